'use strict';
// lib/tls_certs.js: a throwaway PKI for the Redis TLS tests (issue 33),
// made with Debian's openssl CLI into a temporary directory that is removed
// when the test ends (or at exit when no test is given). Where lib/hub.js's
// makeCert makes one self-signed certificate for the hub's own port, the
// Redis tests need a chain: a node verifies Redis against a CA file, Redis
// verifies a node's client certificate against the same CA, and a second,
// unrelated CA must be refused.
//
// makeCerts(t) returns file paths (every cert and key is PEM):
//   ca          { cert, key }  the CA everything below is signed by
//   server      { cert, key }  CN and SAN localhost, SAN IP 127.0.0.1
//   wrongName   { cert, key }  the same CA, but only for redis.test (SAN
//                              DNS:redis.test): a name mismatch when the
//                              node connects to 127.0.0.1, accepted with
//                              --redis-tls-server-name redis.test
//   client      { cert, key }  a client certificate (CN lubdub-node)
//   otherCa     { cert, key }  a second CA that signed nothing here: a node
//                              trusting it refuses the server above
//   dir                        the directory holding them all
// Server certificates carry both serverAuth and clientAuth: Redis presents
// its own certificate as a client when it replicates with tls-replication,
// and so do the sentinels (lib/sentinel.js).
// EC P-256 keys: quick to make (a full set takes well under a second).
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const OPENSSL = process.env.OPENSSL || 'openssl';
const DAYS = '2';
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

function openssl(args) {
  execFileSync(OPENSSL, args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 30000 });
}

function makeCa(dir, name, cn) {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  openssl(['req', '-x509', ...EC, '-keyout', key, '-out', cert, '-days', DAYS,
    '-subj', `/CN=${cn}`,
    '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  return { cert, key };
}

// A leaf certificate signed by ca, with the given subject and extensions.
function makeLeaf(dir, ca, name, cn, ext) {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  const csr = path.join(dir, `${name}.csr`);
  const extFile = path.join(dir, `${name}.ext`);
  fs.writeFileSync(extFile, `${['basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment', ...ext].join('\n')}\n`);
  openssl(['req', '-new', ...EC, '-keyout', key, '-out', csr, '-subj', `/CN=${cn}`]);
  openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial',
    '-out', cert, '-days', DAYS, '-extfile', extFile]);
  fs.rmSync(csr);
  fs.rmSync(extFile);
  return { cert, key };
}

function makeCerts(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-redis-tls-'));
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  if (t) t.after(remove);
  else process.on('exit', remove);
  const ca = makeCa(dir, 'ca', 'lubdub test CA');
  const both = 'extendedKeyUsage=serverAuth,clientAuth';
  return {
    dir,
    ca,
    server: makeLeaf(dir, ca, 'server', 'localhost',
      [both, 'subjectAltName=DNS:localhost,IP:127.0.0.1']),
    wrongName: makeLeaf(dir, ca, 'wrong-name', 'redis.test',
      [both, 'subjectAltName=DNS:redis.test']),
    client: makeLeaf(dir, ca, 'client', 'lubdub-node', ['extendedKeyUsage=clientAuth']),
    otherCa: makeCa(dir, 'other-ca', 'an unrelated CA'),
  };
}

// One set for the whole test process (LUBDUB_TEST_REDIS_TLS=1 runs every
// Redis of a file over TLS with it), made on first use, removed at exit.
let shared = null;
function sharedCerts() {
  if (!shared) shared = makeCerts(null);
  return shared;
}

module.exports = { makeCerts, sharedCerts };
