'use strict';
// Shared by compose.test.js and k8s.test.js: what deploy/compose.yaml and
// deploy/k8s/ need beyond ./lib.js's private podman.
//
// - podmanWrapper(): a script that runs the sandbox's podman (its --root,
//   --runroot and storage driver; the environment carries CONTAINERS_CONF),
//   for tools that take a podman path (podman-compose --podman-path).
// - forgetCniNetwork(): the host-wide CNI state a removed network leaves
//   (the host-local IPAM directory, dnsname's directory), which no podman
//   --root holds; the bridge itself goes with `podman network rm`.
// - yamlDocs(): a YAML file's documents as objects, read with Debian's
//   python3-yaml (node has no YAML parser and the tests vendor none).
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

function podmanWrapper(sandbox) {
  const file = path.join(sandbox.tmp, 'podman-wrapper');
  const quote = (s) => `'${String(s).replace(/'/g, "'\\''")}'`;
  fs.writeFileSync(file, `#!/bin/sh\nexec podman ${sandbox.podmanArgs.map(quote).join(' ')} "$@"\n`,
    { mode: 0o755 });
  return file;
}

// Then the directories above it, where they are left empty (the first CNI
// network on a machine makes them; a machine that had none keeps none).
function forgetCniNetwork(name) {
  for (const dir of ['/var/lib/cni/networks', '/run/containers/cni/dnsname']) {
    fs.rmSync(path.join(dir, name), { recursive: true, force: true });
  }
  for (const dir of ['/var/lib/cni/networks', '/var/lib/cni/results', '/var/lib/cni',
    '/run/containers/cni/dnsname', '/run/containers/cni']) {
    try { fs.rmdirSync(dir); } catch (_) { /* not empty, or not there */ }
  }
}

function yamlDocs(file) {
  const r = spawnSync('python3', ['-c',
    'import json, sys, yaml\n' +
    'print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))', file],
  { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cannot read ${file} as YAML: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

module.exports = { podmanWrapper, forgetCniNetwork, yamlDocs };
