// index.mjs: the client's scene registry, one line per scene: the name the server gives
// (state.scene, POST /api/sessions {scene}) -> its module. The lobby offers them in this
// order. How to add one: web-client/README.md.
const SCENES = {
  volume: () => import('./volume.mjs'),
  cloth: () => import('./cloth.mjs'),
  softbody: () => import('./softbody.mjs'),
  growth: () => import('./growth.mjs'),
};

export const sceneNames = Object.keys(SCENES);

/** The scene module of that name (its default export), or null when this client has none. */
export async function loadScene(name) {
  return Object.hasOwn(SCENES, name) ? (await SCENES[name]()).default : null;
}
