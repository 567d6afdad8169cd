'use strict';
// A private test host: a network namespace joined to the default one by a
// veth pair, on a /30 of link-local space, whose traffic can be dropped in
// both directions (nftables, or iptables) to black-hole its peers: no FIN,
// no RST, only a heartbeat can tell. Used by blackhole.test.js and the soak.
//
//   const ns = netns('bh', 0);   // tag, /30 index within 169.254.N.0/24
//   ns.whyNot() -> null | reason; ns.setup(); ns.exec(cmd, args) -> argv;
//   ns.drop(); ns.undrop(); ns.cleanup() (also runs at process exit).
//
// Names carry this process's pid, so parallel runs do not collide; needs
// root and `ip netns`.
const { execFileSync } = require('node:child_process');

function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts }).toString();
}
function tryRun(cmd, args, opts) {
  try { return run(cmd, args, opts); } catch (_) { return null; }
}
const have = (cmd) => tryRun('sh', ['-c', `command -v ${cmd}`]) !== null;

function netns(tag, index) {
  const id = process.pid % 1000000;
  const name = `lubdub-${tag}-${process.pid}`;
  const vh = `l${tag.slice(0, 2)}${id}h`;
  const vn = `l${tag.slice(0, 2)}${id}n`;
  const net = `169.254.${1 + (process.pid % 254)}`;
  const hostIp = `${net}.${4 * index + 1}`;
  const peerIp = `${net}.${4 * index + 2}`;
  const table = `lubdub_${tag}`;
  let created = false;
  let dropper = null;
  const inNs = (cmd, args) => ['netns', 'exec', name, cmd, ...args];

  const ns = {
    name, hostIp, peerIp,
    whyNot() {
      if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'needs root';
      if (tryRun('ip', ['netns', 'list']) === null) return '`ip netns` is not available';
      if (!have('nft') && !have('iptables')) {
        return 'neither nft nor iptables is installed (deploy/install-deps.sh test)';
      }
      return null;
    },
    setup() {
      created = true;
      run('ip', ['netns', 'add', name]);
      run('ip', ['link', 'add', vh, 'type', 'veth', 'peer', 'name', vn]);
      run('ip', ['link', 'set', vn, 'netns', name]);
      run('ip', ['addr', 'add', `${hostIp}/30`, 'dev', vh]);
      run('ip', ['link', 'set', vh, 'up']);
      run('ip', inNs('ip', ['link', 'set', 'lo', 'up']));
      run('ip', inNs('ip', ['addr', 'add', `${peerIp}/30`, 'dev', vn]));
      run('ip', inNs('ip', ['link', 'set', vn, 'up']));
      dropper = have('nft') ? 'nft' : 'iptables';
    },
    // argv for `ip` that runs cmd inside the namespace (ip execs it in place).
    exec: inNs,
    // Drop everything in and out of the namespace; returns the tool used.
    drop() {
      if (dropper === 'nft') {
        const rules = `table inet ${table} {\n` +
          ' chain in { type filter hook input priority 0; policy drop; }\n' +
          ' chain out { type filter hook output priority 0; policy drop; }\n}\n';
        execFileSync('ip', inNs('nft', ['-f', '-']), { input: rules });
      } else {
        run('ip', inNs('iptables', ['-A', 'INPUT', '-j', 'DROP']));
        run('ip', inNs('iptables', ['-A', 'OUTPUT', '-j', 'DROP']));
      }
      return dropper;
    },
    undrop() {
      if (dropper === 'nft') {
        tryRun('ip', inNs('nft', ['delete', 'table', 'inet', table]));
      } else {
        tryRun('ip', inNs('iptables', ['-D', 'INPUT', '-j', 'DROP']));
        tryRun('ip', inNs('iptables', ['-D', 'OUTPUT', '-j', 'DROP']));
      }
    },
    cleanup() {
      if (!created) return;
      created = false;
      tryRun('ip', ['netns', 'del', name]); // takes vn, and with it vh
      tryRun('ip', ['link', 'del', vh]);
    },
  };
  process.on('exit', () => ns.cleanup());
  return ns;
}

module.exports = { netns };
