'use strict';
// tests/integration/lib/history.js - the HTTP API's read of a channel's
// history (docs/PROTOCOL.md 6.2) as the history tests ask it: through the
// pusher SDK's signed get(), the answer's shape checked.

const assert = require('node:assert/strict');

// GET the channel's events through the SDK; the parsed answer of a 200.
async function events(sdk, channel, params = {}) {
  const r = await sdk.get({ path: `/channels/${channel}/events`, params });
  assert.equal(r.status, 200);
  const body = await r.json();
  assert.deepEqual(Object.keys(body).sort(), ['complete', 'events'], JSON.stringify(body));
  assert.equal(typeof body.complete, 'boolean');
  for (const e of body.events) {
    assert.deepEqual(Object.keys(e).sort(), ['data', 'event', 'id', 'time_ms']);
    assert.match(e.id, /^b[0-9a-f]{8}:[0-9]+$/);
    assert.equal(typeof e.data, 'string');
    assert.ok(Number.isInteger(e.time_ms));
  }
  return body;
}

// The error answer of a GET the hub refuses with status.
async function refused(sdk, channel, params, status, why) {
  await assert.rejects(sdk.get({ path: `/channels/${channel}/events`, params }), (e) => {
    assert.equal(e.status, status, `${JSON.stringify(params)}: ${e.body}`);
    assert.match(JSON.parse(e.body).error, why);
    return true;
  });
}

module.exports = { events, refused };
