// view3d.mjs: the streamed surfaces in three.js (skin translucent over bone), orbit, zoom
// and pan with mouse or touch, and grab by picking: a press on the skin grabs there, the
// drag moves the grab point in the plane facing the camera, the release lets go.
import * as THREE from 'three';
import { OrbitControls } from 'three/examples/jsm/controls/OrbitControls.js';

const SURFACE_STYLE = [
  // 0 skin: translucent, drawn after the bone.
  { color: 0xd9a087, opacity: 0.42, transparent: true, depthWrite: false, renderOrder: 1, side: 'double' },
  // 1 bone: opaque ivory.
  // (closed, wound counter-clockwise seen from outside: front faces suffice).
  { color: 0xeee8d5, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'front' },
  // 2 capes (cloth scene): both sides show.
  { color: 0xb0303a, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'double' },
  // 3 bodies: boxes round the colliders.
  { color: 0x8a93a0, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'front' },
];
const GRABBABLE = new Set([0, 2]); // skin (volume), capes (cloth)

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
  /** onGrab(point mm) / onMove(point mm) / onRelease(): the driver's hand. */
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
    this.ground = null;
    new ResizeObserver(() => this.resize()).observe(canvas);
    this.resize();
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
        m.renderOrder = (SURFACE_STYLE[s.id] ?? SURFACE_STYLE[0]).renderOrder;
        m.userData.id = s.id;
      }
      // Picking culls by the sphere, and crowds walk: the worker computed it.
      const [x, y, z, r] = s.sphere;
      m.geometry.boundingSphere = new THREE.Sphere(new THREE.Vector3(x, y, z), r);
    });
    if (!this.framed && n) this.frameCamera(frame);
    this.requestDraw();
  }

  /** One material per surface style, made once. */
  material(id) {
    const key = SURFACE_STYLE[id] ? id : 0;
    if (!this.materials.has(key)) {
      const st = SURFACE_STYLE[key];
      // Lambert, not PBR: tissue is matte, and a software rasteriser has a third of the cost.
      this.materials.set(key, new THREE.MeshLambertMaterial({
        color: st.color, side: st.side === 'double' ? THREE.DoubleSide : THREE.FrontSide,
        transparent: st.transparent, opacity: st.opacity, depthWrite: st.depthWrite,
      }));
    }
    return this.materials.get(key);
  }

  frameCamera(frame) {
    const bodies = frame.surfaces.find((s) => s.id === 3);
    if (bodies) return this.frameCrowd(bodies);
    const { bmin, bmax } = this.box;
    const c = new THREE.Vector3((bmin[0] + bmax[0]) / 2, (bmin[1] + bmax[1]) / 2, (bmin[2] + bmax[2]) / 2);
    const r = Math.hypot(bmax[0] - bmin[0], bmax[1] - bmin[1], bmax[2] - bmin[2]) / 2;
    this.controls.target.copy(c);
    // From the front (+y is anterior in the lattice), a little from above and the side.
    this.camera.position.set(c.x + 0.55 * r, c.y + 2.6 * r, c.z + 0.9 * r);
    this.camera.near = r / 20;
    this.camera.far = r * 20;
    this.camera.updateProjectionMatrix();
    this.controls.update();
    this.framed = true;
  }

  /** Cloth: the box is the whole walking area; look at the crowd (its bodies) from behind
   *  and to one side, where the capes are, over a ground grid. */
  frameCrowd(bodies) {
    const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
    for (let i = 0; i < bodies.pos.length; i++) {
      const b = i % 3, v = bodies.pos[i];
      lo[b] = Math.min(lo[b], v);
      hi[b] = Math.max(hi[b], v);
    }
    const c = new THREE.Vector3((lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 1.0);
    const r = Math.max(2, Math.hypot(hi[0] - lo[0], hi[1] - lo[1]) / 2);
    this.controls.target.copy(c);
    this.camera.position.set(lo[0] - 2.5 - r, c.y - 1.1 * r, 1.8 + 0.4 * r);
    this.camera.near = 0.05;
    this.camera.far = 500;
    this.camera.updateProjectionMatrix();
    this.controls.update();
    if (!this.ground) {
      const size = 2 * Math.ceil(r + 20);
      this.ground = new THREE.GridHelper(size, size, 0x3a4250, 0x252b34);
      this.ground.rotation.x = Math.PI / 2; // the grid lies in x-y: z is up
      this.ground.position.set(c.x, c.y, 0);
      this.scene.add(this.ground);
    }
    this.framed = true;
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
    // The skin (or a cape) first; where the ray misses it (a bone poking out), the bone.
    const rank = (h) => (GRABBABLE.has(h.object.userData.id) ? 0 : 1);
    const hits = this.raycaster.intersectObjects(this.meshes, false)
      .filter((h) => h.object.userData.id !== 3) // bodies are not grabbed
      .sort((a, b) => rank(a) - rank(b) || a.distance - b.distance);
    if (!hits.length) return; // empty space: orbit
    e.stopImmediatePropagation(); // keep OrbitControls out of this drag
    this.canvas.setPointerCapture(e.pointerId);
    const p = hits[0].point;
    const normal = this.camera.getWorldDirection(new THREE.Vector3());
    this.dragPlane.setFromNormalAndCoplanarPoint(normal, p);
    this.grabbing = true;
    this.controls.enabled = false;
    // The hit triangle's nearest corner: the vertex a cloth grab holds.
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

  /** Look at the body from azimuth az (degrees from the front, +y, toward +x) and
   *  elevation el, at the framing distance. */
  setView(az, el) {
    const t = this.controls.target, d = this.camera.position.distanceTo(t);
    const a = (az * Math.PI) / 180, e = (el * Math.PI) / 180;
    this.camera.position.set(t.x + d * Math.cos(e) * Math.sin(a), t.y + d * Math.cos(e) * Math.cos(a), t.z + d * Math.sin(e));
    this.controls.update();
    this.requestDraw();
  }

  /** Canvas pixel coordinates (CSS px) of a world point in mm. */
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
