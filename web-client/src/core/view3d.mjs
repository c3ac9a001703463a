// view3d.mjs: the streamed surfaces in three.js, orbit, zoom and pan with mouse or touch,
// and grab by picking: a press on a surface grabs there, the drag moves the grab point in
// the plane facing the camera, the release lets go. What each surface id looks like, which
// ones a press may grab and where the camera starts come from the scene module
// (setScene); the view itself knows no scene.
import * as THREE from 'three';
import { OrbitControls } from 'three/examples/jsm/controls/OrbitControls.js';

// A surface id the scene did not style: opaque grey, both sides, grabbable.
const DEFAULT_STYLE = { color: 0xa0a6b0, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'double', pick: 0 };

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
  /** onGrab(point, {surface, vertex}) / onMove(point) / onRelease(): the driver's hand, in
   *  world units; onCamera(position): the camera moved. */
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
    this.meshes = [];
    this.materials = new Map();
    this.styles = {};
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

  /** The scene's look, before its first frame. styles[id]: { color, opacity, transparent,
   *  depthWrite, renderOrder, side: 'front' | 'double', pick: 0 (grabbed first), 1 (where
   *  the ray misses every rank-0 surface) or null (never grabbed) }. frameCamera(view,
   *  frame): places the camera on the first frame (default: frameBox). */
  setScene({ styles = {}, frameCamera = null } = {}) {
    this.styles = styles;
    this.frameFor = frameCamera;
    for (const m of this.materials.values()) m.dispose();
    this.materials.clear();
  }

  style(id) {
    return this.styles[id] ?? DEFAULT_STYLE;
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

  /** A decoded mesh frame from wire.mjs: per surface, positions, normals and bounding
   *  sphere in world units, and the triangles when the topology changed. The arrays are
   *  the worker's, transferred: they become the attributes' arrays without a copy. */
  update(frame) {
    this.box = { bmin: frame.bmin, bmax: frame.bmax };
    const n = frame.surfaces.length;
    while (this.meshes.length > n) {
      const m = this.meshes.pop();
      this.scene.remove(m);
      m.geometry.dispose();
    }
    frame.surfaces.forEach((s, k) => {
      let m = this.meshes[k];
      if (s.tri || !m) {
        // A new topology: a new geometry (the page is sent triangles only when they change).
        const g = new THREE.BufferGeometry();
        g.setIndex(new THREE.BufferAttribute(s.tri ?? new Uint32Array(0), 1));
        g.setAttribute('position', new THREE.BufferAttribute(s.pos, 3));
        g.setAttribute('normal', new THREE.BufferAttribute(s.nrm, 3));
        if (!m) {
          m = new THREE.Mesh(g);
          this.scene.add(m);
          this.meshes[k] = m;
        } else {
          m.geometry.dispose();
          m.geometry = g;
        }
      } else {
        const g = m.geometry;
        g.attributes.position.array = s.pos;
        g.attributes.position.needsUpdate = true;
        g.attributes.normal.array = s.nrm;
        g.attributes.normal.needsUpdate = true;
      }
      if (frame.key || m.userData.id !== s.id) {
        // A keyframe says what each surface is: its style by id. The material is the
        // style's one for the page's life, and so its compiled shader program: compiling
        // one costs a software renderer hundreds of milliseconds, and a walking crowd
        // sends a keyframe every frame.
        m.material = this.material(s.id);
        m.renderOrder = this.style(s.id).renderOrder;
        m.userData.id = s.id;
      }
      // Picking culls by the sphere, and crowds walk: the worker computed it.
      const [x, y, z, r] = s.sphere;
      m.geometry.boundingSphere = new THREE.Sphere(new THREE.Vector3(x, y, z), r);
    });
    if (!this.framed && n) {
      if (this.frameFor) this.frameFor(this, frame); else this.frameBox();
      this.framed = true;
    }
    this.requestDraw();
  }

  /** One material per surface style, made once. */
  material(id) {
    const key = this.styles[id] ? id : 'default';
    if (!this.materials.has(key)) {
      const st = this.style(id);
      // Lambert, not PBR: matte surfaces, and a software rasteriser has a third of the cost.
      this.materials.set(key, new THREE.MeshLambertMaterial({
        color: st.color, side: st.side === 'double' ? THREE.DoubleSide : THREE.FrontSide,
        transparent: st.transparent, opacity: st.opacity, depthWrite: st.depthWrite,
      }));
    }
    return this.materials.get(key);
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

  /** The default first view: the whole box from the front (+y), a little from above and
   *  the side. */
  frameBox() {
    const { bmin, bmax } = this.box;
    const c = [0, 1, 2].map((b) => (bmin[b] + bmax[b]) / 2);
    const r = Math.hypot(bmax[0] - bmin[0], bmax[1] - bmin[1], bmax[2] - bmin[2]) / 2;
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
    if (this.meshes.length) {
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
    // Rank 0 first (the surface a hand lands on); rank 1 where the ray misses all of those
    // (a bone poking out of the skin); surfaces without a rank are never grabbed.
    const rank = (h) => this.style(h.object.userData.id).pick;
    const hits = this.raycaster.intersectObjects(this.meshes, false)
      .filter((h) => rank(h) !== null && rank(h) !== undefined)
      .sort((a, b) => rank(a) - rank(b) || a.distance - b.distance);
    if (!hits.length) return; // empty space: orbit
    e.stopImmediatePropagation(); // keep OrbitControls out of this drag
    this.canvas.setPointerCapture(e.pointerId);
    const p = hits[0].point;
    const normal = this.camera.getWorldDirection(new THREE.Vector3());
    this.dragPlane.setFromNormalAndCoplanarPoint(normal, p);
    this.grabbing = true;
    this.controls.enabled = false;
    // The hit triangle's nearest corner: for scenes that grab a vertex.
    const f = hits[0].face, pos = hits[0].object.geometry.attributes.position;
    const corner = [f.a, f.b, f.c]
      .map((i) => [i, new THREE.Vector3().fromBufferAttribute(pos, i).distanceTo(p)])
      .sort((x, y) => x[1] - y[1])[0][0];
    this.hand.onGrab([p.x, p.y, p.z], { surface: hits[0].object.userData.id, vertex: corner });
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
