'use strict';
// Per-app limits a public deployment needs (docs/CONFIG.md "Apps"): the
// REST rate limits (max_backend_events_per_second,
// max_read_requests_per_second) answer a burst from the pusher SDK with
// 429, a Retry-After header and a JSON error, count what they refused per
// app in /stats and /metrics, and let requests through again once the
// bucket refills; an app's own allowed_origins decides its WebSocket
// upgrades instead of the hub-wide --allowed-origins.
const test = require('node:test');
const assert = require('node:assert');
const { startHub, request, waitFor } = require('./lib/hub');
const { serverSdk, rest, signedPath } = require('./lib/clients');
const { connect } = require('./lib/ws');

const limited = {
  id: 'lim', key: 'lim-key', secret: 'lim-secret',
  max_backend_events_per_second: 2, max_read_requests_per_second: 3,
};
const free = { id: 'free', key: 'free-key', secret: 'free-secret' };
const creds = (a) => ({ secret: a.secret, key: a.key });

test('REST rate limits: a burst gets 429 + Retry-After, counted, then recovers', async (t) => {
  const hub = await startHub([], { t, loops: 2, apps: [limited, free] });
  const sdk = serverSdk(hub, limited);

  // A burst of 30 events at once from the SDK: a bucket of 2 a second
  // lets a few through (2, plus what refills while the hub works through
  // the burst), the rest get 429 with a JSON error.
  const results = await Promise.all(Array.from({ length: 30 }, (_, i) =>
    sdk.trigger('burst', 'e', { i }).then(() => 200, (e) => {
      if (e.status === 429) assert.match(e.body, /"error":"rate limit exceeded/);
      return e.status;
    })));
  assert.ok(results.includes(200), `burst results ${results}`);
  assert.ok(results.filter((x) => x === 429).length >= 10, `burst results ${results}`);
  assert.ok(results.every((x) => x === 200 || x === 429), `burst results ${results}`);

  // A batch of 10 counts 10 events: with a full bucket of 2 it passes (the
  // bucket goes 8 events into debt), and the next single event waits
  // for the debt: 4.5 s at 2 a second, so Retry-After says more than 1.
  await waitFor(async () => (await rest(hub, 'POST', '/apps/lim/events', {
    body: { name: 'e', channel: 'c', data: '1' }, signOpts: creds(limited),
  })).status === 200, 'the events bucket to refill', 15000, 250);
  await waitFor(async () => (await rest(hub, 'POST', '/apps/lim/batch_events', {
    body: { batch: Array.from({ length: 10 }, (_, i) => ({ name: 'e', channel: 'c', data: String(i) })) },
    signOpts: creds(limited),
  })).status === 200, 'a batch of 10 to pass', 15000, 250);
  const body = JSON.stringify({ name: 'e', channel: 'c', data: '1' });
  const after = await request('POST', hub.url(signedPath('POST', '/apps/lim/events', {}, body, creds(limited))),
    body, { 'content-type': 'application/json' });
  assert.strictEqual(after.status, 429);
  assert.match(after.headers['retry-after'], /^[1-9]\d*$/);
  assert.ok(Number(after.headers['retry-after']) >= 2, `Retry-After ${after.headers['retry-after']}`);
  assert.match(after.headers['content-type'], /application\/json/);
  assert.strictEqual(JSON.parse(after.body).error.startsWith('rate limit exceeded'), true);

  // Reads: 3 a second; the raw response shows the header.
  const reads = await Promise.all(Array.from({ length: 20 }, () =>
    request('GET', hub.url(signedPath('GET', '/apps/lim/channels', {}, undefined, creds(limited))))));
  const refused = reads.filter((r) => r.status === 429);
  assert.ok(refused.length >= 1, `read statuses ${reads.map((r) => r.status)}`);
  assert.match(refused[0].headers['retry-after'], /^[1-9]\d*$/);
  assert.strictEqual(JSON.parse(refused[0].body).error.includes('read requests'), true);

  // The other app is not limited at all.
  for (let i = 0; i < 20; i++) await serverSdk(hub, free).trigger('x', 'e', {});

  // Counted per app.
  const s = await hub.stats();
  assert.ok(s.apps.lim.rest_events_limited >= 1);
  assert.ok(s.apps.lim.rest_reads_limited >= 1);
  assert.strictEqual(s.apps.free.rest_events_limited, 0);
  const m = (await request('GET', hub.url('/metrics'))).body;
  assert.match(m, /lubdub_app_rest_rate_limited_total\{app="lim",kind="events"\} [1-9]/);
  assert.match(m, /lubdub_app_rest_rate_limited_total\{app="free",kind="reads"\} 0/);

  // Recovery: once the bucket refills, reads pass again.
  await waitFor(async () => (await rest(hub, 'GET', '/apps/lim/channels', { signOpts: creds(limited) })).status === 200,
    'reads to pass again', 15000, 250);
});

test('per-app allowed_origins override the hub-wide list', async (t) => {
  const own = { id: 'own', key: 'own-key', secret: 's1', allowed_origins: ['https://own.example'] };
  const hubwide = { id: 'hw', key: 'hw-key', secret: 's2' };
  const hub = await startHub(['--allowed-origins', 'https://hub.example'], { t, loops: 2, apps: [own, hubwide] });
  const tryOrigin = async (key, origin) => {
    const c = connect(hub, { key, origin });
    t.after(() => c.terminate());
    await waitFor(() => c.unexpected || c.find('pusher:connection_established'), `upgrade of ${key} from ${origin}`);
    const r = c.unexpected ? c.unexpected.status : 101;
    c.close();
    return r;
  };
  assert.strictEqual(await tryOrigin('own-key', 'https://own.example'), 101);
  assert.strictEqual(await tryOrigin('own-key', 'https://hub.example'), 403);
  assert.strictEqual(await tryOrigin('hw-key', 'https://hub.example'), 101);
  assert.strictEqual(await tryOrigin('hw-key', 'https://own.example'), 403);
  await waitFor(() => /upgrade refused: 403 origin "https:\/\/hub.example" not allowed by the app's list of app own/.test(hub.stderr),
    'the refusal line naming the app');
});
