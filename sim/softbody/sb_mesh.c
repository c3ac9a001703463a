/* sb_mesh.c: closed triangle meshes for the surface model: OFF and OBJ readers, the check
 * that a mesh is a closed 2-manifold (every error names the edge, vertex or line), its
 * volume, and the procedural default organ (a bean of exactly n vertices: rings of vertices
 * spaced evenly along the meridian, each ring's count proportional to its circumference,
 * neighbouring rings zipped by angle). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "softbody_internal.h"

#define SB_MAX_POLY 64 /* vertices of one polygon in a file */

static sim_status fail_mesh(sim_softbody_mesh *m, char *err, size_t err_sz, sim_status st,
                            const char *what)
{
    sim_softbody_mesh_free(m);
    return (sim_status)sc_fail(err, err_sz, st, "%s", what);
}

void sim_softbody_mesh_free(sim_softbody_mesh *mesh)
{
    if (!mesh)
        return;
    free(mesh->x);
    free(mesh->tri);
    memset(mesh, 0, sizeof *mesh);
}

double sim_softbody_mesh_volume(const uint32_t *tri, int ntri, const float *x)
{
    double v = 0.0;
    for (int t = 0; t < ntri; t++) {
        const float *a = &x[tri[t * 3] * 3], *b = &x[tri[t * 3 + 1] * 3],
                    *c = &x[tri[t * 3 + 2] * 3];
        double cx = (double)b[1] * (double)c[2] - (double)b[2] * (double)c[1];
        double cy = (double)b[2] * (double)c[0] - (double)b[0] * (double)c[2];
        double cz = (double)b[0] * (double)c[1] - (double)b[1] * (double)c[0];
        v += (double)a[0] * cx + (double)a[1] * cy + (double)a[2] * cz;
    }
    return v / 6.0;
}

/* ---------------------------------------------------------------- reading */

/* A cursor over text, counting lines for the messages. */
typedef struct rd {
    const char *p, *end;
    int line;
} rd;

/* Next whitespace-separated token of the current line (OBJ) or of the file (OFF, where
 * newlines are whitespace); '#' starts a comment to the end of the line. */
static int rd_token(rd *r, int cross_lines, char *tok, size_t tok_sz)
{
    for (;;) {
        while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r'))
            r->p++;
        if (r->p < r->end && *r->p == '#')
            while (r->p < r->end && *r->p != '\n')
                r->p++;
        if (r->p < r->end && *r->p == '\n' && cross_lines) {
            r->p++;
            r->line++;
            continue;
        }
        break;
    }
    size_t n = 0;
    while (r->p < r->end && !isspace((unsigned char)*r->p) && *r->p != '#') {
        if (n + 1 < tok_sz)
            tok[n++] = *r->p;
        r->p++;
    }
    tok[n] = 0;
    return n > 0;
}

static int parse_float(const char *t, float *out)
{
    char *e;
    errno = 0;
    double v = strtod(t, &e);
    if (*e || e == t)
        return 0;
    *out = (float)v;
    return 1;
}

static int parse_long(const char *t, long *out)
{
    char *e;
    errno = 0;
    long v = strtol(t, &e, 10);
    if ((*e && *e != '/') || e == t || errno)
        return 0;
    *out = v;
    return 1;
}

/* Growable arrays of the reader. */
static int grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 1;
    int c = *cap ? *cap : 64;
    while (c < need)
        c = c > (1 << 29) ? need : c * 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

/* Append polygon idx[0..k) as a fan of triangles. */
static sim_status add_polygon(sim_softbody_mesh *m, int *cap, const long *idx, int k, char *err,
                              size_t err_sz)
{
    if (m->ntri + k - 2 > SIM_SOFTBODY_MAX_ELEMS)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT, "more than %d triangles",
                                   SIM_SOFTBODY_MAX_ELEMS);
    if (!grow((void **)&m->tri, cap, m->ntri + k - 2, 3 * sizeof(uint32_t)))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "out of memory");
    for (int j = 1; j + 1 < k; j++) {
        uint32_t *t = &m->tri[m->ntri++ * 3];
        t[0] = (uint32_t)idx[0];
        t[1] = (uint32_t)idx[j];
        t[2] = (uint32_t)idx[j + 1];
    }
    return SIM_OK;
}

/* The OFF keyword with its prefixes ([ST][C][N]OFF: texture coordinates, colours and normals
 * follow each vertex's three coordinates: *extras is set, the line's rest is skipped). A 4D
 * or n-dimensional OFF is refused. */
static sim_status off_keyword(const char *tok, int *extras, char *err, size_t err_sz)
{
    const char *p = tok;
    if (!strncmp(p, "ST", 2))
        p += 2;
    if (*p == 'C')
        p++;
    if (*p == 'N')
        p++;
    if (!strcmp(p, "OFF")) {
        *extras = p != tok;
        return SIM_OK;
    }
    if (strstr(tok, "OFF"))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                   "OFF: '%s' is not a 3D surface (4OFF and nOFF are not read)",
                                   tok);
    return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                               "OFF: the file does not start with OFF (nor COFF, NOFF, STOFF)");
}

static sim_status off_header(rd *r, long *nv, long *nf, int *extras, char *err, size_t err_sz)
{
    char tok[64];
    long ne;
    if (!rd_token(r, 1, tok, sizeof tok))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT, "OFF: the file is empty");
    sim_status st = off_keyword(tok, extras, err, err_sz);
    if (st != SIM_OK)
        return st;
    if (!rd_token(r, 1, tok, sizeof tok) || !parse_long(tok, nv) ||
        !rd_token(r, 1, tok, sizeof tok) || !parse_long(tok, nf) ||
        !rd_token(r, 1, tok, sizeof tok) || !parse_long(tok, &ne))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                   "OFF line %d: expected the vertex, face and edge counts",
                                   r->line);
    if (*nv < 4 || *nv > SIM_SOFTBODY_MAX_VERTS || *nf < 4 || *nf > SIM_SOFTBODY_MAX_ELEMS)
        return (sim_status)sc_fail(
            err, err_sz, SIM_ERR_LIMIT,
            "OFF: %ld vertices and %ld faces: a closed mesh needs at least 4 "
            "of each, and at most %d vertices and %d faces are accepted",
            *nv, *nf, SIM_SOFTBODY_MAX_VERTS, SIM_SOFTBODY_MAX_ELEMS);
    return SIM_OK;
}

static sim_status off_face(rd *r, sim_softbody_mesh *m, int *cap, long f, char *err, size_t err_sz)
{
    char tok[64];
    long k, idx[SB_MAX_POLY];
    if (!rd_token(r, 1, tok, sizeof tok) || !parse_long(tok, &k) || k < 3 || k > SB_MAX_POLY)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                   "OFF line %d: face %ld: expected a vertex count of 3 to %d",
                                   r->line, f, SB_MAX_POLY);
    for (long j = 0; j < k; j++)
        if (!rd_token(r, 1, tok, sizeof tok) || !parse_long(tok, &idx[j]) || idx[j] < 0 ||
            idx[j] >= m->nvert)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "OFF line %d: face %ld: vertex index '%s' is not in [0, %d)",
                                       r->line, f, tok, m->nvert);
    /* Colour values may follow on the line: skip them. */
    while (r->p < r->end && *r->p != '\n')
        r->p++;
    return add_polygon(m, cap, idx, (int)k, err, err_sz);
}

static sim_status parse_off(sim_softbody_mesh *m, rd *r, char *err, size_t err_sz)
{
    long nv, nf;
    int extras = 0;
    sim_status st = off_header(r, &nv, &nf, &extras, err, err_sz);
    if (st != SIM_OK)
        return st;
    m->nvert = (int)nv;
    m->x = sc_calloc((size_t)nv * 3, sizeof(float));
    if (!m->x)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "out of memory");
    char tok[64];
    for (long i = 0; i < nv * 3; i++) {
        if (!rd_token(r, 1, tok, sizeof tok) || !parse_float(tok, &m->x[i]))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "OFF line %d: vertex %ld: expected 3 numbers (truncated?)",
                                       r->line, i / 3);
        while (extras && i % 3 == 2 && r->p < r->end && *r->p != '\n')
            r->p++; /* its normal, colour or texture coordinates */
    }
    int cap = 0;
    for (long f = 0; f < nf; f++)
        if ((st = off_face(r, m, &cap, f, err, err_sz)) != SIM_OK)
            return st;
    return SIM_OK;
}

/* One OBJ index ("7", "7/1", "7//3", "-1"): 1-based or relative to the end. */
static int obj_index(const char *tok, int nvert, long *out)
{
    long v;
    if (!parse_long(tok, &v) || v == 0)
        return 0;
    v = v > 0 ? v - 1 : nvert + v;
    *out = v;
    return v >= 0 && v < nvert;
}

static sim_status obj_line(rd *r, sim_softbody_mesh *m, int *vcap, int *tcap, char *err,
                           size_t err_sz)
{
    char tok[64];
    if (!rd_token(r, 0, tok, sizeof tok))
        return SIM_OK;
    if (!strcmp(tok, "v")) {
        if (m->nvert >= SIM_SOFTBODY_MAX_VERTS)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT, "OBJ: more than %d vertices",
                                       SIM_SOFTBODY_MAX_VERTS);
        if (!grow((void **)&m->x, vcap, m->nvert + 1, 3 * sizeof(float)))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "out of memory");
        for (int b = 0; b < 3; b++)
            if (!rd_token(r, 0, tok, sizeof tok) || !parse_float(tok, &m->x[m->nvert * 3 + b]))
                return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                           "OBJ line %d: a vertex needs 3 numbers", r->line);
        m->nvert++;
    } else if (!strcmp(tok, "f")) {
        long idx[SB_MAX_POLY];
        int k = 0;
        while (rd_token(r, 0, tok, sizeof tok)) {
            if (k == SB_MAX_POLY || !obj_index(tok, m->nvert, &idx[k]))
                return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                           "OBJ line %d: face index '%s' is not a vertex defined "
                                           "before it (or more than %d corners)",
                                           r->line, tok, SB_MAX_POLY);
            k++;
        }
        if (k < 3)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "OBJ line %d: a face needs at least 3 vertices", r->line);
        return add_polygon(m, tcap, idx, k, err, err_sz);
    }
    return SIM_OK; /* normals, texture coordinates, groups, materials: not ours */
}

static sim_status parse_obj(sim_softbody_mesh *m, rd *r, char *err, size_t err_sz)
{
    int vcap = 0, tcap = 0;
    while (r->p < r->end) {
        sim_status st = obj_line(r, m, &vcap, &tcap, err, err_sz);
        if (st != SIM_OK)
            return st;
        while (r->p < r->end && *r->p != '\n')
            r->p++;
        if (r->p < r->end) {
            r->p++;
            r->line++;
        }
    }
    return SIM_OK;
}

void sb_rest_on_floor(float *x, int n)
{
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int i = 0; i < n * 3; i++) {
        lo[i % 3] = fminf(lo[i % 3], x[i]);
        hi[i % 3] = fmaxf(hi[i % 3], x[i]);
    }
    float shift[3] = {-0.5f * (lo[0] + hi[0]), -0.5f * (lo[1] + hi[1]), -lo[2]};
    for (int i = 0; i < n * 3; i++)
        x[i] += shift[i % 3];
}

void sim_softbody_mesh_rest_on_floor(sim_softbody_mesh *mesh)
{
    sb_rest_on_floor(mesh->x, mesh->nvert);
}

/* Scale a mesh in any unit so that its box's diagonal is size_m, resting on the floor. A box
 * that is not finite and positive is left for the check. */
static void fit_size(sim_softbody_mesh *m, float size_m)
{
    sb_rest_on_floor(m->x, m->nvert);
    double diag2 = 0.0;
    for (int k = 0; k < 3; k++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < m->nvert; i++)
            lo = fmin(lo, (double)m->x[i * 3 + k]), hi = fmax(hi, (double)m->x[i * 3 + k]);
        diag2 += (hi - lo) * (hi - lo);
    }
    double diag = sqrt(diag2), k = (double)size_m / diag;
    if (!(diag > 0.0) || !isfinite(diag))
        return;
    for (int i = 0; i < m->nvert * 3; i++) /* about the origin: still centred, still on z = 0 */
        m->x[i] = (float)((double)m->x[i] * k);
}

static sim_status parse_sized(sim_softbody_mesh *out, const char *text, size_t len,
                              const char *format, float size_m, char *err, size_t err_sz)
{
    memset(out, 0, sizeof *out);
    rd r = {text, text + len, 1};
    sim_status st;
    if (format && !strcmp(format, "off"))
        st = parse_off(out, &r, err, err_sz);
    else if (format && !strcmp(format, "obj"))
        st = parse_obj(out, &r, err, err_sz);
    else
        st = (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "mesh format '%s': off or obj",
                                 format ? format : "(null)");
    if (st == SIM_OK && size_m > 0.0f)
        fit_size(out, size_m);
    if (st == SIM_OK)
        st = sim_softbody_mesh_check(out, err, err_sz);
    if (st != SIM_OK)
        sim_softbody_mesh_free(out);
    return st;
}

sim_status sim_softbody_mesh_parse(sim_softbody_mesh *out, const char *text, size_t len,
                                   const char *format, char *err, size_t err_sz)
{
    return parse_sized(out, text, len, format, 0.0f, err, err_sz);
}

sim_status sim_softbody_mesh_load(sim_softbody_mesh *out, const char *path, char *err,
                                  size_t err_sz)
{
    return sim_softbody_mesh_load_sized(out, path, 0.0f, err, err_sz);
}

sim_status sim_softbody_mesh_load_sized(sim_softbody_mesh *out, const char *path, float size_m,
                                        char *err, size_t err_sz)
{
    memset(out, 0, sizeof *out);
    if (!(size_m == 0.0f ||
          (size_m >= SIM_SOFTBODY_MIN_SIZE_M && size_m <= SIM_SOFTBODY_MAX_SIZE_M)))
        return (sim_status)sc_fail(
            err, err_sz, SIM_ERR_ARG, "%s: a size of %g m: 0 (as the file says) or %g to %g m",
            path, (double)size_m, (double)SIM_SOFTBODY_MIN_SIZE_M, (double)SIM_SOFTBODY_MAX_SIZE_M);
    const char *dot = strrchr(path, '.');
    char ext[8] = "";
    for (int i = 0; dot && i < 7 && dot[i + 1]; i++)
        ext[i] = (char)tolower((unsigned char)dot[i + 1]);
    if (strcmp(ext, "off") && strcmp(ext, "obj"))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "%s: not .off or .obj", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_IO, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* 100 bytes a vertex and a face at the limits is far more than any real file. */
    if (len < 0 || len > 100L * (SIM_SOFTBODY_MAX_VERTS + SIM_SOFTBODY_MAX_ELEMS)) {
        fclose(f);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT, "%s: %ld bytes: too large", path,
                                   len);
    }
    char *buf = malloc((size_t)len + 1);
    size_t got = buf ? fread(buf, 1, (size_t)len, f) : 0;
    fclose(f);
    if (!buf || got != (size_t)len) {
        free(buf);
        return (sim_status)sc_fail(err, err_sz, buf ? SIM_ERR_IO : SIM_ERR_NOMEM, "%s: read failed",
                                   path);
    }
    char msg[384] = "";
    sim_status st = parse_sized(out, buf, (size_t)len, ext, size_m, msg, sizeof msg);
    free(buf);
    if (st != SIM_OK)
        return (sim_status)sc_fail(err, err_sz, st, "%s: %s", path, msg);
    return SIM_OK;
}

/* ---------------------------------------------------------------- the manifold check */

/* A directed edge from -> to of triangle tri. */
typedef struct half_edge {
    uint32_t lo, hi; /* the undirected edge */
    uint32_t from, tri;
} half_edge;

static int half_edge_cmp(const void *a, const void *b)
{
    const half_edge *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return x->from < y->from ? -1 : x->from > y->from;
}

/* Every edge in exactly two triangles that run it opposite ways. */
static sim_status check_edges(const half_edge *he, int nhe, char *err, size_t err_sz)
{
    for (int i = 0; i < nhe;) {
        int j = i;
        while (j < nhe && he[j].lo == he[i].lo && he[j].hi == he[i].hi)
            j++;
        if (j - i == 1)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "open mesh: edge %u-%u belongs to triangle %u only (a hole "
                                       "or a border; the surface must be closed)",
                                       he[i].lo, he[i].hi, he[i].tri);
        if (j - i > 2)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "non-manifold mesh: edge %u-%u is shared by %d triangles",
                                       he[i].lo, he[i].hi, j - i);
        if (he[i].from == he[i + 1].from)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "inconsistent orientation: triangles %u and %u run edge "
                                       "%u-%u the same way",
                                       he[i].tri, he[i + 1].tri, he[i].lo, he[i].hi);
        i = j;
    }
    return SIM_OK;
}

/* Around vertex v: the corner of the triangle whose edge v -> to exists. */
static int find_out(const half_edge *he, int nhe, uint32_t v, uint32_t to)
{
    half_edge key = {v < to ? v : to, v < to ? to : v, v, 0};
    const half_edge *h = bsearch(&key, he, (size_t)nhe, sizeof *he, half_edge_cmp);
    return h ? (int)h->tri : -1;
}

/* One fan of triangles round every vertex: walking from a triangle across its edges at v
 * visits all of v's triangles (two cones touching at a vertex would not). */
static sim_status check_fans(const sim_softbody_mesh *m, const half_edge *he, int nhe, char *err,
                             size_t err_sz)
{
    int *count = sc_calloc((size_t)m->nvert, sizeof(int));
    int *first = sc_calloc((size_t)m->nvert, sizeof(int));
    if (!count || !first) {
        free(count);
        free(first);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "out of memory");
    }
    for (int t = 0; t < m->ntri; t++)
        for (int k = 0; k < 3; k++)
            if (count[m->tri[t * 3 + k]]++ == 0)
                first[m->tri[t * 3 + k]] = t;
    sim_status st = SIM_OK;
    for (int v = 0; v < m->nvert && st == SIM_OK; v++) {
        if (!count[v]) {
            st = (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                     "vertex %d belongs to no triangle", v);
            break;
        }
        int t = first[v], steps = 0;
        do {
            const uint32_t *tr = &m->tri[t * 3];
            int k = tr[0] == (uint32_t)v ? 0 : tr[1] == (uint32_t)v ? 1 : 2;
            /* The triangle (v, a, b) is followed round v by the one with edge v -> b. */
            t = find_out(he, nhe, (uint32_t)v, tr[(k + 2) % 3]);
            steps++;
        } while (t >= 0 && t != first[v] && steps <= count[v]);
        if (steps != count[v])
            st = (sim_status)sc_fail(
                err, err_sz, SIM_ERR_FORMAT,
                "non-manifold mesh: vertex %d joins separate fans of triangles", v);
    }
    free(count);
    free(first);
    return st;
}

static sim_status check_geometry(const sim_softbody_mesh *m, char *err, size_t err_sz)
{
    if (m->nvert < 4 || m->ntri < 4 || m->nvert > SIM_SOFTBODY_MAX_VERTS ||
        m->ntri > SIM_SOFTBODY_MAX_ELEMS)
        return (sim_status)sc_fail(
            err, err_sz, SIM_ERR_LIMIT,
            "%d vertices and %d triangles: a closed mesh needs at least 4 of "
            "each, at most %d and %d",
            m->nvert, m->ntri, SIM_SOFTBODY_MAX_VERTS, SIM_SOFTBODY_MAX_ELEMS);
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int i = 0; i < m->nvert * 3; i++) {
        if (!isfinite(m->x[i]))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "vertex %d: coordinate %d is not finite", i / 3, i % 3);
        lo[i % 3] = fminf(lo[i % 3], m->x[i]);
        hi[i % 3] = fmaxf(hi[i % 3], m->x[i]);
    }
    float d[3] = {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]};
    float size = sqrtf(sb_dot3(d, d));
    if (!(size >= SIM_SOFTBODY_MIN_SIZE_M && size <= SIM_SOFTBODY_MAX_SIZE_M))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT,
                                   "the mesh is %g m across: an organ is %g to %g m (metres "
                                   "expected; millimetres must be scaled)",
                                   (double)size, (double)SIM_SOFTBODY_MIN_SIZE_M,
                                   (double)SIM_SOFTBODY_MAX_SIZE_M);
    for (int t = 0; t < m->ntri; t++) {
        const uint32_t *tr = &m->tri[t * 3];
        if (tr[0] >= (uint32_t)m->nvert || tr[1] >= (uint32_t)m->nvert ||
            tr[2] >= (uint32_t)m->nvert)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "triangle %d: a vertex index is out of range", t);
        if (tr[0] == tr[1] || tr[1] == tr[2] || tr[0] == tr[2])
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "triangle %d is degenerate (vertex %u twice)", t,
                                       tr[0] == tr[1] || tr[0] == tr[2] ? tr[0] : tr[1]);
    }
    return SIM_OK;
}

sim_status sim_softbody_mesh_check(sim_softbody_mesh *m, char *err, size_t err_sz)
{
    sim_status st = check_geometry(m, err, err_sz);
    if (st != SIM_OK)
        return st;
    int nhe = m->ntri * 3;
    half_edge *he = sc_calloc((size_t)nhe, sizeof *he);
    if (!he)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "out of memory");
    for (int t = 0; t < m->ntri; t++)
        for (int k = 0; k < 3; k++) {
            uint32_t a = m->tri[t * 3 + k], b = m->tri[t * 3 + (k + 1) % 3];
            half_edge h = {a < b ? a : b, a < b ? b : a, a, (uint32_t)t};
            he[t * 3 + k] = h;
        }
    qsort(he, (size_t)nhe, sizeof *he, half_edge_cmp);
    st = check_edges(he, nhe, err, err_sz);
    if (st == SIM_OK)
        st = check_fans(m, he, nhe, err, err_sz);
    free(he);
    if (st == SIM_OK && sim_softbody_mesh_volume(m->tri, m->ntri, m->x) < 0.0)
        for (int t = 0; t < m->ntri; t++) { /* inward-facing: turn it outward */
            uint32_t s = m->tri[t * 3 + 1];
            m->tri[t * 3 + 1] = m->tri[t * 3 + 2];
            m->tri[t * 3 + 2] = s;
        }
    return st;
}

/* ---------------------------------------------------------------- the default organ */

#define SB_PI 3.14159265358979f

/* Split m vertices over nring rings in proportion to sin(theta), at least 3 each. */
static void ring_counts(int m, int nring, int *cnt)
{
    float tot = 0.0f;
    for (int k = 0; k < nring; k++)
        tot += sinf(SB_PI * (float)(k + 1) / (float)(nring + 1));
    int sum = 0;
    for (int k = 0; k < nring; k++) {
        float f = sinf(SB_PI * (float)(k + 1) / (float)(nring + 1)) / tot;
        cnt[k] = (int)lroundf(f * (float)m);
        cnt[k] = cnt[k] < 3 ? 3 : cnt[k];
        sum += cnt[k];
    }
    for (int k = nring / 2; sum != m; k = (k + 1) % nring) /* rounding: from the equator */
        if (sum < m) {
            cnt[k]++;
            sum++;
        } else if (cnt[k] > 3) {
            cnt[k]--;
            sum--;
        }
}

/* Triangles between ring a (count na, first vertex a0) and ring b, by increasing angle;
 * ring b's vertices sit half a step further round when stagger is set. */
static void zip(uint32_t *tri, int *nt, int a0, int na, int b0, int nb, float offa, float offb)
{
    int i = 0, j = 0;
    while (i < na || j < nb) {
        float ta = ((float)(i + 1) + offa) / (float)na, tb = ((float)(j + 1) + offb) / (float)nb;
        uint32_t *t = &tri[*nt * 3];
        t[0] = (uint32_t)(a0 + i % na);
        t[1] = (uint32_t)(b0 + j % nb);
        if (j == nb || (i < na && ta < tb)) {
            t[2] = (uint32_t)(a0 + (i + 1) % na);
            i++;
        } else {
            t[2] = (uint32_t)(b0 + (j + 1) % nb);
            j++;
        }
        (*nt)++;
    }
}

/* Unit sphere point to the bean: an ellipsoid 12 x 7 x 6 cm whose ends bend toward +y. */
static void bean(float st, float ct, float phi, float out[3])
{
    const float a = 0.06f, b = 0.035f, c = 0.03f, bend = 0.6f;
    float x = a * st * cosf(phi), y = b * st * sinf(phi), z = c * ct;
    out[0] = x;
    out[1] = y + bend * b * (x / a) * (x / a);
    out[2] = z + c;
}

static void organ_rings(sim_softbody_mesh *o, const int *cnt, int nring)
{
    int v = 1, nt = 0;
    bean(0.0f, 1.0f, 0.0f, &o->x[0]);
    for (int k = 0; k < nring; k++) {
        float th = SB_PI * (float)(k + 1) / (float)(nring + 1), off = 0.5f * (float)(k % 2);
        for (int j = 0; j < cnt[k]; j++)
            bean(sinf(th), cosf(th), 2.0f * SB_PI * ((float)j + off) / (float)cnt[k],
                 &o->x[(v + j) * 3]);
        if (k == 0)
            for (int j = 0; j < cnt[0]; j++) { /* the top pole's fan */
                uint32_t *t = &o->tri[nt++ * 3];
                t[0] = 0;
                t[1] = (uint32_t)(1 + j);
                t[2] = (uint32_t)(1 + (j + 1) % cnt[0]);
            }
        else
            zip(o->tri, &nt, v - cnt[k - 1], cnt[k - 1], v, cnt[k], 0.5f * (float)((k - 1) % 2),
                off);
        v += cnt[k];
    }
    int last = v - cnt[nring - 1];
    bean(0.0f, -1.0f, 0.0f, &o->x[v * 3]);
    for (int j = 0; j < cnt[nring - 1]; j++) { /* the bottom pole's fan */
        uint32_t *t = &o->tri[nt++ * 3];
        t[0] = (uint32_t)v;
        t[1] = (uint32_t)(last + (j + 1) % cnt[nring - 1]);
        t[2] = (uint32_t)(last + j);
    }
    o->ntri = nt;
}

sim_status sim_softbody_mesh_organ(sim_softbody_mesh *out, int n, char *err, size_t err_sz)
{
    memset(out, 0, sizeof *out);
    if (n < 12 || n > SIM_SOFTBODY_MAX_VERTS)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "organ: %d vertices: 12 to %d", n,
                                   SIM_SOFTBODY_MAX_VERTS);
    int m = n - 2;
    /* Even spacing: the rings are pi / (nring + 1) apart and a ring holds about 2 (nring + 1)
     * sin(theta) vertices, so m ~ 4 (nring + 1)^2 / pi. */
    int nring = (int)lroundf(sqrtf(SB_PI * (float)m / 4.0f)) - 1;
    nring = nring < 2 ? 2 : nring;
    while (nring > 2 && 3 * nring > m)
        nring--;
    int *cnt = sc_calloc((size_t)nring, sizeof(int));
    out->nvert = n;
    out->x = sc_calloc((size_t)n * 3, sizeof(float));
    /* Euler: a closed genus-0 mesh of n vertices has 2n - 4 triangles. */
    out->tri = sc_calloc((size_t)(2 * n - 4) * 3, sizeof(uint32_t));
    if (!cnt || !out->x || !out->tri) {
        free(cnt);
        return fail_mesh(out, err, err_sz, SIM_ERR_NOMEM, "organ: out of memory");
    }
    ring_counts(m, nring, cnt);
    organ_rings(out, cnt, nring);
    free(cnt);
    SC_ASSERT(out->ntri == 2 * n - 4);
    sim_status st = sim_softbody_mesh_check(out, err, err_sz);
    if (st != SIM_OK)
        sim_softbody_mesh_free(out);
    return st;
}
