/* cloth.h: the cloth scene's public surface: XPBD capes on a crowd of kinematic
 * characters, with levels of detail that hand position and velocity over when they
 * switch (sim/README.md). */
#ifndef SIM_CLOTH_CLOTH_H
#define SIM_CLOTH_CLOTH_H

#include "../core/sc_blob.h"
#include "../sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ cloth scene
 * XPBD cloth on kinematic characters, with levels of detail that hand position and
 * velocity over when they switch (see sim/README.md). Metres, seconds, z up. One scene
 * holds a crowd: every character wears the same garment at its own LOD. */

#define SIM_CLOTH_NLOD 3

typedef enum sim_motion {
    SIM_MOTION_IDLE = 0,
    SIM_MOTION_WALK, ///< 1.4 m/s forward with root motion
    SIM_MOTION_RUN,  ///< 3.5 m/s
    SIM_MOTION_TURN, ///< walking, then a sharp turn (pi/2 in 0.4 s), repeated every 2 s
    SIM_MOTION_JUMP, ///< jumps in place, 0.45 m high, landing every 1.2 s
    SIM_NMOTION
} sim_motion;
/// "idle", "walk", "run", "turn", "jump"; sim_motion_parse returns -1 for anything else.
const char *sim_motion_name(int m);
int sim_motion_parse(const char *s);

/// How a LOD switch starts the target LOD (handoff is the method; the others are the
/// baselines it is measured against).
typedef enum sim_switch_strategy {
    SIM_SWITCH_HANDOFF = 0,         ///< map position and velocity in the root frame
    SIM_SWITCH_NAIVE_ZERO_VELOCITY, ///< map positions, velocity zero
    SIM_SWITCH_RESET_TO_ANIMATION,  ///< the rest pose carried by the character
    SIM_SWITCH_NAIVE_COPY,          ///< copy position and velocity through the table in world
                                    ///< space, nothing more (the usual game-engine switch)
} sim_switch_strategy;
const char *sim_switch_strategy_name(int s);

typedef struct sim_cloth_model_options {
    int cols[SIM_CLOTH_NLOD], rows[SIM_CLOTH_NLOD]; ///< particles across and down per LOD
    int nlod;                                       ///< 1 to SIM_CLOTH_NLOD
    float width, length;                            ///< the garment's rest size, m
    int body; ///< 1: a cape on a character (pinned at the shoulders, colliders);
              ///< 0: a sheet hanging from its two top corners, nothing to hit
} sim_cloth_model_options;

/// The default: a cape 0.6 x 1.05 m, LODs 20x34, 12x18 and 6x9 particles, each
/// triangulated differently.
sim_cloth_model_options sim_cloth_default_model_options(void);

typedef struct sim_cloth_model sim_cloth_model;
/// Build the LOD meshes, their constraints and colouring, and the mapping tables
/// between every pair of LODs. Immutable; may be shared by scenes.
sim_status sim_cloth_model_create(sim_cloth_model **out, const sim_cloth_model_options *o,
                                  char *err, size_t err_sz);
void sim_cloth_model_destroy(sim_cloth_model *m);
/// Bytes the model holds (its meshes, constraints and mapping tables, as allocated).
size_t sim_cloth_model_bytes(const sim_cloth_model *m);
int sim_cloth_model_nlod(const sim_cloth_model *m);
/// Particles and triangles (3 indices each, counter-clockwise seen from behind the
/// character) of one LOD.
int sim_cloth_model_lod_size(const sim_cloth_model *m, int lod, int *ntri);
const uint32_t *sim_cloth_model_triangles(const sim_cloth_model *m, int lod);
/// Inverse mass of each particle of a LOD (0: pinned to the character); NULL if no such LOD.
const float *sim_cloth_model_inv_mass(const sim_cloth_model *m, int lod);
/// Constraints of a LOD: stretch (one per edge) and bending (one per interior edge);
/// returns their sum (0 if no such LOD).
int sim_cloth_model_constraints(const sim_cloth_model *m, int lod, int *nstretch, int *nbend);
/// Compliance scale of a LOD (its mean edge length over LOD 0's; 1 for LOD 0).
float sim_cloth_model_compliance_scale(const sim_cloth_model *m, int lod);
/// Carry a garment's state at LOD `from` (x, v: world m and m/s, from's size x 3) to the
/// vertices of LOD `to` through the model's table, in world space: each target vertex at
/// the weighted source triangle point plus its offset along that triangle's current
/// normal, with the weighted velocity (v and v_out may be NULL). valid (to's size, may be
/// NULL): 1 where the table's distance is within max_dist_m. Returns the number of
/// valid vertices, or -1 when from or to is not a LOD of the model or they are equal.
int sim_cloth_model_map_world(const sim_cloth_model *m, int from, int to, const float *x,
                              const float *v, float max_dist_m, float *x_out, float *v_out,
                              unsigned char *valid);

/* Declared once, in sim/cloth/params.def; the struct, the defaults, the checks and the
 * table clients see are generated from it. */
#define P(type, f, def, lo, hi, unit, group, doc)       SIM_PARAM_FIELD(type, f)
#define A(type, f, i, n, def, lo, hi, unit, group, doc) SIM_PARAM_ARRAY_##i(type, f, n)
#define C(f, def, n, choices, group, doc)               int f;
#define I(type, f, def, lo, hi, unit, doc)              SIM_PARAM_FIELD(type, f)
/// strategy is a sim_switch_strategy.
typedef struct sim_cloth_params {
#include "params.def"
} sim_cloth_params;
#undef P
#undef A
#undef C
#undef I
/// The declared table (params.def).
const sim_param_desc *sim_cloth_params_table(int *n);
/// Check the table's ranges and the relations between them (LOD distances, blends).
sim_status sim_cloth_params_validate(const sim_cloth_params *p, char *err, size_t err_sz);
sim_cloth_params sim_cloth_default_params(void);

typedef enum sim_cloth_event_type {
    SIM_CLOTH_EV_CAMERA = 0, ///< point = camera position
    SIM_CLOTH_EV_FORCE_LOD,  ///< character (-1: all) to lod (-1: back to automatic)
    SIM_CLOTH_EV_MOTION,     ///< character (-1: all) plays motion
    SIM_CLOTH_EV_WIND,       ///< point = velocity impulse on every cloth particle, m/s
    SIM_CLOTH_EV_GRAB,       ///< character's vertex (of its current LOD) held at point
    SIM_CLOTH_EV_MOVE,       ///< the held vertex to point
    SIM_CLOTH_EV_RELEASE,
    SIM_CLOTH_EV_SET_PARAMS, ///< params
} sim_cloth_event_type;

typedef struct sim_cloth_event {
    sim_cloth_event_type type;
    int character, lod, vertex;
    sim_motion motion;
    float point[3];
    sim_cloth_params params;
} sim_cloth_event;

/// One LOD switch of one character. E_pos / E_vel: the largest change of position /
/// velocity over the garment at the switch, each target vertex against the source
/// surface point it maps to (interpolated in world space, independently of the root-frame
/// path the handoff takes); m and m/s. The _next pair: the same one frame later, the
/// shown garment against the source, which keeps running beside it while they blend
/// (-1 with the blend off: no source runs). These are not judged against ground truth;
/// tests/scenes/cloth_scenes.h does that (a second run without the switch).
typedef struct sim_cloth_switch {
    uint64_t frame;
    int character, from, to;
    sim_switch_strategy strategy;
    float e_pos, e_vel;
    float e_pos_next, e_vel_next;
    int settle_frames;     ///< frames until the garment's acceleration is back to its
                           ///< level before the switch (-1: still settling)
    float max_penetration; ///< deepest body or ground penetration while settling, m
    int invalid_mappings;  ///< target vertices that took the animated position
} sim_cloth_switch;

typedef struct sim_cloth_metrics {
    double step_ms;
    int particles;         ///< simulated this frame (all characters, blends included)
    int switches;          ///< LOD switches this frame
    float max_penetration; ///< deepest penetration after the frame's solve, m
    int nonfinite;         ///< particles with a NaN or infinite position (reset)
    int lod_count[SIM_CLOTH_NLOD];
} sim_cloth_metrics;

typedef struct sim_cloth_scene sim_cloth_scene;
/// ncharacters in a grid 2.5 m apart, all idle, camera 4 m in front of the first.
sim_status sim_cloth_scene_create(sim_cloth_scene **out, const sim_cloth_model *m, sim_backend *b,
                                  int ncharacters, char *err, size_t err_sz);
void sim_cloth_scene_destroy(sim_cloth_scene *s);
/// Bytes the scene may hold (not its model): every character's garment at the finest LOD
/// and, while it blends after a switch, its source too; the step's scratch; the queue.
size_t sim_cloth_scene_bytes(const sim_cloth_scene *s);
sim_cloth_params sim_cloth_get_params(const sim_cloth_scene *s);
/// CPU threads for the next steps, at most the backend's (0: the backend's). Results do
/// not depend on it.
void sim_cloth_set_threads(sim_cloth_scene *s, int threads);
/// Check an event and apply it now, at the frame boundary (between two steps); the scene
/// is unchanged when the check fails (SIM_ERR_ARG, the field named in err).
sim_status sim_cloth_apply_event(sim_cloth_scene *s, const sim_cloth_event *ev, char *err,
                                 size_t err_sz);
/// Check an event; queue it for the next step, which applies it as sim_cloth_apply_event
/// would.
sim_status sim_cloth_push_event(sim_cloth_scene *s, const sim_cloth_event *ev, char *err,
                                size_t err_sz);
sim_status sim_cloth_step(sim_cloth_scene *s, sim_cloth_metrics *mt, char *err, size_t err_sz);
int sim_cloth_characters(const sim_cloth_scene *s);
int sim_cloth_lod(const sim_cloth_scene *s, int character);
/// The character's garment particles (world m, its current LOD) and velocities.
const float *sim_cloth_positions(const sim_cloth_scene *s, int character, int *n);
const float *sim_cloth_velocities(const sim_cloth_scene *s, int character, int *n);
/// Root position (feet, world m) and heading (radians about z).
void sim_cloth_root(const sim_cloth_scene *s, int character, float pos[3], float *yaw);
/// The character's body as capsules (a[3], b[3], radius; world m) into caps[max][7];
/// returns how many (0 for a sheet without a body).
int sim_cloth_body(const sim_cloth_scene *s, int character, float caps[][7], int max);
/// The character's latest switch; 0 when it never switched.
int sim_cloth_last_switch(const sim_cloth_scene *s, int character, sim_cloth_switch *out);

/* A character as one mesh in its root frame (x forward, y left, z up; m): its cape's
 * particles at its LOD, then its body drawn as a box round each capsule. What the server
 * sends of a character, and what the protocol's crowd measurement encodes. */
#define SIM_CLOTH_BODY_CAPS 6  ///< capsules a body has at most
#define SIM_CLOTH_BOX_VERTS 8  ///< a capsule's box
#define SIM_CLOTH_BOX_TRIS  12 ///< its triangles

typedef struct sim_cloth_character_mesh {
    int nvert, ntri;           ///< all of it
    int cape_nvert, cape_ntri; ///< the cape: the first vertices and triangles
    int lod;                   ///< the cape's
    float root[3], yaw;        ///< the root frame: world = rotate_z(yaw) local + root
} sim_cloth_character_mesh;

/// The most vertices and triangles a character's mesh has (for the buffers below).
int sim_cloth_character_mesh_max(const sim_cloth_model *m, int *max_tris);
/// Character c's mesh: positions into pos (max vertices x 3); the triangles into tri when
/// not NULL (they change only with the LOD).
void sim_cloth_character_mesh_get(const sim_cloth_scene *s, const sim_cloth_model *m, int c,
                                  float *pos, uint32_t *tri, sim_cloth_character_mesh *out);
/// Bitwise hash of every garment's positions and velocities.
uint64_t sim_cloth_hash(const sim_cloth_scene *s);

/* Snapshots (cloth_snapshot.c): the scene's whole changing state as bytes, so that a scene
 * created again from the same model and character count and restored from them steps on
 * exactly as this one would have (bitwise: positions, velocities, switches), mid-blend and
 * with a held vertex included. The model and the backend are not in it. */
/// Append the state at this frame boundary (queued events included) to out. SIM_ERR_NOMEM
/// when out ran out of memory.
sim_status sim_cloth_scene_save(sim_cloth_scene *s, sc_blob *out, char *err, size_t err_sz);
/// Put back the n bytes save wrote. SIM_ERR_FORMAT, with err saying why, for a snapshot cut
/// short, with bytes left over, of another scene or layout version, or of another size
/// (characters, LODs, particles per LOD), or with a value out of range; SIM_ERR_NOMEM. On
/// any error the scene is as it was.
sim_status sim_cloth_scene_restore(sim_cloth_scene *s, const void *data, size_t n, char *err,
                                   size_t err_sz);

#ifdef __cplusplus
}
#endif
#endif
