/* volume_snapshot.c: a volume state as bytes and back (sim_volume_state_save/_restore),
 * for the server's session snapshots and recordings. What is saved is everything a later
 * frame reads: positions, velocities, the element flags (class and grab bit), the block
 * flags, ages and displacements that decide which blocks relaxation and the velocity layer
 * visit, the grab and the probe, the parameters, the counters and the last metrics (a
 * settled frame repeats them). What is not saved is per-frame scratch that every frame
 * starts afresh (the wave's lists and arrival times, X- which equals X between frames). */
#include <string.h>

#include "volume_internal.h"

#define VOL_SNAP_VERSION 2u

sim_status sim_volume_state_save(sim_volume_state *s, sc_blob *out, char *err, size_t err_sz)
{
    if (s->qcount > 0)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "snapshot: %d events wait for the next step", s->qcount);
    if (!s->host_valid) {
        sim_status st = s->impl->download(s, err, err_sz);
        if (st != SIM_OK)
            return st;
    }
    size_t n = (size_t)s->nelem, nb = (size_t)s->nblocks;
    int32_t dims[3] = {s->m->vol.nx, s->m->vol.ny, s->m->vol.nz};
    int32_t nheld = s->ngrab > s->nprobe ? s->ngrab : s->nprobe;
    sc_blob_tag(out, "VOLS", VOL_SNAP_VERSION);
    SC_PUT(out, dims);
    SC_PUT(out, s->params);
    SC_PUT(out, s->frame);
    SC_PUT(out, s->last_seq);
    SC_PUT(out, s->guard_resets);
    SC_PUT(out, s->settled);
    SC_PUT(out, s->last);
    /* The grab (its first nprobe elements stay the probe after a release). */
    SC_PUT(out, s->ngrab);
    SC_PUT(out, s->nprobe);
    sc_blob_put(out, s->grab_idx, (size_t)nheld * sizeof *s->grab_idx);
    sc_blob_put(out, s->grab_start, (size_t)nheld * 3 * sizeof *s->grab_start);
    SC_PUT(out, s->grab_anchor);
    SC_PUT(out, s->grab_off_lo);
    SC_PUT(out, s->grab_off_hi);
    SC_PUT(out, s->probe_rest);
    SC_PUT(out, s->probe_prev);
    SC_PUT(out, s->probe_pull);
    sc_blob_put(out, s->pos, n * 3 * sizeof(float));
    sc_blob_put(out, s->vel, n * 3 * sizeof(float));
    sc_blob_put(out, s->flags, n);
    sc_blob_put(out, s->blk_flags, nb * sizeof *s->blk_flags);
    sc_blob_put(out, s->blk_maxdisp, nb * sizeof(float));
    if (out->failed)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "snapshot: out of memory");
    return SIM_OK;
}

/* Read the header and the grab into s, checking them against the state's model. */
static sim_status read_head(sim_volume_state *s, sc_reader *r, char *err, size_t err_sz)
{
    int32_t dims[3], ngrab, nprobe;
    sc_reader_tag(r, "VOLS", VOL_SNAP_VERSION);
    SC_GET(r, dims);
    if (!r->failed &&
        (dims[0] != s->m->vol.nx || dims[1] != s->m->vol.ny || dims[2] != s->m->vol.nz))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                   "a %dx%dx%d volume's state, for a %dx%dx%d volume", dims[0],
                                   dims[1], dims[2], s->m->vol.nx, s->m->vol.ny, s->m->vol.nz);
    SC_GET(r, s->params);
    SC_GET(r, s->frame);
    SC_GET(r, s->last_seq);
    SC_GET(r, s->guard_resets);
    SC_GET(r, s->settled);
    SC_GET(r, s->last);
    SC_GET(r, ngrab);
    SC_GET(r, nprobe);
    int32_t nheld = ngrab > nprobe ? ngrab : nprobe;
    if (!r->failed && (ngrab < 0 || nprobe < 0 || nheld > VOL_MAX_GRAB))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                   "snapshot: a grab of %d elements (at most %d)", nheld,
                                   VOL_MAX_GRAB);
    s->ngrab = ngrab;
    s->nprobe = nprobe;
    sc_reader_get(r, s->grab_idx, (size_t)nheld * sizeof *s->grab_idx);
    sc_reader_get(r, s->grab_start, (size_t)nheld * 3 * sizeof *s->grab_start);
    for (int32_t k = 0; k < nheld && !r->failed; k++)
        if (s->grab_idx[k] >= (uint64_t)s->nelem)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "snapshot: grabbed element %u outside the volume",
                                       s->grab_idx[k]);
    SC_GET(r, s->grab_anchor);
    SC_GET(r, s->grab_off_lo);
    SC_GET(r, s->grab_off_hi);
    SC_GET(r, s->probe_rest);
    SC_GET(r, s->probe_prev);
    SC_GET(r, s->probe_pull);
    return SIM_OK;
}

sim_status sim_volume_state_restore(sim_volume_state *s, const void *data, size_t len, char *err,
                                    size_t err_sz)
{
    size_t n = (size_t)s->nelem, nb = (size_t)s->nblocks;
    sc_reader r = sc_reader_of(data, len);
    sim_status st = read_head(s, &r, err, err_sz);
    if (st == SIM_OK) {
        sc_reader_get(&r, s->pos, n * 3 * sizeof(float));
        sc_reader_get(&r, s->vel, n * 3 * sizeof(float));
        sc_reader_get(&r, s->flags, n);
        sc_reader_get(&r, s->blk_flags, nb * sizeof *s->blk_flags);
        sc_reader_get(&r, s->blk_maxdisp, nb * sizeof(float));
        if (!r.failed && r.at != r.n)
            snprintf(r.why, sizeof r.why, "%zu bytes past its end", r.n - r.at), r.failed = 1;
        if (r.failed)
            st = (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT, "snapshot: %s", r.why);
    }
    if (st == SIM_OK)
        st = sim_volume_params_validate(&s->params, err, err_sz);
    if (st != SIM_OK) {
        /* Whatever was read is undone: the state goes back to its start. */
        s->params = sim_default_volume_params();
        s->frame = 0, s->last_seq = 0, s->guard_resets = 0;
        memset(&s->last, 0, sizeof s->last);
        memset(s->flags, 0, n);
        s->ngrab = s->nprobe = 0;
        vol_state_reset(s);
        return st;
    }
    vol_pack_kparams(&s->kp, &s->params, &s->m->vol);
    s->kp.rigid_free = s->ngrab == 0;
    memset(s->class_count, 0, sizeof s->class_count);
    for (int64_t i = 0; i < s->nelem; i++)
        s->class_count[s->flags[i] & CM_CLASS_MASK]++;
    vol_block_classes(s);
    memcpy(s->pos_prev, s->pos, n * 3 * sizeof(float));
    for (size_t i = 0; i < n; i++)
        s->t_reach[i] = CM_UNREACHED;
    s->ncand = s->nreached = 0;
    s->clock = 0.0f;
    s->grab_moved = s->grab_clamped = 0;
    s->host_valid = 1;
    vol_stamp_all(s);
    vol_blocks_from_state(s);
    vol_list_active(s);
    return s->impl->upload_all(s, err, err_sz);
}
