/* sb_snapshot.c: a softbody state as bytes and back (sim_softbody_save / sim_softbody_restore;
 * the server's session snapshots). One part, "SBST" version 1, in this order:
 *   the model it was taken of: kind, particles, edges, tets, boundary tets, embedded
 *   vertices and a hash of the rest positions (a state of another body is refused by name);
 *   the parameters (the POD struct, its size first); the poses: shape matching's warm-start
 *   rotation, the parent's pose as set and as last carried to (a carry still pending is kept),
 *   the hand; the planes; the counts (planes, next plane id, held particles, guard resets);
 *   then the arrays: positions, velocities (n x 3 each), pins (n), the held particles and
 *   their offsets (ngrab, ngrab x 3).
 * Not saved, because a step recomputes it before reading it: the substep start (xp: the
 * first prediction of a frame writes it), the multipliers (zeroed each substep, or unused
 * with one iteration), shape matching's and the volume's partial sums, the embedded surface
 * (placed here from the positions, as a step places it), and everything derived from the
 * parameters and pins (inverse masses, compliances, edge coefficients: set_params rebuilds
 * them). The thread count is the caller's: results do not depend on it.
 * Restore reads and checks everything before it changes anything, so a refused snapshot
 * leaves the state as it was. */
#include <math.h>
#include <string.h>

#include "softbody_internal.h"

#define SB_SNAP_VERSION 1u

static const char k_tag[4] = {'S', 'B', 'S', 'T'};

/* The small fields, read and checked before any is put back. */
typedef struct sb_snap {
    sim_softbody_params prm;
    float quat[4], ppos[3], pquat[4], cpos[3], cquat[4], hand[3];
    sb_userplane planes[SIM_SOFTBODY_MAX_PLANES];
    int32_t nplanes, next_plane_id, ngrab, guard_resets;
} sb_snap;

static uint64_t rest_hash(const sim_softbody_model *m)
{
    return sc_hash_bytes(SC_HASH_SEED, m->rest, (size_t)m->n * 3 * sizeof(float));
}

static void model_sizes(const sim_softbody_model *m, uint32_t out[6])
{
    out[0] = (uint32_t)m->info.kind, out[1] = (uint32_t)m->n, out[2] = (uint32_t)m->nedge;
    out[3] = (uint32_t)m->ntet, out[4] = (uint32_t)m->nbound, out[5] = (uint32_t)m->nembed;
}

sim_status sim_softbody_save(const sim_softbody_state *s, sc_blob *out, char *err, size_t err_sz)
{
    const sim_softbody_model *m = s->m;
    size_t n = (size_t)m->n, ng = (size_t)s->ngrab;
    uint32_t sizes[6], psz = (uint32_t)sizeof s->prm;
    uint64_t rh = rest_hash(m);
    model_sizes(m, sizes);
    sc_blob_tag(out, k_tag, SB_SNAP_VERSION);
    SC_PUT(out, sizes);
    SC_PUT(out, rh);
    SC_PUT(out, psz);
    SC_PUT(out, s->prm);
    SC_PUT(out, s->quat);
    SC_PUT(out, s->ppos);
    SC_PUT(out, s->pquat);
    SC_PUT(out, s->cpos);
    SC_PUT(out, s->cquat);
    SC_PUT(out, s->hand);
    int32_t counts[4] = {s->nplanes, s->next_plane_id, s->ngrab, s->guard_resets};
    SC_PUT(out, counts);
    for (int i = 0; i < s->nplanes; i++) {
        const sb_userplane *p = &s->planes[i];
        int32_t id[2] = {p->id, p->attached};
        SC_PUT(out, id);
        SC_PUT(out, p->n);
        SC_PUT(out, p->d);
    }
    sc_blob_put(out, s->x, n * 3 * sizeof(float));
    sc_blob_put(out, s->v, n * 3 * sizeof(float));
    sc_blob_put(out, s->pinned, n);
    sc_blob_put(out, s->grab_idx, ng * sizeof(int32_t));
    sc_blob_put(out, s->grab_off, ng * 3 * sizeof(float));
    if (out->failed)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "softbody snapshot: out of memory");
    return SIM_OK;
}

/* ---------------------------------------------------------------- restore */

static sim_status refuse(char *err, size_t err_sz, const char *why)
{
    return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "softbody snapshot: %s", why);
}

static int finite_n(const float *p, int n)
{
    for (int k = 0; k < n; k++)
        if (!isfinite(p[k]))
            return 0;
    return 1;
}

/* The model the snapshot was taken of against s's. */
static sim_status read_model(sc_reader *r, const sim_softbody_model *m, char *err, size_t err_sz)
{
    uint32_t got[6], want[6];
    uint64_t rh;
    sc_reader_tag(r, k_tag, SB_SNAP_VERSION);
    SC_GET(r, got);
    SC_GET(r, rh);
    if (r->failed)
        return refuse(err, err_sz, r->why);
    model_sizes(m, want);
    static const char *const kind[2] = {"surface", "hybrid"};
    if (got[0] != want[0])
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "softbody snapshot: of a %s model, this state's is %s",
                                   got[0] < 2 ? kind[got[0]] : "unknown", kind[want[0]]);
    if (memcmp(got, want, sizeof got))
        return (sim_status)sc_fail(
            err, err_sz, SIM_ERR_ARG,
            "softbody snapshot: of a body of %u particles, %u edges, %u tets, %u boundary tets, "
            "%u surface vertices; this state's has %u, %u, %u, %u, %u",
            got[1], got[2], got[3], got[4], got[5], want[1], want[2], want[3], want[4], want[5]);
    if (rh != rest_hash(m))
        return refuse(err, err_sz, "of a body of the same size but another rest shape");
    return SIM_OK;
}

/* The planes: ids rising (as add_plane gives them and remove_plane keeps them) below the next
 * id, unit normals, finite offsets. */
static sim_status read_planes(sc_reader *r, sb_snap *sn, char *err, size_t err_sz)
{
    if (sn->nplanes < 0 || sn->nplanes > SIM_SOFTBODY_MAX_PLANES || sn->next_plane_id < 1)
        return refuse(err, err_sz, "plane counts out of range");
    for (int i = 0; i < sn->nplanes; i++) {
        sb_userplane *p = &sn->planes[i];
        int32_t id[2];
        SC_GET(r, id);
        SC_GET(r, p->n);
        SC_GET(r, p->d);
        if (r->failed)
            return refuse(err, err_sz, r->why);
        p->id = id[0], p->attached = id[1];
        float len = sqrtf(sb_dot3(p->n, p->n));
        if (id[0] < 1 || id[0] >= sn->next_plane_id || (i > 0 && id[0] <= sn->planes[i - 1].id) ||
            (id[1] != 0 && id[1] != 1) || !finite_n(p->n, 3) || !isfinite(p->d) ||
            !(fabsf(len - 1.0f) < 1e-3f))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                       "softbody snapshot: plane %d is damaged", i);
    }
    return SIM_OK;
}

/* Parameters, poses, counts and planes into sn, each checked. */
static sim_status read_small(sc_reader *r, const sim_softbody_model *m, sb_snap *sn, char *err,
                             size_t err_sz)
{
    uint32_t psz;
    SC_GET(r, psz);
    if (!r->failed && psz != (uint32_t)sizeof sn->prm)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "softbody snapshot: parameters of %u bytes, these are %zu", psz,
                                   sizeof sn->prm);
    SC_GET(r, sn->prm);
    SC_GET(r, sn->quat);
    SC_GET(r, sn->ppos);
    SC_GET(r, sn->pquat);
    SC_GET(r, sn->cpos);
    SC_GET(r, sn->cquat);
    SC_GET(r, sn->hand);
    int32_t counts[4];
    SC_GET(r, counts);
    if (r->failed)
        return refuse(err, err_sz, r->why);
    char why[200];
    if (sim_softbody_params_validate(&sn->prm, why, sizeof why) != SIM_OK)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "softbody snapshot: parameters: %s",
                                   why);
    if (!finite_n(sn->quat, 4) || !finite_n(sn->ppos, 3) || !finite_n(sn->pquat, 4) ||
        !finite_n(sn->cpos, 3) || !finite_n(sn->cquat, 4) || !finite_n(sn->hand, 3))
        return refuse(err, err_sz, "a pose that is not finite");
    sn->nplanes = counts[0], sn->next_plane_id = counts[1];
    sn->ngrab = counts[2], sn->guard_resets = counts[3];
    if (sn->ngrab < 0 || sn->ngrab > m->n || sn->guard_resets < 0)
        return refuse(err, err_sz, "counts out of range");
    return read_planes(r, sn, err, err_sz);
}

/* The arrays, checked where they lie in the snapshot before any is copied: exactly the bytes
 * left, finite positions, velocities and offsets, pins 0 or 1, held particles rising (as
 * grab finds them) and in range. */
static sim_status check_arrays(const sc_reader *r, int n, int ngrab, char *err, size_t err_sz)
{
    size_t v3 = (size_t)n * 3 * sizeof(float), gi = (size_t)ngrab * sizeof(int32_t);
    size_t want = 2 * v3 + (size_t)n + gi + (size_t)ngrab * 3 * sizeof(float), left = r->n - r->at;
    if (left != want)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   left < want
                                       ? "softbody snapshot: cut short: %zu bytes of arrays "
                                         "expected, %zu left"
                                       : "softbody snapshot: %zu bytes of arrays "
                                         "expected, %zu left (too many)",
                                   want, left);
    const uint8_t *p = r->p + r->at;
    for (size_t k = 0; k < 2 * v3; k += sizeof(float)) {
        float f;
        memcpy(&f, p + k, sizeof f);
        if (!isfinite(f))
            return refuse(err, err_sz, "a position or velocity that is not finite");
    }
    for (int i = 0; i < n; i++)
        if (p[2 * v3 + (size_t)i] > 1)
            return refuse(err, err_sz, "a pin that is neither 0 nor 1");
    const uint8_t *g = p + 2 * v3 + (size_t)n;
    for (int j = 0, last = -1; j < ngrab; j++) {
        int32_t i;
        float o[3];
        memcpy(&i, g + (size_t)j * sizeof i, sizeof i);
        memcpy(o, g + gi + (size_t)j * sizeof o, sizeof o);
        if (i <= last || i >= n || !finite_n(o, 3))
            return refuse(err, err_sz, "a held particle out of range or order");
        last = i;
    }
    return SIM_OK;
}

/* Everything checked: put it back. The parameters last, so the masses and edge coefficients
 * they make see the pins. */
static void commit(sim_softbody_state *s, sc_reader *r, const sb_snap *sn)
{
    size_t n = (size_t)s->m->n, ng = (size_t)sn->ngrab;
    memcpy(s->quat, sn->quat, sizeof s->quat);
    memcpy(s->ppos, sn->ppos, sizeof s->ppos);
    memcpy(s->pquat, sn->pquat, sizeof s->pquat);
    memcpy(s->cpos, sn->cpos, sizeof s->cpos);
    memcpy(s->cquat, sn->cquat, sizeof s->cquat);
    memcpy(s->hand, sn->hand, sizeof s->hand);
    memcpy(s->planes, sn->planes, sizeof s->planes);
    s->nplanes = sn->nplanes, s->next_plane_id = sn->next_plane_id;
    s->ngrab = sn->ngrab, s->guard_resets = sn->guard_resets;
    sc_reader_get(r, s->x, n * 3 * sizeof(float));
    sc_reader_get(r, s->v, n * 3 * sizeof(float));
    sc_reader_get(r, s->pinned, n);
    sc_reader_get(r, s->grab_idx, ng * sizeof(int32_t));
    sc_reader_get(r, s->grab_off, ng * 3 * sizeof(float));
    memcpy(s->xp, s->x, n * 3 * sizeof(float));
    sim_softbody_set_params(s, &sn->prm, NULL, 0); /* checked in read_small: rebuilds masses */
    sb_place_surface(s);
}

sim_status sim_softbody_restore(sim_softbody_state *s, const void *data, size_t n, char *err,
                                size_t err_sz)
{
    sc_reader r = sc_reader_of(data, n);
    sb_snap sn;
    memset(&sn, 0, sizeof sn);
    sim_status st = read_model(&r, s->m, err, err_sz);
    if (st == SIM_OK)
        st = read_small(&r, s->m, &sn, err, err_sz);
    if (st == SIM_OK)
        st = check_arrays(&r, s->m->n, sn.ngrab, err, err_sz);
    if (st != SIM_OK)
        return st;
    commit(s, &r, &sn);
    return SIM_OK;
}
