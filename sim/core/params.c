/* params.c: the declared parameter tables (sim/sim.h): find, get, set with checks,
 * defaults. A table is built by each scene from its params.def. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../sim.h"
#include "sc_base.h"

const sim_param_desc *sim_param_find(const sim_param_desc *t, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (!strcmp(t[i].name, name))
            return &t[i];
    return NULL;
}

double sim_param_get(const sim_param_desc *d, const void *params)
{
    const char *p = (const char *)params + d->offset;
    if (d->type == SIM_PARAM_FLOAT) {
        float f;
        memcpy(&f, p, sizeof f);
        return (double)f;
    }
    int i;
    memcpy(&i, p, sizeof i);
    return (double)i;
}

static int in_range(const sim_param_desc *d, double v)
{
    if (!isfinite(v) || v < d->min || v > d->max)
        return 0;
    return d->type == SIM_PARAM_FLOAT || v == floor(v);
}

static sim_status range_error(const sim_param_desc *d, double v, char *err, size_t err_sz)
{
    if (d->type == SIM_PARAM_CHOICE)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "%s = %g: must be one of %s", d->name,
                                   v, d->choices);
    return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "%s = %g: must be %sin [%g, %g]", d->name,
                               v, d->type == SIM_PARAM_INT ? "a whole number " : "", d->min,
                               d->max);
}

sim_status sim_param_set(const sim_param_desc *d, void *params, double v, char *err, size_t err_sz)
{
    if (!in_range(d, v))
        return range_error(d, v, err, err_sz);
    char *p = (char *)params + d->offset;
    if (d->type == SIM_PARAM_FLOAT) {
        float f = (float)v;
        memcpy(p, &f, sizeof f);
    } else {
        int i = (int)v;
        memcpy(p, &i, sizeof i);
    }
    return SIM_OK;
}

int sim_param_choice(const sim_param_desc *d, const char *name)
{
    if (d->type != SIM_PARAM_CHOICE || !name)
        return -1;
    size_t len = strlen(name);
    const char *c = d->choices;
    for (int i = 0; c && *c; i++) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == len && !strncmp(c, name, n))
            return i;
        c = bar ? bar + 1 : NULL;
    }
    return -1;
}

void sim_param_choice_name(const sim_param_desc *d, int i, char *out, size_t out_sz)
{
    const char *c = d->type == SIM_PARAM_CHOICE ? d->choices : NULL;
    for (int k = 0; c && k < i; k++) {
        c = strchr(c, '|');
        c = c ? c + 1 : NULL;
    }
    size_t n = 0;
    if (c && i >= 0) {
        const char *bar = strchr(c, '|');
        n = bar ? (size_t)(bar - c) : strlen(c);
    }
    if (out_sz == 0)
        return;
    if (n >= out_sz)
        n = out_sz - 1;
    if (n)
        memcpy(out, c, n);
    out[n] = 0;
}

sim_status sim_params_check(const sim_param_desc *t, int n, const void *params, char *err,
                            size_t err_sz)
{
    for (int i = 0; i < n; i++) {
        double v = sim_param_get(&t[i], params);
        if (!in_range(&t[i], v))
            return range_error(&t[i], v, err, err_sz);
    }
    return SIM_OK;
}

void sim_params_default(const sim_param_desc *t, int n, void *params)
{
    for (int i = 0; i < n; i++)
        (void)sim_param_set(&t[i], params, t[i].def, NULL, 0);
}
