/* builder.c: sessions are built here, off the HTTP threads. A POST /api/sessions takes its
 * place in the table at once (state "loading", with its id and tokens) and its scene is
 * built by one of a few builder threads, in arrival order: a large volume costs a builder a
 * second or two, never one of the two HTTP threads (six such requests at once used to hold
 * both, and /api/health with them, for seconds).
 *
 * Threads: srv_build_submit from HTTP threads; the jobs run on the builders; g->lock guards
 * the queue and the stop flag. */
#include <stdlib.h>

#include "server.h"

typedef struct job {
    void (*run)(void *arg);
    void *arg;
    struct job *next;
} job;

typedef struct builders {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    job *head, *tail;
    int stopping, n;
    pthread_t thread[SRV_BUILDERS];
} builders;

static void *builder_main(void *arg)
{
    builders *g = arg;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        while (!g->head && !g->stopping)
            pthread_cond_wait(&g->cond, &g->lock);
        job *j = g->head;
        if (!j)
            break; /* stopping, and nothing left to build */
        g->head = j->next;
        if (!g->head)
            g->tail = NULL;
        pthread_mutex_unlock(&g->lock);
        j->run(j->arg);
        free(j);
        pthread_mutex_lock(&g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int srv_builders_start(srv *s)
{
    builders *g = calloc(1, sizeof *g);
    if (!g)
        return -1;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    s->builders = g;
    for (; g->n < SRV_BUILDERS; g->n++)
        if (pthread_create(&g->thread[g->n], NULL, builder_main, g) != 0)
            break;
    return g->n > 0 ? 0 : -1;
}

int srv_build_submit(srv *s, void (*run)(void *arg), void *arg)
{
    builders *g = s->builders;
    job *j = g ? malloc(sizeof *j) : NULL;
    if (!j)
        return -1;
    *j = (job){run, arg, NULL};
    pthread_mutex_lock(&g->lock);
    int ok = !g->stopping;
    if (ok) {
        if (g->tail)
            g->tail->next = j;
        else
            g->head = j;
        g->tail = j;
        pthread_cond_signal(&g->cond);
    }
    pthread_mutex_unlock(&g->lock);
    if (!ok)
        free(j);
    return ok ? 0 : -1;
}

void srv_builders_stop(srv *s)
{
    builders *g = s->builders;
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stopping = 1; /* what is queued is still built: its requests get their answers */
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    for (int i = 0; i < g->n; i++)
        pthread_join(g->thread[i], NULL);
    g->n = 0;
}

void srv_builders_free(srv *s)
{
    builders *g = s->builders;
    if (!g)
        return;
    srv_builders_stop(s); /* (joined already, as a rule) */
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    free(g);
    s->builders = NULL;
}
