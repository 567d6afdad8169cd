'use strict';
// GET /lubdub-resume.js: the resume helper comes from the hub's own binary
// (embedded at build time from web/lubdub-resume.js, server/http/files.c),
// whatever --web-root is: the default root (relative to the test's working
// directory, where there is no web/), the repository's web/, an empty
// directory, and one holding another file of that name, which must not
// shadow it. Each answer is the file's exact bytes as a JavaScript module
// (type, no-store like the web root's files, CORS for apps on another
// origin), and it imports as an ES module exporting resume().
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startHub, request } = require('./lib/hub');

const ROOT = path.resolve(__dirname, '../..');
const SOURCE = fs.readFileSync(path.join(ROOT, 'web', 'lubdub-resume.js'), 'utf8');

function tempRoot(t, files = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-web-'));
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function getHelper(hub) {
  const r = await request('GET', hub.url('/lubdub-resume.js'));
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-type'], 'text/javascript; charset=utf-8');
  assert.equal(r.headers['cache-control'], 'no-store');
  assert.equal(r.headers['access-control-allow-origin'], '*');
  assert.equal(r.body, SOURCE, 'the bytes of web/lubdub-resume.js');
  return r.body;
}

test('/lubdub-resume.js with the default web root and the repository\'s, and it imports as a module', async (t) => {
  const hub = await startHub([], { t });
  const body = await getHelper(hub);
  const mod = await import(`data:text/javascript;base64,${Buffer.from(body).toString('base64')}`);
  assert.deepEqual(Object.keys(mod), ['resume']);
  assert.equal(typeof mod.resume, 'function');

  const web = await startHub(['--web-root', path.join(ROOT, 'web')], { t });
  await getHelper(web);
  // The web root still serves its own files next to it.
  const page = await request('GET', web.url('/client.js'));
  assert.equal(page.status, 200);
});

test('/lubdub-resume.js with a --web-root that lacks it, or holds another file of that name', async (t) => {
  const empty = await startHub(['--web-root', tempRoot(t)], { t });
  await getHelper(empty);
  assert.equal((await request('GET', empty.url('/client.js'))).status, 404);

  const shadow = await startHub(['--web-root',
    tempRoot(t, { 'lubdub-resume.js': 'export const old = 1;\n' })], { t });
  await getHelper(shadow);
  // Only that exact path: a look-alike is the web root's business.
  assert.equal((await request('GET', shadow.url('/lubdub-resume.js.map'))).status, 404);
});
