/* cloth_snapshot.c: the cloth scene's changing state as bytes (sim_cloth_scene_save and
 * sim_cloth_scene_restore, cloth.h), for the server's session snapshots and recordings.
 *
 * What is written is everything a later frame reads: the frame counter, the camera, the
 * parameters, the events queued for the next step, and per character its motion, its time
 * in it and its pose, the forced LOD and the hold counter, the garment shown (LOD, x, v and
 * the per-particle inverse mass), the source garment and the blend counter while blending
 * after a switch, the hand (vertex and point), the acceleration history and the last
 * frame's velocities, the last switch's record and its watch. What is not: the model and
 * the backend (the scene is built again from the same ones), the thread count (results do
 * not depend on it), and each garment's xp and lambda, which every substep (and the
 * settle) writes before it reads them.
 *
 * Restore reads the whole snapshot into fresh garments first, checking every count against
 * the scene and its model (characters, LODs, particles per LOD), every index against its
 * range and the parameters as an event's would be; only then does it put them in, so a
 * snapshot it refuses leaves the scene as it was. */
#include <stdarg.h>
#include <string.h>

#include "../core/sc_blob.h"
#include "cloth_internal.h"

#define SNAP_TAG     "CLTH"
#define SNAP_VERSION 1u

/* ------------------------------------------------------------------ save */

static void put_i32(sc_blob *b, int v)
{
    int32_t x = (int32_t)v;
    SC_PUT(b, x);
}

static void put_garment(sc_blob *b, const cloth_garment *g)
{
    put_i32(b, g->lod);
    put_i32(b, g->n);
    sc_blob_put(b, g->x, (size_t)g->n * 3 * sizeof(float));
    sc_blob_put(b, g->v, (size_t)g->n * 3 * sizeof(float));
    sc_blob_put(b, g->w, (size_t)g->n * sizeof(float));
}

static void put_event(sc_blob *b, const sim_cloth_event *e)
{
    put_i32(b, (int)e->type);
    put_i32(b, e->character);
    put_i32(b, e->lod);
    put_i32(b, e->vertex);
    put_i32(b, (int)e->motion);
    sc_blob_put(b, e->point, sizeof e->point);
    SC_PUT(b, e->params);
}

static void put_character(sc_blob *b, const cloth_character *c)
{
    put_i32(b, (int)c->motion);
    SC_PUT(b, c->t);
    SC_PUT(b, c->pose);
    put_i32(b, c->forced_lod);
    put_i32(b, c->hold);
    put_garment(b, &c->g);
    put_i32(b, c->blend);
    if (c->blend)
        put_garment(b, &c->src);
    put_i32(b, c->grab_vertex);
    sc_blob_put(b, c->grab_point, sizeof c->grab_point);
    sc_blob_put(b, c->accel, sizeof c->accel);
    sc_blob_put(b, c->v_last, (size_t)c->g.n * 3 * sizeof(float));
    put_i32(b, c->has_switch);
    SC_PUT(b, c->last);
    SC_PUT(b, c->accel_base);
    put_i32(b, c->watching);
}

sim_status sim_cloth_scene_save(sim_cloth_scene *s, sc_blob *out, char *err, size_t err_sz)
{
    sc_blob_tag(out, SNAP_TAG, SNAP_VERSION);
    /* The sizes first, so that a snapshot of another crowd or model is refused by them. */
    put_i32(out, s->nchar);
    put_i32(out, s->m->nlod);
    for (int k = 0; k < s->m->nlod; k++)
        put_i32(out, s->m->lod[k].n);
    put_i32(out, (int)sizeof(sim_cloth_params));
    SC_PUT(out, s->frame);
    sc_blob_put(out, s->camera, sizeof s->camera);
    SC_PUT(out, s->prm);
    put_i32(out, s->qcount);
    for (int i = 0; i < s->qcount; i++)
        put_event(out, &s->queue[i]);
    for (int i = 0; i < s->nchar; i++)
        put_character(out, &s->ch[i]);
    if (out->failed)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cloth snapshot: out of memory");
    return SIM_OK;
}

/* ------------------------------------------------------------------ restore */

/* What restore has read, not yet put in. */
typedef struct snap_in {
    sc_reader r;
    const sim_cloth_scene *s;
    int nomem;
    uint64_t frame;
    float camera[3];
    sim_cloth_params prm;
    int qcount;
    sim_cloth_event *queue; /* (qcount) */
    cloth_character *ch;    /* (s->nchar), each with its own garments */
} snap_in;

/* The first reason wins; the reader reads zeros from then on. */
static void refuse(snap_in *in, const char *fmt, ...) SC_PRINTF(2, 3);
static void refuse(snap_in *in, const char *fmt, ...)
{
    if (in->r.failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(in->r.why, sizeof in->r.why, fmt, ap);
    va_end(ap);
    in->r.failed = 1;
}

static int get_i32(snap_in *in)
{
    int32_t x;
    SC_GET(&in->r, x);
    return (int)x;
}

/* An int in [lo, hi] (lo once anything failed). */
static int get_in(snap_in *in, const char *what, int ch, int lo, int hi)
{
    int v = get_i32(in);
    if (!in->r.failed && (v < lo || v > hi))
        refuse(in, "character %d: %s %d, not in %d to %d", ch, what, v, lo, hi);
    return in->r.failed ? lo : v;
}

static void *get_alloc(snap_in *in, size_t n, size_t size)
{
    void *p = in->r.failed ? NULL : sc_calloc(n, size);
    if (!p && !in->r.failed) {
        in->nomem = 1;
        refuse(in, "out of memory");
    }
    return p;
}

static void get_garment(snap_in *in, int ch, cloth_garment *g)
{
    const sim_cloth_model *m = in->s->m;
    int lod = get_in(in, "LOD", ch, 0, m->nlod - 1), n = get_i32(in);
    if (!in->r.failed && n != m->lod[lod].n)
        refuse(in, "character %d: %d particles at LOD %d, the model's has %d", ch, n, lod,
               m->lod[lod].n);
    if (in->r.failed)
        return;
    if (cloth_garment_alloc(m, lod, g) != 0) {
        in->nomem = 1;
        refuse(in, "out of memory");
        return;
    }
    sc_reader_get(&in->r, g->x, (size_t)n * 3 * sizeof(float));
    sc_reader_get(&in->r, g->v, (size_t)n * 3 * sizeof(float));
    sc_reader_get(&in->r, g->w, (size_t)n * sizeof(float));
}

static void get_character(snap_in *in, int i, cloth_character *c)
{
    sc_reader *r = &in->r;
    int nlod = in->s->m->nlod;
    c->motion = (sim_motion)get_in(in, "motion", i, 0, SIM_NMOTION - 1);
    SC_GET(r, c->t);
    SC_GET(r, c->pose);
    c->forced_lod = get_in(in, "forced LOD", i, -1, nlod - 1);
    c->hold = get_in(in, "hold", i, 0, INT32_MAX);
    get_garment(in, i, &c->g);
    c->blend = get_in(in, "blend", i, 0, INT32_MAX);
    if (c->blend)
        get_garment(in, i, &c->src);
    c->grab_vertex = get_in(in, "held vertex", i, -1, c->g.n - 1);
    sc_reader_get(r, c->grab_point, sizeof c->grab_point);
    sc_reader_get(r, c->accel, sizeof c->accel);
    c->v_last = get_alloc(in, (size_t)c->g.n * 3, sizeof(float));
    if (c->v_last)
        sc_reader_get(r, c->v_last, (size_t)c->g.n * 3 * sizeof(float));
    c->has_switch = get_in(in, "has_switch", i, 0, 1);
    SC_GET(r, c->last);
    SC_GET(r, c->accel_base);
    c->watching = get_in(in, "watching", i, 0, CLOTH_SETTLE_CAP);
}

/* The sizes against this scene's, then the scene's own fields and the queue. */
static void get_scene(snap_in *in)
{
    const sim_cloth_scene *s = in->s;
    int nchar = get_i32(in), nlod = get_i32(in);
    if (!in->r.failed && nchar != s->nchar)
        refuse(in, "a snapshot of %d characters, the scene has %d", nchar, s->nchar);
    if (!in->r.failed && nlod != s->m->nlod)
        refuse(in, "a snapshot of %d LODs, the model has %d", nlod, s->m->nlod);
    for (int k = 0; !in->r.failed && k < nlod; k++) {
        int n = get_i32(in);
        if (!in->r.failed && n != s->m->lod[k].n)
            refuse(in, "LOD %d: %d particles in the snapshot, %d in the model", k, n,
                   s->m->lod[k].n);
    }
    int psize = get_i32(in);
    if (!in->r.failed && psize != (int)sizeof(sim_cloth_params))
        refuse(in, "parameters of %d bytes, these are %d", psize, (int)sizeof(sim_cloth_params));
    SC_GET(&in->r, in->frame);
    sc_reader_get(&in->r, in->camera, sizeof in->camera);
    SC_GET(&in->r, in->prm);
    char why[200];
    if (!in->r.failed && sim_cloth_params_validate(&in->prm, why, sizeof why) != SIM_OK)
        refuse(in, "%s", why);
    in->qcount = get_i32(in);
    if (!in->r.failed && (in->qcount < 0 || in->qcount > CLOTH_QUEUE_CAP))
        refuse(in, "%d queued events, at most %d", in->qcount, CLOTH_QUEUE_CAP);
    if (in->qcount > 0)
        in->queue = get_alloc(in, (size_t)in->qcount, sizeof *in->queue);
    for (int i = 0; !in->r.failed && i < in->qcount; i++) {
        sim_cloth_event *e = &in->queue[i];
        int type = get_i32(in), known = type >= 0 && type <= (int)SIM_CLOTH_EV_SET_PARAMS;
        e->type = (sim_cloth_event_type)(known ? type : 0);
        e->character = get_i32(in), e->lod = get_i32(in), e->vertex = get_i32(in);
        e->motion = (sim_motion)get_i32(in);
        sc_reader_get(&in->r, e->point, sizeof e->point);
        SC_GET(&in->r, e->params);
        if (!in->r.failed && (!known || cloth_check_event(s, e, why, sizeof why) != SIM_OK))
            refuse(in, "queued event %d: %s", i, known ? why : "of no known type");
    }
}

static void free_characters(cloth_character *ch, int n)
{
    for (int i = 0; ch && i < n; i++) {
        cloth_garment_free(&ch[i].g);
        cloth_garment_free(&ch[i].src);
        free(ch[i].v_last);
    }
    free(ch);
}

sim_status sim_cloth_scene_restore(sim_cloth_scene *s, const void *data, size_t n, char *err,
                                   size_t err_sz)
{
    snap_in in;
    memset(&in, 0, sizeof in);
    in.r = sc_reader_of(data, n);
    in.s = s;
    sc_reader_tag(&in.r, SNAP_TAG, SNAP_VERSION);
    get_scene(&in);
    if (in.qcount > 0 && !s->queue && !in.r.failed)
        s->queue = get_alloc(&in, CLOTH_QUEUE_CAP, sizeof *s->queue); /* empty: no change */
    in.ch = get_alloc(&in, (size_t)s->nchar, sizeof *in.ch);
    for (int i = 0; !in.r.failed && i < s->nchar; i++)
        get_character(&in, i, &in.ch[i]);
    if (!in.r.failed && in.r.at != in.r.n)
        refuse(&in, "%zu bytes left after the state", in.r.n - in.r.at);
    if (in.r.failed) {
        free_characters(in.ch, s->nchar);
        free(in.queue);
        return (sim_status)sc_fail(err, err_sz, in.nomem ? SIM_ERR_NOMEM : SIM_ERR_FORMAT,
                                   "cloth snapshot: %s", in.r.why);
    }
    /* All read and checked: put it in. */
    for (int i = 0; i < s->nchar; i++) {
        cloth_character *c = &s->ch[i];
        cloth_garment_free(&c->g);
        cloth_garment_free(&c->src);
        free(c->v_last);
        *c = in.ch[i];
    }
    free(in.ch);
    s->frame = in.frame;
    memcpy(s->camera, in.camera, sizeof s->camera);
    s->prm = in.prm;
    s->qcount = in.qcount;
    if (in.qcount > 0)
        memcpy(s->queue, in.queue, (size_t)in.qcount * sizeof *s->queue);
    free(in.queue);
    return SIM_OK;
}
