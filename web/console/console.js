'use strict';
// The operator console (served under /console when --admin-token is set).
// The admin token lives in this tab's sessionStorage only: API calls send it
// as "Authorization: Bearer", the live tail's WebSocket as its first
// message, never in a URL (URLs end up in access logs). The page also
// shows presence members with their user_info, publishes a test event
// (POST publish) and runs the socket inspector (POST inspect, then GET
// inspect?query=N until its answer is complete).
(function () {
  const KEY = 'lubdub.adminToken';
  const $ = (id) => document.getElementById(id);
  const state = { token: sessionStorage.getItem(KEY), app: null, presence: null,
    ws: null, timer: null, lines: 0 };
  const MAX_LINES = 500;

  function setBadge(text, cls, s) {
    const b = $('state');
    b.textContent = text;
    b.className = `badge ${cls}`;
    b.dataset.state = s;
  }

  async function api(path, body) {
    const r = await fetch(`/console/api/${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${state.token}` }, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (r.status === 401) {
      signOut('The hub refused the token.');
      throw new Error('unauthorized');
    }
    if (body !== undefined) {
      // POSTs answer with what the hub said, refusals included.
      let j = {};
      try { j = await r.json(); } catch (e) { /* empty body */ }
      return { status: r.status, body: j };
    }
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
  }

  function signOut(msg) {
    sessionStorage.removeItem(KEY);
    state.token = null;
    stopTail();
    clearInterval(state.timer);
    state.timer = null;
    $('app').hidden = true;
    $('login').hidden = false;
    $('signout').hidden = true;
    setBadge('signed out', 'waiting', 'signed-out');
    const e = $('login-error');
    e.hidden = !msg;
    e.textContent = msg || '';
  }

  async function signIn() {
    let apps;
    try {
      apps = (await api('apps')).apps;
    } catch (e) {
      if (e.message !== 'unauthorized') signOut(`Cannot reach the hub: ${e.message}`);
      return;
    }
    $('login').hidden = true;
    $('app').hidden = false;
    $('signout').hidden = false;
    setBadge('signed in', 'connected', 'signed-in');
    const sel = $('app-select');
    sel.textContent = '';
    for (const a of apps) {
      const o = document.createElement('option');
      o.value = a.id;
      o.textContent = `${a.id} (key ${a.key})${a.enabled ? '' : ' disabled'}`;
      sel.appendChild(o);
    }
    state.app = apps.length ? apps[0].id : null;
    refresh();
    state.timer = setInterval(refresh, 1000);
  }

  async function refresh() {
    if (!state.token || !state.app) return;
    try {
      const app = encodeURIComponent(state.app);
      const r = await api(`channels?app=${app}`);
      renderChannels(r.channels, r.truncated);
      if (state.presence) {
        const u = await api(`users?app=${app}&channel=${encodeURIComponent(state.presence)}`);
        renderMembers(u.users || []);
      }
    } catch (e) { /* shown by signOut, or retried next second */ }
  }

  function renderChannels(list, truncated) {
    list.sort((a, b) => a.name.localeCompare(b.name));
    const body = $('channels');
    body.textContent = '';
    for (const c of list) {
      const tr = document.createElement('tr');
      tr.dataset.channel = c.name;
      const name = document.createElement('td');
      name.className = 'name';
      name.textContent = c.name;
      const subs = document.createElement('td');
      subs.className = 'num subs';
      subs.textContent = c.subscription_count;
      const users = document.createElement('td');
      users.className = 'num users';
      users.textContent = c.user_count === undefined ? '' : c.user_count;
      const act = document.createElement('td');
      if (c.name.startsWith('presence-')) {
        const b = document.createElement('button');
        b.textContent = 'members';
        b.className = 'inspect';
        b.onclick = () => { state.presence = c.name; $('presence-channel').textContent = c.name; refresh(); };
        act.appendChild(b);
      }
      const t = document.createElement('button');
      t.textContent = 'tail';
      t.className = 'tail-this';
      t.onclick = () => { $('tail-channel').value = c.name; $('tail-prefix').checked = false; startTail(); };
      act.appendChild(t);
      tr.append(name, subs, users, act);
      body.appendChild(tr);
    }
    $('no-channels').hidden = list.length > 0;
    $('channels-meta').textContent = `${list.length} channel(s)${truncated ? ', list cut at 1000' : ''}`;
  }

  function renderMembers(users) {
    const ul = $('members');
    ul.textContent = '';
    for (const u of users) {
      const li = document.createElement('li');
      li.className = 'member';
      li.dataset.user = u.id;
      li.append(document.createTextNode(u.id));
      if (u.user_info !== undefined) {
        const info = document.createElement('span');
        info.className = 'info';
        info.textContent = JSON.stringify(u.user_info);
        li.appendChild(info);
      }
      ul.appendChild(li);
    }
  }

  function tailState(text, s) {
    $('tail-state').textContent = text;
    $('tail-state').dataset.state = s;
  }

  function addLine(kind, text) {
    const div = document.createElement('div');
    div.className = `line ${kind}`;
    const k = document.createElement('span');
    k.className = 'kind';
    k.textContent = kind;
    div.append(k, document.createTextNode(text));
    const box = $('tail');
    box.appendChild(div);
    if (++state.lines > MAX_LINES) { box.removeChild(box.firstChild); state.lines--; }
    box.scrollTop = box.scrollHeight;
  }

  function startTail() {
    stopTail();
    const kinds = [];
    if ($('tail-events').checked) kinds.push('events');
    if ($('tail-connections').checked) kinds.push('connections');
    const req = {
      token: state.token, app: state.app, channel: $('tail-channel').value,
      prefix: $('tail-prefix').checked, kinds, rate: Number($('tail-rate').value) || 0,
    };
    const proto = location.protocol === 'https:' ? 'wss' : 'ws';
    const ws = new WebSocket(`${proto}://${location.host}/console/tail`, 'lubdub-console');
    state.ws = ws;
    tailState('connecting', 'connecting');
    $('tail-start').disabled = true;
    $('tail-stop').disabled = false;
    ws.onopen = () => ws.send(JSON.stringify(req));
    ws.onmessage = (ev) => {
      const m = JSON.parse(ev.data);
      if (m.type === 'ready') {
        tailState(`tailing (at most ${m.rate}/s)`, 'tailing');
      } else if (m.type === 'drops') {
        $('drops-rate').textContent = m.rate;
        $('drops-queue').textContent = m.queue;
      } else if (m.type === 'event') {
        addLine('event', `${new Date(m.t).toISOString().slice(11, 23)} ${m.channel} ${m.message}${m.truncated ? ` … (${m.bytes} bytes)` : ''}`);
      } else if (m.type === 'connection') {
        addLine('connection', `${new Date(m.t).toISOString().slice(11, 23)} ${m.state} ${m.socket_id}${m.code ? ` code ${m.code}` : ''}`);
      } else if (m.type === 'error') {
        addLine('error', m.message);
      }
    };
    ws.onclose = (ev) => {
      if (state.ws !== ws) return;
      state.ws = null;
      $('tail-start').disabled = false;
      $('tail-stop').disabled = true;
      if (ev.code === 4401) { signOut('The hub refused the token.'); return; }
      tailState(`stopped (${ev.code})`, 'stopped');
    };
  }

  function stopTail() {
    if (state.ws) {
      const ws = state.ws;
      state.ws = null;
      ws.close();
      $('tail-start').disabled = false;
      $('tail-stop').disabled = true;
      tailState('stopped', 'stopped');
    }
  }

  // A test event, published as a REST trigger publishes it.
  async function publishTest() {
    const out = $('publish-result');
    const req = { app: state.app, channel: $('publish-channel').value.trim(),
      event: $('publish-event').value.trim(), data: $('publish-data').value };
    out.dataset.state = 'sending';
    out.textContent = 'publishing…';
    try {
      const r = await api('publish', req);
      out.dataset.state = r.status === 200 ? 'published' : 'refused';
      out.textContent = r.status === 200 ? `published ${req.event} to ${req.channel}`
        : `refused (${r.status}): ${r.body.error || ''}`;
      out.className = r.status === 200 ? 'small' : 'small error';
    } catch (e) {
      out.dataset.state = 'refused';
      out.textContent = e.message;
    }
  }

  function field(parent, label, value) {
    const d = document.createElement('div');
    const b = document.createElement('b');
    b.textContent = `${label}: `;
    d.append(b, document.createTextNode(value));
    parent.appendChild(d);
    return d;
  }

  function renderInspect(a) {
    const box = $('inspect-out');
    box.textContent = '';
    for (const s of a.sockets) {
      const r = document.createElement('div');
      r.className = 'record socket';
      r.dataset.socket = s.socket_id;
      field(r, 'socket', `${s.socket_id} (${s.state}) on node ${s.node || 'this one'}, loop ${s.loop}, ${s.connected_s} s`);
      field(r, 'user', s.user_id || '–');
      field(r, 'subscriptions', `${s.subscriptions.join(', ') || 'none'}${s.subscriptions_truncated ? ' …' : ''}${s.subscriptions_pending ? ` (+${s.subscriptions_pending} joining)` : ''}`).className = 'subs';
      field(r, 'queued', `${s.queued_bytes} bytes in ${s.queued_frames} frames`).className = 'queued';
      field(r, 'written', s.bytes_written === null ? '–' : `${s.bytes_written} bytes`).className = 'written';
      box.appendChild(r);
    }
    for (const c of a.closes) {
      const r = document.createElement('div');
      r.className = 'record close';
      r.dataset.socket = c.socket_id;
      r.dataset.code = c.code;
      field(r, 'closed', `${c.socket_id} at ${new Date(c.at_ms).toISOString()} on node ${c.node || 'this one'}, loop ${c.loop}`);
      field(r, 'code', `${c.code || '– (the peer closed)'} ${c.why}${c.reason ? `: ${c.reason}` : ''}`).className = 'code';
      field(r, 'user', c.user_id || '–');
      box.appendChild(r);
    }
  }

  // Start a query, then poll its answer (the hub asks every loop, and in a
  // cluster every node, without holding the request).
  async function inspect() {
    const v = $('inspect-verdict');
    const req = { app: state.app };
    req[$('inspect-kind').value] = $('inspect-id').value.trim();
    v.dataset.state = 'running';
    v.textContent = 'asking…';
    $('inspect-out').textContent = '';
    try {
      const r = await api('inspect', req);
      if (r.status !== 202) {
        v.dataset.state = 'refused';
        v.textContent = `refused (${r.status}): ${r.body.error || ''}`;
        return;
      }
      for (let i = 0; i < 100; i++) {
        const a = await api(`inspect?query=${r.body.query}`);
        if (a.state === 'done') {
          v.dataset.state = 'done';
          v.textContent = a.verdict;
          renderInspect(a);
          return;
        }
        await new Promise((res) => setTimeout(res, 100 + 20 * i));
      }
      v.textContent = 'no answer';
    } catch (e) {
      v.dataset.state = 'refused';
      v.textContent = e.message;
    }
  }

  $('publish-form').addEventListener('submit', (ev) => { ev.preventDefault(); publishTest(); });
  $('inspect-form').addEventListener('submit', (ev) => { ev.preventDefault(); inspect(); });

  $('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.token = $('token').value.trim();
    $('token').value = '';
    if (!state.token) return;
    sessionStorage.setItem(KEY, state.token);
    signIn();
  });
  $('signout').onclick = () => signOut();
  $('app-select').onchange = (ev) => { state.app = ev.target.value; state.presence = null; renderMembers([]); refresh(); };
  $('tail-form').addEventListener('submit', (ev) => { ev.preventDefault(); startTail(); });
  $('tail-stop').onclick = stopTail;

  window.lubdubConsole = state;
  if (state.token) signIn();
})();
