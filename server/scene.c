/* scene.c: the table of scene kinds. */
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
