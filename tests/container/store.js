'use strict';
// tests/container/store.js: the podman store the container tests of one
// ctest run share, so that each image is built once per run, not once per
// test (the lubdub image is a full compile; Redis and Prometheus are apt
// installs). tests/container/CMakeLists.txt runs it as two fixture tests:
//
//   node store.js setup    (container_store_setup, FIXTURES_SETUP)
//     removes what a killed earlier run left at LUBDUB_CT_STORE, makes the
//     store (./lib.js podmanOf: storage root, run root, tmp dir, network
//     config dir, containers.conf) and imports the bookworm minbase base
//     image into it (./lib.js importBase: the cached rootfs tarball, or a
//     debootstrap that refills the cache).
//   node store.js cleanup  (container_store_cleanup, FIXTURES_CLEANUP)
//     removes every container, pod and image, the store directory, and
//     /var/lib/containers when the setup found none there.
//
// ctest runs the cleanup after the tests that need the store, whether they
// passed or failed, and runs the setup first even for `ctest -R
// container_compose` alone. The tests themselves build the images they need
// (`podman build` finds every layer already built in the store's cache) and
// remove what they run (./lib.js podmanSandbox).
//
// Needs root on Linux, like the tests; does nothing otherwise. Runs alone
// (RESOURCE_LOCK podman), single-threaded.
const fs = require('node:fs');
const path = require('node:path');

const {
  ROOT, skipUnlessRoot, run, removeTree, podmanOf, importBase,
} = require('./lib');

const STATE = 'store-state.json';

// Everything the store holds, then the store; /var/lib/containers too
// when the setup that made the store found none there.
async function removeStore(store) {
  if (!fs.existsSync(store)) return;
  let hadVarLibContainers = true;
  try {
    hadVarLibContainers = JSON.parse(
      fs.readFileSync(path.join(store, STATE), 'utf8')).hadVarLibContainers;
  } catch (_) { /* no state: leave /var/lib/containers */ }
  const { podman } = podmanOf(store);
  await podman(['rm', '--all', '--force', '--time', '0'], { timeoutMs: 120000 });
  await podman(['pod', 'rm', '--all', '--force'], { timeoutMs: 120000 });
  await podman(['system', 'reset', '--force'], { timeoutMs: 120000 });
  await removeTree(store);
  if (!hadVarLibContainers) fs.rmSync('/var/lib/containers', { recursive: true, force: true });
  return hadVarLibContainers;
}

async function setup(store) {
  const t0 = Date.now();
  await run(path.join(ROOT, 'deploy', 'install-deps.sh'), ['container'],
    { check: true, timeoutMs: 900000 });
  // A store left by a killed run goes first; what it recorded about
  // /var/lib/containers is still the truth about the machine before it.
  const stale = await removeStore(store);
  const hadVarLibContainers = stale === undefined ? fs.existsSync('/var/lib/containers') : stale;
  if (stale !== undefined) console.log(`removed a store left by an earlier run: ${store}`);
  fs.mkdirSync(store, { recursive: true });
  fs.writeFileSync(path.join(store, STATE), JSON.stringify({ hadVarLibContainers }));
  const { podman } = podmanOf(store);
  const tmp = fs.mkdtempSync(path.join(store, 'setup-'));
  const t = { diagnostic: (m) => console.log(m) };
  const how = await importBase(t, { tmp, tag: 'setup', podman });
  await removeTree(tmp);
  console.log(`store ${store}: base image (${how}) in ` +
    `${((Date.now() - t0) / 1000).toFixed(1)}s`);
}

async function main() {
  const what = process.argv[2];
  const store = process.env.LUBDUB_CT_STORE;
  if (!['setup', 'cleanup'].includes(what) || !store || !path.isAbsolute(store)) {
    console.error('usage: LUBDUB_CT_STORE=/abs/dir node store.js setup|cleanup');
    process.exit(2);
  }
  if (skipUnlessRoot) {
    console.log(`skipped: ${skipUnlessRoot}`);
    return;
  }
  if (what === 'setup') {
    await setup(store);
  } else {
    await removeStore(store);
    console.log(`store ${store} removed`);
  }
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
