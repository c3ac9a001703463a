// main.mjs: the Softcast page. Without ?session= it is the lobby (list, create, join by
// link); with ?session=ID&token=T it opens that session: 3D view, slice view, controls,
// stats. window.softcast exposes the page's state to people debugging and to the e2e tests.
import { Connection } from './connection.mjs';
import { View3D } from './view3d.mjs';
import { SliceView } from './sliceview.mjs';
import { Controls } from './controls.mjs';

const $ = (sel) => document.querySelector(sel);
const params = new URLSearchParams(location.search);

async function api(method, path, body) {
  const r = await fetch(path, {
    method, headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await r.json().catch(() => null);
  if (!r.ok) throw new Error(json?.detail ? `${json.error}: ${json.detail}` : `HTTP ${r.status}`);
  return json;
}

// ------------------------------------------------------------------ lobby

async function lobby() {
  $('#lobby').hidden = false;
  const tbody = $('#sessions tbody');
  const refresh = async () => {
    try {
      const { sessions } = await api('GET', '/api/sessions');
      tbody.replaceChildren(...sessions.map((s) => {
        const tr = document.createElement('tr');
        const size = s.dims ? s.dims.join(' x ') : `${s.characters} characters`;
        for (const v of [s.id, s.scene, size, s.clients, s.frames]) tr.insertCell().textContent = v;
        return tr;
      }));
      if (!sessions.length) tbody.innerHTML = '<tr><td colspan=5 class=hint>none yet</td></tr>';
    } catch (e) {
      tbody.innerHTML = `<tr><td colspan=5 class=error>${e.message}</td></tr>`;
    }
  };
  refresh();
  setInterval(refresh, 3000);
  const sceneSelect = $('#create select[name=scene]');
  const showSceneFields = () => document.querySelectorAll('#create [data-scene]').forEach((el) => {
    el.hidden = el.dataset.scene !== sceneSelect.value;
  });
  sceneSelect.addEventListener('change', showSceneFields);
  showSceneFields();
  $('#create').addEventListener('submit', async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const body = { scene: f.get('scene') };
    if (body.scene === 'volume' && f.get('dims')) body.dims = f.get('dims').split('x').map(Number);
    if (body.scene === 'cloth') body.characters = Number(f.get('characters'));
    const btn = e.target.querySelector('button');
    btn.disabled = true;
    btn.textContent = 'Creating...';
    try {
      const s = await api('POST', '/api/sessions', body);
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
  // The WebSocket port from the API, the host this page came from.
  const wsPort = new URL(info.ws_url).port;
  const wsUrl = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.hostname}:${wsPort}/?session=${encodeURIComponent(id)}&token=${encodeURIComponent(token)}`;

  // frames: numbers of the mesh frames shown; shown: [frame, decodedAt, shownAt] (ms since
  // the epoch) of the same.
  const st = { state: null, role: null, frame: -1, frames: [], shown: [], texts: [] };
  // Moves go out at most one per 16 ms (the server steps at 60 Hz and rate-limits),
  // the newest pointer position winning; timers, not animation frames, so a hidden tab
  // still lets go of what it holds.
  let pendingMove = null, moveTimer = 0, lastMoveAt = 0, grabRadiusMm = 3;
  const flushMove = () => {
    clearTimeout(moveTimer);
    moveTimer = 0;
    if (!pendingMove) return;
    conn.send('move', { point: pendingMove, space: 'world' });
    pendingMove = null;
    lastMoveAt = performance.now();
  };
  let lastCameraAt = 0, cameraTimer = 0;
  const view = new View3D($('#canvas3d'), {
    onGrab: (p, hit) => {
      if (st.state?.scene !== 'cloth') {
        conn.send('grab', { point: p, radius: grabRadiusMm, space: 'world' });
        return;
      }
      // A cape vertex: which character's, by the LOD table of the shown keyframe.
      const e = (conn.table?.lods ?? []).findIndex((x) => hit.vertex >= x.firstVertex && hit.vertex < x.firstVertex + x.nvert);
      if (e >= 0 && hit.surface === 2)
        conn.send('grab', { character: e, vertex: hit.vertex - conn.table.lods[e].firstVertex, point: p });
    },
    // Cloth: the driver's camera sets the LODs; at most 10 updates a second.
    onCamera: (p) => {
      if (st.state?.scene !== 'cloth' || st.role !== 'driver') return;
      clearTimeout(cameraTimer);
      const send = () => { lastCameraAt = performance.now(); conn.send('camera', { point: p }); };
      const wait = 100 - (performance.now() - lastCameraAt);
      if (wait <= 0) send(); else cameraTimer = setTimeout(send, wait);
    },
    onMove: (p) => {
      pendingMove = p;
      const wait = 16 - (performance.now() - lastMoveAt);
      if (wait <= 0) flushMove();
      else if (!moveTimer) moveTimer = setTimeout(flushMove, wait);
    },
    onRelease: () => { flushMove(); conn.send('release'); },
  });
  const slice = new SliceView($('#sliceview'), (plane, index, level, width) =>
    conn.send('slice', { plane, index, level, width }));
  // Latest wins on the page too: the worker hands over one decoded frame at a time; it is
  // applied on the next animation frame (or at once in a hidden tab, which has none), then
  // taken (ack), and the worker posts the newest frame since.
  let pending = null;
  const applyMesh = () => {
    const m = pending;
    if (!m) return;
    pending = null;
    if (m.table) showTable(m.table);
    view.update(m);
    st.frame = m.frame;
    st.frames.push(m.frame);
    if (st.frames.length > 600) st.frames.splice(0, 300);
    st.shown.push([m.frame, m.decodedAt, performance.timeOrigin + performance.now()]);
    if (st.shown.length > 600) st.shown.splice(0, 300);
    conn.ack();
    slice.meshFrame(m.frame);
  };
  const showTable = (t) => {
    conn.table = t;
    const n = [0, 0, 0];
    for (const e of t.lods) n[e.lod] = (n[e.lod] ?? 0) + 1;
    st.lods = t.lods.map((e) => e.lod);
    const ep = Math.max(...t.lods.map((e) => e.ePos)), ev = Math.max(...t.lods.map((e) => e.eVel));
    $('#lod-counts').textContent = `characters at LOD 0 / 1 / 2: ${n.join(' / ')}` +
      (ev > 0 || ep > 0 ? ` · worst last switch: E_pos ${(ep * 100).toFixed(1)} cm, E_vel ${ev.toFixed(2)} m/s` : '');
  };
  document.addEventListener('visibilitychange', () => { if (document.hidden) applyMesh(); });
  const conn = new Connection(wsUrl, {
    onMesh: (m) => {
      pending = m;
      if (document.hidden) applyMesh();
      else view.requestDraw();
    },
    onSlice: (s) => slice.show(s),
    onText: (t) => {
      st.texts.push(t);
      if (st.texts.length > 200) st.texts.splice(0, 100);
      if (t.type === 'state') {
        st.state = t;
        st.role = t.role;
        const cloth = t.scene === 'cloth';
        controls.state(t);
        view.setDriver(t.role === 'driver');
        if (!cloth) {
          grabRadiusMm = 3 * Math.max(...t.spacing); // three lattice units
          slice.setDims(t.dims, t.spacing);
        }
        $('#sliceview').hidden = cloth;
        $('#clothview').hidden = !cloth;
        $('#cloth-params').hidden = !cloth;
        document.querySelectorAll('#panel [data-scene=volume]').forEach((el) => { el.hidden = cloth; });
        document.querySelectorAll('#clothview button, #clothview select').forEach((el) => { el.disabled = t.role !== 'driver'; });
        const badge = $('#badge');
        badge.hidden = false;
        badge.textContent = t.role === 'driver' ? 'driver' : 'viewer';
        badge.className = `badge ${t.role}`;
        $('#hint3d').textContent = t.role !== 'driver' ? 'watching live · drag to orbit · wheel to zoom · right-drag to pan'
          : cloth ? 'drag a cape to pull it · drag elsewhere to orbit · wheel to zoom (LODs follow) · right-drag to pan'
            : 'drag on the body to pull it · drag elsewhere to orbit · wheel to zoom · right-drag to pan';
      } else if (t.type === 'control_request') {
        controls.controlRequest(t.from);
      } else if (t.type === 'notice') {
        $('#hint3d').textContent = t.detail; // e.g. a pull that stops at the volume's edge
      } else if (t.type === 'error' && t.seq && t.seq === slice.inFlight) {
        slice.inFlight = 0;
      }
    },
    onStatus: (state, detail) => {
      const c = $('#conn');
      c.hidden = false;
      c.textContent = state;
      showMessage(state === 'refused' || state === 'reconnecting' ? detail : '');
    },
  });
  const controls = new Controls(document, conn, {
    // The server tells the driver the view token; a viewer shares its own link.
    viewerLink: () => `${location.origin}${location.pathname}?session=${encodeURIComponent(id)}` +
      `&token=${encodeURIComponent(st.state?.view_token ?? token)}`,
  });
  conn.start();
  // The cloth panel: motions, a gust, the LOD.
  document.querySelectorAll('#motions button').forEach((b) => b.addEventListener('click', () => {
    document.querySelectorAll('#motions button').forEach((o) => o.classList.toggle('on', o === b));
    conn.send('motion', { character: -1, motion: b.dataset.motion });
  }));
  $('#gust').addEventListener('click', () => conn.send('wind', { impulse: [-3, 1.5, 1.5] }));
  $('#force-lod').addEventListener('change', (e) => conn.send('force_lod', { character: -1, lod: Number(e.target.value) }));

  // Drawing: one animation frame per change (a new mesh frame, the camera, a resize); the
  // newest decoded frame is applied first. Stats over the last second, four times a second.
  const fpsWindow = [];
  view.onFrame = (now) => {
    applyMesh();
    if (view.render()) fpsWindow.push(now);
  };
  let lastBytes = 0, lastT = performance.now(), kbps = 0;
  setInterval(() => {
    const now = performance.now();
    while (fpsWindow.length && fpsWindow[0] < now - 1000) fpsWindow.shift();
    if (now - lastT >= 1000) {
      kbps = (conn.bytes - lastBytes) / 1024 / ((now - lastT) / 1000);
      lastBytes = conn.bytes;
      lastT = now;
    }
    const lat = conn.latencies.slice(-30).sort((a, b) => a - b);
    const med = lat.length ? lat[lat.length >> 1].toFixed(0) : '-';
    $('#stats').textContent = `${fpsWindow.length} fps   latency ${med} ms\n${kbps.toFixed(1)} kB/s   frame ${st.frame}\n${conn.state}`;
  }, 250);

  window.softcast = {
    st, view, slice, conn,
    fps: () => fpsWindow.length,
    firstFrameAt: () => view.firstFrameAt,
    /** Pixels of the 3D view that differ from the background, and a hash of the image. */
    pixels3d() {
      const { px } = view.readPixels();
      let lit = 0, h = 2166136261;
      for (let i = 0; i < px.length; i += 4) {
        if (px[i] > 24 || px[i + 1] > 24 || px[i + 2] > 30) lit++;
        h = Math.imul(h ^ (px[i] + 3 * px[i + 1] + 7 * px[i + 2]), 16777619);
      }
      return { lit, total: px.length / 4, hash: h >>> 0 };
    },
    sliceHash() {
      const p = slice.lastPixels;
      if (!p) return null;
      let h = 2166136261;
      for (let i = 0; i < p.length; i++) h = Math.imul(h ^ p[i], 16777619);
      return { plane: slice.lastPlane, received: slice.received, n: p.length, hash: h >>> 0 };
    },
  };
}

const id = params.get('session'), token = params.get('token');
if (id && token) session(id, token);
else lobby();
