/* test_params.c: the declared parameter tables (each scene's params.def). */
#include <math.h>
#include <string.h>

#include "sim/cloth/cloth.h"
#include "sim/volume/volume.h"
#include "tests/harness.h"

static void check_table(const char *scene, const sim_param_desc *t, int n, const void *defaults,
                        size_t size)
{
    CHECKF(n > 10, "%s: only %d parameters", scene, n);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            CHECKF(strcmp(t[i].name, t[j].name) != 0, "%s: %s declared twice", scene, t[i].name);
        CHECKF(t[i].min <= t[i].def && t[i].def <= t[i].max, "%s: %s default %g outside [%g, %g]",
               scene, t[i].name, t[i].def, t[i].min, t[i].max);
        CHECKF(t[i].offset + sizeof(float) <= size, "%s: %s outside the struct", scene, t[i].name);
        CHECKF(t[i].doc && strlen(t[i].doc) > 10, "%s: %s has no doc line", scene, t[i].name);
        /* The struct the scene hands out holds every declared default. */
        CHECKF(sim_param_get(&t[i], defaults) ==
                   (t[i].type == SIM_PARAM_FLOAT ? (double)(float)t[i].def : t[i].def),
               "%s: %s is %g by default, declared %g", scene, t[i].name,
               sim_param_get(&t[i], defaults), t[i].def);
    }
    char err[256];
    CHECK(sim_params_check(t, n, defaults, err, sizeof err) == SIM_OK);
}

TEST(params_tables_declare_every_default_once)
{
    int n;
    const sim_param_desc *t = sim_volume_params_table(&n);
    sim_volume_params vp = sim_default_volume_params();
    check_table("volume", t, n, &vp, sizeof vp);
    CHECK(sim_param_find(t, n, "tissue.skin_fat.shear") != NULL);
    CHECK(sim_param_find(t, n, "hu_threshold.2") != NULL);
    const sim_param_desc *ct;
    ct = sim_cloth_params_table(&n);
    sim_cloth_params cp = sim_cloth_default_params();
    check_table("cloth", ct, n, &cp, sizeof cp);
    CHECK(sim_param_find(ct, n, "wind.1") != NULL);
}

TEST(params_set_checks_range_type_and_names_the_parameter)
{
    int n;
    const sim_param_desc *t = sim_volume_params_table(&n);
    sim_volume_params p = sim_default_volume_params(), before = p;
    char err[256] = "";
    const sim_param_desc *alpha = sim_param_find(t, n, "alpha");
    REQUIRE(alpha != NULL);
    CHECK(sim_param_set(alpha, &p, 1.5, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "alpha") && strstr(err, "[0, 1]"), "message: %s", err);
    CHECK(sim_param_set(alpha, &p, NAN, err, sizeof err) == SIM_ERR_ARG);
    CHECK(memcmp(&p, &before, sizeof p) == 0); /* refused: unchanged */
    CHECK(sim_param_set(alpha, &p, 0.5, err, sizeof err) == SIM_OK);
    CHECK(p.alpha == 0.5f);
    const sim_param_desc *it = sim_param_find(t, n, "relax_iterations");
    REQUIRE(it != NULL);
    CHECK(sim_param_set(it, &p, 2.5, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "whole"), "message: %s", err);
    CHECK(sim_param_set(it, &p, 4, err, sizeof err) == SIM_OK && p.relax_iterations == 4);
    const sim_param_desc *sh = sim_param_find(t, n, "tissue.muscle_organ.shear");
    REQUIRE(sh != NULL);
    CHECK(sim_param_set(sh, &p, 0.25, err, sizeof err) == SIM_OK);
    CHECK(p.tissue[SIM_TISSUE_MUSCLE_ORGAN].shear == 0.25f &&
          p.tissue[SIM_TISSUE_BONE].shear == 0.0f);
    const sim_param_desc *c = sim_param_find(t, n, "condition");
    REQUIRE(c != NULL);
    CHECK(sim_param_choice(c, "B") == SIM_CONDITION_B);
    CHECK(sim_param_choice(c, "D") == -1);
    char name[8];
    sim_param_choice_name(c, SIM_CONDITION_C, name, sizeof name);
    CHECK(strcmp(name, "C") == 0);
    CHECK(sim_param_set(c, &p, 3, err, sizeof err) == SIM_ERR_ARG);
    /* The cross checks stay the scene's. */
    p = sim_default_volume_params();
    p.hu_threshold[1] = p.hu_threshold[0];
    CHECK(sim_volume_params_validate(&p, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "hu_threshold"), "message: %s", err);
    const sim_param_desc *ct = sim_cloth_params_table(&n);
    const sim_param_desc *dt = sim_param_find(ct, n, "dt");
    REQUIRE(dt != NULL);
    CHECK(dt->internal == 1);
}
