/* param_rows.h: the rows of a scene's parameter table (sim_param_desc, sim.h) from its
 * params.def X-list, written once for every scene. Define SIM_PARAMS_STRUCT as the scene's
 * parameter struct, include this, write the table, then include param_rows_end.h:
 *
 *     #define SIM_PARAMS_STRUCT sim_cloth_params
 *     #include "../core/param_rows.h"
 *     static const sim_param_desc k_params[] = {
 *     #include "params.def"
 *     };
 *     #include "../core/param_rows_end.h"
 *
 * A scene whose list has rows of its own kind (the volume's per-tissue T) defines their
 * macro beside these. No include guard: each scene's table includes it once. */
#include <stddef.h>

/* P: one value. */
#define P(type, f, def, lo, hi, unit, group, doc) \
    {#f, group, unit, doc, NULL, SIM_PARAM_##type, 0, offsetof(SIM_PARAMS_STRUCT, f), def, lo, hi},
/* A: element i of a float array, named "f.i". */
#define A(type, f, i, n, def, lo, hi, unit, group, doc)                       \
    {#f "." #i, group,                                                        \
     unit,      doc,                                                          \
     NULL,      SIM_PARAM_##type,                                             \
     0,         offsetof(SIM_PARAMS_STRUCT, f) + (size_t)(i) * sizeof(float), \
     def,       lo,                                                           \
     hi},
/* C: a choice among n names ("a|b|c"), stored as its index. */
#define C(f, def, n, choices, group, doc)                                                 \
    {#f,  group, "",   doc, choices, SIM_PARAM_CHOICE, 0, offsetof(SIM_PARAMS_STRUCT, f), \
     def, 0,     (n)-1},
/* I: internal: checked and defaulted, never listed to clients. */
#define I(type, f, def, lo, hi, unit, doc)                                                  \
    {#f,  "internal", unit, doc, NULL, SIM_PARAM_##type, 1, offsetof(SIM_PARAMS_STRUCT, f), \
     def, lo,         hi},
