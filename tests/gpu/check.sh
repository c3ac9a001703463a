#!/bin/sh
# Prepared GPU check, for a lent machine that has only the CUDA Toolkit and a C
# compiler (no make, no NIfTI, no server libraries). Builds the sim and the bench with
# nvcc, checks CUDA against CPU on the same script (parity), prints the timings.
# Budget: under 5 minutes. Usage: sh tests/gpu/check.sh   (from the repository root)
# meshoptimizer (the hybrid soft body's decimation) is not on the lent machine: run
# `sh tests/gpu/check.sh --prepare` here first, which copies its header and library into
# build/gpu-deps, and carry build/gpu-deps with the run. `--build-only` stops after the
# build and a short CPU run of the bench (make test runs it, so the script keeps building).
set -eu
cd "$(dirname "$0")/../.."
B=${BUILD:-build/gpu}
DEPS=build/gpu-deps
if [ "${1:-}" = --prepare ]; then
    mkdir -p "$DEPS/include" "$DEPS/lib"
    lib=$(cc -print-file-name=libmeshoptimizer.so)
    if [ ! -e "$lib" ] || [ ! -e /usr/include/meshoptimizer.h ]; then
        echo "no meshoptimizer here to copy (make deps installs it)"
        exit 1
    fi
    real=$(readlink -f "$lib")
    cp /usr/include/meshoptimizer.h "$DEPS/include/"
    cp "$real" "$DEPS/lib/"
    soname=$(objdump -p "$real" | sed -n 's/^ *SONAME *//p')
    ln -sf "$(basename "$real")" "$DEPS/lib/$soname"
    ln -sf "$(basename "$real")" "$DEPS/lib/libmeshoptimizer.so"
    echo "copied $(basename "$real") ($soname) and meshoptimizer.h into $DEPS: carry it"
    exit 0
fi
mkdir -p "$B/obj"
# meshoptimizer from the system where it is installed, else from build/gpu-deps (--prepare).
MESHOPT_CFLAGS="" MESHOPT_LIBS="-lmeshoptimizer"
if [ "${SOFTCAST_GPU_DEPS:-}" = carried ] || ! echo '#include <meshoptimizer.h>' | cc -E -x c - >/dev/null 2>&1; then
    [ -e "$DEPS/include/meshoptimizer.h" ] ||
        { echo "meshoptimizer is missing: run sh tests/gpu/check.sh --prepare where it is installed, and carry $DEPS"; exit 1; }
    MESHOPT_CFLAGS="-I$DEPS/include"
    MESHOPT_LIBS="-L$PWD/$DEPS/lib -Wl,-rpath,$PWD/$DEPS/lib -lmeshoptimizer"
fi
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# nvcc on PATH may be a wrapper script: ask nvcc where its toolkit is, then find libcudart.
TOP=$("$NVCC" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)
TOP=${TOP:-$(dirname "$(dirname "$NVCC")")}
CUDA_LIB=""
for d in "$TOP/lib64" "$TOP/lib" "$TOP"/targets/*/lib; do
    [ -e "$d/libcudart.so" ] && { CUDA_LIB=$d; break; }
done
[ -n "$CUDA_LIB" ] || { echo "no libcudart.so under $TOP"; exit 1; }
ARCH=${CUDA_ARCH:--gencode arch=compute_90,code=sm_90}
T0=$(date +%s)
echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
"$NVCC" --version | tail -n 1

echo "== build (cc + nvcc, --fmad=false, -ffp-contract=off)"
CFLAGS="-std=c11 -D_POSIX_C_SOURCE=200809L -O2 -g -ffp-contract=off -fopenmp -I. -DSIM_HAVE_CUDA=1 $MESHOPT_CFLAGS"
objs=""
for f in sim/*/*.c tests/scenes/*.c tests/bench/*.c; do
    o="$B/obj/$(echo "$f" | tr / _).o"
    cc $CFLAGS -c "$f" -o "$o" &
    objs="$objs $o"
done
for f in sim/*/*.cu; do
    o="$B/obj/$(echo "$f" | tr / _).o"
    "$NVCC" -std=c++17 -O2 --fmad=false -DSIM_HAVE_CUDA=1 -I. $ARCH -c "$f" -o "$o" &
    objs="$objs $o"
done
wait
cc -fopenmp -o "$B/softcast-bench" $objs -L"$CUDA_LIB" -Wl,-rpath,"$CUDA_LIB" \
    $MESHOPT_LIBS -lcudart -lstdc++ -lm
echo "built in $(( $(date +%s) - T0 )) s"
if [ "${1:-}" = --build-only ]; then # make test: the script still builds, and its bench runs
    "$B/softcast-bench" volume --backend cpu --threads 1 --dims 16x16x16 --frames 5 >/dev/null
    exit
fi

BENCH="$B/softcast-bench"
run() { echo "\$ softcast-bench $*"; timeout 120 "$BENCH" "$@" || echo "(exit $?)"; }
echo "== parity: CUDA against CPU (1 thread), same pull and release, 100 frames; then a CUDA"
echo "   state saved mid-drag and restored into another steps on as the original (durability)"
run parity --dims 128x128x75 --frames 100
echo "== CUDA timings"
run volume --backend cuda --dims 128x128x75 --scenario pull --frames 400
run volume --backend cuda --dims 64x64x64 --scenario pull --frames 400
run volume --backend cuda --uniform 0 --dims 64x64x64 --pull 3
run volume --backend cuda --uniform 0 --dims 64x64x64 --pull 8
run volume --backend cuda --dims 128x128x75 --scenario release --condition B --frames 300
run volume --backend cuda --dims 128x128x75 --scenario release --condition C --frames 300
echo "== many sessions (issue 14): N states of one 64^3 model dragged, all stepped together each"
echo "   frame (sim_volume_step_many: one batch of launches for them all), steps per second"
for n in 1 16 64; do
    run volume --backend cuda --dims 64x64x64 --sessions $n --frames 120
done
echo "== batch parity: 24 sessions with schedules of their own, together and each alone, hashes equal"
run volume --backend cuda --dims 64x64x64 --sessions 24 --frames 150 --check
run volume --backend cpu --threads 16 --dims 64x64x64 --sessions 16 --frames 120
echo "== cloth: CUDA against CPU, then timings"
run cloth --parity --frames 90
run cloth --backend cuda --dims 50x50 --substeps 15 --frames 200
run cloth --backend cuda --characters 100 --frames 200
echo "== softbody: CUDA against CPU, then timings"
run softbody --parity --frames 60
run softbody --backend cuda --model surface --particles 5000 --frames 200
run softbody --backend cuda --model hybrid --particles 20000 --frames 100
echo "== growth: the truss's relaxation, CUDA against CPU (400 sweeps), then timings"
run growth --parity --cells 200x100
run growth --model truss --backend cuda --cells 50x25
run growth --model truss --backend cuda --cells 200x100
echo "== CPU timings on this machine, for comparison"
run volume --backend cpu --threads 1 --dims 128x128x75 --scenario pull --frames 120
run volume --backend cpu --threads 0 --dims 128x128x75 --scenario pull --frames 120
run cloth --backend cpu --threads 1 --dims 50x50 --substeps 15 --frames 200
run cloth --backend cpu --threads 0 --characters 100 --frames 200
run softbody --backend cpu --threads 1 --model surface --particles 500 --frames 300
run softbody --backend cpu --threads 1 --model surface --particles 5000 --frames 200
run growth --model truss --backend cpu --threads 1 --cells 200x100
run growth --model truss --backend cpu --threads 0 --cells 200x100
echo "== done in $(( $(date +%s) - T0 )) s"
