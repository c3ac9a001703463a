# Softcast top-level Makefile (plain make, Redis style).
#   make            install missing system packages (deploy/install-deps.sh), build all
#   make test       build with ASan+UBSan and run every test (last line: N passed, N failed)
#   make run        build, then serve the default scene on http://127.0.0.1:8080
#   make bench      run the volume benches
#   make cuda-check compile every .cu with warnings as errors (no GPU needed)
#   make format     apply .clang-format (make test checks it)
#   make geometry-figures  time the soft-body geometry pipeline (a 30k-vertex organ)
# Knobs: OPT=-O2, SANITIZE=address,undefined (test build), NVCC=nvcc, CUDA=0 to skip it.

CC       ?= cc
OPT      ?= -O2
BUILD    ?= build
SANITIZE ?= address,undefined
NVCC     ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80

WARN   = -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
         -Wvla -Wformat=2 -Wdouble-promotion -Werror
CSTD   = -std=c11 -D_POSIX_C_SOURCE=200809L
# Same float results on every build: no FMA contraction (CUDA side: --fmad=false).
FPFLAGS = -ffp-contract=off
OPENMP ?= -fopenmp
# Without OpenMP (tsan-check) the pragmas are ignored, on purpose.
CFLAGS_BASE = $(CSTD) $(WARN) $(if $(OPENMP),,-Wno-unknown-pragmas) $(FPFLAGS) $(OPENMP) -MMD -MP -I.

# NIfTI support when Debian's NIfTI C library is installed (the GPU machine may lack it).
# Looked for when a recipe runs (recursive variables, used in recipes only), so that on a
# fresh machine the build that `deps` has just installed it for finds it.
NIFTI_H = $(wildcard /usr/include/nifti/nifti1_io.h)
NIFTI_CFLAGS = $(if $(NIFTI_H),-DSIM_HAVE_NIFTI=1 -I/usr/include/nifti)
NIFTI_LIBS = $(if $(NIFTI_H),-lniftiio -lznz -lz)
# DICOM series (sim/volume/dicom.cpp, GDCM's C++ library) and .zip of them (libzip), when
# Debian's libgdcm-dev and libzip-dev are installed; looked for at recipe time like NIfTI.
# dicom.cpp is always compiled (empty without GDCM), so a C++ compiler is needed (g++, which
# nvcc needs anyway); without the libraries the loaders say the build lacks DICOM support.
DICOM_H = $(and $(wildcard /usr/include/gdcm-3.0/gdcmImageReader.h),$(wildcard /usr/include/zip.h))
DICOM_CFLAGS = $(if $(DICOM_H),-DSIM_HAVE_DICOM=1)
DICOM_CXXFLAGS = $(if $(DICOM_H),-DSIM_HAVE_DICOM=1 -isystem /usr/include/gdcm-3.0)
DICOM_LIBS = $(if $(DICOM_H),-lgdcmMSFF -lgdcmDSED -lgdcmDICT -lgdcmIOD -lgdcmCommon -lzip -lstdc++)
# The growth truss's reference solve (sim/growth/direct.c): SuiteSparse's CHOLMOD when
# Debian's libsuitesparse-dev is installed; looked for at recipe time like NIfTI. Without it
# the direct solve says the build lacks it (the GPU machines build the sim without it).
CHOLMOD_H = $(wildcard /usr/include/suitesparse/cholmod.h)
CHOLMOD_CFLAGS = $(if $(CHOLMOD_H),-DSIM_HAVE_CHOLMOD=1 -I/usr/include/suitesparse)
CHOLMOD_LIBS = $(if $(CHOLMOD_H),-lcholmod)
# meshoptimizer (a dependency install-deps.sh always installs: the protocol's codecs) also
# decimates the soft-body surfaces. Not detected: a header looked for before make installs
# it would leave a fresh machine's first build without it.
MESHOPT_LIBS = -lmeshoptimizer

# CUDA backend when nvcc exists (CUDA=0 forces it off).
ifeq ($(CUDA),0)
  NVCC :=
endif
# nvcc on PATH may be a wrapper script, so ask nvcc itself where its toolkit lives (TOP in
# its dry run) and look for libcudart there. Without libcudart the backend is not linked,
# but cuda-check still compiles every .cu.
ifneq ($(NVCC),)
  CUDA_TOP := $(shell $(NVCC) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | \
                sed -n 's/^\#\$$ TOP=//p' | head -n 1)
  CUDA_TOP := $(if $(CUDA_TOP),$(CUDA_TOP),$(patsubst %/bin/nvcc,%,$(NVCC)))
  CUDA_LIBDIR := $(firstword $(realpath $(dir $(wildcard $(addprefix $(CUDA_TOP)/, \
                   lib64/libcudart.so lib/libcudart.so targets/*/lib/libcudart.so)))))
  ifneq ($(CUDA_LIBDIR),)
    CUDA_CFLAGS  = -DSIM_HAVE_CUDA=1
    CUDA_LIBS    = -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcudart -lstdc++
  else
    $(info cuda: no libcudart.so under $(CUDA_TOP); CUDA backend not linked (cuda-check still runs))
  endif
endif
NVFLAGS = -std=c++17 -O2 --fmad=false -DSIM_HAVE_CUDA=1 -I. -Xcompiler -Wall,-Wextra -Werror all-warnings $(CUDA_ARCH)

SIM_C    := $(wildcard sim/*/*.c)
SIM_CU   := $(wildcard sim/*/*.cu)
SIM_CPP  := $(wildcard sim/*/*.cpp)
PROTO_C  := $(wildcard protocol/*.c)
SERVER_C := $(wildcard server/*.c)
# The server's parts that need no sockets (the scene adapters see only scene.h): the C tests
# and the event fuzzer link them.
SCENE_C  := server/scene.c $(wildcard server/scene_*.c) server/text.c server/inbox.c server/forwarded.c \
            server/reader.c
# (fuzz_ws.c is the WebSocket handler with lws stubbed: libFuzzer only, never in the C tests)
TEST_C   := $(filter-out tests/fuzz/fuzz_ws.c tests/fuzz/fuzz_http.c,$(wildcard tests/*.c tests/sim/*.c tests/scenes/*.c tests/protocol/test_*.c tests/fuzz/*.c \
              tests/server/*.c))
TEST_CPP := $(wildcard tests/sim/*.cpp)
BENCH_C  := $(wildcard tests/bench/*.c tests/scenes/*.c)

# The bench's peers for the cloth and the soft body: Bullet's soft bodies, when installed
# (bench only). Looked for at recipe time like NIfTI: on a fresh machine `deps` installs it
# during the same make. The .cpp peers are always compiled (empty without Bullet).
BULLET_H = $(wildcard /usr/include/bullet/btBulletDynamicsCommon.h)
BENCH_CXX_O = $(patsubst %.cpp,$(REL)/%.cpp.o,$(wildcard tests/bench/*.cpp))
BENCH_DEFS = $(if $(BULLET_H),-DSOFTCAST_HAVE_BULLET=1)
BULLET_LIBS = $(if $(BULLET_H),-lBulletSoftBody -lBulletDynamics -lBulletCollision -lLinearMath -lstdc++)

LIBS = $(NIFTI_LIBS) $(DICOM_LIBS) $(CHOLMOD_LIBS) $(MESHOPT_LIBS) $(CUDA_LIBS) -lm
# The protocol (and later the server) need these; the sim and the bench do not.
PROTO_LIBS = -lzstd -lmeshoptimizer -lcjson
SERVER_LIBS = -lmicrohttpd -lwebsockets -lpthread

# Release objects in build/rel, test objects (sanitisers, -O1 -g) in build/test.
REL  = $(BUILD)/rel
TST  = $(BUILD)/test
REL_CFLAGS = $(CFLAGS_BASE) $(OPT) -g $(NIFTI_CFLAGS) $(DICOM_CFLAGS) $(CHOLMOD_CFLAGS) $(CUDA_CFLAGS)
TST_CFLAGS = $(CFLAGS_BASE) -O1 -g -fno-omit-frame-pointer -fsanitize=$(SANITIZE) \
             -fno-sanitize-recover=undefined $(NIFTI_CFLAGS) $(DICOM_CFLAGS) $(CHOLMOD_CFLAGS) \
             $(CUDA_CFLAGS)
# C++ (the DICOM reader, the tests' DICOM writer): the same warnings that C++ has.
CXXFLAGS_BASE = -std=c++17 -Wall -Wextra -Wpedantic -Wshadow -Wformat=2 -Werror $(FPFLAGS) \
                -MMD -MP -I. $(DICOM_CXXFLAGS)
REL_CXXFLAGS = $(CXXFLAGS_BASE) $(OPT) -g $(NIFTI_CFLAGS) $(CUDA_CFLAGS)
TST_CXXFLAGS = $(CXXFLAGS_BASE) -O1 -g -fno-omit-frame-pointer -fsanitize=$(SANITIZE) \
               -fno-sanitize-recover=undefined $(NIFTI_CFLAGS) $(CUDA_CFLAGS)

REL_SIM_O = $(SIM_C:%.c=$(REL)/%.o) $(SIM_CPP:%.cpp=$(REL)/%.cpp.o) \
            $(if $(CUDA_LIBDIR),$(SIM_CU:%.cu=$(REL)/%.cu.o))
TST_SIM_O = $(SIM_C:%.c=$(TST)/%.o) $(SIM_CPP:%.cpp=$(TST)/%.cpp.o) \
            $(if $(CUDA_LIBDIR),$(SIM_CU:%.cu=$(REL)/%.cu.o))

.PHONY: all build-all deps test-deps test mutants bench-client run bench cuda-check format-check format clean sim bench-bin protocol-vectors web
# The build runs after deps, never beside it (make -jN): what deps installs (NIfTI, GDCM,
# Bullet) is looked for when the flags are written, so a compile must not start before it.
all: deps
	@$(MAKE) --no-print-directory build-all
build-all: $(BUILD)/softcast-bench $(BUILD)/softcast-server $(BUILD)/softcast-load web

# The browser client: npm packages from the committed lock file, bundled by esbuild into
# web-client/dist/: app.js (the page) and wire.js (its Web Worker: the socket and the frame
# decoding), each with a gzip copy the server sends to browsers that take it.
WEB_SRC := $(wildcard web-client/src/*.mjs web-client/src/*/*.mjs) protocol/js/softcast-proto.mjs
web: web-client/dist/app.js
web-client/node_modules/.package-lock.json: web-client/package-lock.json
	cd web-client && npm ci --no-audit --no-fund --loglevel=error
web-client/dist/app.js: $(WEB_SRC) web-client/node_modules/.package-lock.json
	web-client/node_modules/.bin/esbuild app=web-client/src/main.mjs wire=web-client/src/wire.worker.mjs \
	    --bundle --minify --format=esm --target=es2020 --log-level=warning --outdir=web-client/dist
	gzip -9 -k -f web-client/dist/app.js web-client/dist/wire.js

deps:
	@deploy/install-deps.sh

# The tests also need Debian's Chromium (the browser end-to-end tests). After deps, never
# beside it (make -jN): two package installs at once fight over dpkg's lock.
test-deps: deps
	@deploy/install-deps.sh --test

sim: $(BUILD)/libsoftcast-sim.a

# Made afresh: `ar r` into an old archive keeps members whose sources moved or went (and
# replaces the wrong one of two objects with the same name), so the link would take them.
$(BUILD)/libsoftcast-sim.a: $(REL_SIM_O)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/softcast-bench: $(BENCH_C:%.c=$(REL)/%.o) $(BENCH_CXX_O) $(BUILD)/libsoftcast-sim.a \
                        $(BUILD)/bench.flags
	$(CC) $(OPENMP) -o $@ $(filter-out %.flags,$^) $(BULLET_LIBS) $(LIBS)

# Their own rule, not a target-specific REL_CFLAGS: make would hand that to rel.flags too.
$(REL)/tests/bench/bench_cloth.o $(REL)/tests/bench/bench_softbody_peer.o: $(REL)/%.o: %.c \
        $(BUILD)/rel.flags $(BUILD)/bench.flags
	@mkdir -p $(@D)
	$(CC) $(REL_CFLAGS) $(BENCH_DEFS) -c -o $@ $<
$(REL)/tests/bench/%.cpp.o: tests/bench/%.cpp $(BUILD)/rel.flags $(BUILD)/bench.flags
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -Wall -Wextra -Werror $(BENCH_DEFS) $(if $(BULLET_H),-isystem /usr/include/bullet) \
	    -MMD -MP -c -o $@ $<

bench-bin: $(BUILD)/softcast-bench

# The soft-body geometry pipeline's timings (tests/tools/geometry_figures.c): a phantom organ
# at 1 mm voxels, 30,000 surface vertices, tets of 4 to 32 voxels; GEOMETRY_ARGS to vary.
.PHONY: geometry-figures
geometry-figures: $(BUILD)/softcast-geometry
	$(BUILD)/softcast-geometry $(GEOMETRY_ARGS)

$(BUILD)/softcast-geometry: $(REL)/tests/tools/geometry_figures.o $(BUILD)/libsoftcast-sim.a
	$(CC) $(OPENMP) -o $@ $^ $(LIBS)

$(BUILD)/softcast-server: $(SERVER_C:%.c=$(REL)/%.o) $(PROTO_C:%.c=$(REL)/%.o) $(BUILD)/libsoftcast-sim.a
	$(CC) $(OPENMP) -o $@ $^ $(SERVER_LIBS) $(PROTO_LIBS) $(LIBS)

# The operators' load generator in C (deploy/load/softcast-load.c): one thread, libwebsockets.
$(BUILD)/softcast-load: $(REL)/deploy/load/softcast-load.o
	$(CC) -o $@ $^ -lwebsockets -lcjson -lm

# The server under ASan and UBSan, for the integration tests (leaks show at exit).
$(TST)/softcast-server: $(SERVER_C:%.c=$(TST)/%.o) $(PROTO_C:%.c=$(TST)/%.o) $(TST_SIM_O)
	$(CC) $(OPENMP) -fsanitize=$(SANITIZE) -o $@ $^ $(SERVER_LIBS) $(PROTO_LIBS) $(LIBS)

$(BUILD)/softcast-tests: $(TEST_C:%.c=$(TST)/%.o) $(TEST_CPP:%.cpp=$(TST)/%.cpp.o) $(PROTO_C:%.c=$(TST)/%.o) $(SCENE_C:%.c=$(TST)/%.o) $(TST_SIM_O)
	$(CC) $(OPENMP) -fsanitize=$(SANITIZE) -o $@ $^ $(PROTO_LIBS) $(LIBS)

# The same tests optimized and unsanitized, for the long runs (TEST_LONG, tests/harness.h):
# make test runs those here (--long), 10-15x faster than under the sanitizers, and the rest
# in the sanitized binary (--short).
$(BUILD)/softcast-tests-fast: $(TEST_C:%.c=$(REL)/%.o) $(TEST_CPP:%.cpp=$(REL)/%.cpp.o) $(PROTO_C:%.c=$(REL)/%.o) $(SCENE_C:%.c=$(REL)/%.o) $(REL_SIM_O)
	$(CC) $(OPENMP) -o $@ $^ $(PROTO_LIBS) $(LIBS)

# libFuzzer on the frame decoders, the event parsers (the envelope, then every scene's) and
# frame sequences applied to one object decoder (clang). FUZZ_SECONDS each, from the committed
# corpus tests/fuzz/corpus/T (which make test replays); new interesting inputs land in
# build/fuzz/new/T, to be copied into the corpus where worth keeping. make fuzz-seeds writes the
# encoder-made seeds (a frame of every kind, and frame sequences) that the corpora start from.
# ws: the WebSocket message handler itself (server/ws.c with its lws calls stubbed, on a real
# session table; tests/fuzz/fuzz_ws.c).
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 60
FUZZ_CC ?= clang
# The library sources are compiled once, instrumented (fuzzer-no-link), into build/fuzz/obj/
# and shared by every target; each target's own file adds its main (FUZZ_MAIN).
FUZZ_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -g -I.
FUZZ_SAN = address,undefined
FUZZ_TARGETS = frame event delta ws http
FUZZ_SRC_frame = $(PROTO_C)
FUZZ_SRC_delta = $(PROTO_C)
FUZZ_SRC_event = $(PROTO_C) $(SCENE_C) $(SIM_C)
FUZZ_SRC_ws = $(PROTO_C) $(SCENE_C) $(SIM_C) server/session.c server/config.c server/durable.c \
              server/recording.c server/builder.c
FUZZ_SRC_http = $(PROTO_C) $(SCENE_C) $(SIM_C) server/session.c server/config.c server/durable.c \
                server/recording.c
FUZZ_OBJ = $(BUILD)/fuzz/obj
.PHONY: fuzz fuzz-seeds fuzz-smoke fuzz-bin
fuzz-bin: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
$(FUZZ_OBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -MMD -MP -c -o $@ $<
# The simulation is linked for the sessions the handlers make, not fuzzed (its own tests cover
# it): sanitized but kept out of the coverage map, so the fuzzers steer by the code under test
# and do not pay for the thousands of edges a volume build lights (the http target ran 2.4x
# faster).
$(FUZZ_OBJ)/sim/%.o: sim/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=$(FUZZ_SAN) -MMD -MP -c -o $@ $<
define FUZZ_TARGET_RULE
$(BUILD)/fuzz/fuzz_$(1): tests/fuzz/fuzz_$(1).c $(FUZZ_SRC_$(1):%.c=$(FUZZ_OBJ)/%.o) $(wildcard server/*.c server/*.h tests/fuzz/*.h)
	@mkdir -p $$(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DFUZZ_MAIN -fsanitize=fuzzer,$(FUZZ_SAN) -o $$@ $$< \
	    $(FUZZ_SRC_$(1):%.c=$(FUZZ_OBJ)/%.o) $(PROTO_LIBS) -lpthread -lm
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call FUZZ_TARGET_RULE,$(t))))
# libFuzzer writes new inputs into the first folder it is given: build/fuzz/new/T, never the
# committed corpus (a run would leave hundreds of untracked files in the tree).
fuzz: fuzz-bin
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD)/fuzz/new/$$t && \
	  $(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	    $(BUILD)/fuzz/new/$$t tests/fuzz/corpus/$$t || exit 1; \
	done
# In make test (tests/run-tests.sh runs it beside the other tests, at idle priority): each
# target FUZZ_SMOKE_SECONDS from its committed corpus with a fixed seed; what it finds goes to
# a scratch folder, never into the committed corpus. FUZZ_JOBS targets at a time.
FUZZ_JOBS ?= 3
fuzz-smoke: fuzz-bin
	tests/fuzz/smoke.sh $(BUILD) $(FUZZ_SMOKE_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)

# The server under ThreadSanitizer, through its end-to-end tests. Built without OpenMP:
# libgomp is not instrumented, so its barriers would read as races.
.PHONY: tsan-check
tsan-check: deps
	$(MAKE) BUILD=$(BUILD)/tsan SANITIZE=thread OPENMP= CUDA=0 $(BUILD)/tsan/test/softcast-server
	cd tests/server && npm ci --no-audit --no-fund --loglevel=error >/dev/null
	SOFTCAST_SERVER=$(CURDIR)/$(BUILD)/tsan/test/softcast-server TSAN_OPTIONS="halt_on_error=1 exitcode=66" \
	    node --test tests/server/server.test.mjs tests/server/behaviour.test.mjs \
	    tests/server/classroom.test.mjs tests/server/cloth.test.mjs tests/server/keyframes.test.mjs

fuzz-seeds: $(BUILD)/softcast-fuzzseeds
	@mkdir -p tests/fuzz/corpus/frame tests/fuzz/corpus/delta
	$(BUILD)/softcast-fuzzseeds tests/fuzz/corpus/frame tests/fuzz/corpus/delta

$(BUILD)/softcast-fuzzseeds: $(REL)/tests/protocol/gen_fuzz_seeds.o $(PROTO_C:%.c=$(REL)/%.o)
	$(CC) -o $@ $^ $(PROTO_LIBS) -lm

# Regenerate protocol/vectors/*.bin (commit the result; vectors.json says what they hold).
protocol-vectors: $(BUILD)/softcast-protogen
	$(BUILD)/softcast-protogen protocol/vectors

$(BUILD)/softcast-protogen: $(REL)/tests/protocol/gen_vectors.o $(PROTO_C:%.c=$(REL)/%.o)
	$(CC) -o $@ $^ $(PROTO_LIBS) -lm

# The flags and libraries each kind of build uses, in a file rewritten only when they change:
# objects depend on it, so a change of configuration (the NIfTI library installed after a
# first build, CUDA found, OPT changed) rebuilds what it affects.
.PHONY: FORCE
$(BUILD)/rel.flags $(BUILD)/test.flags $(BUILD)/bench.flags: $(BUILD)/%.flags: FORCE
	@mkdir -p $(@D)
	@printf '%s\n' '$(FLAGS_$*)' | cmp -s - $@ 2>/dev/null || printf '%s\n' '$(FLAGS_$*)' >$@
FLAGS_rel = $(CC) $(REL_CFLAGS) $(CXX) $(REL_CXXFLAGS) $(LIBS)
# The bench's peer (Bullet): only the bench's objects and link follow it.
FLAGS_bench = $(BENCH_DEFS) $(BULLET_LIBS)
FLAGS_test = $(CC) $(TST_CFLAGS) $(CXX) $(TST_CXXFLAGS) $(LIBS)

$(REL)/%.o: %.c $(BUILD)/rel.flags
	@mkdir -p $(@D)
	$(CC) $(REL_CFLAGS) -c -o $@ $<

$(TST)/%.o: %.c $(BUILD)/test.flags
	@mkdir -p $(@D)
	$(CC) $(TST_CFLAGS) -c -o $@ $<

$(REL)/sim/%.cpp.o: sim/%.cpp $(BUILD)/rel.flags
	@mkdir -p $(@D)
	$(CXX) $(REL_CXXFLAGS) -c -o $@ $<

$(REL)/tests/sim/%.cpp.o: tests/sim/%.cpp $(BUILD)/rel.flags
	@mkdir -p $(@D)
	$(CXX) $(REL_CXXFLAGS) -c -o $@ $<

$(TST)/%.cpp.o: %.cpp $(BUILD)/test.flags
	@mkdir -p $(@D)
	$(CXX) $(TST_CXXFLAGS) -c -o $@ $<

$(REL)/%.cu.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -MMD -MP -c -o $@ $<

# The packages first, then everything the tests need built one job a core, then the tests
# (tests/run-tests.sh: the C tests, the node tests and the fuzz smoke at once).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
.PHONY: test-build
test: deps test-deps
	$(MAKE) --no-print-directory -j$(JOBS) test-build
	SOFTCAST_FUZZ_SMOKE="$(FUZZ_SMOKE_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)" tests/run-tests.sh $(BUILD)
test-build: format-check $(BUILD)/softcast-tests $(BUILD)/softcast-tests-fast $(TST)/softcast-server $(BUILD)/softcast-load cuda-check web fuzz-bin

# The local cluster (deploy/local/: three servers behind nginx over TLS) and the manifests
# checks; make test runs them with the other node tests.
.PHONY: test-deploy
test-deploy: deps test-deps $(TST)/softcast-server
	for d in tests/server tests/deploy; do (cd $$d && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || exit 1; done
	SOFTCAST_SERVER=$(CURDIR)/$(TST)/softcast-server node --test tests/deploy/

# The one .clang-format, checked on every test run; `make format` applies it.
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cu' 2>/dev/null)
# It also holds every function in sim/, server/ and protocol/ to 100 lines.
format-check:
	@if [ -z "$(FORMAT_FILES)" ]; then echo "format-check: not a git checkout, skipped"; \
	else clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: ok" && \
	  tests/function-length.sh; fi

format:
	clang-format -i $(FORMAT_FILES)

# Serve the default volume scene on http://127.0.0.1:8080 (WebSocket on 8081) with one
# session ready; its links are printed. Ctrl-C stops it cleanly.
run: all
	$(BUILD)/softcast-server --http-port 8080 --ws-port 8081 --default-session --state-dir $(BUILD)/state

# Pull at the reference size with 2 and 1 threads; softcast-load's drag loop at 64^3 (the
# slowest steps set a server's input-to-frame latency); the same small pull on a homogeneous
# block at 64^3 and 128x128x75 (propagation cost follows moved elements, not size);
# release under each damping condition; the cloth: LOD switches in six scenarios, the
# hanging sheet beside Bullet, a crowd of 100; the soft body: the source's 500 particles and
# 5,000 on one thread, the two-region tet box beside Bullet, the phantom organ on 2 threads;
# then the server itself under build/softcast-load (tests/bench/server-load.sh): step and
# encode per frame, sessions of 1 driver and 4 viewers, 1 driver and 100 viewers.
bench: all
	$(BUILD)/softcast-bench volume --dims 128x128x75 --threads 2 --scenario pull --frames 200
	$(BUILD)/softcast-bench volume --dims 128x128x75 --threads 1 --scenario pull --frames 200
	$(BUILD)/softcast-bench volume --dims 64x64x64 --threads 1 --scenario drag --frames 540
	$(BUILD)/softcast-bench volume --dims 64x64x64 --threads 2 --scenario drag --frames 540
	BUILD=$(BUILD) tests/bench/pull-across-n.sh
	$(BUILD)/softcast-bench volume --uniform 0 --dims 64x64x64 --threads 2 --pull 3
	$(BUILD)/softcast-bench volume --uniform 0 --dims 64x64x64 --threads 2 --pull 8
	$(BUILD)/softcast-bench volume --uniform 0 --dims 128x128x75 --threads 2 --pull 3
	for c in A B C; do $(BUILD)/softcast-bench volume --dims 128x128x75 --threads 2 \
	    --scenario release --condition $$c --frames 300 || exit 1; done
	$(BUILD)/softcast-bench cloth --lod-scenarios
	$(BUILD)/softcast-bench cloth --dims 50x50 --substeps 15 --threads 1 $(if $(BULLET_H),--peer bullet)
	$(BUILD)/softcast-bench cloth --characters 100 --threads 2
	$(BUILD)/softcast-bench softbody --model surface --particles 500 --threads 1 --substeps 5 --frames 600
	$(BUILD)/softcast-bench softbody --model surface --particles 5000 --threads 1 --substeps 5 --frames 300
	$(BUILD)/softcast-bench softbody --model hybrid --particles 2500 --threads 1 --frames 300 $(if $(BULLET_H),--peer bullet)
	$(BUILD)/softcast-bench softbody --model hybrid --organ phantom --threads 2 --frames 100
	$(BUILD)/softcast-bench growth --model truss --cells 50x25
	$(BUILD)/softcast-bench growth --model truss --cells 200x100
	$(BUILD)/softcast-bench growth --model plant --seed 1
	BUILD=$(BUILD) tests/bench/server-load.sh

# The browser client's figures in headless Chromium against the release server: first-load
# bytes, time to first frame, frames/s and latency while dragging.
bench-client: all test-deps
	cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error
	node tests/e2e/measure.mjs

# Each behaviour check against the bug it claims to catch (tests/mutants/): apply one
# mutation at a time to a scratch copy, rebuild, run the check, expect it to fail.
mutants: all test-deps
	for d in tests/server tests/e2e; do (cd $$d && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || exit 1; done
	node tests/mutants/run.mjs $(MUTANTS_ARGS)

# Every .cu compiled with warnings as errors (the objects the backend links, reused); needs
# nvcc, not a GPU. And the prepared GPU script (tests/gpu/check.sh), which builds with cc and
# nvcc alone from flags and libraries of its own: built here and its bench run briefly, so
# that it still builds when a GPU is lent (a library the sim took on since would otherwise
# surface only there). It links libcudart, so it needs the toolkit's libraries too.
ifneq ($(NVCC),)
cuda-check: $(SIM_CU:%.cu=$(REL)/%.cu.o) $(REL)/tests/gpu/kernels_compile.cu.o \
            $(if $(CUDA_LIBDIR),$(BUILD)/gpu-script/softcast-bench)
	@echo "cuda-check: every .cu compiles$(if $(CUDA_LIBDIR),; tests/gpu/check.sh builds)"
$(BUILD)/gpu-script/softcast-bench: $(SIM_C) $(SIM_CU) $(BENCH_C) tests/gpu/check.sh \
            $(wildcard sim/*.h sim/*/*.h tests/scenes/*.h tests/bench/*.h)
	BUILD=$(BUILD)/gpu-script NVCC=$(NVCC) sh tests/gpu/check.sh --build-only >$(BUILD)/gpu-script.log 2>&1 || \
	  { cat $(BUILD)/gpu-script.log; exit 1; }
else
cuda-check:
	@echo "cuda-check: nvcc not found (install the CUDA Toolkit); skipped"
endif

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
