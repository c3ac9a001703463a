/* reader.h: users' volume files are read in a child process (reader.c), so that a decoder
 * that crashes or asserts on a malformed file costs that one read, not the server. */
#ifndef SERVER_READER_H
#define SERVER_READER_H

#include "sim/volume/volume.h"

/* The argument that makes a program the reader child: its main calls srv_reader_main when
 * argv[1] is this (the server's main does; the C tests' main too, so they test the child). */
#define SRV_READER_ARG "--volume-reader"

/* sim_volume_load_file, run in a child (this program again, as the reader). The same
 * results; opts->progress is called on the caller's thread as the child reports each stage.
 * A child that dies (a signal, its CPU limit) or says nothing usable gives
 * SIM_ERR_FORMAT with why, naming path. Where the child cannot be started (no
 * /proc/self/exe), the file is read here, with a warning on stderr, once. */
sim_status srv_volume_load_isolated(sim_volume *out, const char *path,
                                    const sim_volume_load_opts *opts, sim_volume_info *info,
                                    char *err, size_t err_sz);

/* The child's main: argv as srv_volume_load_isolated builds it; writes its records to fd 3. */
int srv_reader_main(int argc, char **argv);

#endif
