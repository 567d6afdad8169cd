'use strict';
// `promtool check metrics` (format and lint) over an exposition text:
// resolves { code, out }; rejects when promtool cannot be run at all.
const { spawn } = require('node:child_process');

function promtool(text) {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('error', (e) => reject(new Error(
      `promtool not runnable (${e.message}); deploy/install-deps.sh test installs it (Debian package prometheus)`)));
    child.on('close', (code) => resolve({ code, out }));
    child.stdin.end(text);
  });
}

module.exports = { promtool };
