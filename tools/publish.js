#!/usr/bin/env node
'use strict';
// Publish one event through lubdub's Pusher REST API (POST /apps/ID/events),
// signed with HMAC-SHA256 the way the Pusher server SDKs sign it. Needs
// only node (18+); no npm packages.
//
//   node tools/publish.js [options] CHANNEL EVENT [DATA]
//
//   --url URL        hub base URL            (env LUBDUB_URL, default
//                                              http://127.0.0.1:6001)
//   --app-id ID      app id                  (env LUBDUB_APP_ID, app-id)
//   --key KEY        app key                 (env LUBDUB_APP_KEY, app-key)
//   --secret SECRET  app secret              (env LUBDUB_APP_SECRET,
//                                              app-secret)
//   --socket-id ID   exclude this connection (optional)
//
// DATA is sent verbatim as the event's data string; it defaults to
// {"text":"hello from tools/publish.js"}. Prints the HTTP status and body;
// exits 0 on 200.
const crypto = require('node:crypto');
const http = require('node:http');
const https = require('node:https');

function usage(msg) {
    if (msg) {
        console.error(`publish: ${msg}`);
    }
    console.error('usage: node tools/publish.js [--url URL] [--app-id ID] ' +
                  '[--key KEY] [--secret SECRET] [--socket-id ID] ' +
                  'CHANNEL EVENT [DATA]');
    process.exit(2);
}

function parseArgs(argv) {
    const o = {
        url: process.env.LUBDUB_URL || 'http://127.0.0.1:6001',
        appId: process.env.LUBDUB_APP_ID || 'app-id',
        key: process.env.LUBDUB_APP_KEY || 'app-key',
        secret: process.env.LUBDUB_APP_SECRET || 'app-secret',
        socketId: null,
        rest: [],
    };
    const flags = { '--url': 'url', '--app-id': 'appId', '--key': 'key',
                    '--secret': 'secret', '--socket-id': 'socketId' };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === '-h' || a === '--help') {
            usage();
        } else if (flags[a]) {
            if (i + 1 >= argv.length) {
                usage(`${a} needs a value`);
            }
            o[flags[a]] = argv[++i];
        } else if (a.startsWith('--') && flags[a.split('=')[0]]) {
            o[flags[a.split('=')[0]]] = a.slice(a.indexOf('=') + 1);
        } else {
            o.rest.push(a);
        }
    }
    if (o.rest.length < 2 || o.rest.length > 3) {
        usage('CHANNEL and EVENT are required');
    }
    return o;
}

// The string to sign is METHOD\nPATH\nQUERY, the query's keys sorted and
// its values not escaped; body_md5 binds the body to the signature.
function signedPath(o, path, body) {
    const params = {
        auth_key: o.key,
        auth_timestamp: String(Math.floor(Date.now() / 1000)),
        auth_version: '1.0',
        body_md5: crypto.createHash('md5').update(body).digest('hex'),
    };
    const query = Object.keys(params).sort()
        .map((k) => `${k}=${params[k]}`).join('&');
    const sig = crypto.createHmac('sha256', o.secret)
        .update(`POST\n${path}\n${query}`).digest('hex');
    return `${path}?${query}&auth_signature=${sig}`;
}

function publish(o, channel, event, data) {
    const msg = { name: event, channel, data };
    if (o.socketId) {
        msg.socket_id = o.socketId;
    }
    const body = JSON.stringify(msg);
    const base = new URL(o.url);
    const path = `/apps/${encodeURIComponent(o.appId)}/events`;
    const target = new URL(signedPath(o, path, body), base);
    const lib = target.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
        const req = lib.request(target, {
            method: 'POST',
            headers: {
                'content-type': 'application/json',
                'content-length': Buffer.byteLength(body),
            },
        }, (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d) => { text += d; });
            res.on('end', () => resolve({ status: res.statusCode, body: text }));
        });
        req.on('error', reject);
        req.setTimeout(10000, () => req.destroy(new Error('timed out')));
        req.end(body);
    });
}

if (require.main === module) {
    const o = parseArgs(process.argv.slice(2));
    const [channel, event, data] = o.rest;
    publish(o, channel, event,
            data === undefined ?
                '{"text":"hello from tools/publish.js"}' : data)
        .then((r) => {
            console.log(`${r.status} ${r.body}`);
            process.exit(r.status === 200 ? 0 : 1);
        })
        .catch((e) => {
            console.error(`publish: ${e.message}`);
            process.exit(1);
        });
}

module.exports = { publish, signedPath };
