'use strict';
// lib/docsnippets.js: the snippets of docs/CLIENTS.md, read from the doc
// itself so the doc cannot drift from what the tests run
// (clients_doc.test.js, clients_doc_browser.test.js).
//
// A fenced block of the doc is preceded by a marker comment on the line
// before its fence: `<!-- snippet: NAME -->` for a block a test runs, or
// `<!-- untested: WHY -->`. load() refuses a doc with a block that has
// neither, or with two snippets of one name. fill() replaces the
// placeholders, and only those, with a test hub's host, port and app:
//   YOUR_APP_ID, YOUR_APP_KEY, YOUR_APP_SECRET  the app's credentials
//   127.0.0.1, 6001                             a hub without TLS
//   ws.example.com, 443                         a hub with TLS (a URL that
//                                               names no port gets one)
// run() runs a snippet in a subprocess (node, whose imports and requires
// resolve to tests/integration/node_modules through a symlink beside the
// file, or bash) and waits on what it prints; the process is killed by its PID when the
// test ends. Waits end on conditions; the timeouts only turn a hang into a
// failure.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { ROOT, TIME_SCALE, makeCert } = require('./hub');
const { rest } = require('./clients');

const DOC = path.join(ROOT, 'docs', 'CLIENTS.md');
const NODE_MODULES = path.join(__dirname, '..', 'node_modules');
// The app the tests' hubs serve: credentials of their own, so a snippet
// that kept a hub's defaults (app-key ...) would fail.
const DOC_APP = { id: 'docs-app-1', key: 'docs-key-8f2c', secret: 'docs-secret-5d1e7a' };
// How long a snippet may take to connect and print: node starting
// pusher-js or Echo on a loaded machine (scaled under sanitizers).
const SNIPPET_TIMEOUT_MS = 60000 * TIME_SCALE;
const MARKER_RE = /^<!--\s*(snippet|untested):\s*(.*?)\s*-->\s*$/;
const FENCE_RE = /^(`{3,})\s*([\w-]*)\s*$/;

// Every fenced block of text: {lang, code, line (1-based, of the opening
// fence), marker: {kind, value} or null}.
function blocks(text) {
  const lines = text.split('\n');
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE_RE.exec(lines[i]);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.trimEnd() === open[1]);
    if (end < 0) throw new Error(`${DOC}:${i + 1}: a fence that never closes`);
    const m = i > 0 ? MARKER_RE.exec(lines[i - 1]) : null;
    out.push({
      lang: open[2], code: `${lines.slice(i + 1, end).join('\n')}\n`, line: i + 1,
      marker: m ? { kind: m[1], value: m[2] } : null,
    });
    i = end;
  }
  return out;
}

// The doc's blocks and its snippets by name: {blocks, snippets: Map}.
function load(file = DOC) {
  const all = blocks(fs.readFileSync(file, 'utf8'));
  const snippets = new Map();
  for (const b of all) {
    if (!b.marker) {
      throw new Error(`${file}:${b.line}: a \`\`\`${b.lang} block with no <!-- snippet: NAME --> ` +
        'or <!-- untested: WHY --> on the line before it');
    }
    if (b.marker.kind !== 'snippet') continue;
    const name = b.marker.value;
    if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`${file}:${b.line}: bad snippet name '${name}'`);
    if (snippets.has(name)) throw new Error(`${file}:${b.line}: a second snippet named ${name}`);
    snippets.set(name, { name, lang: b.lang, code: b.code, line: b.line });
  }
  return { blocks: all, snippets };
}

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// The snippet's code with the placeholders replaced. hub: {host, port};
// tls: whether it is the TLS hub (its placeholders are ws.example.com and
// 443, else 127.0.0.1 and 6001); app: {id, key, secret}. Fails when a
// placeholder is left, when a snippet names the other kind of hub, or when
// it does not name the hub's port after all (then it would not be the hub
// it reached), unless noHub says the snippet names none (an app object).
function fill(snippet, { hub, tls, app, noHub = false }) {
  let code = snippet.code;
  const other = tls ? /\b6001\b/ : /\bws\.example\.com\b|\b443\b/;
  if (other.test(code)) {
    throw new Error(`snippet ${snippet.name} names a ${tls ? 'plain' : 'TLS'} hub's placeholders`);
  }
  const port = String(hub.port);
  if (tls) {
    code = code.replace(/\b(https|wss):\/\/ws\.example\.com(?![\w.:-])/g, `$1://${hub.host}:${port}`);
    code = code.replace(/\bws\.example\.com\b/g, hub.host);
    code = code.replace(/\b443\b/g, port);
  } else {
    code = code.replace(new RegExp(`\\b${escapeRe('127.0.0.1')}\\b`, 'g'), hub.host);
    code = code.replace(/\b6001\b/g, port);
  }
  code = code.replace(/\bYOUR_APP_ID\b/g, app.id)
    .replace(/\bYOUR_APP_KEY\b/g, app.key)
    .replace(/\bYOUR_APP_SECRET\b/g, app.secret);
  const left = /YOUR_[A-Z_]+/.exec(code);
  if (left) throw new Error(`snippet ${snippet.name}: ${left[0]} is not a placeholder the tests fill`);
  if (!noHub && !new RegExp(`\\b${port}\\b`).test(code)) {
    throw new Error(`snippet ${snippet.name} names no hub port the tests could fill`);
  }
  return code;
}

// A .env file as Laravel's (phpdotenv) and Vite's (dotenv-expand) readers
// take it: KEY=VALUE lines, # comments, quotes stripped, ${VAR} expanded
// from the lines above.
function parseDotenv(text) {
  const env = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (!m) throw new Error(`not a .env line: ${line}`);
    let v = m[2];
    const quoted = /^"(.*)"$/.exec(v) || /^'(.*)'$/.exec(v);
    if (quoted) v = quoted[1];
    env[m[1]] = v.replace(/\$\{([A-Z_][A-Z0-9_]*)\}/g, (_, k) => {
      if (!(k in env)) throw new Error(`.env: \${${k}} before ${k} is set`);
      return env[k];
    });
  }
  return env;
}

// What Vite exposes of a .env to the front end as import.meta.env: the
// VITE_ variables only.
function viteEnv(env) {
  return Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith('VITE_')));
}

// Run code in a subprocess: node by default (ext 'cjs' or 'mjs'), or
// another interpreter (bash, ext 'sh'); env: more environment variables.
// Returns at once {pid, exit (a promise of {code, signal}), stdout(),
// output(), kill(), waitOutput(re, what)}.
function run(t, code, { ext = 'cjs', env = {}, interpreter = process.execPath } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-snippet-'));
  fs.symlinkSync(NODE_MODULES, path.join(dir, 'node_modules'), 'dir');
  const file = path.join(dir, `snippet.${ext}`);
  fs.writeFileSync(file, code);
  const child = spawn(interpreter, [file], {
    cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  let done = null;
  const watchers = new Set();
  const wake = () => { for (const w of watchers) w(); };
  child.stdout.on('data', (d) => { out += d; wake(); });
  child.stderr.on('data', (d) => { err += d; });
  const exit = new Promise((resolve) => {
    child.on('exit', (c, signal) => { done = { code: c, signal }; resolve(done); wake(); });
  });
  t.after(async () => {
    if (!done) {
      try { process.kill(child.pid, 'SIGKILL'); } catch (_) { /* gone */ }
    }
    await exit;
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const proc = {
    pid: child.pid,
    exit,
    stdout: () => out,
    // Stop it (by its PID) and wait until it is gone.
    kill() {
      if (!done) {
        try { process.kill(child.pid, 'SIGKILL'); } catch (_) { /* gone */ }
      }
      return exit;
    },
    output: () => `stdout:\n${out}\nstderr:\n${err}`,
    // Resolves with the match of re in what the snippet printed, as soon
    // as it is there; fails when the snippet exits first, or after
    // timeoutMs.
    waitOutput(re, what, timeoutMs = SNIPPET_TIMEOUT_MS) {
      return new Promise((resolve, reject) => {
        let timer = null;
        const check = () => {
          const m = re.exec(out);
          if (!m && !done) return;
          watchers.delete(check);
          clearTimeout(timer);
          if (m) resolve(m);
          else reject(new Error(`the snippet exited ${JSON.stringify(done)} before printing ${what}: ` +
            proc.output()));
        };
        timer = setTimeout(() => {
          watchers.delete(check);
          reject(new Error(`timed out waiting for the snippet to print ${what}: ${proc.output()}`));
        }, timeoutMs);
        watchers.add(check);
        check();
      });
    },
  };
  return proc;
}

// A throwaway certificate for 127.0.0.1 and localhost, for the TLS hubs:
// {key, cert (paths), ca (its PEM)}; its directory is removed at exit.
function testCert() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-clients-doc-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const c = makeCert(dir);
  return { ...c, ca: fs.readFileSync(c.cert) };
}

// Wait until the hub answers that app's channel is occupied: the snippet
// subscribed. hub.ca: the CA of a TLS hub. failure(): a reason to stop
// waiting at once (the snippet exited), or null.
async function waitOccupied(hub, app, channel, failure = () => null) {
  const deadline = Date.now() + SNIPPET_TIMEOUT_MS;
  for (;;) {
    const r = await rest(hub, 'GET', `/apps/${app.id}/channels/${channel}`,
      { signOpts: { key: app.key, secret: app.secret }, ca: hub.ca });
    if (r.status !== 200) throw new Error(`GET channel ${channel}: ${r.status} ${r.body}`);
    if (r.json.occupied) return;
    const why = failure();
    if (why) throw new Error(`${channel} never occupied: ${why}`);
    if (Date.now() > deadline) throw new Error(`${channel} never occupied (${failure() || 'timeout'})`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

module.exports = {
  DOC_APP, testCert, waitOccupied,
  DOC, blocks, load, fill, parseDotenv, viteEnv, run, SNIPPET_TIMEOUT_MS,
};
