'use strict';
// lib/sentinel.js: a Redis Sentinel deployment of the test's own (issue 33,
// item 3) from Debian's redis-server and redis-sentinel: a primary, a
// replica (replicaof the primary) and three sentinels monitoring them as
// one master name, every process on a free loopback port, killed by PID
// when the test ends (and at exit, even after a failure); the sentinels'
// config files live in a temporary directory removed at the end.
//
// startSentinels(t, opts) resolves once the deployment is whole: the
// replica in sync, and every sentinel knows the replica and the other
// sentinels (without that a failover cannot reach its quorum). opts:
//   name              the master name (lubdub-primary)
//   tls               a lib/tls_certs.js set: every server and sentinel
//                     serves TLS only, replication and the sentinels'
//                     links included (tls-replication yes)
//   sentinelPassword  the sentinels require it (requirepass, and
//                     sentinel-pass between themselves); s.passwordFile
//                     holds it for --redis-sentinel-password-file
//   downAfterMs, failoverTimeoutMs  1000 and 5000, as the issue says
//   defer             run a cleanup when the test ends (lib/cluster.js's
//                     defer, so that nodes stop before their Redis)
// What it holds and does:
//   s.servers         the redis-server processes (lib/redis.js objects)
//   s.sentinels       {port, pid, out, stop()} for each sentinel
//   s.addrs()         "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
//   s.url(db)         a --redis URL that gives only scheme, credentials
//                     (lib/redis.js's node user, when it has one) and db (its
//                     host:port, 127.0.0.1:1, has nothing listening: a node
//                     that reached Redis found it through the sentinels)
//   s.nodeArgs()      --redis-sentinel, --redis-master, the password file
//                     and the TLS flags a node needs
//   s.master()        what a sentinel answers for the master's address
//                     ({host, port}, SENTINEL get-master-addr-by-name)
//   s.primary()       the server process at that address
//   s.killPrimary()   SIGKILL the current primary; resolves with
//                     {killedAt, port} (killedAt: Date.now() just before)
//   s.waitFailover(port)  wait until every sentinel names a master other
//                     than port and one logged +switch-master to it
//                     (since the last killPrimary());
//                     resolves with {at, port, switchedAt}
//   s.restartAsReplica(r)  start a killed server again on its port as a
//                     replica of the current master (once every sentinel
//                     sees that master steady: s.steady(port)), wait until
//                     in sync and every sentinel lists it as a healthy
//                     replica
//   s.failover()      the three above: one whole failover, timed
//   s.replicated()    wait until every live replica has applied all the
//                     primary had written when asked (the offsets of INFO
//                     replication): what a kill after it cannot lose
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFile } = require('node:child_process');
const { waitFor } = require('./hub');
const redisLib = require('./redis');

const REDIS_SENTINEL = process.env.REDIS_SENTINEL || '/usr/bin/redis-sentinel';
const REDIS_CLI = process.env.REDIS_CLI || '/usr/bin/redis-cli';

// When lib/redis.js gives every Redis the ACL users of docs/SCALING.md
// (the default user off), replication and the sentinels use its admin
// user: {user, pass} from its AUTH command (RESP), else null.
const admin = (() => {
  const f = (redisLib.ADMIN_AUTH || '').split('\r\n');
  return f[2] === 'AUTH' ? { user: f[4], pass: f[6] } : null;
})();

// redis-cli to a sentinel (not lib/redis.js's redisCli: that one logs in
// as the admin user, which sentinels do not have).
function sentinelCli(port, ...args) {
  return new Promise((resolve, reject) => {
    execFile(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(port), ...args],
      { timeout: 10000 }, (err, stdout) => (err ? reject(err) : resolve(stdout.trim())));
  });
}

const running = new Set();
const dirs = new Set();
const removeDir = (dir) => {
  try { fs.rmSync(dir, { recursive: true, force: true }); } catch (_) { /* again at exit */ }
};
process.on('exit', () => {
  for (const c of running) {
    try { process.kill(c.pid, 'SIGKILL'); } catch (_) { /* gone */ }
  }
  for (const d of dirs) removeDir(d);
});

// Fields of a flat RESP map as redis-cli prints it (key, value per line).
function fields(out) {
  const lines = out.split('\n');
  const m = {};
  for (let i = 0; i + 1 < lines.length; i += 2) m[lines[i]] = lines[i + 1];
  return m;
}

function sentinelConf({ port, dir, name, primaryPort, tls, password, downAfterMs, failoverTimeoutMs }) {
  const lines = [
    tls ? 'port 0' : `port ${port}`, 'bind 127.0.0.1', 'protected-mode no', 'daemonize no',
    `dir ${dir}`, 'logfile ""',
    `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
    `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
    `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
    `sentinel parallel-syncs ${name} 1`,
    ...(admin ? [`sentinel auth-user ${name} ${admin.user}`, `sentinel auth-pass ${name} ${admin.pass}`] : []),
  ];
  if (password) lines.push(`requirepass ${password}`, `sentinel sentinel-pass ${password}`);
  if (tls) {
    lines.push(`tls-port ${port}`, `tls-cert-file ${tls.server.cert}`, `tls-key-file ${tls.server.key}`,
      `tls-ca-cert-file ${tls.ca.cert}`, 'tls-auth-clients no', 'tls-replication yes');
  }
  return `${lines.join('\n')}\n`;
}

async function startSentinels(t, opts = {}) {
  const {
    name = 'lubdub-primary', sentinelPassword = null, downAfterMs = 1000, failoverTimeoutMs = 5000,
  } = opts;
  const tls = opts.tls === undefined ? null : opts.tls;
  const defer = opts.defer || ((fn) => t.after(fn));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-sentinel-'));
  // Removed when the test ends and again at exit (the processes writing
  // in it may outlive the first try: teardown order varies with defer).
  dirs.add(dir);
  defer(() => removeDir(dir));
  // Quick syncs: no 5 s wait for more replicas before a diskless transfer.
  // A replica stores what a full sync sends in its own directory (its
  // --dir, else it would write dump.rdb wherever the test runs).
  const serverExtra = ['--repl-diskless-sync-delay', '0',
    ...(admin ? ['--masteruser', admin.user, '--masterauth', admin.pass] : [])];
  const serverDir = () => ['--dir', fs.mkdtempSync(path.join(dir, 'server-'))];
  const start = (extra = []) => redisLib.startRedis(t, { tls, defer,
    extra: [...serverExtra, ...serverDir(), ...extra] });

  const s = { name, tls, dir, servers: [], sentinels: [], sentinelPassword, passwordFile: null };
  const primary = await start();
  s.servers.push(primary);
  s.servers.push(await start(['--replicaof', '127.0.0.1', String(primary.port)]));
  if (sentinelPassword) {
    s.passwordFile = path.join(dir, 'sentinel-password');
    fs.writeFileSync(s.passwordFile, `${sentinelPassword}\n`, { mode: 0o600 });
  }

  const cliAuth = sentinelPassword ? ['-a', sentinelPassword, '--no-auth-warning'] : [];
  const cliTls = tls ? redisLib.tlsCliArgs(tls) : [];
  for (let k = 0; k < 3; k++) {
    const port = await redisLib.freePort();
    const conf = path.join(dir, `sentinel-${k + 1}.conf`);
    fs.writeFileSync(conf, sentinelConf({ port, dir, name, primaryPort: primary.port, tls,
      password: sentinelPassword, downAfterMs, failoverTimeoutMs }));
    const child = spawn(REDIS_SENTINEL, [conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    const sn = { port, pid: child.pid, child, out: '', exit: null };
    child.stdout.on('data', (d) => { sn.out += d; });
    child.stderr.on('data', (d) => { sn.out += d; });
    sn.exited = new Promise((resolve) => child.on('exit', (code, signal) => {
      running.delete(child);
      sn.exit = { code, signal };
      resolve(sn.exit);
    }));
    sn.stop = async (signal = 'SIGKILL') => {
      if (sn.exit) return sn.exit;
      try { process.kill(sn.pid, signal); } catch (_) { /* gone */ }
      return sn.exited;
    };
    sn.cli = (...args) => sentinelCli(port, ...cliTls, ...cliAuth, ...args);
    defer(() => sn.stop());
    s.sentinels.push(sn);
  }

  s.addrs = () => s.sentinels.map((sn) => `127.0.0.1:${sn.port}`).join(',');
  // The node user's credentials when lib/redis.js has one (redisUrl).
  s.url = (db = 0) => (redisLib.redisUrl ? redisLib.redisUrl(1, db) : `redis://127.0.0.1:1/${db}`)
    .replace(/^rediss?:/, tls ? 'rediss:' : 'redis:');
  s.nodeArgs = () => ['--redis-sentinel', s.addrs(), '--redis-master', name,
    ...(s.passwordFile ? ['--redis-sentinel-password-file', s.passwordFile] : []),
    ...(tls ? redisLib.tlsNodeArgs(tls, false) : [])];
  const masterOf = async (sn) => {
    const [host, port] = (await sn.cli('SENTINEL', 'get-master-addr-by-name', name)).split('\n');
    return { host, port: Number(port) };
  };
  s.master = () => masterOf(s.sentinels.find((sn) => !sn.exit));
  s.primary = async () => {
    const { port } = await s.master();
    return s.servers.find((r) => r.port === port && !r.exit);
  };

  // Whole: every live sentinel agrees on the master, sees it up, knows
  // every live replica (up, in sync) and the other sentinels.
  s.settled = async (what = 'the sentinel deployment to settle', timeoutMs = 30000) => {
    await waitFor(async () => {
      const live = s.sentinels.filter((sn) => !sn.exit);
      const liveReplicas = s.servers.filter((r) => !r.exit).length - 1;
      const masters = new Set();
      for (const sn of live) {
        const m = fields(await sn.cli('SENTINEL', 'master', name));
        if (m.flags !== 'master' || Number(m['num-other-sentinels']) !== s.sentinels.length - 1) return false;
        masters.add(m.port);
        const reps = (await sn.cli('SENTINEL', 'replicas', name)).split('\n');
        const healthy = [];
        // Each replica is a flat map; its flags say slave when it is up.
        let cur = {};
        for (let i = 0; i + 1 < reps.length; i += 2) {
          if (reps[i] === 'name' && Object.keys(cur).length) { healthy.push(cur); cur = {}; }
          cur[reps[i]] = reps[i + 1];
        }
        if (Object.keys(cur).length) healthy.push(cur);
        const ok = healthy.filter((r) => r.flags === 'slave' && r['master-link-status'] === 'ok');
        if (ok.length < liveReplicas) return false;
      }
      if (masters.size !== 1) return false;
      const p = await s.primary();
      return !!p;
    }, what, timeoutMs, 100);
  };

  // Where each sentinel's log stood at the last kill: a +switch-master
  // counts only after it (an earlier failover may have logged the same
  // pair of ports the other way round and back).
  let marks = null;
  s.killPrimary = async () => {
    const p = await s.primary();
    marks = s.sentinels.map((sn) => sn.out.length);
    const killedAt = Date.now();
    await p.stop('SIGKILL');
    return { killedAt, port: p.port, server: p };
  };

  s.waitFailover = async (oldPort, timeoutMs = 30000) => {
    const re = new RegExp(`\\+switch-master ${name} 127\\.0\\.0\\.1 ${oldPort} 127\\.0\\.0\\.1 (\\d+)`);
    let switchedAt = 0;
    const port = await waitFor(async () => {
      if (!switchedAt && s.sentinels.some((sn, k) => re.test(sn.out.slice(marks ? marks[k] : 0)))) {
        switchedAt = Date.now();
      }
      if (!switchedAt) return false;
      const seen = new Set();
      for (const sn of s.sentinels.filter((x) => !x.exit)) seen.add((await masterOf(sn)).port);
      return seen.size === 1 && !seen.has(oldPort) && [...seen][0];
    }, `a failover away from ${oldPort}`, timeoutMs, 20);
    return { at: Date.now(), port, switchedAt };
  };

  // Every sentinel names port as the master, sees it up and has had a
  // reply to a ping lately. On a loaded machine a sentinel whose fresh
  // link to a just-promoted master has not answered for down-after-ms
  // marks it down and fails over again; a replica's full sync (a fork)
  // started at that moment makes it likelier, so a restart waits for this.
  s.steady = async (port, timeoutMs = 30000) => {
    await waitFor(async () => {
      for (const sn of s.sentinels.filter((x) => !x.exit)) {
        const m = fields(await sn.cli('SENTINEL', 'master', name));
        if (Number(m.port) !== port || m.flags !== 'master' || !(Number(m['last-ok-ping-reply']) < 500)) return false;
      }
      return true;
    }, `every sentinel to see ${port} as a steady master`, timeoutMs, 50);
  };

  // The restarted server may not be promoted before it has the data
  // (replica-priority 0 until its first sync is done).
  s.restartAsReplica = async (r) => {
    const { port } = await s.master();
    await s.steady(port);
    const again = await redisLib.startRedis(t, { tls, port: r.port, defer,
      extra: [...serverExtra, ...serverDir(), '--replica-priority', '0',
        '--replicaof', '127.0.0.1', String(port)] });
    s.servers[s.servers.indexOf(r)] = again;
    await waitFor(async () => /master_link_status:up/.test(await again.cli('INFO', 'replication')),
      `${r.port} in sync with ${port}`, 30000, 50);
    assert.equal(await again.cli('CONFIG', 'SET', 'replica-priority', '100'), 'OK');
    await s.settled(`the sentinels to list ${r.port} as a replica`);
    return again;
  };

  const offset = (info, key) => Number((new RegExp(`${key}:(\\d+)`).exec(info) || [])[1]);
  s.replicated = async (timeoutMs = 10000) => {
    const p = await s.primary();
    const want = offset(await p.cli('INFO', 'replication'), 'master_repl_offset');
    const replicas = s.servers.filter((r) => r !== p && !r.exit);
    await waitFor(async () => {
      for (const r of replicas) {
        if (!(offset(await r.cli('INFO', 'replication'), 'slave_repl_offset') >= want)) return false;
      }
      return true;
    }, `the replicas at offset ${want}`, timeoutMs, 20);
    return want;
  };

  s.failover = async () => {
    const kill = await s.killPrimary();
    const done = await s.waitFailover(kill.port);
    await s.restartAsReplica(kill.server);
    return { ...kill, switchedAt: done.switchedAt, newPort: done.port,
      switchMs: done.switchedAt - kill.killedAt };
  };

  await waitFor(async () => {
    for (const sn of s.sentinels) {
      if (sn.exit) throw new Error(`redis-sentinel exited: ${sn.out}`);
      if ((await sn.cli('PING')) !== 'PONG') return false;
    }
    return true;
  }, 'the sentinels to answer', 10000, 50);
  await s.settled();
  return s;
}

module.exports = { startSentinels, sentinelCli };
