/* bench_softbody_peer.c: the softbody bench's Bullet peer (its settings from ours) and the
 * CUDA parity run. Reads the state's derived arrays (softbody_internal.h): the peer needs
 * each edge's compliance and each node's mass exactly as our solver has them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/softbody/softbody_internal.h"
#include "tests/bench/bench_bullet.h"
#include "tests/bench/bench_softbody.h"
#include "tests/scenes/softbody_scenes.h"

#if SOFTCAST_HAVE_BULLET
/* Bullet's kLST per region: one XPBD iteration from a zero multiplier moves an edge's ends by
 * w / (w + alpha / h^2) of its error (w: the two inverse masses), a PBD link by kLST: the
 * mean of the first over the region's edges (an edge goes to the region lending it the most
 * volume). */
static void peer_klst(const sim_softbody_model *m, const sim_softbody_state *s, double h,
                      uint8_t *eregion, double klst[SIM_SOFTBODY_NREGION])
{
    double sum[SIM_SOFTBODY_NREGION] = {0}, cnt[SIM_SOFTBODY_NREGION] = {0};
    for (int e = 0; e < m->nedge; e++) {
        int r = 0;
        for (int k = 1; k < SIM_SOFTBODY_NREGION; k++)
            r = m->evol[e * SIM_SOFTBODY_NREGION + k] > m->evol[e * SIM_SOFTBODY_NREGION + r] ? k
                                                                                              : r;
        double w = (double)s->w_free[m->ea[e]] + (double)s->w_free[m->eb[e]];
        sum[r] += w / (w + (double)s->ealpha[e] / (h * h));
        cnt[r] += 1.0;
        eregion[e] = (uint8_t)r;
    }
    for (int r = 0; r < SIM_SOFTBODY_NREGION; r++)
        klst[r] = cnt[r] > 0.0 ? sum[r] / cnt[r] : 1.0;
}

#endif

void bench_softbody_peer(const sim_softbody_model *m, const sim_softbody_state *s, int frames,
                         const bench_sb_figures *full, const bench_sb_figures *edges_only)
{
#if SOFTCAST_HAVE_BULLET
    const sim_softbody_params *p = &s->prm;
    double h = (double)p->dt / sb_substeps(m, p);
    bench_bullet_tets t;
    memset(&t, 0, sizeof t);
    float *mass = malloc((size_t)m->n * sizeof(float));
    int32_t *edge = malloc((size_t)m->nedge * 2 * sizeof(int32_t));
    uint8_t *eregion = malloc((size_t)m->nedge);
    for (int i = 0; i < m->n; i++)
        mass[i] = s->w_free[i] > 0.0f ? 1.0f / s->w_free[i] : 0.0f;
    for (int e = 0; e < m->nedge; e++)
        edge[e * 2] = m->ea[e], edge[e * 2 + 1] = m->eb[e];
    peer_klst(m, s, h, eregion, t.klst);
    t.nvert = m->n, t.ntet = m->ntet, t.nedge = m->nedge;
    t.x = m->rest, t.mass = mass, t.tet = m->tet, t.edge = edge, t.eregion = eregion;
    t.substeps = sb_substeps(m, p), t.iterations = sb_iterations(m, p), t.frames = frames;
    t.damping_kdp = (double)p->damping * h; /* ours: v *= 1 - damping h each substep */
    t.gravity = (double)p->gravity;
    bench_bullet_tet_box(&t);
    printf(
        "{\"scene\":\"softbody\",\"engine\":\"bullet\",\"version\":\"3.24\",\"model\":\"hybrid\","
        "\"tets_source\":\"box\",\"threads\":1,\"particles\":%d,\"tets\":%d,\"links\":%d,"
        "\"substeps\":%d,\"iterations\":%d,\"frames\":%d,\"klst\":[%.5f,%.5f],"
        "\"volume_constraints\":\"none (links only)\",\"damping_kdp\":%.6g,"
        "\"ms_per_frame_median\":%.4f,\"ms_per_frame_p90\":%.4f,\"cpu_ms_per_frame_mean\":%.4f,"
        "\"lowest_z\":%.5f}\n",
        m->n, m->ntet, t.links, t.substeps, t.iterations, frames, t.klst[0], t.klst[1],
        t.damping_kdp, t.ms_median, t.ms_p90, t.cpu_ms_mean, t.lowest_z);
    printf("{\"peer\":\"bullet\",\"substeps\":%d,\"iterations\":%d,\"softcast\":{\"edges_xpbd\":%d,"
           "\"tet_volumes_xpbd\":%d,\"virtual_springs\":%d,\"region_compliance\":[%g,%g]},"
           "\"bullet_ms_over_softcast_ms\":%.2f,\"bullet_cpu_over_softcast_cpu\":%.2f,"
           "\"lowest_z_difference_m\":%.4f,\"like_for_like\":{\"softcast\":\"edges only (XPBD, "
           "no tet volumes, no springs)\",\"bullet\":\"links only\",\"softcast_ms_median\":%.4f,"
           "\"softcast_ms_p90\":%.4f,\"bullet_ms_over_softcast_ms\":%.2f,"
           "\"bullet_cpu_over_softcast_cpu\":%.2f,\"lowest_z_difference_m\":%.4f}}\n",
           t.substeps, t.iterations, m->nedge, p->tet_volumes ? m->ntet : 0,
           p->spring_mode == SIM_SPRING_OFF ? 0 : 4 * m->nbound, (double)p->region_compliance[0],
           (double)p->region_compliance[1], t.ms_median / full->ms_median,
           t.cpu_ms_mean / full->cpu_ms, fabs(t.lowest_z - full->lowest_z), edges_only->ms_median,
           edges_only->ms_p90, t.ms_median / edges_only->ms_median,
           t.cpu_ms_mean / edges_only->cpu_ms, fabs(t.lowest_z - edges_only->lowest_z));
    free(mass);
    free(edge);
    free(eregion);
#else
    (void)m, (void)s, (void)frames, (void)full, (void)edges_only;
    printf("{\"peer\":\"bullet\",\"skipped\":\"this bench was built without Bullet\"}\n");
#endif
}

/* One model on one backend, frames with the hand pulling particle 0 up 3 cm. */
static int parity_run(const sim_softbody_model *m, sim_backend_kind kind, int frames, float *out)
{
    char err[256];
    sim_backend *b;
    sim_softbody_state *s;
    if (sim_backend_create(&b, kind, 1, err, sizeof err) != SIM_OK)
        return 0;
    if (sim_softbody_state_create(&s, m, b, err, sizeof err) != SIM_OK) {
        sim_backend_destroy(b);
        return 0;
    }
    int n;
    const float *x = sim_softbody_positions(s, &n);
    float pick[3] = {x[0], x[1], x[2]}, hand[3] = {x[0], x[1], x[2] + 0.03f};
    sim_softbody_grab(s, pick);
    sim_softbody_move_hand(s, hand, err, sizeof err);
    int ok = 1;
    for (int f = 0; ok && f < frames; f++)
        ok = sim_softbody_step(s, NULL, err, sizeof err) == SIM_OK;
    memcpy(out, sim_softbody_positions(s, &n), (size_t)n * 3 * sizeof(float));
    sim_softbody_state_destroy(s);
    sim_backend_destroy(b);
    return ok;
}

int bench_softbody_parity(int frames)
{
    if (!sim_cuda_available()) {
        printf("{\"parity\":\"skipped\",\"reason\":\"no CUDA device answers\"}\n");
        return 0;
    }
    char err[256];
    sim_softbody_tets t;
    sim_softbody_model *m[2] = {sbs_organ_model(500), NULL};
    if (sbs_box_tets(&t, 12, 6, 6, 0.01f, 0.0f, 6, 2, err, sizeof err) != SIM_OK ||
        sim_softbody_model_hybrid(&m[1], &t, err, sizeof err) != SIM_OK || !m[0])
        return 1;
    int failed = 0;
    for (int k = 0; k < 2; k++) {
        int n = sim_softbody_model_info(m[k]).particles;
        float *a = malloc((size_t)n * 3 * sizeof(float)),
              *b = malloc((size_t)n * 3 * sizeof(float));
        int ok = parity_run(m[k], SIM_BACKEND_CPU, frames, a) &&
                 parity_run(m[k], SIM_BACKEND_CUDA, frames, b);
        double d = 0.0;
        for (int i = 0; ok && i < n * 3; i++)
            d = fmax(d, fabs((double)a[i] - (double)b[i]));
        ok = ok && d <= 1e-4;
        failed |= !ok;
        printf("{\"parity\":\"softbody\",\"model\":\"%s\",\"particles\":%d,\"frames\":%d,"
               "\"max_pos_diff_m\":%.3g,\"tolerance_m\":1e-4,\"ok\":%s}\n",
               k ? "hybrid" : "surface", n, frames, d, ok ? "true" : "false");
        free(a);
        free(b);
        sim_softbody_model_destroy(m[k]);
    }
    sim_softbody_tets_free(&t);
    return failed;
}
