/* test_backend.c: choosing a backend, and CUDA against CPU where a device answers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cloth/cloth.h"
#include "sim/volume/volume.h"
#include "tests/harness.h"
#include "tests/scenes/volume_scenes.h"

TEST(backend_choice_and_errors)
{
    char err[256];
    sim_backend *b = NULL;
    CHECK(sim_backend_kind_parse("auto") == SIM_BACKEND_AUTO);
    CHECK(sim_backend_kind_parse("cpu") == SIM_BACKEND_CPU);
    CHECK(sim_backend_kind_parse("cuda") == SIM_BACKEND_CUDA);
    CHECK(sim_backend_kind_parse("gpu") == -1);
    REQUIRE(sim_backend_create(&b, SIM_BACKEND_AUTO, 2, err, sizeof err) == SIM_OK);
    CHECK(!strcmp(sim_backend_name(b), sim_cuda_available() ? "cuda" : "cpu"));
    sim_backend_destroy(b);
    REQUIRE(sim_backend_create(&b, SIM_BACKEND_CPU, 3, err, sizeof err) == SIM_OK);
    CHECK(sim_backend_threads(b) == 3);
    sim_backend_destroy(b);
    CHECK(sim_backend_create(&b, SIM_BACKEND_CPU, -1, err, sizeof err) == SIM_ERR_ARG);
    if (!sim_cuda_available()) {
        err[0] = 0;
        CHECK(sim_backend_create(&b, SIM_BACKEND_CUDA, 0, err, sizeof err) == SIM_ERR_BACKEND);
        CHECKF(strstr(err, "cuda") != NULL, "message: %s", err);
        CHECK(b == NULL);
    }
}

/* CUDA and CPU run the same kernels without FMA contraction: after a pull and release
 * their states agree within atol + rtol*|ref|. */
TEST(cuda_matches_cpu_after_pull_and_release)
{
    if (!sim_cuda_available())
        SKIP(
            "no CUDA device answers on this machine (the parity check runs in tests/gpu/check.sh)");
    char err[256];
    sim_volume v;
    REQUIRE(sim_volume_phantom(&v, 48, 48, 28, err, sizeof err) == SIM_OK);
    vs_scene sc[2];
    sim_backend_kind kinds[2] = {SIM_BACKEND_CPU, SIM_BACKEND_CUDA};
    for (int k = 0; k < 2; k++)
        REQUIRE(vs_scene_create(&sc[k], &v, kinds[k], 1, err, sizeof err) == SIM_OK);
    for (int cond = 0; cond < 3; cond++) {
        for (int k = 0; k < 2; k++) {
            REQUIRE(vs_push(sc[k].state, SIM_EV_RESET, NULL, 0) == SIM_OK);
            sim_volume_params p = sim_default_volume_params();
            p.condition = (sim_condition)cond;
            REQUIRE(vs_set_params(sc[k].state, &p) == SIM_OK);
            vs_release_opts o = vs_default_release_opts();
            o.max_after = 60;
            vs_release_result r;
            REQUIRE(vs_run_release(sc[k].state, &v, &o, &r, err, sizeof err) == SIM_OK);
        }
        const float *pa = sim_volume_positions(sc[0].state),
                    *pb = sim_volume_positions(sc[1].state);
        const float *va = sim_volume_velocities(sc[0].state),
                    *vb = sim_volume_velocities(sc[1].state);
        size_t n = (size_t)48 * 48 * 28 * 3;
        float worst = 0.0f;
        for (size_t i = 0; i < n; i++) {
            worst = fmaxf(worst, fabsf(pa[i] - pb[i]) - 1e-4f * fabsf(pa[i]));
            worst = fmaxf(worst, fabsf(va[i] - vb[i]) - 1e-4f * fabsf(va[i]));
        }
        CHECKF(worst <= 1e-4f, "condition %c: CUDA differs from CPU by %g beyond rtol", 'A' + cond,
               (double)worst);
    }
    for (int k = 0; k < 2; k++)
        vs_scene_destroy(&sc[k]);
    sim_volume_free(&v);
}

/* The cloth on CUDA against the CPU: the same crowd, positions within 1 mm (the bench's
 * `cloth --parity` prints the figures). */
TEST(cuda_cloth_matches_cpu)
{
    if (!sim_cuda_available())
        SKIP("no CUDA device answers on this machine (softcast-bench cloth --parity runs in "
             "tests/gpu/check.sh)");
    char err[256];
    sim_cloth_model *m;
    REQUIRE(sim_cloth_model_create(&m, NULL, err, sizeof err) == SIM_OK);
    float *x[2];
    int n[2];
    sim_backend_kind kinds[2] = {SIM_BACKEND_CPU, SIM_BACKEND_CUDA};
    for (int k = 0; k < 2; k++) {
        sim_backend *b;
        REQUIRE(sim_backend_create(&b, kinds[k], 1, err, sizeof err) == SIM_OK);
        sim_cloth_scene *s;
        REQUIRE(sim_cloth_scene_create(&s, m, b, 2, err, sizeof err) == SIM_OK);
        sim_cloth_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = SIM_CLOTH_EV_MOTION;
        ev.character = -1;
        ev.motion = SIM_MOTION_WALK;
        REQUIRE(sim_cloth_push_event(s, &ev, err, sizeof err) == SIM_OK);
        for (int f = 0; f < 60; f++)
            REQUIRE(sim_cloth_step(s, NULL, err, sizeof err) == SIM_OK);
        const float *p = sim_cloth_positions(s, 1, &n[k]);
        x[k] = malloc((size_t)n[k] * 3 * sizeof(float));
        memcpy(x[k], p, (size_t)n[k] * 3 * sizeof(float));
        sim_cloth_scene_destroy(s);
        sim_backend_destroy(b);
    }
    REQUIRE(n[0] == n[1]);
    float dmax = 0.0f;
    for (int i = 0; i < n[0] * 3; i++)
        dmax = fabsf(x[0][i] - x[1][i]) > dmax ? fabsf(x[0][i] - x[1][i]) : dmax;
    CHECKF(dmax <= 1e-3f, "CUDA cloth differs from the CPU by %.3g m", (double)dmax);
    free(x[0]);
    free(x[1]);
    sim_cloth_model_destroy(m);
}
