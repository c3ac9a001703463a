// view3d.mjs: the streamed objects in three.js (one Mesh or LineSegments per protocol
// object, placed by its transform), orbit, zoom and pan with mouse or touch, and grab by
// picking: a press on an object grabs there, the drag moves the grab point in the plane
// facing the camera, the release lets go. What each object looks like (one style, or one
// per range of its elements), which ones a press may grab and where the camera starts come
// from the scene module (setScene); the view itself knows no scene.
import * as THREE from 'three';
import { OrbitControls } from 'three/examples/jsm/controls/OrbitControls.js';
import { PRIM } from '../../../protocol/js/softcast-proto.mjs';

// An object the scene did not style: opaque grey, both sides, grabbable; a line set grey
// (or coloured by its scalar) and never grabbed.
const DEFAULT_STYLE = { color: 0xa0a6b0, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'double', pick: 0 };
const DEFAULT_LINES = { ...DEFAULT_STYLE, pick: null };

// A software rasteriser (SwiftShader, llvmpipe: no GPU) cannot afford multisampling, and
// it shares the CPU with the page, the decoder and whatever else runs: it draws at most
// SOFT_FPS frames a second, into a drawing buffer of at most SOFT_PIXELS pixels (the cost
// of a frame's fill follows its pixels; a 100-character crowd at 600 x 720 pixels took
// 21-26 ms a frame on SwiftShader, 11-15 ms at a quarter of the pixels).
const SOFT_FPS = 30;
const SOFT_PIXELS = 640 * 360;
function softwareRenderer() {
  const gl = document.createElement('canvas').getContext('webgl2');
  const info = gl?.getExtension('WEBGL_debug_renderer_info');
  const name = info ? String(gl.getParameter(info.UNMASKED_RENDERER_WEBGL)) : '';
  gl?.getExtension('WEBGL_lose_context')?.loseContext();
  return { software: /SwiftShader|llvmpipe|software/i.test(name), name };
}

export class View3D {
  /** onGrab(point, {object, vertex, point}) / onMove(point) / onRelease(): the driver's
   *  hand, in world units (vertex: the object's, a local index); onCamera(position): the
   *  camera moved. */
  constructor(canvas, { onGrab, onMove, onRelease, onCamera }) {
    this.canvas = canvas;
    this.gpu = softwareRenderer();
    this.renderer = new THREE.WebGLRenderer({ canvas, antialias: !this.gpu.software });
    this.renderer.setClearColor(0x0b0d10);
    this.scene = new THREE.Scene();
    this.camera = new THREE.PerspectiveCamera(35, 1, 1, 5000);
    this.camera.up.set(0, 0, 1); // z runs head to foot in the lattice: keep it vertical
    this.scene.add(new THREE.HemisphereLight(0xffffff, 0x404050, 1.4));
    const sun = new THREE.DirectionalLight(0xffffff, 1.6);
    sun.position.set(0.4, 1, 0.7);
    this.camera.add(sun); // the light follows the camera: the side we look at is lit
    this.scene.add(this.camera);
    this.controls = new OrbitControls(this.camera, canvas);
    this.controls.enableDamping = false;
    this.objects = new Map(); // protocol object id -> {id, obj (Mesh or LineSegments), meta, groups}
    this.meshes = [];         // their three.js objects, in id order
    this.materials = new Map(); // style -> {variant -> material}: made once each
    this.styleFor = () => null;
    this.frameFor = null;   // the scene's first-frame camera, if it has one
    this.box = null;
    this.driver = false;
    this.hand = { onGrab, onMove, onRelease };
    this.grabbing = false;
    this.dirty = true;
    this.raf = 0;          // the animation frame requested, if any
    this.inFrame = false;
    this.drawnAt = -Infinity; // performance.now() of the last frame drawn
    this.onFrame = null;   // (now) => ...: the page's work for an animation frame; default: render
    this.framesDrawn = 0;
    this.firstFrameAt = null;
    this.raycaster = new THREE.Raycaster();
    this.dragPlane = new THREE.Plane();
    canvas.addEventListener('pointerdown', (e) => this.down(e), { capture: true });
    canvas.addEventListener('pointermove', (e) => this.move(e));
    canvas.addEventListener('pointerup', (e) => this.up(e));
    canvas.addEventListener('pointercancel', (e) => this.up(e));
    this.controls.addEventListener('change', () => {
      this.requestDraw();
      onCamera?.(this.camera.position.toArray());
    });
    new ResizeObserver(() => this.resize()).observe(canvas);
    this.resize();
  }

  /** The scene's look, before its first frame. styleFor(meta): an object's style from its
   *  key's fields (meta: id, primitive, lod, info, nvert, nelem, bmin, bmax, hasScalar, smin,
   *  smax), or a list of groups [{style, from}] (from: its first element; each group runs
   *  to the next one's start) for an object drawn in parts, or null (the default). Return
   *  the same style objects each time: each has one material for the page's life. A style:
   *  { color, opacity, transparent, depthWrite, renderOrder, side: 'front' | 'double', pick:
   *  0 (grabbed first), 1 (where the ray misses every rank-0 part) or null (never grabbed) };
   *  a line set's vertices are coloured by its scalar when it has one. frameCamera(view,
   *  update): places the camera on the first update (default: frameBox). */
  setScene({ styleFor = () => null, frameCamera = null } = {}) {
    this.styleFor = styleFor;
    this.frameFor = frameCamera;
    for (const m of this.materials.values()) for (const x of m.values()) x.dispose();
    this.materials.clear();
  }

  /** The groups an object is drawn in: [{style, from}], from 0 up. */
  groupsOf(meta) {
    const lines = meta.primitive === PRIM.LINES;
    const s = this.styleFor({ ...meta }) ?? (lines ? DEFAULT_LINES : DEFAULT_STYLE);
    return Array.isArray(s) ? s : [{ style: s, from: 0 }];
  }

  setDriver(driver) {
    this.driver = driver;
    if (!driver && this.grabbing) this.up(null);
  }

  resize() {
    const w = this.canvas.clientWidth, h = this.canvas.clientHeight;
    if (!w || !h) return;
    this.renderer.setPixelRatio(this.gpu.software ? Math.min(1, Math.sqrt(SOFT_PIXELS / (w * h)))
      : Math.min(window.devicePixelRatio, 2));
    this.renderer.setSize(w, h, false);
    this.camera.aspect = w / h;
    this.camera.updateProjectionMatrix();
    this.requestDraw();
  }

  /** An update from wire.mjs: the objects removed, and per object that changed its key's
   *  fields and elements (a key or an append), its positions, normals, colours and bounding
   *  sphere (local frame, when they changed), its transform (when it changed). The arrays
   *  are the worker's, transferred: they become the attributes' arrays without a copy. */
  update(u) {
    for (const id of u.removed) this.drop(id);
    for (const o of u.objects) this.apply(o);
    if (!this.framed && this.objects.size) {
      this.box = this.worldBox();
      if (this.frameFor) this.frameFor(this, u); else this.frameBox();
      this.framed = true;
    }
    if (u.removed.length || u.objects.length) this.requestDraw();
  }

  apply(o) {
    let e = this.objects.get(o.id);
    if (o.meta) {
      // A key or an append: a new geometry (a buffer cannot change its size).
      const lines = o.meta.primitive === PRIM.LINES;
      const g = new THREE.BufferGeometry();
      g.setIndex(new THREE.BufferAttribute(o.elements, 1));
      g.setAttribute('position', new THREE.BufferAttribute(o.positions, 3));
      if (o.normals) g.setAttribute('normal', new THREE.BufferAttribute(o.normals, 3));
      if (o.colors) g.setAttribute('color', new THREE.BufferAttribute(o.colors, 3));
      if (e && e.lines !== lines) { this.drop(o.id); e = null; }
      if (!e) {
        e = { id: o.id, lines, obj: lines ? new THREE.LineSegments(g) : new THREE.Mesh(g) };
        e.obj.userData.id = o.id;
        this.objects.set(o.id, e);
        this.scene.add(e.obj);
        this.meshes = [...this.objects.values()].sort((a, b) => a.id - b.id).map((x) => x.obj);
      } else {
        e.obj.geometry.dispose();
        e.obj.geometry = g;
      }
      e.meta = { id: o.id, ...o.meta };
      this.restyle(e);
    } else if (e && (o.positions || o.colors)) {
      const g = e.obj.geometry;
      for (const [name, array] of [['position', o.positions], ['normal', o.normals], ['color', o.colors]]) {
        if (!array || !g.attributes[name]) continue;
        g.attributes[name].array = array;
        g.attributes[name].needsUpdate = true;
      }
    }
    if (!e) return; // (the worker sends a new object's key first)
    if (o.sphere) {
      // Culling and picking test the sphere in the object's frame; crowds walk and capes
      // flutter: the worker computed it.
      const [x, y, z, r] = o.sphere;
      e.obj.geometry.boundingSphere = new THREE.Sphere(new THREE.Vector3(x, y, z), r);
    }
    if (o.transform) {
      e.obj.position.set(...o.transform.t);
      e.obj.quaternion.set(...o.transform.r);
    }
  }

  drop(id) {
    const e = this.objects.get(id);
    if (!e) return;
    this.scene.remove(e.obj);
    e.obj.geometry.dispose();
    this.objects.delete(id);
    this.meshes = this.meshes.filter((m) => m !== e.obj);
  }

  /** The object's materials and groups, by the scene's style for its key. The material is
   *  the style's one for the page's life, and so its compiled shader program: compiling one
   *  costs a software renderer hundreds of milliseconds, and a walking crowd re-keys often. */
  restyle(e) {
    const g = e.obj.geometry, per = e.lines ? 2 : 3, n = g.index.count / per;
    const vc = !!g.attributes.color;
    e.groups = this.groupsOf(e.meta);
    g.clearGroups();
    if (e.groups.length > 1) {
      e.groups.forEach((x, k) => {
        const end = k + 1 < e.groups.length ? Math.min(n, e.groups[k + 1].from) : n;
        const from = Math.min(n, x.from);
        if (end > from) g.addGroup(from * per, (end - from) * per, k);
      });
      e.obj.material = e.groups.map((x) => this.material(x.style, e.lines, vc));
    } else {
      e.obj.material = this.material(e.groups[0].style, e.lines, vc);
    }
    e.obj.renderOrder = Math.min(...e.groups.map((x) => x.style.renderOrder ?? 0));
  }

  /** One material per style and kind (surface or lines, with vertex colours or not), made once. */
  material(st, lines, vertexColors) {
    if (!this.materials.has(st)) this.materials.set(st, new Map());
    const made = this.materials.get(st), variant = `${lines ? 'l' : 's'}${vertexColors ? 'c' : ''}`;
    if (!made.has(variant)) {
      const common = {
        color: vertexColors ? 0xffffff : st.color, vertexColors, transparent: st.transparent,
        opacity: st.opacity, depthWrite: st.depthWrite,
      };
      // Lambert, not PBR: matte surfaces, and a software rasteriser has a third of the cost.
      made.set(variant, lines ? new THREE.LineBasicMaterial(common)
        : new THREE.MeshLambertMaterial({ ...common, side: st.side === 'double' ? THREE.DoubleSide : THREE.FrontSide }));
    }
    return made.get(variant);
  }

  /** The objects' bounds in world units (of those ids, or all): each object's
   *  quantisation box (local) placed by its transform. {bmin, bmax}. */
  worldBox(ids = null) {
    const box = new THREE.Box3();
    for (const e of this.objects.values()) {
      if (ids && !ids.includes(e.id)) continue;
      e.obj.updateMatrixWorld();
      box.union(new THREE.Box3(new THREE.Vector3(...e.meta.bmin), new THREE.Vector3(...e.meta.bmax)).applyMatrix4(e.obj.matrixWorld));
    }
    return { bmin: box.min.toArray(), bmax: box.max.toArray() };
  }

  /** The camera at position, looking at target (world units), with its near and far planes. */
  lookAt(target, position, near, far) {
    this.controls.target.set(...target);
    this.camera.position.set(...position);
    this.camera.near = near;
    this.camera.far = far;
    this.camera.updateProjectionMatrix();
    this.controls.update();
    this.requestDraw();
  }

  /** The default first view: the objects' world box (this.box, set at the first update)
   *  from the front (+y), a little from above and the side. */
  frameBox() {
    const { bmin, bmax } = this.box;
    const c = [0, 1, 2].map((b) => (bmin[b] + bmax[b]) / 2);
    const r = Math.hypot(bmax[0] - bmin[0], bmax[1] - bmin[1], bmax[2] - bmin[2]) / 2 || 1;
    this.lookAt(c, [c[0] + 0.55 * r, c[1] + 2.6 * r, c[2] + 0.9 * r], r / 20, r * 20);
  }

  /** A grid of size x size world units in the plane z = 0, centred at (x, y); once. */
  addGround(size, x, y) {
    if (this.ground) return;
    this.ground = new THREE.GridHelper(size, size, 0x3a4250, 0x252b34);
    this.ground.rotation.x = Math.PI / 2; // the grid lies in x-y: z is up
    this.ground.position.set(x, y, 0);
    this.scene.add(this.ground);
    this.requestDraw();
  }

  /** Something changed: draw on the next animation frame, once for any number of changes
   *  (a change made during that frame's callback is drawn in it). Nothing changes, nothing
   *  is drawn: a still scene leaves the main thread and the rasteriser idle. */
  requestDraw() {
    this.dirty = true;
    if (this.raf || this.inFrame) return;
    this.raf = requestAnimationFrame((now) => {
      this.raf = 0;
      if (this.gpu.software && now - this.drawnAt < 1000 / SOFT_FPS - 2) {
        this.requestDraw(); // too soon after the last: the next animation frame
        return;
      }
      this.inFrame = true;
      try {
        if (this.onFrame) this.onFrame(now); else this.render();
      } finally {
        this.inFrame = false;
      }
    });
  }

  /** Draw if something changed; returns 1 when a frame was drawn. */
  render() {
    if (!this.dirty) return 0;
    this.dirty = false;
    this.drawnAt = performance.now();
    this.renderer.render(this.scene, this.camera);
    if (this.objects.size) {
      this.framesDrawn++;
      if (this.firstFrameAt === null) this.firstFrameAt = performance.now();
    }
    return 1;
  }

  ray(e) {
    const r = this.canvas.getBoundingClientRect();
    const ndc = new THREE.Vector2(((e.clientX - r.left) / r.width) * 2 - 1, -((e.clientY - r.top) / r.height) * 2 + 1);
    this.camera.updateMatrixWorld(); // the view may have moved since the last drawn frame
    this.raycaster.setFromCamera(ndc, this.camera);
    return this.raycaster.ray;
  }

  down(e) {
    if (!this.driver || e.button !== 0 || e.shiftKey || e.ctrlKey || e.metaKey || !this.meshes.length) return;
    this.ray(e);
    this.scene.updateMatrixWorld(); // transforms may have moved since the last drawn frame
    // Rank 0 first (the part a hand lands on); rank 1 where the ray misses all of those (a
    // bone poking out of the skin); parts without a rank are never grabbed.
    const rank = (h) => this.objects.get(h.object.userData.id)?.groups[h.face?.materialIndex ?? 0]?.style.pick;
    const hits = this.raycaster.intersectObjects(this.meshes, false)
      .filter((h) => rank(h) !== null && rank(h) !== undefined)
      .sort((a, b) => rank(a) - rank(b) || a.distance - b.distance);
    if (!hits.length) return; // empty space: orbit
    e.stopImmediatePropagation(); // keep OrbitControls out of this drag
    this.canvas.setPointerCapture(e.pointerId);
    const hit = hits[0], p = hit.point;
    const normal = this.camera.getWorldDirection(new THREE.Vector3());
    this.dragPlane.setFromNormalAndCoplanarPoint(normal, p);
    this.grabbing = true;
    this.controls.enabled = false;
    this.hand.onGrab([p.x, p.y, p.z], { object: hit.object.userData.id, vertex: nearestVertex(hit), point: [p.x, p.y, p.z] });
  }

  move(e) {
    if (!this.grabbing) return;
    const p = this.ray(e).intersectPlane(this.dragPlane, new THREE.Vector3());
    if (p) this.hand.onMove([p.x, p.y, p.z]);
  }

  up(e) {
    if (!this.grabbing) return;
    this.grabbing = false;
    this.controls.enabled = true;
    if (e) this.canvas.releasePointerCapture?.(e.pointerId);
    this.hand.onRelease();
  }

  /** Look at the target from azimuth az (degrees from the front, +y, toward +x) and
   *  elevation el, at the framing distance. */
  setView(az, el) {
    const t = this.controls.target, d = this.camera.position.distanceTo(t);
    const a = (az * Math.PI) / 180, e = (el * Math.PI) / 180;
    this.camera.position.set(t.x + d * Math.cos(e) * Math.sin(a), t.y + d * Math.cos(e) * Math.cos(a), t.z + d * Math.sin(e));
    this.controls.update();
    this.requestDraw();
  }

  /** Canvas pixel coordinates (CSS px) of a world point. */
  screenOf(p) {
    this.camera.updateMatrixWorld();
    const v = new THREE.Vector3(p[0], p[1], p[2]).project(this.camera);
    return [(v.x + 1) / 2 * this.canvas.clientWidth, (1 - v.y) / 2 * this.canvas.clientHeight];
  }

  /** For tests: draw now and read the pixels back (same task, so the buffer is valid). */
  readPixels() {
    this.renderer.render(this.scene, this.camera);
    const gl = this.renderer.getContext();
    const w = gl.drawingBufferWidth, h = gl.drawingBufferHeight;
    const px = new Uint8Array(w * h * 4);
    gl.readPixels(0, 0, w, h, gl.RGBA, gl.UNSIGNED_BYTE, px);
    return { w, h, px };
  }
}

/** The hit triangle's corner nearest the hit point (a local index), for scenes that grab a
 *  vertex; on a line set, the hit segment's first vertex. */
function nearestVertex(hit) {
  if (!hit.face) return hit.index;
  const pos = hit.object.geometry.attributes.position;
  const local = hit.object.worldToLocal(hit.point.clone());
  return [hit.face.a, hit.face.b, hit.face.c]
    .map((i) => [i, new THREE.Vector3().fromBufferAttribute(pos, i).distanceTo(local)])
    .sort((x, y) => x[1] - y[1])[0][0];
}
