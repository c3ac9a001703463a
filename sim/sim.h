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
/// 1 when this build contains the CUDA backend and a device answers.
int sim_cuda_available(void);
/// Parse "auto" / "cpu" / "cuda"; returns -1 for anything else.
int sim_backend_kind_parse(const char *s);

#ifdef __cplusplus
}
#endif
#endif
