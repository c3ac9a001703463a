/* growth.h: the growth scenes (../shared/GROWTH.md), whose structure grows while they run.
 *
 * The plant: a stochastic L-system. Each branch clones once (a continuation and a side
 * branch) and stops; a branch shorter than the length limit stops without cloning, so growth
 * ends by itself. A seed per plant: the same seed grows the same tree.
 *
 * The truss: the equivalent truss of a plate (Tatting and Guerdal 2000), one square cell of
 * four orthogonal members and two diagonals cloned generation by generation into a deep beam
 * of nx x ny cells, loaded, solved by the source's cellular-automata relaxation (each node
 * moved to equilibrium with its neighbours, repeated; here in four colours with
 * over-relaxation, on the CPU or CUDA from one kernel), and coloured by each cell's internal
 * energy. A direct sparse solve (CHOLMOD) is the reference. Units are SI (m, N, Pa).
 *
 * Threads: a plant or truss belongs to one thread at a time. */
#ifndef SIM_GROWTH_GROWTH_H
#define SIM_GROWTH_GROWTH_H

#include "sim/core/sc_blob.h"
#include "sim/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ parameters */

#define P(type, f, def, lo, hi, unit, group, doc)       SIM_PARAM_FIELD(type, f)
#define A(type, f, i, n, def, lo, hi, unit, group, doc) SIM_PARAM_ARRAY_##i(type, f, n)
#define C(f, def, n, choices, group, doc)               int f;
#define I(type, f, def, lo, hi, unit, doc)              SIM_PARAM_FIELD(type, f)
/// The scene's live parameters, declared once in sim/growth/params.def.
typedef struct sim_growth_params {
#include "params.def"
} sim_growth_params;
#undef P
#undef A
#undef C
#undef I

enum { SIM_GROWTH_SOLVER_RELAX = 0, SIM_GROWTH_SOLVER_DIRECT = 1 };

/// The declared table (params.def).
const sim_param_desc *sim_growth_params_table(int *n);
sim_growth_params sim_growth_default_params(void);
/// The table's ranges, and side_angle_min <= side_angle_max.
sim_status sim_growth_params_validate(const sim_growth_params *p, char *err, size_t err_sz);

/* ------------------------------------------------------------------ the plant */

/// The L-system's rules, in the source's units (GROWTH.md section 1).
typedef struct sim_plant_params {
    float ref_length;     ///< reference length of the first branch (100)
    float min_length;     ///< a branch shorter than this stops without cloning (10)
    float cont_ratio;     ///< a continuation's length over its parent's (0.8)
    float cont_turn_deg;  ///< a continuation turns by a uniform angle in +-this (5)
    float side_ratio_min; ///< a side branch's length over its parent's: uniform in
    float side_ratio_max; ///<   [min, max] (0.6, 0.8)
    float side_angle_min; ///< a side branch turns to its preferred side by a uniform
    float side_angle_max; ///<   angle in [min, max] degrees (30, 45)
    float base_min;       ///< the first branch is ref_length times a uniform factor in
    float base_max;       ///<   [min, max] (0.9, 1.1)
    float new_size;       ///< drawn thickness of a branch at the length limit (0.05)
    int three_d;          ///< 1: each clone's turning plane rolls by a random angle
    int max_branches;     ///< a step that would pass this is refused (SIM_ERR_LIMIT)
} sim_plant_params;

/// The source's rules (2D).
sim_plant_params sim_plant_default_params(void);
/// Every rule in range (lengths positive, min <= max, angles in [0, 90]); names the first
/// that is not.
sim_status sim_plant_params_check(const sim_plant_params *p, char *err, size_t err_sz);

enum { SIM_BRANCH_ROOT = 0, SIM_BRANCH_CONTINUATION = 1, SIM_BRANCH_SIDE = 2 };

/// One branch: a segment from start to tip (source units; 2D grows in x, y with z = 0, up +y).
typedef struct sim_branch {
    float start[3], tip[3];
    float dir[3];    ///< unit, from start to tip
    float normal[3]; ///< the axis its clones turn about (2D: +z)
    float length;
    float size;     ///< drawn thickness, fixed at birth (sim_plant_branch_size)
    float turn_deg; ///< signed angle from its parent's direction (0: the root)
    int32_t parent; ///< index of its parent, -1 for the root
    int32_t generation;
    int8_t side;     ///< preferred side, +1 or -1: where its side branch turns
    int8_t kind;     ///< SIM_BRANCH_*
    int8_t complete; ///< cloned, or too short to
    int8_t reserved;
} sim_branch;

typedef struct sim_plant sim_plant;

/// A plant of one branch (the root, growing up from the origin) from these rules and seed.
sim_status sim_plant_create(sim_plant **out, const sim_plant_params *p, uint64_t seed, char *err,
                            size_t err_sz);
void sim_plant_destroy(sim_plant *pl);
/// One generation: every branch not yet complete clones (or, too short, stops). Returns the
/// branches added (0: growth has stopped), -1 when the cap would be passed or -2 when memory
/// ran out (nothing added either way).
int sim_plant_step(sim_plant *pl);
/// 1 once every branch is complete.
int sim_plant_done(const sim_plant *pl);
/// The branches in the order they were made (a parent before its children); valid until the
/// next step.
const sim_branch *sim_plant_branches(const sim_plant *pl, int *n);
int sim_plant_generation(const sim_plant *pl);
const sim_plant_params *sim_plant_params_of(const sim_plant *pl);
uint64_t sim_plant_seed(const sim_plant *pl);
/// Bitwise hash of every branch (same seed, same rules: same hash).
uint64_t sim_plant_hash(const sim_plant *pl);
/// The plant's whole state as bytes (its rules, seed, generator, branches), and back into a
/// plant of the same fixed rules (only the turns and the length limit may differ):
/// SIM_ERR_FORMAT for a damaged or foreign snapshot (the plant then unchanged).
sim_status sim_plant_save(const sim_plant *pl, sc_blob *out);
sim_status sim_plant_restore(sim_plant *pl, const void *data, size_t n, char *err, size_t err_sz);
/// Change the rules for the clones made from now on (checked as at create; the branches
/// grown stay as they are).
sim_status sim_plant_set_params(sim_plant *pl, const sim_plant_params *p, char *err, size_t err_sz);
/// The thickness a branch of that length is drawn with (pipe model, see plant.c).
float sim_plant_branch_size(const sim_plant_params *p, float length);

/* ------------------------------------------------------------------ the truss */

/// The beam: its extent in cells and what each cell stands for.
typedef struct sim_truss_params {
    int nx, ny;         ///< cells to the right and up (50 x 25)
    double cell_m;      ///< side l of a square cell
    double thickness_m; ///< plate thickness t the truss stands for
    double youngs_pa;   ///< the plate's Young's modulus E
} sim_truss_params;

/// The source's deep beam: 50 x 25 cells of 0.1 m, a 10 mm steel plate (E 200 GPa).
sim_truss_params sim_truss_default_params(void);
sim_status sim_truss_params_check(const sim_truss_params *p, char *err, size_t err_sz);

/// Cross-section areas of the equivalent truss for a cell of side l and plate thickness t
/// (Tatting and Guerdal 2000): A_o = 3/4 l t (orthogonal), A_d = 3 sqrt(2) / 8 l t (diagonal).
double sim_truss_area_orthogonal(double l, double t);
double sim_truss_area_diagonal(double l, double t);

typedef struct sim_truss sim_truss;

/// A truss of one cell at the origin (bottom left), to grow to nx x ny cells.
sim_status sim_truss_create(sim_truss **out, const sim_truss_params *p, sim_backend *b, char *err,
                            size_t err_sz);
void sim_truss_destroy(sim_truss *t);
/// One generation of cloning: every cell clones itself to its right and upward, where the
/// beam has room and no cell stands yet. Returns the cells added (0: fully grown).
int sim_truss_grow(sim_truss *t);
/// Grow until complete.
void sim_truss_grow_all(sim_truss *t);
int sim_truss_cell_count(const sim_truss *t);
int sim_truss_has_cell(const sim_truss *t, int i, int j);
const sim_truss_params *sim_truss_params_of(const sim_truss *t);

/* Nodes are (i, j), 0 <= i <= nx, 0 <= j <= ny, at (i l, j l); node index i + j (nx + 1). */
/// Fix a node's x and/or y (0, 0 frees it). SIM_ERR_ARG off the grid.
sim_status sim_truss_support(sim_truss *t, int i, int j, int fix_x, int fix_y);
/// Remove every support and load.
void sim_truss_clear(sim_truss *t);
/// Set the force on a node (N; replaces what was there). SIM_ERR_ARG off the grid.
sim_status sim_truss_load(sim_truss *t, int i, int j, double fx, double fy);
/// The simply supported deep beam: a pin at the bottom left corner, a roller (y fixed) at
/// the bottom right, and a force fy (N, negative: down) at the middle of the top edge.
void sim_truss_load_case_beam(sim_truss *t, double fy);

/// The result of a solve.
typedef struct sim_truss_solve_info {
    int iterations;  ///< relaxation sweeps taken (0 for the direct solve)
    double residual; ///< |f - K u| / |f| after it (free degrees of freedom)
    double ms;       ///< wall time
} sim_truss_solve_info;

/// Cellular-automata relaxation from the current displacements: up to max_sweeps sweeps,
/// stopping once |f - K u| / |f| < tol. SIM_ERR_ARG when the grown truss is not held (no
/// support that stops it moving rigidly in x, in y and turning).
sim_status sim_truss_relax(sim_truss *t, int max_sweeps, double tol, sim_truss_solve_info *info,
                           char *err, size_t err_sz);
/// CPU threads the relaxation may use (the server's share for this step); 0: the backend's.
void sim_truss_set_threads(sim_truss *t, int threads);
/// Relaxation's over-relaxation factor (1: plain Gauss-Seidel; the default suits the beam's
/// size, see truss.c). Range (0, 2).
void sim_truss_set_omega(sim_truss *t, double omega);
double sim_truss_omega(const sim_truss *t);
/// The direct sparse solve (CHOLMOD) into the displacements. SIM_ERR_BACKEND when this build
/// has no CHOLMOD (sim_truss_have_direct), SIM_ERR_ARG when not held.
sim_status sim_truss_solve_direct(sim_truss *t, sim_truss_solve_info *info, char *err,
                                  size_t err_sz);
int sim_truss_have_direct(void);
/// Displacements to zero (the unloaded beam).
void sim_truss_reset(sim_truss *t);
/// Node displacements (m), (nodes x 2), node index i + j (nx + 1).
const double *sim_truss_displacements(const sim_truss *t);
/// The truss's changing state as bytes (its cells, supports, loads, displacements), and back
/// into a truss of the same extent: SIM_ERR_FORMAT for a damaged or foreign snapshot (the truss
/// then unchanged).
sim_status sim_truss_save(const sim_truss *t, sc_blob *out);
sim_status sim_truss_restore(sim_truss *t, const void *data, size_t n, char *err, size_t err_sz);
/// Bitwise hash of the cells, supports, loads and displacements.
uint64_t sim_truss_hash(const sim_truss *t);
/// |f - K u| / |f| now.
double sim_truss_residual(const sim_truss *t);

/// Each cell's internal energy (J), (nx x ny), cell i + j nx (0 where no cell stands):
/// U = 1/2 E l [ A_o/2 (e_b^2 + e_t^2 + e_l^2 + e_r^2) + sqrt(2) A_d (e_d1^2 + e_d2^2) ],
/// the source's U with each orthogonal member shared by the two cells beside it and the
/// diagonals' true length (so that the cells' energies add up to the work of the loads).
void sim_truss_cell_energy(const sim_truss *t, double *out);
/// The strain energy of the whole truss (J): 1/2 u^T K u.
double sim_truss_energy(const sim_truss *t);
/// The work of the loads on the displacements (J): f . u.
double sim_truss_load_work(const sim_truss *t);

/// Members for drawing: each as its two nodes and its area (0 where none stands yet).
/// kind: 0 horizontal, 1 vertical, 2 diagonal up-right, 3 diagonal up-left.
typedef struct sim_truss_member {
    int32_t a, b; ///< node indices
    int32_t kind, cell;
    double area;
} sim_truss_member;
/// Every member slot (present or not) in a fixed order; n their count.
const sim_truss_member *sim_truss_members(const sim_truss *t, int *n);
/// A member's axial strain from the current displacements.
double sim_truss_member_strain(const sim_truss *t, const sim_truss_member *m);

#ifdef __cplusplus
}
#endif
#endif
