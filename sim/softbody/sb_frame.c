/* sb_frame.c: what a caller sets on a softbody state between frames (parent, planes, hand,
 * pins, positions), the frame itself (carry, solve, embedded surface, guard) and the read
 * side. The algorithm is described at the top of sb_state.c. */
#include <math.h>
#include <string.h>

#include "softbody_internal.h"

static int finite3(const float p[3])
{
    return isfinite(p[0]) && isfinite(p[1]) && isfinite(p[2]);
}

sim_status sim_softbody_set_parent(sim_softbody_state *s, const float pos[3], const float quat[4],
                                   char *err, size_t err_sz)
{
    float len =
        sqrtf(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3]);
    if (!finite3(pos) || !(fabsf(len - 1.0f) < 1e-3f))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "parent: the position must be finite and the quaternion of unit "
                                   "length (|q| = %g)",
                                   (double)len);
    memcpy(s->ppos, pos, sizeof s->ppos);
    for (int k = 0; k < 4; k++)
        s->pquat[k] = quat[k] / len;
    return SIM_OK;
}

sim_status sim_softbody_add_plane(sim_softbody_state *s, const float n[3], float d, int attached,
                                  int *id, char *err, size_t err_sz)
{
    float len = sqrtf(sb_dot3(n, n));
    if (!finite3(n) || !isfinite(d) || !(len > 1e-6f))
        return (sim_status)sc_fail(
            err, err_sz, SIM_ERR_ARG,
            "plane: the normal must be finite and not zero, the offset finite");
    if (s->nplanes == SIM_SOFTBODY_MAX_PLANES)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT, "plane: at most %d planes",
                                   SIM_SOFTBODY_MAX_PLANES);
    sb_userplane *p = &s->planes[s->nplanes++];
    p->id = s->next_plane_id++;
    p->attached = attached != 0;
    for (int k = 0; k < 3; k++)
        p->n[k] = n[k] / len;
    p->d = d / len;
    if (id)
        *id = p->id;
    return SIM_OK;
}

sim_status sim_softbody_remove_plane(sim_softbody_state *s, int id, char *err, size_t err_sz)
{
    for (int i = 0; i < s->nplanes; i++)
        if (s->planes[i].id == id) {
            memmove(&s->planes[i], &s->planes[i + 1],
                    (size_t)(s->nplanes - i - 1) * sizeof s->planes[0]);
            s->nplanes--;
            return SIM_OK;
        }
    return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "plane %d: no such plane", id);
}

int sim_softbody_grab(sim_softbody_state *s, const float point[3])
{
    if (!finite3(point))
        return -1;
    float r2 = s->prm.grab_radius * s->prm.grab_radius;
    s->ngrab = 0;
    for (int i = 0; i < s->m->n; i++) {
        float d[3] = {s->x[i * 3] - point[0], s->x[i * 3 + 1] - point[1],
                      s->x[i * 3 + 2] - point[2]};
        if (sb_dot3(d, d) > r2)
            continue;
        s->grab_idx[s->ngrab] = i;
        memcpy(&s->grab_off[s->ngrab * 3], d, sizeof d);
        s->ngrab++;
    }
    memcpy(s->hand, point, sizeof s->hand);
    return s->ngrab;
}

sim_status sim_softbody_move_hand(sim_softbody_state *s, const float point[3], char *err,
                                  size_t err_sz)
{
    if (!finite3(point))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "hand: the point must be finite");
    memcpy(s->hand, point, sizeof s->hand);
    return SIM_OK;
}

void sim_softbody_release(sim_softbody_state *s)
{
    s->ngrab = 0;
}

sim_status sim_softbody_set_pinned(sim_softbody_state *s, const uint8_t *pinned, char *err,
                                   size_t err_sz)
{
    (void)err;
    (void)err_sz;
    for (int i = 0; i < s->m->n; i++) {
        s->pinned[i] = pinned && pinned[i];
        s->w[i] = s->pinned[i] ? 0.0f : s->w_free[i];
    }
    sb_edge_update(s);
    return SIM_OK;
}

sim_status sim_softbody_set_positions(sim_softbody_state *s, const float *x, const float *v,
                                      char *err, size_t err_sz)
{
    int n = s->m->n;
    for (int i = 0; i < n * 3; i++)
        if (!isfinite(x[i]) || (v && !isfinite(v[i])))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                       "positions: particle %d is not finite", i / 3);
    memcpy(s->x, x, (size_t)n * 3 * sizeof(float));
    memcpy(s->xp, x, (size_t)n * 3 * sizeof(float));
    if (v)
        memcpy(s->v, v, (size_t)n * 3 * sizeof(float));
    else
        memset(s->v, 0, (size_t)n * 3 * sizeof(float));
    sb_place_surface(s);
    return SIM_OK;
}

/* ---------------------------------------------------------------- the frame */

/* The parent's motion since the last frame, applied to every particle. */
static void carry(sim_softbody_state *s)
{
    if (!memcmp(s->cpos, s->ppos, sizeof s->ppos) && !memcmp(s->cquat, s->pquat, sizeof s->pquat))
        return;
    float R[9], t[3];
    sb_pose_delta(s->cquat, s->cpos, s->pquat, s->ppos, R, t);
    int n = s->m->n, nt = n >= s->prm.parallel_min ? s->threads : 1;
    (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int i = 0; i < n; i++)
        sb_carry(i, s->x, s->v, R, t);
    /* Shape matching's warm start turns with the body: quat = dq quat, dq = q1 q0^-1. */
    float dq[4], q[4];
    sb_quat_mul_conj(s->pquat, s->cquat, dq);
    memcpy(q, s->quat, sizeof q);
    sb_quat_mul(dq, q, s->quat);
    memcpy(s->cpos, s->ppos, sizeof s->cpos);
    memcpy(s->cquat, s->pquat, sizeof s->cquat);
}

/* The floor, then the user's planes; attached ones placed at the parent's pose. */
static void place_planes(const sim_softbody_state *s, sb_frame *f)
{
    float R[9];
    sb_quat_to_mat(s->pquat, R);
    sb_plane floor = {{0.0f, 0.0f, 1.0f}, s->prm.floor_z};
    f->planes[0] = floor;
    f->nplanes = 1;
    for (int i = 0; i < s->nplanes; i++) {
        const sb_userplane *u = &s->planes[i];
        sb_plane *p = &f->planes[f->nplanes++];
        if (!u->attached) {
            memcpy(p->n, u->n, sizeof p->n);
            p->d = u->d;
            continue;
        }
        for (int r = 0; r < 3; r++)
            p->n[r] = R[r * 3] * u->n[0] + R[r * 3 + 1] * u->n[1] + R[r * 3 + 2] * u->n[2];
        p->d = u->d + sb_dot3(p->n, s->ppos);
    }
}

void sb_place_surface(sim_softbody_state *s)
{
    const sim_softbody_model *m = s->m;
    int n = m->nembed, nt = n >= s->prm.parallel_min ? s->threads : 1;
    (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int i = 0; i < n; i++)
        sb_embed(i, m->etet, m->ew, m->tet, s->x, s->surf);
}

/* After the solve: a non-finite particle resets the state (counted); otherwise the
 * fastest particle and the deepest penetration. */
static void guard_and_measure(sim_softbody_state *s, const sb_frame *f, sim_softbody_metrics *mt)
{
    int bad = 0;
    float vmax2 = 0.0f, depth = 0.0f;
    for (int i = 0; i < s->m->n; i++) {
        if (!finite3(&s->x[i * 3]) || !finite3(&s->v[i * 3])) {
            bad++;
            continue;
        }
        float v2 = sb_dot3(&s->v[i * 3], &s->v[i * 3]);
        vmax2 = v2 > vmax2 ? v2 : vmax2;
        if (s->w[i] > 0.0f) {
            float d = sb_penetration(i, s->x, f->planes, f->nplanes);
            depth = d > depth ? d : depth;
        }
    }
    if (bad) {
        s->guard_resets++;
        sim_softbody_state_reset(s);
        vmax2 = depth = 0.0f;
    }
    mt->nonfinite = bad;
    mt->max_speed = sqrtf(vmax2);
    mt->max_penetration = depth;
    mt->grabbed = s->ngrab;
}

sim_status sim_softbody_step(sim_softbody_state *s, sim_softbody_metrics *mt, char *err,
                             size_t err_sz)
{
    double t0 = sc_now_ms();
    sim_softbody_metrics local;
    mt = mt ? mt : &local;
    memset(mt, 0, sizeof *mt);
    carry(s);
    sb_frame f;
    place_planes(s, &f);
    sim_status st = sb_backend_for(s->b)->solve(s->m, s, &f, s->threads);
    if (st != SIM_OK)
        return (sim_status)sc_fail(err, err_sz, st, "softbody step: the %s backend failed",
                                   sim_backend_name(s->b));
    sb_place_surface(s);
    guard_and_measure(s, &f, mt);
    mt->step_ms = sc_now_ms() - t0;
    return SIM_OK;
}

const float *sim_softbody_positions(const sim_softbody_state *s, int *n)
{
    *n = s->m->n;
    return s->x;
}

const float *sim_softbody_velocities(const sim_softbody_state *s, int *n)
{
    *n = s->m->n;
    return s->v;
}

const float *sim_softbody_surface(const sim_softbody_state *s, int *n)
{
    if (s->m->info.kind == SIM_SOFTBODY_SURFACE) {
        *n = s->m->n;
        return s->x;
    }
    *n = s->m->nembed;
    return s->surf;
}

int sim_softbody_guard_resets(const sim_softbody_state *s)
{
    return s->guard_resets;
}

uint64_t sim_softbody_hash(const sim_softbody_state *s)
{
    size_t n = (size_t)s->m->n * 3 * sizeof(float);
    return sc_hash_bytes(sc_hash_bytes(SC_HASH_SEED, s->x, n), s->v, n);
}
