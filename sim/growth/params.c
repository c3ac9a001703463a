/* params.c: the growth scene's parameter table, from params.def. */
#include <string.h>

#include "growth.h"
#include "sim/core/sc_base.h"

#define SIM_PARAMS_STRUCT sim_growth_params
#include "../core/param_rows.h"
static const sim_param_desc k_params[] = {
#include "params.def"
};
#include "../core/param_rows_end.h"
#define N_PARAMS ((int)(sizeof k_params / sizeof k_params[0]))

const sim_param_desc *sim_growth_params_table(int *n)
{
    *n = N_PARAMS;
    return k_params;
}

sim_growth_params sim_growth_default_params(void)
{
    sim_growth_params p;
    memset(&p, 0, sizeof p);
    sim_params_default(k_params, N_PARAMS, &p);
    return p;
}

sim_status sim_growth_params_validate(const sim_growth_params *p, char *err, size_t err_sz)
{
    sim_status st = sim_params_check(k_params, N_PARAMS, p, err, err_sz);
    if (st == SIM_OK && p->side_angle_min > p->side_angle_max)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "side_angle_min %g is above side_angle_max %g",
                                   (double)p->side_angle_min, (double)p->side_angle_max);
    return st;
}
