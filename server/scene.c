/* scene.c: the table of scene kinds, and what they share: parameter tables. */
#include <math.h>
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

int srv_param_set(const srv_param *t, size_t n, void *params, const char *name, double v)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, t[i].name)) {
            char *at = (char *)params + t[i].off;
            if (t[i].is_int) {
                if (v != floor(v) || fabs(v) > 1e6)
                    return -1;
                *(int *)(void *)at = (int)v;
            } else {
                *(float *)(void *)at = (float)v;
            }
            return 0;
        }
    return -1;
}

void srv_param_json(cJSON *o, const srv_param *t, size_t n, const void *params)
{
    for (size_t i = 0; i < n; i++) {
        const char *at = (const char *)params + t[i].off;
        double v = t[i].is_int ? (double)*(const int *)(const void *)at
                               : (double)*(const float *)(const void *)at;
        cJSON_AddNumberToObject(o, t[i].name, v);
    }
}
