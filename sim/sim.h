/* sim.h: what every scene of the Softcast simulation library shares: status codes, the
 * backend (CPU or CUDA), and the declared parameter tables. Each scene has its own
 * public header beside its code: sim/volume/volume.h, sim/cloth/cloth.h.
 *
 * A scene is an immutable model (built once, shared read-only by every session that
 * uses it) plus a mutable state per session. Events are queued on a state and applied
 * at the next frame boundary by the scene's step. A step is deterministic for a given
 * backend and thread count.
 *
 * Threads: a model may be read by any number of threads at once. A state and its
 * backend belong to one thread at a time (the caller serialises).
 */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum sim_status {
    SIM_OK = 0,
    SIM_ERR_ARG,     ///< an argument or parameter is out of range
    SIM_ERR_IO,      ///< a file could not be opened or read
    SIM_ERR_FORMAT,  ///< a file is corrupt, truncated or of an unsupported kind
    SIM_ERR_LIMIT,   ///< a configured limit was exceeded (elements, queue)
    SIM_ERR_NOMEM,   ///< an allocation failed
    SIM_ERR_BACKEND, ///< the backend failed (CUDA error, no device)
} sim_status;

/// Short constant name of a status ("ok", "bad argument", ...).
const char *sim_status_str(sim_status s);

/* --------------------------------------------------------------- backend */

typedef enum sim_backend_kind {
    SIM_BACKEND_AUTO = 0, ///< CUDA when a device answers, CPU otherwise
    SIM_BACKEND_CPU,
    SIM_BACKEND_CUDA,
} sim_backend_kind;

typedef struct sim_backend sim_backend;

/// Create a backend. threads: CPU worker threads (0 = all cores). Owned by caller.
sim_status sim_backend_create(sim_backend **out, sim_backend_kind kind, int threads, char *err,
                              size_t err_sz);
void sim_backend_destroy(sim_backend *b);
/// "cpu" or "cuda".
const char *sim_backend_name(const sim_backend *b);
/// Threads the CPU backend uses (1 for CUDA).
int sim_backend_threads(const sim_backend *b);
/// 1 when the backend steps many states in one batch of launches (CUDA: see
/// sim_volume_step_many), so that stepping due sessions together beats stepping them in turn.
/// The CPU backend steps a batch one state after another: 0.
int sim_backend_batches(const sim_backend *b);
/// 1 when this build contains the CUDA backend and a device answers.
int sim_cuda_available(void);
/// Parse "auto" / "cpu" / "cuda"; returns -1 for anything else.
int sim_backend_kind_parse(const char *s);

/* ------------------------------------------------------------- parameters */

/* Each scene declares its parameters once, in its params.def (MuJoCo's X-macro lists):
 * the struct fields, the defaults, the range checks, the names clients use and the
 * schema a server sends all come from that list, through this table of descriptors. */
typedef enum sim_param_type {
    SIM_PARAM_FLOAT = 0,
    SIM_PARAM_INT,
    SIM_PARAM_CHOICE, ///< an int indexing `choices`
} sim_param_type;

typedef struct sim_param_desc {
    const char *name;    ///< as clients name it: "alpha", "wind.0", "tissue.skin_fat.shear"
    const char *group;   ///< the panel group the scene chose
    const char *unit;    ///< "" when none
    const char *doc;     ///< one line
    const char *choices; ///< SIM_PARAM_CHOICE: names separated by '|', else NULL
    sim_param_type type;
    int internal;  ///< 1: checked and defaulted, but not shown to or set by clients
    size_t offset; ///< of the float or int in the scene's parameter struct
    double def, min, max;
} sim_param_desc;

/// The descriptor named `name` (case-sensitive), or NULL.
const sim_param_desc *sim_param_find(const sim_param_desc *t, int n, const char *name);
/// A parameter's value as a double.
double sim_param_get(const sim_param_desc *d, const void *params);
/// Set one value, checked (finite, in [min, max], whole for INT and CHOICE). SIM_ERR_ARG
/// names the parameter and the range in err; params is unchanged then.
sim_status sim_param_set(const sim_param_desc *d, void *params, double v, char *err, size_t err_sz);
/// The index of a choice by name ("B" of "A|B|C"), or -1.
int sim_param_choice(const sim_param_desc *d, const char *name);
/// Choice i's name into out (empty when out of range).
void sim_param_choice_name(const sim_param_desc *d, int i, char *out, size_t out_sz);
/// Every value finite and in range; names the first that is not.
sim_status sim_params_check(const sim_param_desc *t, int n, const void *params, char *err,
                            size_t err_sz);
/// Every declared default into params (fields the table does not list are left alone).
void sim_params_default(const sim_param_desc *t, int n, void *params);

/* Generating a scene's struct from its list (see sim/volume/volume.h). */
#define SIM_PARAM_CTYPE_FLOAT    float
#define SIM_PARAM_CTYPE_INT      int
#define SIM_PARAM_FIELD(type, f) SIM_PARAM_CTYPE_##type f;
/* An array is declared by its element 0 and sized by its count. */
#define SIM_PARAM_ARRAY_0(type, f, n) SIM_PARAM_CTYPE_##type f[n];
#define SIM_PARAM_ARRAY_1(type, f, n)
#define SIM_PARAM_ARRAY_2(type, f, n)
#define SIM_PARAM_ARRAY_3(type, f, n)

#ifdef __cplusplus
}
#endif
#endif
