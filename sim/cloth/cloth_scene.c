/* cloth_scene.c: a crowd of characters, each wearing the garment at its own LOD.
 * Per frame, at the boundary: events, then each character's LOD choice (camera distance
 * with hysteresis and a hold time, or forced) and, on a change, the switch; then the
 * root motion, the solve (backend), the blend after a switch, and the switch metrics.
 *
 * The switch (handoff): the source garment's state after the last solve is expressed in
 * the character's root frame (velocity without the root's linear and angular motion),
 * carried to the target's vertices through the precomputed barycentric tables plus the
 * normal offset, and taken back to the world; a vertex whose mapping is invalid takes the
 * animated rest position and the mean velocity of its valid neighbours. Abnormal
 * velocities are clamped; the target's stretch is settled to its own (positions only, see
 * settle); then, with the blend on, for blend_vel_frames the source keeps running and the
 * target is blended toward it with smoothstep, positions over blend_pos_frames. Judged
 * against the same run without the switch (tests/scenes/cloth_scenes.c): the settle is
 * what the handoff adds to copying x and v through the table. */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cloth_internal.h"

#define PI_F 3.14159265358979f

static const char *const k_motion[SIM_NMOTION] = {"idle", "walk", "run", "turn", "jump"};
const char *sim_motion_name(int m)
{
    return m >= 0 && m < SIM_NMOTION ? k_motion[m] : "?";
}
int sim_motion_parse(const char *s)
{
    for (int m = 0; s && m < SIM_NMOTION; m++)
        if (!strcmp(s, k_motion[m]))
            return m;
    return -1;
}
const char *sim_switch_strategy_name(int s)
{
    static const char *const k[] = {"handoff", "naive_zero_velocity", "reset_to_animation",
                                    "naive_copy"};
    return s >= 0 && s < 4 ? k[s] : "?";
}

/* The table, generated from params.def. */
#define SIM_PARAMS_STRUCT sim_cloth_params
#include "../core/param_rows.h"
static const sim_param_desc k_params[] = {
#include "params.def"
};
#include "../core/param_rows_end.h"
#define N_PARAMS ((int)(sizeof k_params / sizeof k_params[0]))

const sim_param_desc *sim_cloth_params_table(int *n)
{
    *n = N_PARAMS;
    return k_params;
}

sim_cloth_params sim_cloth_default_params(void)
{
    sim_cloth_params p;
    memset(&p, 0, sizeof p);
    sim_params_default(k_params, N_PARAMS, &p);
    return p;
}

sim_status sim_cloth_params_validate(const sim_cloth_params *p, char *err, size_t err_sz)
{
    sim_status st = sim_params_check(k_params, N_PARAMS, p, err, err_sz);
    if (st != SIM_OK)
        return st;
    const char *bad = NULL;
    if (p->blend_vel_frames < p->blend_pos_frames)
        bad = "blend frames: position <= velocity (velocity 0 with position 0: no blend)";
    for (int k = 0; !bad && k < SIM_CLOTH_NLOD - 1; k++)
        if (!(p->lod_exit[k] <= p->lod_enter[k]) ||
            (k > 0 && !(p->lod_exit[k] > p->lod_enter[k - 1])))
            bad = "LOD distances: 0 < exit[i] <= enter[i] < exit[i+1]";
    if (bad)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "cloth params: %s", bad);
    return SIM_OK;
}

/* ------------------------------------------------------------------ the body */

void cloth_to_world(const cloth_body *b, const float q[3], float out[3])
{
    xp_to_world(b->root, b->yaw, q, out);
}

static float stride_of(const cloth_pose *p)
{
    float sp = sqrtf(p->vel[0] * p->vel[0] + p->vel[1] * p->vel[1]);
    return sp > 2.0f ? 0.45f : sp > 0.1f ? 0.25f : 0.0f;
}

void cloth_body_at(const sim_cloth_model *m, const cloth_pose *p0, const cloth_pose *p1, float s,
                   cloth_body *out)
{
    for (int k = 0; k < 3; k++)
        out->root[k] = p0->pos[k] + s * (p1->pos[k] - p0->pos[k]);
    out->yaw = p0->yaw + s * (p1->yaw - p0->yaw);
    out->ncaps = 0;
    if (!m->opt.body)
        return;
    float phase = p0->phase + s * (p1->phase - p0->phase), stride = stride_of(p1);
    /* Root frame: torso, head, two legs swinging with the gait. */
    float local[5][7] = {
        {0, 0, 0.95f, 0, 0, 1.40f, 0.17f},
        {0, 0, 1.62f, 0, 0, 1.62f, 0.11f},
        {0, 0.1f, 0.88f, stride * sinf(phase), 0.1f, 0.1f, 0.07f},
        {0, -0.1f, 0.88f, -stride * sinf(phase), -0.1f, 0.1f, 0.07f},
        {0, 0, 0.80f, 0, 0, 0.95f, 0.15f}, /* hips */
    };
    for (int c = 0; c < 5; c++) {
        cloth_to_world(out, &local[c][0], out->caps[c].a);
        cloth_to_world(out, &local[c][3], out->caps[c].b);
        out->caps[c].r = local[c][6];
    }
    out->ncaps = 5;
}

void cloth_place_pinned(const sim_cloth_model *m, cloth_garment *g, const cloth_body *b)
{
    const cloth_lod *l = &m->lod[g->lod];
    for (int i = 0; i < g->n; i++)
        if (l->w[i] <= 0.0f)
            cloth_to_world(b, &l->rest[i * 3], &g->x[i * 3]);
}

/* Velocity of the body's rigid motion at world point x: v_lin + w x (x - root). */
static void rigid_velocity(const cloth_pose *p, const float x[3], float out[3])
{
    float r[3] = {x[0] - p->pos[0], x[1] - p->pos[1], x[2] - p->pos[2]};
    out[0] = p->vel[0] - p->yaw_rate * r[1];
    out[1] = p->vel[1] + p->yaw_rate * r[0];
    out[2] = p->vel[2];
}

/* The root motion of one frame: pose at t -> pose at t + dt. */
#define JUMP_PERIOD 1.2f
#define JUMP_V0     2.97f /* 0.45 m at g = 9.81 */
static float jump_height(float t, float g)
{
    float tt = fmodf(t, JUMP_PERIOD), air = 2.0f * JUMP_V0 / g;
    return tt < air ? JUMP_V0 * tt - 0.5f * g * tt * tt : 0.0f;
}

static void advance_pose(const cloth_character *c, float dt, float g, cloth_pose *out)
{
    const cloth_pose *p = &c->pose;
    *out = *p;
    float t1 = (float)c->t + dt, speed = 0.0f, gait = 0.0f;
    out->yaw_rate = 0.0f;
    switch (c->motion) {
    case SIM_MOTION_WALK:
        speed = 1.4f, gait = 2.0f * PI_F * 0.9f;
        break;
    case SIM_MOTION_RUN:
        speed = 3.5f, gait = 2.0f * PI_F * 1.4f;
        break;
    case SIM_MOTION_TURN:
        speed = 1.4f, gait = 2.0f * PI_F * 0.9f;
        if (fmodf(t1, 2.0f) >= 1.6f)
            out->yaw_rate = (PI_F / 2.0f) / 0.4f;
        break;
    default:
        break;
    }
    out->yaw = p->yaw + out->yaw_rate * dt;
    out->phase = p->phase + gait * dt;
    out->vel[0] = speed * cosf(out->yaw);
    out->vel[1] = speed * sinf(out->yaw);
    out->pos[0] = p->pos[0] + out->vel[0] * dt;
    out->pos[1] = p->pos[1] + out->vel[1] * dt;
    float z1 = c->motion == SIM_MOTION_JUMP ? jump_height(t1, g) : 0.0f;
    out->vel[2] = (z1 - p->pos[2]) / dt;
    out->pos[2] = z1;
}

/* ------------------------------------------------------------------ garments */

void cloth_garment_free(cloth_garment *g)
{
    free(g->x);
    free(g->v);
    free(g->xp);
    free(g->w);
    free(g->lambda);
    memset(g, 0, sizeof *g);
}

int cloth_garment_alloc(const sim_cloth_model *m, int lod, cloth_garment *g)
{
    const cloth_lod *l = &m->lod[lod];
    memset(g, 0, sizeof *g);
    g->lod = lod;
    g->n = l->n;
    g->x = sc_calloc((size_t)l->n * 3, sizeof(float));
    g->v = sc_calloc((size_t)l->n * 3, sizeof(float));
    g->xp = sc_calloc((size_t)l->n * 3, sizeof(float));
    g->w = sc_calloc((size_t)l->n, sizeof(float));
    g->lambda = sc_calloc((size_t)l->ncons, sizeof(float));
    if (!g->x || !g->v || !g->xp || !g->w || !g->lambda) {
        cloth_garment_free(g);
        return -1;
    }
    memcpy(g->w, l->w, (size_t)l->n * sizeof(float));
    return 0;
}

/* The rest pose carried by the character (the animation), moving rigidly with it. */
static void garment_to_animation(const sim_cloth_model *m, cloth_garment *g, const cloth_pose *p)
{
    cloth_body b;
    cloth_body_at(m, p, p, 0.0f, &b);
    const cloth_lod *l = &m->lod[g->lod];
    for (int i = 0; i < g->n; i++) {
        cloth_to_world(&b, &l->rest[i * 3], &g->x[i * 3]);
        rigid_velocity(p, &g->x[i * 3], &g->v[i * 3]);
    }
}

/* Source state carried to the target's vertices through the table: the material points
 * in the world (xm, vm), and whether each mapping is valid. */
static void map_state(const sim_cloth_model *m, const cloth_garment *src, int to,
                      const cloth_pose *p, float max_dist, float *xm, float *vm, uint8_t *valid,
                      float *xr, float *vr)
{
    const cloth_lod *ls = &m->lod[src->lod];
    const cloth_map *mp = &m->map[src->lod][to];
    float c = cosf(p->yaw), s = sinf(p->yaw);
    /* Root frame: x_r = R^-1 (x - root), v_r = R^-1 (v - v_lin - w x (x - root)). */
    for (int i = 0; i < src->n; i++) {
        float d[3], vv[3], rv[3];
        for (int k = 0; k < 3; k++)
            d[k] = src->x[i * 3 + k] - p->pos[k];
        rigid_velocity(p, &src->x[i * 3], rv);
        for (int k = 0; k < 3; k++)
            vv[k] = src->v[i * 3 + k] - rv[k];
        xr[i * 3] = c * d[0] + s * d[1];
        xr[i * 3 + 1] = -s * d[0] + c * d[1];
        xr[i * 3 + 2] = d[2];
        vr[i * 3] = c * vv[0] + s * vv[1];
        vr[i * 3 + 1] = -s * vv[0] + c * vv[1];
        vr[i * 3 + 2] = vv[2];
    }
    for (int j = 0; j < mp->n; j++) {
        int t = mp->tri[j];
        const uint32_t *tr = &ls->tri[t * 3];
        const float *bc = &mp->bary[j * 3];
        float n[3], q[3], qv[3];
        cloth_triangle_normal(ls->tri, t, xr, n);
        for (int k = 0; k < 3; k++) {
            q[k] = bc[0] * xr[tr[0] * 3 + k] + bc[1] * xr[tr[1] * 3 + k] +
                   bc[2] * xr[tr[2] * 3 + k] + mp->offset[j] * n[k];
            qv[k] =
                bc[0] * vr[tr[0] * 3 + k] + bc[1] * vr[tr[1] * 3 + k] + bc[2] * vr[tr[2] * 3 + k];
        }
        /* Back to the world: x = root + R q, v = v_lin + w x (R q) + R v_r. */
        float *x = &xm[j * 3], *v = &vm[j * 3], rvel[3];
        x[0] = p->pos[0] + c * q[0] - s * q[1];
        x[1] = p->pos[1] + s * q[0] + c * q[1];
        x[2] = p->pos[2] + q[2];
        rigid_velocity(p, x, rvel);
        v[0] = rvel[0] + c * qv[0] - s * qv[1];
        v[1] = rvel[1] + s * qv[0] + c * qv[1];
        v[2] = rvel[2] + qv[2];
        valid[j] = mp->dist[j] <= max_dist;
    }
}

static int scratch_alloc(const sim_cloth_model *m, map_scratch *s)
{
    int n = 0;
    for (int k = 0; k < m->nlod; k++)
        n = m->lod[k].n > n ? m->lod[k].n : n;
    s->xm = sc_calloc((size_t)n * 3, sizeof(float));
    s->vm = sc_calloc((size_t)n * 3, sizeof(float));
    s->xr = sc_calloc((size_t)n * 3, sizeof(float));
    s->vr = sc_calloc((size_t)n * 3, sizeof(float));
    s->valid = sc_calloc((size_t)n, 1);
    return s->xm && s->vm && s->xr && s->vr && s->valid ? 0 : -1;
}

static void scratch_free(map_scratch *s)
{
    free(s->xm), free(s->vm), free(s->xr), free(s->vr), free(s->valid);
}

/* Settle the target's strain. A garment in motion or hanging carries its load in the
 * stretch of its links, and how much stretch that takes differs between LODs (fewer,
 * longer links; one solver iteration per substep). Mapped from the source, the target's
 * links hold the source's stretch, not their own: a coarse target snapped up by
 * centimetres within a frame and bounced (0.7 m/s off the source in its first frame, at
 * rest). So before it runs, the target is relaxed quasi-statically: SETTLE_PASSES passes
 * of its own stretch constraints (its compliance, tension only) under gravity and wind,
 * from rest each time (no velocity is integrated, so the garment as a whole barely
 * moves: 0.03 mm of fall a pass at 10 substeps), with the colliders every
 * SETTLE_COLLIDE_EVERY passes (they are most of a pass's cost and, moving millimetres a
 * pass, change nothing measurable in between). Each link ends near the stretch that
 * carries its load; most of the garment moves by millimetres, the hem, where a chain's
 * stretch adds up, by up to 4.3 cm. The mapped velocity is kept as it is (PBD's
 * v = (x - xp) / h applied to the settling would turn that into metres a second).
 * Measured against the run that did not switch: sim/README.md. */
#define SETTLE_PASSES        100
#define SETTLE_COLLIDE_EVERY 10
static void settle(const sim_cloth_model *m, cloth_garment *g, const cloth_pose *p,
                   const sim_cloth_params *prm)
{
    const cloth_lod *l = &m->lod[g->lod];
    float h = prm->dt / (float)prm->substeps, inv_h = 1.0f / h;
    float fall[3] = {prm->wind[0] * h * h, prm->wind[1] * h * h,
                     (prm->wind[2] - prm->gravity) * h * h};
    float a_stretch = prm->stretch_compliance * l->compliance_scale * inv_h * inv_h;
    cloth_body b;
    cloth_body_at(m, p, p, 0.0f, &b);
    for (int it = 0; it < SETTLE_PASSES; it++) {
        memcpy(g->xp, g->x, (size_t)g->n * 3 * sizeof(float));
        for (int i = 0; i < g->n; i++)
            if (g->w[i] > 0.0f)
                for (int q = 0; q < 3; q++)
                    g->x[i * 3 + q] += fall[q];
        for (int k = 0; k < l->ncons; k++)
            if (l->ckind[k] == CLOTH_STRETCH) {
                float lambda = 0.0f;
                xp_distance(l->ca[k], l->cb[k], l->crest[k], a_stretch, 1, g->x, g->w, &lambda);
            }
        if (it % SETTLE_COLLIDE_EVERY == SETTLE_COLLIDE_EVERY - 1)
            for (int i = 0; i < g->n; i++)
                xp_collide(i, g->x, g->xp, g->w, b.caps, b.ncaps, prm->thickness, prm->friction);
    }
}

static float smoothstep01(float t)
{
    t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
    return t * t * (3.0f - 2.0f * t);
}

static float max_dv(const float *a, const float *b, int n)
{
    float mx = 0.0f;
    for (int i = 0; i < n; i++) {
        float d0 = a[i * 3] - b[i * 3], d1 = a[i * 3 + 1] - b[i * 3 + 1],
              d2 = a[i * 3 + 2] - b[i * 3 + 2];
        float d = sqrtf(d0 * d0 + d1 * d1 + d2 * d2);
        mx = d > mx ? d : mx;
    }
    return mx;
}

/* The target garment dst of a switch of c to LOD `to`: every vertex from the source
 * through the mapping (pinned ones at their attachment, unmapped ones at rest with their
 * valid neighbours' mean velocity). Returns how many vertices had no valid mapping. */
static int map_into(const sim_cloth_model *m, const sim_cloth_params *prm, cloth_character *c,
                    int to, map_scratch *ms, cloth_garment *g)
{
    const cloth_pose *p = &c->pose;
    const cloth_garment dst = *g; /* writes go to g's arrays */
    map_state(m, &c->g, to, p, prm->map_max_distance, ms->xm, ms->vm, ms->valid, ms->xr, ms->vr);
    const cloth_lod *lt = &m->lod[to];
    cloth_body b;
    cloth_body_at(m, p, p, 0.0f, &b);
    int invalid = 0;
    for (int j = 0; j < dst.n; j++) {
        if (lt->w[j] <= 0.0f) {
            /* Pinned: at the attachment, with the velocity the source's pinned row had in
             * its last substep (the pose's velocity is a frame average: at a landing the
             * two differ by metres a second). */
            cloth_to_world(&b, &lt->rest[j * 3], &dst.x[j * 3]);
            if (ms->valid[j])
                memcpy(&dst.v[j * 3], &ms->vm[j * 3], 3 * sizeof(float));
            else
                rigid_velocity(p, &dst.x[j * 3], &dst.v[j * 3]);
        } else if (ms->valid[j]) {
            memcpy(&dst.x[j * 3], &ms->xm[j * 3], 3 * sizeof(float));
            memcpy(&dst.v[j * 3], &ms->vm[j * 3], 3 * sizeof(float));
        } else {
            invalid++;
            cloth_to_world(&b, &lt->rest[j * 3], &dst.x[j * 3]);
        }
    }
    for (int j = 0; j < dst.n; j++) { /* invalid: mean velocity of valid neighbours */
        if (lt->w[j] <= 0.0f || ms->valid[j])
            continue;
        float acc[3] = {0, 0, 0};
        int k = 0;
        for (int e = lt->adj_start[j]; e < lt->adj_start[j + 1]; e++)
            if (ms->valid[lt->adj[e]]) {
                for (int q = 0; q < 3; q++)
                    acc[q] += ms->vm[lt->adj[e] * 3 + q];
                k++;
            }
        if (k)
            for (int q = 0; q < 3; q++)
                dst.v[j * 3 + q] = acc[q] / (float)k;
        else
            rigid_velocity(p, &dst.x[j * 3], &dst.v[j * 3]);
    }
    return invalid;
}

/* The switch's record: E_pos, E_vel and the rest (c->last), and the watch for its
 * settle. */
static void record_switch(sim_cloth_scene *sc, cloth_character *c, int to, map_scratch *ms,
                          const cloth_garment *g, int invalid)
{
    const sim_cloth_model *m = sc->m;
    const sim_cloth_params *prm = &sc->prm;
    const cloth_garment dst = *g;
    /* E_pos, E_vel at the same material points (valid mappings; pinned vertices too),
     * against the source interpolated in world space: x = sum w x_src + offset n_world,
     * v = sum w v_src. One frame later: character_frame. */
    sim_cloth_switch *r = &c->last;
    memset(r, 0, sizeof *r);
    r->frame = sc->frame;
    r->character = (int)(c - sc->ch);
    r->from = c->g.lod;
    r->to = to;
    r->strategy = prm->strategy;
    r->invalid_mappings = invalid;
    sim_cloth_model_map_world(m, c->g.lod, to, c->g.x, c->g.v, prm->map_max_distance, ms->xr,
                              ms->vr, ms->valid);
    for (int j = 0; j < dst.n; j++) {
        if (!ms->valid[j])
            continue;
        float dp = 0.0f, dv = 0.0f;
        for (int q = 0; q < 3; q++) {
            float a = dst.x[j * 3 + q] - ms->xr[j * 3 + q],
                  v = dst.v[j * 3 + q] - ms->vr[j * 3 + q];
            dp += a * a;
            dv += v * v;
        }
        r->e_pos = sqrtf(dp) > r->e_pos ? sqrtf(dp) : r->e_pos;
        r->e_vel = sqrtf(dv) > r->e_vel ? sqrtf(dv) : r->e_vel;
    }
    r->settle_frames = -1;
    c->has_switch = 1;
    float base = 0.0f;
    for (int k = 0; k < CLOTH_ACCEL_HIST; k++)
        base += c->accel[k];
    c->accel_base = base / CLOTH_ACCEL_HIST;
    c->watching = 1;
}

/* Switch character c to LOD `to` at the frame boundary. */
static int do_switch(sim_cloth_scene *sc, cloth_character *c, int to, map_scratch *ms)
{
    const sim_cloth_model *m = sc->m;
    const sim_cloth_params *prm = &sc->prm;
    const cloth_pose *p = &c->pose;
    cloth_garment dst;
    if (cloth_garment_alloc(m, to, &dst) != 0)
        return -1;
    float *vlast = sc_calloc((size_t)dst.n * 3, sizeof(float));
    if (!vlast) {
        cloth_garment_free(&dst);
        return -1;
    }
    /* A switch during a blend finishes the blend first: the shown garment is the source. */
    if (c->blend) {
        cloth_garment_free(&c->src);
        c->blend = 0;
    }
    int invalid = map_into(m, prm, c, to, ms, &dst);
    switch (prm->strategy) {
    case SIM_SWITCH_HANDOFF:
        for (int j = 0; j < dst.n; j++) { /* clamp only abnormal velocities */
            float rv[3], d[3], len = 0.0f;
            rigid_velocity(p, &dst.x[j * 3], rv);
            for (int q = 0; q < 3; q++) {
                d[q] = dst.v[j * 3 + q] - rv[q];
                len += d[q] * d[q];
            }
            len = sqrtf(len);
            if (len > prm->v_abnormal)
                for (int q = 0; q < 3; q++)
                    dst.v[j * 3 + q] = rv[q] + d[q] * prm->v_abnormal / len;
        }
        settle(m, &dst, p, prm);
        break;
    case SIM_SWITCH_NAIVE_ZERO_VELOCITY: /* the handoff's positions, without its velocities */
        settle(m, &dst, p, prm);
        memset(dst.v, 0, (size_t)dst.n * 3 * sizeof(float));
        break;
    case SIM_SWITCH_RESET_TO_ANIMATION:
        garment_to_animation(m, &dst, p);
        break;
    case SIM_SWITCH_NAIVE_COPY: /* world space, as is: no clamp, no projection */
        sim_cloth_model_map_world(m, c->g.lod, to, c->g.x, c->g.v, prm->map_max_distance, ms->xr,
                                  ms->vr, ms->valid);
        for (int j = 0; j < dst.n; j++)
            if (ms->valid[j]) {
                memcpy(&dst.x[j * 3], &ms->xr[j * 3], 3 * sizeof(float));
                memcpy(&dst.v[j * 3], &ms->vr[j * 3], 3 * sizeof(float));
            }
        break;
    }
    /* Multipliers: constraint ids of different LODs never match (their topologies
     * differ), and the solver resets them every substep anyway: nothing to carry
     * (test_cloth.c shows the reset makes them irrelevant). */
    record_switch(sc, c, to, ms, &dst, invalid);
    memcpy(vlast, dst.v, (size_t)dst.n * 3 * sizeof(float));
    free(c->v_last);
    c->v_last = vlast;
    /* With the blend on, the source keeps running for blend_vel_frames and the target is
     * blended toward it (E_pos_next and E_vel_next compare against it); off, it stops. */
    if (prm->blend_vel_frames > 0) {
        c->src = c->g;
        c->blend = 1;
    } else {
        cloth_garment_free(&c->g);
        c->last.e_pos_next = c->last.e_vel_next = -1.0f;
    }
    c->g = dst;
    c->hold = 0;
    /* The hand lets go: a vertex index means another point at another LOD. */
    c->grab_vertex = -1;
    return 0;
}

/* ------------------------------------------------------------------ the scene */

sim_status sim_cloth_scene_create(sim_cloth_scene **out, const sim_cloth_model *m, sim_backend *b,
                                  int ncharacters, char *err, size_t err_sz)
{
    *out = NULL;
    if (!m || !b)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "cloth scene: model and backend required");
    if (ncharacters < 1 || ncharacters > 10000)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "cloth scene: %d characters: 1 to 10000", ncharacters);
    sim_cloth_scene *s = sc_calloc(1, sizeof *s);
    if (!s)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cloth scene: out of memory");
    s->m = m;
    s->be = b;
    s->impl = cloth_backend_for(b);
    s->prm = sim_cloth_default_params();
    s->threads = b->threads;
    s->nchar = ncharacters;
    s->ch = sc_calloc((size_t)ncharacters, sizeof *s->ch);
    s->scratch = sc_calloc((size_t)b->threads, sizeof *s->scratch);
    for (int t = 0; s->scratch && t < b->threads; t++)
        if (scratch_alloc(m, &s->scratch[t]) != 0) {
            sim_cloth_scene_destroy(s);
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cloth scene: out of memory");
        }
    s->camera[0] = 4.0f, s->camera[1] = 0.0f, s->camera[2] = 1.5f;
    int side = (int)ceil(sqrt((double)ncharacters));
    for (int i = 0; s->ch && i < ncharacters; i++) {
        cloth_character *c = &s->ch[i];
        c->forced_lod = -1;
        c->grab_vertex = -1;
        c->pose.pos[0] = -2.5f * (float)(i / side);
        c->pose.pos[1] = 2.5f * (float)(i % side);
        c->hold = s->prm.lod_hold_frames;
        if (cloth_garment_alloc(m, 0, &c->g) != 0)
            break;
        garment_to_animation(m, &c->g, &c->pose);
        memset(c->g.v, 0, (size_t)c->g.n * 3 * sizeof(float));
        c->v_last = sc_calloc((size_t)c->g.n * 3, sizeof(float));
        if (!c->v_last)
            break;
    }
    if (!s->ch || !s->scratch || !s->ch[ncharacters - 1].v_last) {
        sim_cloth_scene_destroy(s);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cloth scene: out of memory");
    }
    *out = s;
    return SIM_OK;
}

void sim_cloth_scene_destroy(sim_cloth_scene *s)
{
    if (!s)
        return;
    for (int i = 0; s->ch && i < s->nchar; i++) {
        cloth_garment_free(&s->ch[i].g);
        cloth_garment_free(&s->ch[i].src);
        free(s->ch[i].v_last);
    }
    free(s->ch);
    for (int t = 0; s->scratch && t < s->be->threads; t++)
        scratch_free(&s->scratch[t]);
    free(s->scratch);
    free(s->queue);
    free(s);
}

size_t sim_cloth_scene_bytes(const sim_cloth_scene *s)
{
    size_t n = 0, ncons = 0;
    for (int k = 0; k < s->m->nlod; k++) {
        n = (size_t)s->m->lod[k].n > n ? (size_t)s->m->lod[k].n : n;
        ncons = (size_t)s->m->lod[k].ncons > ncons ? (size_t)s->m->lod[k].ncons : ncons;
    }
    size_t garment = n * 10 * sizeof(float) + ncons * sizeof(float); /* x, v, xp, w; lambda */
    size_t character = sizeof(cloth_character) + 2 * garment + n * 3 * sizeof(float); /* v_last */
    size_t scratch = sizeof(map_scratch) + n * (12 * sizeof(float) + 1);
    return sizeof *s + (size_t)s->nchar * character + (size_t)s->be->threads * scratch +
           CLOTH_QUEUE_CAP * sizeof(sim_cloth_event);
}

sim_cloth_params sim_cloth_get_params(const sim_cloth_scene *s)
{
    return s->prm;
}

void sim_cloth_set_threads(sim_cloth_scene *s, int threads)
{
    s->threads = threads > 0 && threads < s->be->threads ? threads : s->be->threads;
}

/* The checks every event passes, queued or applied at once; the scene is not touched. */
sim_status cloth_check_event(const sim_cloth_scene *s, const sim_cloth_event *ev, char *err,
                             size_t err_sz)
{
    int nl = s->m->nlod;
    if (ev->type != SIM_CLOTH_EV_CAMERA && ev->type != SIM_CLOTH_EV_WIND &&
        ev->type != SIM_CLOTH_EV_SET_PARAMS &&
        (ev->character < -1 || ev->character >= s->nchar ||
         (ev->character < 0 && ev->type >= SIM_CLOTH_EV_GRAB)))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "character %d: 0 to %d%s",
                                   ev->character, s->nchar - 1,
                                   ev->type >= SIM_CLOTH_EV_GRAB ? "" : " or -1 (all)");
    for (int k = 0; k < 3; k++)
        if (!(fabsf(ev->point[k]) <= 1e6f))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                       "point[%d] must be finite, within 1e6", k);
    switch (ev->type) {
    case SIM_CLOTH_EV_FORCE_LOD:
        if (ev->lod < -1 || ev->lod >= nl)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                       "lod %d: 0 to %d, or -1 (automatic)", ev->lod, nl - 1);
        return SIM_OK;
    case SIM_CLOTH_EV_MOTION:
        if ((unsigned)ev->motion >= SIM_NMOTION)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "motion %d unknown",
                                       (int)ev->motion);
        return SIM_OK;
    case SIM_CLOTH_EV_GRAB:
        if (ev->vertex < 0 || ev->vertex >= s->m->lod[0].n)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "vertex %d out of range",
                                       ev->vertex);
        return SIM_OK;
    case SIM_CLOTH_EV_SET_PARAMS:
        if (sim_cloth_params_validate(&ev->params, err, err_sz) != SIM_OK)
            return SIM_ERR_ARG;
        return SIM_OK;
    case SIM_CLOTH_EV_CAMERA:
    case SIM_CLOTH_EV_WIND:
    case SIM_CLOTH_EV_MOVE:
    case SIM_CLOTH_EV_RELEASE:
        return SIM_OK;
    }
    return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "event type %d unknown", (int)ev->type);
}

sim_status sim_cloth_push_event(sim_cloth_scene *s, const sim_cloth_event *ev, char *err,
                                size_t err_sz)
{
    sim_status st = cloth_check_event(s, ev, err, err_sz);
    if (st != SIM_OK)
        return st;
    if (s->qcount >= CLOTH_QUEUE_CAP)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT, "event queue full (%d)",
                                   CLOTH_QUEUE_CAP);
    if (!s->queue && !(s->queue = sc_calloc(CLOTH_QUEUE_CAP, sizeof *s->queue)))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "event queue: out of memory");
    s->queue[s->qcount++] = *ev;
    return SIM_OK;
}

static void apply_event(sim_cloth_scene *s, const sim_cloth_event *ev);

sim_status sim_cloth_apply_event(sim_cloth_scene *s, const sim_cloth_event *ev, char *err,
                                 size_t err_sz)
{
    sim_status st = cloth_check_event(s, ev, err, err_sz);
    if (st == SIM_OK)
        apply_event(s, ev);
    return st;
}

static void apply_event(sim_cloth_scene *s, const sim_cloth_event *ev)
{
    int c0 = ev->character < 0 ? 0 : ev->character, c1 = ev->character < 0 ? s->nchar : c0 + 1;
    switch (ev->type) {
    case SIM_CLOTH_EV_CAMERA:
        memcpy(s->camera, ev->point, sizeof s->camera);
        break;
    case SIM_CLOTH_EV_FORCE_LOD:
        for (int i = c0; i < c1; i++)
            s->ch[i].forced_lod = ev->lod;
        break;
    case SIM_CLOTH_EV_MOTION:
        for (int i = c0; i < c1; i++)
            if (s->ch[i].motion != ev->motion) {
                s->ch[i].motion = ev->motion;
                s->ch[i].t = 0.0;
            }
        break;
    case SIM_CLOTH_EV_WIND:
        for (int i = 0; i < s->nchar; i++) {
            cloth_garment *gs[2] = {&s->ch[i].g, &s->ch[i].src};
            for (int k = 0; k < 2; k++)
                for (int j = 0; j < gs[k]->n; j++)
                    if (gs[k]->w[j] > 0.0f)
                        for (int q = 0; q < 3; q++)
                            gs[k]->v[j * 3 + q] += ev->point[q];
        }
        break;
    case SIM_CLOTH_EV_GRAB:
        if (ev->vertex < s->ch[c0].g.n && s->m->lod[s->ch[c0].g.lod].w[ev->vertex] > 0.0f) {
            s->ch[c0].grab_vertex = ev->vertex;
            memcpy(s->ch[c0].grab_point, ev->point, sizeof ev->point);
        }
        break;
    case SIM_CLOTH_EV_MOVE:
        memcpy(s->ch[c0].grab_point, ev->point, sizeof ev->point);
        break;
    case SIM_CLOTH_EV_RELEASE:
        s->ch[c0].grab_vertex = -1;
        break;
    case SIM_CLOTH_EV_SET_PARAMS:
        s->prm = ev->params;
        break;
    }
}

static int choose_lod(const sim_cloth_scene *s, const cloth_character *c)
{
    int nl = s->m->nlod, cur = c->g.lod;
    if (c->forced_lod >= 0)
        return c->forced_lod < nl ? c->forced_lod : nl - 1;
    float d[3] = {s->camera[0] - c->pose.pos[0], s->camera[1] - c->pose.pos[1],
                  s->camera[2] - c->pose.pos[2] - 1.0f};
    float dist = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    int want = cur;
    while (want < nl - 1 && dist > s->prm.lod_enter[want])
        want++;
    while (want > 0 && dist < s->prm.lod_exit[want - 1])
        want--;
    if (want != cur &&
        (c->hold < s->prm.lod_hold_frames || s->frame % (uint64_t)s->prm.lod_switch_every != 0))
        return cur;
    return want;
}

static int garment_finite(const cloth_garment *g)
{
    for (int i = 0; i < g->n * 3; i++)
        if (!isfinite(g->x[i]) || !isfinite(g->v[i]))
            return 0;
    return 1;
}

/* One frame of the blend after a switch: the source runs beside the shown garment, which
 * is pulled toward it with smoothstep weights (positions over blend_pos_frames,
 * velocities over blend_vel_frames). gv: the held vertex (kept at the hand), or -1. */
static void blend_step(const sim_cloth_scene *s, cloth_character *c, map_scratch *ms,
                       const cloth_pose *p1, int gv, int threads)
{
    const sim_cloth_model *m = s->m;
    const sim_cloth_params *prm = &s->prm;
    s->impl->solve(m, &c->src, &c->pose, p1, prm, threads);
    map_state(m, &c->src, c->g.lod, p1, prm->map_max_distance, ms->xm, ms->vm, ms->valid, ms->xr,
              ms->vr);
    const cloth_lod *l = &m->lod[c->g.lod];
    float sp = prm->blend_pos_frames > 0
                   ? smoothstep01((float)c->blend / (float)prm->blend_pos_frames)
                   : 1.0f;
    float sv = prm->blend_vel_frames > 0
                   ? smoothstep01((float)c->blend / (float)prm->blend_vel_frames)
                   : 1.0f;
    for (int j = 0; j < c->g.n; j++)
        if (l->w[j] > 0.0f && ms->valid[j] && j != gv)
            for (int q = 0; q < 3; q++) {
                float *x = &c->g.x[j * 3 + q], *v = &c->g.v[j * 3 + q];
                *x = ms->xm[j * 3 + q] + sp * (*x - ms->xm[j * 3 + q]);
                *v = ms->vm[j * 3 + q] + sv * (*v - ms->vm[j * 3 + q]);
            }
    /* E_pos_next, E_vel_next: the shown garment against where the source is, one frame
     * after the switch. Not ground truth: tests/scenes/cloth_scenes.c measures that. */
    sim_cloth_switch *r = &c->last;
    for (int j = 0; c->blend == 1 && j < c->g.n; j++) {
        if (!ms->valid[j] || j == gv)
            continue;
        float dp = 0.0f, dv = 0.0f;
        for (int q = 0; q < 3; q++) {
            float a = c->g.x[j * 3 + q] - ms->xm[j * 3 + q];
            float b = c->g.v[j * 3 + q] - ms->vm[j * 3 + q];
            dp += a * a;
            dv += b * b;
        }
        r->e_pos_next = sqrtf(dp) > r->e_pos_next ? sqrtf(dp) : r->e_pos_next;
        r->e_vel_next = sqrtf(dv) > r->e_vel_next ? sqrtf(dv) : r->e_vel_next;
    }
    if (c->blend++ >= prm->blend_vel_frames) {
        cloth_garment_free(&c->src);
        c->blend = 0;
    }
}

/* One character's frame. Returns 1 when it switched LOD, -1 on allocation failure. */
static int character_frame(sim_cloth_scene *s, cloth_character *c, map_scratch *ms, int threads,
                           float *depth_out, int *nonfinite, int *particles)
{
    const sim_cloth_model *m = s->m;
    const sim_cloth_params *prm = &s->prm;
    int switched = 0, to = choose_lod(s, c);
    if (to != c->g.lod) {
        if (do_switch(s, c, to, ms) != 0)
            return -1;
        switched = 1;
    }
    cloth_pose p1;
    advance_pose(c, prm->dt, prm->gravity, &p1);
    int gv = c->grab_vertex;
    float wsave = 0.0f;
    if (gv >= 0) { /* held: kinematic at the hand, which cannot reach inside the body */
        cloth_body body;
        cloth_body_at(m, &c->pose, &p1, 1.0f, &body);
        float hand[3], hand_prev[3], one = 1.0f;
        memcpy(hand, c->grab_point, sizeof hand);
        memcpy(hand_prev, hand, sizeof hand);
        xp_collide(0, hand, hand_prev, &one, body.caps, body.ncaps, prm->thickness, 0.0f);
        wsave = c->g.w[gv];
        c->g.w[gv] = 0.0f;
        memcpy(&c->g.x[gv * 3], hand, sizeof hand);
    }
    float depth = s->impl->solve(m, &c->g, &c->pose, &p1, prm, threads);
    if (gv >= 0) {
        c->g.w[gv] = wsave;
        /* Pulled past half again its length next to the hand (the body walked away, or the
         * hand dragged it round the body): the cloth slips out of the hand. */
        const cloth_lod *l = &m->lod[c->g.lod];
        for (int e = l->adj_start[gv]; e < l->adj_start[gv + 1]; e++) {
            int o = l->adj[e];
            float now = 0.0f, rest = 0.0f;
            for (int q = 0; q < 3; q++) {
                float a = c->g.x[gv * 3 + q] - c->g.x[o * 3 + q];
                float r0 = l->rest[gv * 3 + q] - l->rest[o * 3 + q];
                now += a * a;
                rest += r0 * r0;
            }
            if (now > 2.25f * rest)
                c->grab_vertex = -1;
        }
    }
    *particles += c->g.n;
    if (c->blend) {
        *particles += c->src.n;
        blend_step(s, c, ms, &p1, gv, threads);
    }
    if (!garment_finite(&c->g)) { /* blew up: back to the animation, counted */
        (*nonfinite)++;
        garment_to_animation(m, &c->g, &p1);
        if (c->blend) {
            cloth_garment_free(&c->src);
            c->blend = 0;
        }
    }
    /* Acceleration this frame, and the watch on the last switch. */
    float a = max_dv(c->g.v, c->v_last, c->g.n);
    memmove(c->accel, c->accel + 1, (CLOTH_ACCEL_HIST - 1) * sizeof(float));
    c->accel[CLOTH_ACCEL_HIST - 1] = a;
    memcpy(c->v_last, c->g.v, (size_t)c->g.n * 3 * sizeof(float));
    if (c->watching) {
        sim_cloth_switch *r = &c->last;
        if (depth > r->max_penetration)
            r->max_penetration = depth;
        if (a <= 1.5f * c->accel_base + 0.05f) {
            r->settle_frames = c->watching;
            c->watching = 0;
        } else if (++c->watching > CLOTH_SETTLE_CAP) {
            c->watching = 0;
        }
    }
    c->pose = p1;
    c->t += (double)prm->dt;
    c->hold++;
    *depth_out = depth;
    return switched;
}

sim_status sim_cloth_step(sim_cloth_scene *s, sim_cloth_metrics *mt, char *err, size_t err_sz)
{
    double t0 = sc_now_ms();
    for (int i = 0; i < s->qcount; i++)
        apply_event(s, &s->queue[i]);
    s->qcount = 0;
    int nt = s->threads, inner = s->nchar > 1 ? 1 : nt;
    int switches = 0, nonfinite = 0, particles = 0, failed = 0;
    float depth = 0.0f;
    (void)nt;
#pragma omp parallel num_threads(nt) if (s->nchar > 1) reduction(+ : switches, nonfinite, particles, failed) reduction(max : depth)
    {
#ifdef _OPENMP
        map_scratch *ms = &s->scratch[omp_get_thread_num()];
#else
        map_scratch *ms = &s->scratch[0];
#endif
#pragma omp for schedule(dynamic, 4)
        for (int i = 0; i < s->nchar; i++) {
            float d = 0.0f;
            int r = character_frame(s, &s->ch[i], ms, inner, &d, &nonfinite, &particles);
            if (r < 0)
                failed++;
            else
                switches += r;
            depth = d > depth ? d : depth;
        }
    }
    s->frame++;
    if (mt) {
        memset(mt, 0, sizeof *mt);
        mt->switches = switches;
        mt->nonfinite = nonfinite;
        mt->particles = particles;
        mt->max_penetration = depth;
        for (int i = 0; i < s->nchar; i++)
            mt->lod_count[s->ch[i].g.lod]++;
        mt->step_ms = sc_now_ms() - t0;
    }
    if (failed)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cloth step: out of memory");
    return SIM_OK;
}

int sim_cloth_characters(const sim_cloth_scene *s)
{
    return s->nchar;
}
int sim_cloth_lod(const sim_cloth_scene *s, int c)
{
    return c >= 0 && c < s->nchar ? s->ch[c].g.lod : -1;
}
const float *sim_cloth_positions(const sim_cloth_scene *s, int c, int *n)
{
    if (c < 0 || c >= s->nchar)
        return NULL;
    if (n)
        *n = s->ch[c].g.n;
    return s->ch[c].g.x;
}
const float *sim_cloth_velocities(const sim_cloth_scene *s, int c, int *n)
{
    if (c < 0 || c >= s->nchar)
        return NULL;
    if (n)
        *n = s->ch[c].g.n;
    return s->ch[c].g.v;
}
void sim_cloth_root(const sim_cloth_scene *s, int c, float pos[3], float *yaw)
{
    if (c < 0 || c >= s->nchar)
        return;
    memcpy(pos, s->ch[c].pose.pos, 3 * sizeof(float));
    if (yaw)
        *yaw = s->ch[c].pose.yaw;
}
int sim_cloth_body(const sim_cloth_scene *s, int c, float caps[][7], int max)
{
    if (c < 0 || c >= s->nchar)
        return 0;
    cloth_body b;
    cloth_body_at(s->m, &s->ch[c].pose, &s->ch[c].pose, 0.0f, &b);
    int n = b.ncaps < max ? b.ncaps : max;
    for (int k = 0; k < n; k++) {
        memcpy(&caps[k][0], b.caps[k].a, 3 * sizeof(float));
        memcpy(&caps[k][3], b.caps[k].b, 3 * sizeof(float));
        caps[k][6] = b.caps[k].r;
    }
    return n;
}

int sim_cloth_last_switch(const sim_cloth_scene *s, int c, sim_cloth_switch *out)
{
    if (c < 0 || c >= s->nchar || !s->ch[c].has_switch)
        return 0;
    *out = s->ch[c].last;
    return 1;
}
uint64_t sim_cloth_hash(const sim_cloth_scene *s)
{
    uint64_t h = SC_HASH_SEED;
    for (int i = 0; i < s->nchar; i++) {
        h = sc_hash_bytes(h, s->ch[i].g.x, (size_t)s->ch[i].g.n * 3 * sizeof(float));
        h = sc_hash_bytes(h, s->ch[i].g.v, (size_t)s->ch[i].g.n * 3 * sizeof(float));
    }
    return h;
}
