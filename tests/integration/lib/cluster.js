'use strict';
// What the cluster tests share (cluster.test.js, cluster_cache.test.js):
// a node started against a Redis URL that must exit 0 when the test ends,
// the /stats backplane block of a node, and a wait until every node of a
// list says its backplane is up.
const { startHub, waitFor } = require('./hub');
const { closeTracked } = require('./clients');

// A two-loop node with the given --node-id; its tracked clients are closed
// and its exit status checked when t ends. extra: more flags.
async function startNode(t, redisUrl, id, extra = []) {
  const hub = await startHub(['--loops', '2', '--drain-timeout', '1s',
    '--redis', redisUrl, '--node-id', id, ...extra]);
  t.after(async () => {
    await closeTracked(hub);
    const exit = await hub.stop();
    if (exit.code !== 0) {
      throw new Error(`node ${id} exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-4000)}`);
    }
  });
  return hub;
}

const bp = async (hub) => (await hub.stats()).backplane;

async function allUp(nodes) {
  await waitFor(async () => {
    for (const n of nodes) if ((await bp(n)).state !== 'up') return false;
    return true;
  }, 'every node up', 20000, 50);
}

module.exports = { startNode, bp, allUp };
