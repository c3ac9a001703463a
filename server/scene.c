/* scene.c: the table of scene kinds, and what they share: parameter tables. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "scene.h"

const srv_scene_i *srv_scene_find(const char *name)
{
    static const srv_scene_i *const k[] = {&srv_scene_volume, &srv_scene_cloth};
    for (size_t i = 0; name && i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(name, k[i]->name))
            return k[i];
    return NULL;
}

sim_status srv_params_set(const sim_param_desc *t, int n, void *params, const char *name, double v,
                          char *err, size_t err_sz)
{
    const sim_param_desc *d = sim_param_find(t, n, name);
    if (!d || d->internal) {
        snprintf(err, err_sz, "no parameter \"%s\" in this scene (its state message lists them)",
                 name);
        return SIM_ERR_ARG;
    }
    return sim_param_set(d, params, v, err, err_sz);
}

char *srv_params_json(const sim_param_desc *t, int n, const void *params)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && i < n; i++) {
        if (t[i].internal)
            continue;
        double v = sim_param_get(&t[i], params);
        if (t[i].type == SIM_PARAM_CHOICE) {
            char name[64];
            sim_param_choice_name(&t[i], (int)v, name, sizeof name);
            cJSON_AddStringToObject(o, t[i].name, name);
        } else {
            cJSON_AddNumberToObject(o, t[i].name, v);
        }
    }
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}

static const char *type_name(sim_param_type t)
{
    return t == SIM_PARAM_INT ? "int" : t == SIM_PARAM_CHOICE ? "choice" : "float";
}

cJSON *srv_params_schema(const sim_param_desc *t, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        if (t[i].internal)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "name", t[i].name);
        cJSON_AddStringToObject(o, "type", type_name(t[i].type));
        cJSON_AddNumberToObject(o, "min", t[i].min);
        cJSON_AddNumberToObject(o, "max", t[i].max);
        cJSON_AddNumberToObject(o, "default", t[i].def);
        cJSON_AddStringToObject(o, "unit", t[i].unit);
        cJSON_AddStringToObject(o, "group", t[i].group);
        cJSON_AddStringToObject(o, "doc", t[i].doc);
        if (t[i].type == SIM_PARAM_CHOICE) {
            cJSON *c = cJSON_AddArrayToObject(o, "choices");
            for (int k = 0; c && k <= (int)t[i].max; k++) {
                char name[64];
                sim_param_choice_name(&t[i], k, name, sizeof name);
                cJSON_AddItemToArray(c, cJSON_CreateString(name));
            }
        }
        cJSON_AddItemToArray(a, o);
    }
    return a;
}
