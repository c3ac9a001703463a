// main.mjs: the Softcast page, the shell around the scenes. Without ?session= it is the
// lobby (list, create, join by link); with ?session=ID&token=T it opens that session: the
// connection, the 3D view, the stats, the classroom and the parameter panel (core/), then
// hands the session to the module of the scene the server names in `state`
// (scenes/index.mjs). The shell knows no scene. window.softcast exposes the page's state
// to people debugging and to the e2e tests.
import { Connection } from './core/connection.mjs';
import { View3D } from './core/view3d.mjs';
import { ParamPanel } from './core/panel.mjs';
import { Classroom } from './core/classroom.mjs';
import { Stats } from './core/stats.mjs';
import { Hand } from './core/hand.mjs';
import { h } from './core/dom.mjs';
import { sceneNames, loadScene } from './scenes/index.mjs';
import { uploadCard } from './core/upload.mjs';

const $ = (sel) => document.querySelector(sel);
const params = new URLSearchParams(location.search);

// A server started with --api-key-file makes sessions for its operator's key only: the
// lobby asks for it once (kept for this tab) and sends it with what makes sessions.
const operatorKey = () => sessionStorage.getItem('softcast-key') ?? '';

async function api(method, path, body) {
  const headers = { 'content-type': 'application/json' };
  if (method === 'POST' && operatorKey()) headers.authorization = `Bearer ${operatorKey()}`;
  const r = await fetch(path, {
    method, headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await r.json().catch(() => null);
  if (!r.ok) {
    const e = new Error(json?.detail ? `${json.error}: ${json.detail}` : `HTTP ${r.status}`);
    e.status = r.status;
    throw e;
  }
  return json;
}

// A new session. Behind a router a full (or draining) process answers 503 and the router
// tries another; should every try it made land on full ones, each process is asked in turn.
async function createSession(body) {
  try {
    return await api('POST', '/api/sessions', body);
  } catch (e) {
    if (e.status !== 503) throw e;
    const { processes } = await api('GET', '/api/cluster').catch(() => ({ processes: [] }));
    let last = e;
    for (const p of processes.length > 1 ? processes : []) {
      try {
        return await api('POST', `/api/sessions?process=${encodeURIComponent(p)}`, body);
      } catch (e2) {
        if (e2.status !== 503) throw e2;
        last = e2;
      }
    }
    throw last;
  }
}

// ------------------------------------------------------------------ lobby

// Every process's sessions. Behind a router (deploy/) GET /api/cluster names the processes
// and each lists its own (?process=NAME goes to that one); alone, a server lists its own.
async function allSessions() {
  const { processes } = await api('GET', '/api/cluster');
  if (processes.length <= 1) return { sessions: (await api('GET', '/api/sessions')).sessions, unreachable: [] };
  const lists = await Promise.allSettled(
    processes.map((p) => api('GET', `/api/sessions?process=${encodeURIComponent(p)}`)));
  return {
    sessions: lists.flatMap((r) => (r.status === 'fulfilled' ? r.value.sessions : [])),
    unreachable: processes.filter((p, i) => lists[i].status !== 'fulfilled'),
  };
}

async function lobby() {
  $('#lobby').hidden = false;
  const modules = new Map();
  for (const name of sceneNames) modules.set(name, await loadScene(name));
  const tbody = $('#sessions tbody');
  const refresh = async () => {
    try {
      const { sessions, unreachable } = await allSessions();
      tbody.replaceChildren(...sessions.map((s) => {
        const tr = document.createElement('tr');
        const size = s.state === 'loading' ? `loading: ${s.stage}`
          : s.state === 'failed' ? `failed: ${s.error}` : modules.get(s.scene)?.lobby.size(s) ?? '';
        for (const v of [s.id, s.scene, size, s.clients, s.frames]) tr.insertCell().textContent = v;
        return tr;
      }));
      if (!sessions.length) tbody.innerHTML = '<tr><td colspan=5 class=hint>none yet</td></tr>';
      for (const p of unreachable) {
        const tr = tbody.insertRow();
        tr.innerHTML = '<td colspan=5 class=error></td>';
        tr.cells[0].textContent = `${p}: not answering (its sessions are not listed)`;
      }
    } catch (e) {
      tbody.innerHTML = `<tr><td colspan=5 class=error>${e.message}</td></tr>`;
    }
  };
  refresh();
  setInterval(refresh, 3000);
  api('GET', '/api/health').then((hl) => {
    if (!hl.api_key_required) return;
    const label = $('#operator-key'), input = label.querySelector('input');
    label.hidden = false;
    input.value = operatorKey();
    input.addEventListener('change', () => sessionStorage.setItem('softcast-key', input.value.trim()));
  }).catch(() => {});
  // A CT of one's own: uploaded, loaded on the server, then opened to drive.
  uploadCard($('#upload'), { api, open: (s) => { location.href = `./${new URL(s.control_url).search}`; } });
  // A recording: uploaded as a replay session, polled until ready, opened to drive.
  $('#recording-file').addEventListener('change', async (e) => {
    const f = e.target.files[0], status = $('#recording-status');
    if (!f) return;
    status.textContent = `sending ${f.name}...`;
    const headers = { 'content-type': 'application/octet-stream' };
    if (operatorKey()) headers.authorization = `Bearer ${operatorKey()}`;
    const r = await fetch('/api/recordings', { method: 'POST', headers, body: f });
    const s = await r.json().catch(() => null);
    if (!r.ok) { status.textContent = s?.detail ?? `HTTP ${r.status}`; return; }
    for (let st = s; ; await new Promise((res) => setTimeout(res, 200))) {
      st = await api('GET', `/api/sessions/${s.id}?token=${encodeURIComponent(s.control_token)}`); // its reason too
      if (st.state === 'ready') break;
      if (st.state === 'failed') { status.textContent = st.error; return; }
      status.textContent = `building the replay: ${st.stage}`;
    }
    location.href = `./${new URL(s.control_url).search}`;
  });
  // The create form: a scene, and the fields its module asks for.
  const sceneSelect = $('#create select[name=scene]');
  const fields = $('#scene-fields');
  for (const [name, mod] of modules) {
    sceneSelect.append(h('option', { value: name }, mod.title));
    fields.append(h('span', { class: 'scene-fields', dataset: { scene: name } }, mod.lobby.fields()));
  }
  // Only the chosen scene's fields are shown, checked and sent: the others are disabled, which
  // keeps them out of the form's data (two scenes may both have a "model").
  const showSceneFields = () => fields.querySelectorAll('[data-scene]').forEach((el) => {
    el.hidden = el.dataset.scene !== sceneSelect.value;
    el.querySelectorAll('input, select, textarea').forEach((c) => { c.disabled = el.hidden; });
  });
  sceneSelect.addEventListener('change', showSceneFields);
  showSceneFields();
  $('#create').addEventListener('submit', async (e) => {
    e.preventDefault();
    const scene = sceneSelect.value;
    const key = new FormData(e.target).get('key');
    if (key) sessionStorage.setItem('softcast-key', String(key).trim());
    const body = { scene, ...modules.get(scene).lobby.body(new FormData(e.target)) };
    const btn = e.target.querySelector('button');
    btn.disabled = true;
    btn.textContent = 'Creating...';
    try {
      const s = await createSession(body);
      location.href = `./${new URL(s.control_url).search}`; // same host the page came from
    } catch (err) {
      $('#create-error').hidden = false;
      $('#create-error').textContent = `Could not create the session: ${err.message}`;
      btn.disabled = false;
      btn.textContent = 'Create and drive';
    }
  });
  $('#join').addEventListener('submit', (e) => {
    e.preventDefault();
    const link = new FormData(e.target).get('link').trim();
    try {
      const u = new URL(link, location.href);
      if (!u.searchParams.get('session') || !u.searchParams.get('token')) throw new Error();
      location.href = `./${u.search}`;
    } catch {
      alert('That is not a session link: it needs ?session=...&token=...');
    }
  });
}

// ---------------------------------------------------------------- session

async function session(id, token) {
  $('#session').hidden = false;
  const msg = $('#message');
  const showMessage = (text) => { msg.hidden = !text; msg.textContent = text || ''; };
  let info;
  try {
    info = await api('GET', `/api/sessions/${encodeURIComponent(id)}`);
  } catch (e) {
    showMessage(/404|unknown/.test(e.message)
      ? 'This session does not exist (any more). Ask for a new link, or start one from the lobby.'
      : `Cannot reach the server: ${e.message}`);
    return;
  }
  // Behind a router (--public-url) the API's ws_url is on this page's host: as it is. A
  // server reached directly may name its bind address there: its port on this page's host.
  const api_ws = new URL(info.ws_url);
  const wsUrl = api_ws.host === location.host
    ? `${info.ws_url}&token=${encodeURIComponent(token)}`
    : `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.hostname}:${api_ws.port}/?session=${encodeURIComponent(id)}&token=${encodeURIComponent(token)}`;

  // frames: numbers of the frames shown (the newest each update brought); shown: [frame,
  // decodedAt, shownAt] (ms since the epoch) of the same. A scene module may add its own
  // (the cloth: lods).
  const st = { state: null, role: null, frame: -1, frames: [], shown: [], texts: [] };
  // The scene module's hooks once it is open (see web-client/README.md); until then frames
  // wait in the worker.
  let scene = null, sceneName = null;
  const view = new View3D($('#canvas3d'), {
    onGrab: (p, hit) => scene?.grab(p, hit),
    onCamera: (p) => scene?.camera?.(p),
    onMove: (p) => hand.move(p),
    onRelease: () => hand.release(),
  });
  // Latest wins on the page too: the worker hands over one update at a time; it is applied
  // on the next animation frame (or at once in a hidden tab, which has none), then taken
  // (ack), and the worker posts the next: everything that changed since, to the newest frame.
  // (The worker never posts while the page holds one: an update is never overwritten.)
  let pending = null;
  const applyObjects = () => {
    const m = pending;
    if (!m || !scene) return;
    pending = null;
    view.update(m);
    st.frame = m.frame;
    st.frames.push(m.frame);
    if (st.frames.length > 600) st.frames.splice(0, 300);
    st.shown.push([m.frame, m.decodedAt, performance.timeOrigin + performance.now()]);
    if (st.shown.length > 600) st.shown.splice(0, 300);
    conn.ack();
    classroom.frame(m.frame);
    scene.objects?.(m);
  };
  document.addEventListener('visibilitychange', () => { if (document.hidden) applyObjects(); });

  const hint = (t) => {
    $('#hint3d').textContent = scene?.hint?.(t.role === 'driver') ??
      (t.role === 'driver' ? 'drag on the scene to pull it · drag elsewhere to orbit · wheel to zoom · right-drag to pan'
        : 'watching live · drag to orbit · wheel to zoom · right-drag to pan');
  };
  const onState = (t) => {
    st.state = t;
    st.role = t.role;
    classroom.state(t);
    panel.state(t);
    view.setDriver(t.role === 'driver');
    const badge = $('#badge');
    badge.hidden = false;
    badge.textContent = t.role === 'driver' ? 'driver' : 'viewer';
    badge.className = `badge ${t.role}`;
    if (!sceneName) openScene(t.scene);
    scene?.state?.(t);
    hint(t);
  };
  const openScene = async (name) => {
    sceneName = name;
    const mod = await loadScene(name);
    if (!mod) {
      showMessage(`This page has no module for the scene "${name}" (web-client/src/scenes/).`);
      return;
    }
    const side = $('#sideview');
    scene = mod.open({ conn, view, st, side });
    Object.assign(window.softcast, { scene }, scene.expose ?? {});
    scene.state?.(st.state);
    hint(st.state);
    view.requestDraw(); // a frame may be waiting for the scene
  };

  const conn = new Connection(wsUrl, {
    onObjects: (m) => {
      pending = m;
      if (document.hidden) applyObjects();
      else view.requestDraw();
    },
    onSlice: (s) => scene?.sliceFrame?.(s),
    onText: (t) => {
      st.texts.push(t);
      if (st.texts.length > 200) st.texts.splice(0, 100);
      if (t.type === 'state') {
        onState(t);
        return;
      }
      if (t.type === 'control_request') classroom.controlRequest(t.from);
      else if (t.type === 'recording') classroom.recordingState(t);
      else if (t.type === 'notice') $('#hint3d').textContent = t.detail; // e.g. a pull that stops at the edge
      else if (t.type === 'error') panel.refused(t);
      scene?.text?.(t);
    },
    onStatus: (state, detail) => {
      const c = $('#conn');
      c.hidden = false;
      c.textContent = state;
      showMessage(state === 'refused' || state === 'reconnecting' ? detail : '');
    },
  });
  const hand = new Hand(conn);
  const classroom = new Classroom(document, conn, {
    // The server tells the driver the view token; a viewer shares its own link.
    viewerLink: () => `${location.origin}${location.pathname}?session=${encodeURIComponent(id)}` +
      `&token=${encodeURIComponent(st.state?.view_token ?? token)}`,
  });
  Object.assign(classroom, { token, sessionId: id }); // the recording's download needs them
  const panel = new ParamPanel($('#params'), (p) => conn.send('set_params', { params: p }));
  const stats = new Stats($('#stats'), conn, st);
  conn.start();

  // Drawing: one animation frame per change (an update, the camera, a resize); the update
  // waiting is applied first.
  view.onFrame = (now) => {
    applyObjects();
    if (view.render()) stats.drawn(now);
  };

  window.softcast = {
    st, view, conn, panel,
    scene: null, // the scene module's hooks, once open (it may add its own fields here)
    fps: () => stats.fps(),
    firstFrameAt: () => view.firstFrameAt,
    /** Pixels of the 3D view that differ from the background, and a hash of the image. */
    pixels3d() {
      const { px } = view.readPixels();
      let lit = 0, x = 2166136261;
      for (let i = 0; i < px.length; i += 4) {
        if (px[i] > 24 || px[i + 1] > 24 || px[i + 2] > 30) lit++;
        x = Math.imul(x ^ (px[i] + 3 * px[i + 1] + 7 * px[i + 2]), 16777619);
      }
      return { lit, total: px.length / 4, hash: x >>> 0 };
    },
  };
}

const id = params.get('session'), token = params.get('token');
if (id && token) session(id, token);
else lobby();
