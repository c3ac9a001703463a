/* sched.c: the simulation workers. They share every session, each at its own beat: a worker
 * takes a due session that no other worker steps (a light one first, then the most overdue;
 * while every worker is on a heavy step, the express worker takes the short light ones),
 * takes what applies now from the session's inbox and applies it straight to the scene (the frame
 * boundary: the inbox is the only queue), steps the scene (scene.h), encodes one object frame for
 * all its clients (the encoder keys, appends, moves and holds each object; a snapshot when a client
 * needs one) and publishes it, then tells the WebSocket thread (srv_session_news). A session with
 * no clients sleeps; a settled scene costs nothing and sends nothing until an event. Runs on the
 * worker threads; other threads only poke them (srv_worker_poke). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "scene.h"

typedef struct worker {
    srv *s;
    int index;
    int express; /* the express worker (below) */
    pthread_t thread;
    /* One take from a session's inbox and its viewers' queries (the worker's own: nothing
     * big on its stack). */
    _Alignas(8) unsigned char batch[SRV_INBOX_BYTES +
                                    SRV_QUERIES_PER_FRAME * SRV_ITEM_BYTES(SRV_QUERY_BYTES)];
    struct frame_job *jobs; /* SRV_STEP_BATCH_MAX: the frames of the group it steps */
} worker;

/* The express worker, beside the --workers ones: while every worker is stepping a session
 * that is not light, it steps the due light sessions whose frames measured short
 * (EXPRESS_COST of a period at most), one at a time. A step is not preempted, so without it a
 * light session waited for a heavy step to end (a cloth crowd's: 100 ms and more); with it the
 * cores are shared with the heavy steps for the length of a short one (the operating system's
 * time slices do the preempting). It steps nothing while a worker may take the light
 * sessions. Its pick rests on past cost: a light session whose next step is long (a sudden
 * big drag) holds it as a heavy step holds a worker. Off by default where the workers batch
 * (srv_express_worker_on). */
#define EXPRESS_COST 0.25

/* The workers share every session: each takes a due session that no other worker is
 * stepping (pick_session). A session whose step is heavy holds one worker while the others keep
 * its neighbours' beats; with static slot-to-worker shares, as before, it stalled every
 * session that shared its worker. Lock order: sched.lock, then srv.lock, then a session's
 * lock; nobody takes sched.lock holding either of the others. */
typedef struct sched {
    int n;  /* workers (--workers) */
    int nw; /* threads: the workers and the express worker */
    worker *w;
    pthread_mutex_t lock; /* guards pokes and every session's stepping flag */
    pthread_cond_t cond;  /* CLOCK_MONOTONIC; a poke, or every worker busy with a heavy step */
    /* Pokes so far: a worker sleeps only while no poke came since it last looked at the
     * sessions. A count, not a flag that the first worker awake clears: with a flag, two
     * events for two sessions woke one of two idle workers, and the other session waited
     * for a step of the first or for its own beat. */
    unsigned long pokes;
    int heavy_busy;    /* workers stepping a session that is not light (is_light) now */
    int express_poked; /* every worker became busy with one: the express worker looks */
    atomic_int live;   /* ready sessions with clients or events, at the last look */
    int batch_max;     /* sessions a worker steps together at most (--step-batch resolved) */
} sched;

/* CPU threads a step may use now: the cores shared among the sessions that step at once
 * (at most one per worker). Counted per pass rather than per step, so two steps never both
 * take all the cores for a moment. */
static int step_threads(srv *s)
{
    if (s->cfg.threads)
        return s->cfg.threads;
    sched *sc = s->sched;
    int busy = atomic_load(&sc->live);
    busy = busy < 1 ? 1 : busy > sc->n ? sc->n : busy;
    int share = sim_backend_threads(s->backend) / busy;
    return share > 0 ? share : 1;
}

/* ------------------------------------------------- what a scene is handed */

typedef struct wctx {
    srv_scene_ctx pub;
    srv *s;
    srv_session *ss;
} wctx;

static void ctx_reply_text(srv_scene_ctx *c, uint32_t client, const char *text)
{
    srv_session_reply(((wctx *)c)->ss, client, NULL, text);
}

static void ctx_reply_frame(srv_scene_ctx *c, uint32_t client, const uint8_t *bytes, size_t len)
{
    srv_frame *f = srv_frame_new(bytes, len, c->frame, 0);
    if (f)
        srv_session_reply(((wctx *)c)->ss, client, f, NULL);
}

static void ctx_error(srv_scene_ctx *c, uint32_t client, uint32_t seq, const char *error,
                      const char *detail)
{
    wctx *w = (wctx *)c;
    srv_session_error(w->s, w->ss, client, seq, error, detail);
}

static void ctx_init(wctx *c, srv *s, srv_session *ss, uint32_t driver)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->ss = ss;
    c->pub.backend = s->backend;
    c->pub.threads = step_threads(s);
    c->pub.frame = ss->frame_no;
    c->pub.sim_time_s = (double)ss->frame_no / s->cfg.rate_hz;
    c->pub.driver = driver;
    c->pub.session_id = ss->id;
    c->pub.reply_text = ctx_reply_text;
    c->pub.reply_frame = ctx_reply_frame;
    c->pub.error = ctx_error;
}

/* ---------------------------------------------------------------- a frame */

typedef struct taken {
    int n;             /* items applied */
    uint32_t last_seq; /* of the last that frames echo */
    int driven;        /* any such */
    double oldest_ms;  /* arrival of the first */
    int state_changed; /* pause or resume */
} taken;

/* Apply one take, in order: pause and resume are the session's, the rest its scene's.
 * Frames echo the seq of the driver's last applied event (its input-to-frame latency);
 * queries are answered to their asker in their own frame, and viewers may send them: their
 * seqs, counted by another client, stay out of the echo. */
static void apply_taken(wctx *c, const unsigned char *b, int n, taken *t)
{
    srv_session *ss = c->ss;
    memset(t, 0, sizeof *t);
    t->n = n;
    for (int i = 0; i < n; i++) {
        srv_item h;
        memcpy(&h, b, sizeof h);
        srv_record_note(ss, &h, b + sizeof h);
        if (h.kind == SRV_ITEM_PAUSE || h.kind == SRV_ITEM_RESUME) {
            pthread_mutex_lock(&ss->lock);
            ss->paused = h.kind == SRV_ITEM_PAUSE;
            pthread_mutex_unlock(&ss->lock);
            t->state_changed = 1;
        } else if (h.kind == SRV_ITEM_RECORD_START) {
            srv_record_start(c->s, ss, &c->pub, h.client, h.seq);
        } else if (h.kind == SRV_ITEM_RECORD_STOP) {
            srv_record_stop(c->s, ss, &c->pub, h.client, h.seq);
        } else if (h.kind == SRV_ITEM_SEEK) {
            srv_replay_seek(c->s, ss, &c->pub, &h, b + sizeof h);
            t->state_changed = 1;
        } else {
            srv_event ev = {h.client, h.seq, b + sizeof h, h.size};
            const srv_event_desc *d = &ss->scene->events[h.kind - SRV_ITEM_SCENE];
            d->apply(&c->pub, ss->scene_data, &ev);
        }
        srv_durable_record(ss, &h, b + sizeof h); /* replayed after a restart (durable.c) */
        if (!(h.flags & SRV_EV_QUERY)) {
            t->last_seq = h.seq;
            t->driven = 1;
        }
        if (i == 0)
            t->oldest_ms = h.arrived_ms;
        b += SRV_ITEM_BYTES(h.size);
    }
    if (srv_record_full(ss)) /* no room for more: it ends here, and says so */
        srv_record_stop(c->s, ss, &c->pub, c->pub.driver, 0);
}

/* A frame as the session's clients see it: the encoder's header flags say whether it is
 * structural (every client must apply it) or a snapshot (where clients start). */
static srv_frame *frame_of(const proto_buf *b, uint64_t frame, const proto_frame_stats *fs)
{
    return srv_frame_new(b->data, b->len, frame, fs->flags);
}

/* Encode the view's objects and publish the frame (encode: the scene moved or something was
 * asked of it), then, when a client waits for one, a snapshot of the state after it. The
 * encoder chooses per object what the frame carries; a frame that cannot be published
 * resets it, so the next frame keys everything and every client takes it. */
static void encode_and_publish(srv *s, srv_session *ss, int encode, int snapshot, uint32_t last_seq)
{
    double t0 = srv_now_ms();
    proto_header h;
    memset(&h, 0, sizeof h);
    h.frame = ss->frame_no;
    h.last_seq = last_seq;
    h.sim_time_s = (double)ss->frame_no / s->cfg.rate_hz;
    proto_buf *b = &ss->enc_buf; /* one stepper at a time: the worker's while it steps */
    proto_frame_stats fs;
    if (encode || !ss->encoded_any) {
        srv_view view;
        srv_view_budget budget = {ss->frame_bytes,
                                  s->cfg.view_budget_kib * 1024.0 / s->cfg.rate_hz};
        ss->scene->view(ss->scene_data, ss->frame_no, &budget, &view);
        srv_frame *f = NULL;
        b->len = 0;
        if (proto_encode_frame2(ss->enc, b, &h, view.obj, view.n, &fs) == PROTO_OK)
            f = frame_of(b, ss->frame_no, &fs);
        if (!f) { /* the next beat encodes afresh: a snapshot every client takes */
            proto_encoder_reset(ss->enc);
            ss->encoded_any = 0;
            snapshot = 0;
        } else {
            /* About the last 30 frames: long enough to see past one key, short enough to
             * follow a crowd that starts to run. */
            ss->frame_bytes += (b->len - ss->frame_bytes) / 30.0;
            ss->encoded_any = 1;
            srv_session_publish(ss, f);
            snapshot &= !(fs.flags & PROTO_FLAG_SNAPSHOT); /* this frame is one */
        }
    }
    if (snapshot && ss->encoded_any) {
        srv_frame *f = NULL;
        b->len = 0;
        if (proto_encode_snapshot(ss->enc, b, &h, &fs) == PROTO_OK)
            f = frame_of(b, ss->frame_no, &fs);
        if (f)
            srv_session_publish_snapshot(ss, f);
    }
    pthread_mutex_lock(&ss->lock);
    ss->last_encode_ms = srv_now_ms() - t0;
    ss->encode_ms_sum += ss->last_encode_ms;
    ss->encodes++;
    pthread_mutex_unlock(&ss->lock);
}

/* Every client hears of new parameters in a state message, once a step has applied them
 * (a paused session holds them until it resumes). Returns 1 when a state message is due. */
static int publish_state(srv_session *ss, int params_changed, int state_changed, int paused)
{
    ss->params_dirty |= params_changed;
    char *pj = NULL;
    if (ss->params_dirty && !paused) {
        pj = ss->scene->params_json(ss->scene_data);
        ss->params_dirty = 0;
    }
    if (!pj && !state_changed)
        return 0;
    pthread_mutex_lock(&ss->lock);
    if (pj) {
        free(ss->params_json);
        ss->params_json = pj;
    }
    ss->state_version++;
    pthread_mutex_unlock(&ss->lock);
    return 1;
}

static void count_frame(srv_session *ss, double step_ms, const taken *t, int batched)
{
    pthread_mutex_lock(&ss->lock);
    ss->frames++;
    ss->batched_steps += (uint64_t)batched;
    ss->last_step_ms = step_ms;
    ss->step_ms_sum += step_ms;
    if (t->n) {
        ss->latency_ms_sum += srv_now_ms() - t->oldest_ms;
        ss->latency_n++;
    }
    pthread_mutex_unlock(&ss->lock);
}

/* One session's frame as the worker takes it through its three parts (frame_begin,
 * frame_step or a batch's step_many, frame_end). The wctx stays put while its scene may call
 * back through it. */
typedef struct frame_job {
    srv_session *ss;
    wctx c;
    taken t;
    int n, want_snapshot, paused, moved, ended, batched;
    uint32_t last_seq;
    double step_ms;
} frame_job;

/* A frame's first part: take what applies now from the inbox and apply it. Returns 0 when
 * nobody watches and nothing came: the session sleeps (no step, no frame). */
static int frame_begin(srv *s, worker *wk, frame_job *j)
{
    srv_session *ss = j->ss;
    pthread_mutex_lock(&ss->lock);
    size_t bytes = srv_inbox_take(&ss->inbox, ss->paused, wk->batch, &j->n);
    /* Then the viewers' queries, a few a frame (they change nothing: after the driver's). */
    j->n += srv_session_take_queries(ss, wk->batch + bytes, SRV_QUERIES_PER_FRAME);
    int nclients = ss->nclients;
    j->want_snapshot = ss->want_snapshot;
    uint32_t driver = ss->driver;
    ss->want_snapshot = 0;
    pthread_mutex_unlock(&ss->lock);
    if (nclients == 0 && j->n == 0) {
        srv_durable_commit(s, ss); /* its last events reach the disk on time all the same */
        return 0;                  /* nobody watches: the session sleeps */
    }
    ctx_init(&j->c, s, ss, driver);
    /* Beside the workers' heavy steps, which have the cores: its own thread only (its light
     * sessions are small; more threads would take the cores from the heavy steps for longer). */
    if (wk->express)
        j->c.pub.threads = 1;
    apply_taken(&j->c, wk->batch, j->n, &j->t);
    /* In the log before any frame that acknowledges them goes out. */
    srv_durable_commit(s, ss);
    pthread_mutex_lock(&ss->lock);
    if (j->t.driven)
        ss->last_seq = j->t.last_seq;
    j->last_seq = ss->last_seq;
    j->paused = ss->paused;
    pthread_mutex_unlock(&ss->lock);
    return 1;
}

/* Whether the job's step may join a batch (scene step_many): a live, running session. */
static int frame_batches(const frame_job *j)
{
    return !j->ss->replay && !j->paused && j->ss->scene->step_many;
}

static void frame_step(srv *s, frame_job *j)
{
    srv_session *ss = j->ss;
    if (ss->replay) { /* its frames are the recording's: numbered, applied and stepped there */
        j->moved = srv_replay_frame(s, ss, &j->c.pub, j->paused, &j->step_ms, &j->ended);
    } else {
        j->moved = !j->paused && ss->scene->step(&j->c.pub, ss->scene_data, &j->step_ms);
        ss->frame_no++;
    }
}

/* A frame's last part: state, encoding and publication. Returns 1 when its clients have news. */
static int frame_end(srv *s, frame_job *j)
{
    srv_session *ss = j->ss;
    srv_durable_after_step(s, ss);
    int news =
        publish_state(ss, j->c.pub.params_changed, j->t.state_changed || j->ended, j->paused);
    /* A paused session sends nothing new (its events wait in the inbox for resume); a
     * joiner still gets its snapshot. A settled scene encodes nothing: the encoder keys
     * objects itself (new, re-shaped, or a delta costlier than a key; --keyframe-every as
     * a backstop), so no frame ever keys every object for every viewer at once but a
     * snapshot, which only the clients that need one get. */
    /* A query (a slice) changes nothing: answered by its reply, it makes no frame. (It once
     * did: the frame's new number sent the page's slice view asking again, each answer making
     * the next frame, so a session that had come to rest never said so.) */
    int changed = j->moved || (j->t.driven && !j->paused);
    if (changed || j->want_snapshot || !ss->encoded_any)
        encode_and_publish(s, ss, changed, j->want_snapshot, j->last_seq);
    count_frame(ss, j->step_ms, &j->t, j->batched);
    pthread_mutex_lock(&ss->lock);
    /* At rest: nothing changed, no event came while this frame ran (one pushed since the take
     * waits in the inbox; a paused session's held ones wait for resume), and the scene has
     * nothing of its own to come (a paused one steps nothing whatever it has). */
    ss->at_rest = !changed && ss->inbox.count == ss->inbox.held &&
                  (j->paused || !ss->scene->at_rest || ss->scene->at_rest(ss->scene_data));
    int replies = ss->nmail;
    pthread_mutex_unlock(&ss->lock);
    return changed || j->want_snapshot || replies || news;
}

/* One frame of each session of the group (n of them, all of one scene when n > 1): those that
 * may, stepped together by the scene's step_many, the others alone. news[k]: session k's
 * clients have news; awake[k]: it stepped (not asleep, nobody watching); own_ms[k]: what its
 * frame held the worker (wall time, its writes to the disk and its helper threads' time
 * included): its own parts, and of a batch's step its share by what the backend measured
 * of each. A session is charged its own frame, not the batch's: charged the batch's, a
 * light session batched once with heavy ones looked heavy from then on, and was batched with
 * them (waiting for their steps) for good. Returns how many stepped. */
static int run_sessions(srv *s, worker *wk, srv_session **group, int n, int *news, int *awake,
                        double *own_ms)
{
    frame_job *jobs = wk->jobs;
    srv_scene_ctx *ctx[SRV_STEP_BATCH_MAX];
    void *scenes[SRV_STEP_BATCH_MAX];
    int changed[SRV_STEP_BATCH_MAX], which[SRV_STEP_BATCH_MAX], nawake = 0;
    double ms[SRV_STEP_BATCH_MAX];
    int m = 0;
    for (int k = 0; k < n; k++) {
        double t0 = srv_now_ms();
        memset(&jobs[k], 0, sizeof jobs[k]);
        jobs[k].ss = group[k];
        awake[k] = frame_begin(s, wk, &jobs[k]);
        if (awake[k]) {
            nawake++;
            if (n > 1 && frame_batches(&jobs[k])) {
                ctx[m] = &jobs[k].c.pub;
                scenes[m] = group[k]->scene_data;
                which[m++] = k;
            } else {
                frame_step(s, &jobs[k]);
            }
        }
        own_ms[k] = srv_now_ms() - t0;
    }
    if (m > 0) {
        double t0 = srv_now_ms(), measured = 0;
        group[which[0]]->scene->step_many(ctx, scenes, m, changed, ms);
        double held = srv_now_ms() - t0;
        for (int r = 0; r < m; r++)
            measured += ms[r] > 0 ? ms[r] : 0;
        for (int r = 0; r < m; r++) /* by the backend's measures; alike where it has none */
            own_ms[which[r]] += measured > 0 ? held * (ms[r] > 0 ? ms[r] : 0) / measured : held / m;
    }
    if (m > 1) {
        atomic_fetch_add(&s->batched_steps, (unsigned long long)m);
        atomic_fetch_add(&s->step_batches, 1ull);
    }
    for (int r = 0; r < m; r++) {
        frame_job *j = &jobs[which[r]];
        j->moved = changed[r];
        j->step_ms = ms[r];
        j->batched = m > 1;
        j->ss->frame_no++;
    }
    for (int k = 0; k < n; k++) {
        double t0 = srv_now_ms();
        news[k] = awake[k] && frame_end(s, &jobs[k]);
        own_ms[k] += srv_now_ms() - t0;
    }
    return nawake;
}

void srv_worker_poke(srv *s, uint32_t slot)
{
    (void)slot; /* any worker may step any session */
    sched *sc = s->sched;
    if (!sc || sc->n <= 0)
        return;
    pthread_mutex_lock(&sc->lock);
    sc->pokes++;
    pthread_cond_broadcast(&sc->cond);
    pthread_mutex_unlock(&sc->lock);
}

/* The absolute monotonic time `ms` as pthread_cond_timedwait takes it. */
static struct timespec abs_time(double ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)(fmod(ms, 1000.0) * 1e6);
    return ts;
}

/* Sleep until the absolute monotonic time `until_ms`, a poke since the worker looked (seen:
 * sc->pokes then), or the stop (sc->lock held). */
static void wait_until(sched *sc, srv *s, double until_ms, unsigned long seen)
{
    struct timespec ts = abs_time(until_ms);
    while (sc->pokes == seen && !atomic_load(&s->stop))
        if (pthread_cond_timedwait(&sc->cond, &sc->lock, &ts) != 0)
            break;
}

/* The express worker's wait (sc->lock held): until `until_ms`, its own poke (every worker
 * became busy with a heavy session) or, while they are, anyone's since it looked. A poke
 * while a worker may take it is that worker's: the express worker leaves it. */
static void wait_express(sched *sc, srv *s, double until_ms, unsigned long seen)
{
    struct timespec ts = abs_time(until_ms);
    while (!sc->express_poked && !(sc->pokes != seen && sc->heavy_busy == sc->n) &&
           !atomic_load(&s->stop))
        if (pthread_cond_timedwait(&sc->cond, &sc->lock, &ts) != 0)
            break;
    sc->express_poked = 0;
}

/* The live session in slot i with a reference held, and whether events wait that apply
 * now; NULL when none, closing or not loaded. */
static srv_session *hold_slot(srv *s, int i, int *pending, int *watched)
{
    pthread_mutex_lock(&s->lock);
    srv_session *ss = s->slots[i];
    int closing = 1;
    *pending = *watched = 0;
    if (ss) {
        pthread_mutex_lock(&ss->lock);
        closing = ss->closing || ss->load_state != SRV_READY; /* nothing to step yet */
        *pending = ss->inbox.count > ss->inbox.held || ss->nquery > 0;
        *watched = ss->nclients > 0;
        pthread_mutex_unlock(&ss->lock);
        if (!closing)
            s->refs[i]++; /* the worker holds it while it steps it */
    }
    pthread_mutex_unlock(&s->lock);
    return closing ? NULL : ss;
}

/* When a session wants its next step: at its beat, or, with events waiting, at once but
 * never sooner than half a period after its last step (input waits for a step, not for the
 * next tick, and the step rate stays bounded). */
static double wants_step_at(const srv_session *ss, int pending, double period)
{
    double early = ss->step_at_ms + 0.5 * period;
    return pending && early < ss->due_ms ? early : ss->due_ms;
}

/* What a turn among the live sessions (at the last look) costs: a frame of each, at this
 * session's cost. */
static double turn_ms(const sched *sc, const srv_session *ss)
{
    int live = atomic_load(&sc->live);
    return ss->frame_cost_ms * (live > 1 ? live : 1);
}

/* Whether a session is light: its frames at the rate it asks for take no more than its share
 * of the workers (a session stepped early for events waiting asks for two frames a beat). */
static int is_light(const sched *sc, const srv_session *ss, double at, double period)
{
    return turn_ms(sc, ss) * (at < ss->due_ms ? 2 : 1) <= sc->n * period;
}

/* Whether a due session goes before the others: a light one; or one that has waited past
 * what its turn among them takes (a session starved by light ones comes first all the same). */
static int goes_first(const sched *sc, const srv_session *ss, double at, double now, double period)
{
    return is_light(sc, ss, at, period) || now - at > turn_ms(sc, ss) + 2 * period;
}

/* Whether the express worker may step a session: a light one whose frames measured short. */
static int express_takes(const sched *sc, const srv_session *ss, double at, double period)
{
    return ss->frame_cost_ms > 0 && ss->frame_cost_ms <= EXPRESS_COST * period &&
           is_light(sc, ss, at, period);
}

/* The session to step now (claimed, a reference held); NULL when none is due, *wake_at then
 * when the first will be (sc->lock held). Of the due sessions nobody steps, one that goes
 * first (goes_first) before the others, and of those alike the most overdue. So a light
 * session beside heavy ones keeps its rate (it waits for a worker, not for each heavy one in
 * turn), and sessions that want more than their share take turns, each one frame, slowing
 * together (their shares in frames, not in time: a volume dragged more often costs less a
 * frame, so shares in time drift apart, the sessions stepped most getting ever cheaper).
 * Live: the ready sessions watched or with events waiting. */
static srv_session *pick_session(srv *s, sched *sc, const worker *wk, double now, double period,
                                 double *wake_at, int *light)
{
    srv_session *pick = NULL;
    double pick_at = 0;
    int pick_first = 0, live = 0;
    *wake_at = now + period;
    for (int i = 0; i < s->cfg.max_sessions; i++) {
        int pending, watched;
        srv_session *ss = hold_slot(s, i, &pending, &watched);
        if (!ss)
            continue;
        live += watched || pending;
        if (ss->stepping) { /* another worker's; its beat is the stepper's to write */
            srv_session_put(s, ss);
            continue;
        }
        double at = wants_step_at(ss, pending, period);
        if (wk->express && !express_takes(sc, ss, at, period)) {
            srv_session_put(s, ss);
            continue;
        }
        int first = at <= now && goes_first(sc, ss, at, now, period);
        if (at <= now && (!pick || first > pick_first || (first == pick_first && at < pick_at))) {
            if (pick)
                srv_session_put(s, pick);
            pick = ss, pick_at = at, pick_first = first;
            continue;
        }
        if (at > now && at < *wake_at)
            *wake_at = at;
        srv_session_put(s, ss);
    }
    atomic_store(&sc->live, live);
    if (pick) {
        pick->stepping = 1;
        *light = is_light(sc, pick, pick_at, period);
    }
    return pick;
}

/* With the picked session (group[0]), the other sessions of its scene due within half a
 * period that nobody steps, claimed, up to sc->batch_max in all: the backend steps them in one
 * batch (on CUDA one set of launches and read-backs for all), and stepping a session a little
 * early lines its beat up with the others'. Light sessions batch with light ones only, heavy
 * with heavy (is_light): a batch's frames end together, so a light session batched with a
 * heavy one would wait for it. Returns the group's size (sc->lock held). */
static int pick_group(srv *s, sched *sc, double now, double period, int light, srv_session **group)
{
    const srv_scene_i *scene = group[0]->scene;
    if (sc->batch_max < 2 || !scene->step_many || group[0]->replay)
        return 1;
    int n = 1;
    for (int i = 0; i < s->cfg.max_sessions && n < sc->batch_max; i++) {
        int pending, watched;
        srv_session *ss = hold_slot(s, i, &pending, &watched);
        if (!ss)
            continue;
        double at = ss->stepping || ss->scene != scene || ss->replay
                        ? now + period /* not to be taken */
                        : wants_step_at(ss, pending, period);
        if (at > now + 0.5 * period || is_light(sc, ss, at, period) != light) {
            srv_session_put(s, ss);
            continue;
        }
        ss->stepping = 1;
        group[n++] = ss;
    }
    return n;
}

/* Every worker steps every session, one at a time each (the stepping flag): a session
 * keeps its own beat at rate_hz; after a step that overran its beat, the beat restarts from
 * now, so an overloaded session drops its own frame rate. A light session goes first, then
 * the most overdue (pick_session), so a busy server slows every heavy session together and
 * a light one keeps its rate. */
static void *worker_main(void *arg)
{
    worker *wk = arg;
    srv *s = wk->s;
    sched *sc = s->sched;
    double period = 1000.0 / s->cfg.rate_hz;
    pthread_mutex_lock(&sc->lock);
    while (!atomic_load(&s->stop)) {
        if (wk->index == 0) {
            pthread_mutex_unlock(&sc->lock);
            srv_sessions_reap(s);
            pthread_mutex_lock(&sc->lock);
        }
        double now = srv_now_ms(), wake_at;
        unsigned long seen = sc->pokes;              /* what the pick below sees */
        if (wk->express && sc->heavy_busy < sc->n) { /* a worker may take what is due */
            /* express_poked wakes it; the time: a backstop */
            wait_express(sc, s, now + 1000.0, seen);
            continue;
        }
        srv_session *group[SRV_STEP_BATCH_MAX];
        int light = 0;
        group[0] = pick_session(s, sc, wk, now, period, &wake_at, &light);
        if (!group[0]) {
            if (wk->express)
                wait_express(sc, s, wake_at, seen);
            else
                wait_until(sc, s, wake_at, seen);
            continue;
        }
        int n = wk->express ? 1 : pick_group(s, sc, now, period, light, group),
            news[SRV_STEP_BATCH_MAX], heavy = !wk->express && !light;
        sc->heavy_busy += heavy;
        if (heavy && sc->heavy_busy == sc->n) { /* every worker on a heavy step */
            sc->express_poked = 1;
            pthread_cond_broadcast(&sc->cond);
        }
        pthread_mutex_unlock(&sc->lock);
        /* What each frame held the worker (run_sessions). */
        int awake[SRV_STEP_BATCH_MAX];
        double own_ms[SRV_STEP_BATCH_MAX];
        int nawake = run_sessions(s, wk, group, n, news, awake, own_ms);
        if (wk->express)
            atomic_fetch_add(&s->express_steps, (unsigned long long)nawake);
        for (int k = 0; k < n; k++) {
            srv_session *ss = group[k];
            if (news[k])
                srv_session_news(s, ss);
            int early = now < ss->due_ms;
            ss->step_at_ms = now;
            /* Keep the beat; after an early step or a stall, restart it from now. */
            ss->due_ms = early || ss->due_ms + period < now ? now + period : ss->due_ms + period;
        }
        pthread_mutex_lock(&sc->lock);
        sc->heavy_busy -= heavy;
        for (int k = 0; k < n; k++) {
            /* A frame asleep or paused steps nothing: it says nothing of what the next
             * running frame will cost (counted as cheap, a heavy session that slept through
             * a page reload came back light, and its first step held its worker as a light
             * one: the express worker stayed off, light sessions in its batch waited). */
            double cost = group[k]->frame_cost_ms, ms = own_ms[k];
            if (awake[k] && !wk->jobs[k].paused)
                group[k]->frame_cost_ms = cost > 0 ? 0.8 * cost + 0.2 * ms : ms;
            group[k]->stepping = 0;
            srv_session_put(s, group[k]);
        }
    }
    pthread_mutex_unlock(&sc->lock);
    return NULL;
}

/* --step-batch resolved: 64 where the backend batches (CUDA), else 1. */
static int batch_max_of(const srv *s)
{
    return s->cfg.step_batch                 ? s->cfg.step_batch
           : sim_backend_batches(s->backend) ? SRV_STEP_BATCH_MAX
                                             : 1;
}

int srv_express_worker_on(const srv *s)
{
    /* Not by default where the workers batch (CUDA): there a batch's cost shared by its
     * sessions looks short, and the express worker would step them one launch each. */
    return s->cfg.express_worker >= 0 ? s->cfg.express_worker : batch_max_of(s) == 1;
}

int srv_worker_start(srv *s)
{
    int n = s->cfg.workers, nw = n + srv_express_worker_on(s); /* and the express worker */
    sched *sc = calloc(1, sizeof *sc);
    worker *w = sc ? calloc((size_t)nw, sizeof *w) : NULL;
    if (!w) {
        free(sc);
        return -1;
    }
    sc->w = w;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sc->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&sc->lock, NULL);
    for (int k = 0; k < nw; k++) {
        w[k].s = s;
        w[k].index = k;
        w[k].express = k == n;
        w[k].jobs = calloc(SRV_STEP_BATCH_MAX, sizeof *w[k].jobs);
        if (!w[k].jobs) {
            for (int j = 0; j < k; j++)
                free(w[j].jobs);
            free(w);
            free(sc);
            return -1;
        }
    }
    sc->n = n;
    sc->batch_max = batch_max_of(s);
    sc->nw = nw;
    s->sched = sc;
    for (int k = 0; k < nw; k++)
        if (pthread_create(&w[k].thread, NULL, worker_main, &w[k]) != 0) {
            atomic_store(&s->stop, 1);
            srv_worker_poke(s, 0);
            for (int j = 0; j < k; j++)
                pthread_join(w[j].thread, NULL);
            for (int j = 0; j < nw; j++) {
                free(w[j].jobs);
                w[j].jobs = NULL;
            }
            sc->n = sc->nw = 0;
            return -1;
        }
    return 0;
}

void srv_worker_stop(srv *s)
{
    sched *sc = s->sched;
    atomic_store(&s->stop, 1);
    srv_worker_poke(s, 0);
    for (int k = 0; sc && k < sc->nw; k++)
        pthread_join(sc->w[k].thread, NULL);
}

/* After the WebSocket thread has stopped too: nobody can poke a worker any more. */
void srv_worker_free(srv *s)
{
    sched *sc = s->sched;
    if (!sc)
        return;
    pthread_cond_destroy(&sc->cond);
    pthread_mutex_destroy(&sc->lock);
    for (int k = 0; k < sc->nw; k++)
        free(sc->w[k].jobs);
    free(sc->w);
    free(sc);
    s->sched = NULL;
}
