'use strict';
// The operator console (served under /console when --admin-token is set).
// The admin token lives in this tab's sessionStorage only: API calls send it
// as "Authorization: Bearer", the live tail's WebSocket as its first
// message, never in a URL (URLs end up in access logs).
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

  async function api(path) {
    const r = await fetch(`/console/api/${path}`, {
      headers: { authorization: `Bearer ${state.token}` }, cache: 'no-store',
    });
    if (r.status === 401) {
      signOut('The hub refused the token.');
      throw new Error('unauthorized');
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
      li.textContent = u.id;
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
