#!/bin/sh
# Run every test: the C binary, then the server and JS tests under node.
# First fetch data made by others into BUILD/data: a real CT and real meshes. When a file
# cannot be had, FILE.FETCH_FAILED beside it says why, starting "reachable:" when the
# package registry answered (another package downloads: the fetch itself is broken, and the
# test that needs the data fails) or "unreachable:" (no registry here: that test skips,
# naming the cause).
set -u
BUILD=${1:-build}
DATA="$BUILD/data"
mkdir -p "$DATA"

# fetch PKG OUT UNPACK: unless OUT is there, download Debian's PKG and run "UNPACK DEB_DIR"
# (it makes OUT from the unpacked package in $tmp/x); OUT.FETCH_FAILED says why when not.
fetch() {
    pkg=$1 out=$2 unpack=$3
    if [ -s "$out" ]; then
        rm -f "$out.FETCH_FAILED"
        return
    fi
    tmp=$(mktemp -d)
    why=""
    # Bounded: an offline machine gives up after about 30 s, not after apt's default waits.
    download() { (cd "$tmp" && apt-get -o Acquire::http::Timeout=30 -o Acquire::Retries=0 download "$1" >"$tmp/$1.log" 2>&1); }
    last() { tail -n 1 "$tmp/$1.log" 2>/dev/null; }
    if ! command -v apt-get >/dev/null 2>&1; then
        why="unreachable: apt-get not found (not a Debian system)"
    # A machine whose package lists were never fetched needs one update first (as root).
    elif download "$pkg" ||
        { [ "$(id -u)" = 0 ] && apt-get update -qq >"$tmp/update.log" 2>&1 && download "$pkg"; }; then
        { dpkg -x "$tmp"/"$pkg"_*.deb "$tmp/x" && "$unpack" "$tmp" && [ -s "$out" ]; } ||
            why="reachable: $pkg downloaded but did not unpack to $out"
    elif download base-files; then
        why="reachable: apt-get download $pkg failed ($(last "$pkg")) while base-files downloaded"
    else
        why="unreachable: apt-get download failed for $pkg ($(last "$pkg")) and for base-files ($(last base-files))"
    fi
    if [ -n "$why" ]; then
        echo "run-tests: $pkg: $why"
        printf '%s\n' "$why" >"$out.FETCH_FAILED"
    else
        rm -f "$out.FETCH_FAILED"
    fi
    rm -rf "$tmp"
}

# The real CT: Debian's invesalius-examples head CT (Cranium.inv3's matrix.dat).
unpack_cranium() {
    tar -xzf "$1/x/usr/share/doc/invesalius-examples/examples/Cranium.inv3" -C "$1" &&
        mv "$(find "$1" -name matrix.dat | head -n 1)" "$DATA/cranium_256x256x108_i16.raw"
}
fetch invesalius-examples "$DATA/cranium_256x256x108_i16.raw" unpack_cranium
# Closed and open meshes made by others: CGAL's test data (Debian's libcgal-demo), for the
# soft body's loader and surface model. The list is the one test_softbody.c reads.
MESHES="elephant elephant-with-holes femur dino knot hedra_open armadillo"
unpack_meshes() {
    mkdir -p "$DATA/meshes" &&
        tar -xzf "$1/x/usr/share/doc/libcgal-dev/data.tar.gz" -C "$1" \
            $(for m in $MESHES; do printf ' data/meshes/%s.off' "$m"; done) &&
        for m in $MESHES; do cp "$1/data/meshes/$m.off" "$DATA/meshes/" || return 1; done &&
        echo "$MESHES" >"$DATA/meshes/LIST"
}
mkdir -p "$DATA/meshes"
fetch libcgal-demo "$DATA/meshes/LIST" unpack_meshes
# DICOM made by others: pydicom's test files (Debian's python3-pydicom), for the server's
# reader on files it never saw (tests/server/upload.test.mjs).
unpack_pydicom() {
    rm -rf "$DATA/pydicom/test_files" &&
        cp -r "$1/x/usr/lib/python3/dist-packages/pydicom/data/test_files" "$DATA/pydicom/" &&
        ls "$DATA/pydicom/test_files" >"$DATA/pydicom/LIST"
}
mkdir -p "$DATA/pydicom"
fetch python3-pydicom "$DATA/pydicom/LIST" unpack_pydicom
export SOFTCAST_DATA="$DATA"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
# OpenMP threads that wait by spinning, on a machine where another process holds a core,
# turn every barrier into a scheduler time slice (measured: the volume tests 3-5x slower
# with one core busy). Waiting in the kernel costs microseconds and never that.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
shift 2>/dev/null || true

# Three parts run at once, each into its own log, printed whole as it ends:
# 1. the node tests (the server end to end, the JavaScript decoder, the browser client in
#    headless Chromium, against the server built with ASan and UBSan) at normal priority.
#    The files that bound frame rates, latencies or a page's longest task (NODE_TIMED) first,
#    one at a time: with other files' servers beside them the fairness test's small session
#    once fell under its frame-rate bound, and the browser client's crowd page once had a
#    357 ms task against its bound, and the cluster's streams once had a 1,026 ms gap
#    against their 1 s after a process was killed; then the rest, SOFTCAST_NODE_JOBS files at a time
#    (default 3: they mostly wait on frame periods and pages);
# 2. the C tests (sim, protocol, scenes) at nice 19: they count work, never time, so they
#    take what the node tests leave (the node tests mostly wait on frame periods);
# 3. with SOFTCAST_FUZZ_SMOKE="SECONDS JOBS TARGET..." (make test sets it), the fuzz smoke
#    (tests/fuzz/smoke.sh) at idle priority: each target runs its SECONDS on what the
#    tests leave, and its executions line says how much that was.
logs=$(mktemp -d)
trap 'trap - INT TERM; kill 0' INT TERM
idle() {
    if chrt -i 0 true 2>/dev/null; then chrt -i 0 "$@"; else nice -n 19 "$@"; fi
}
# One C worker a core (softcast-tests -j); the times of this run order the next one's
# longest first. A first run starts from tests/c-test-times.txt (one run's times, here):
# in the default order the longest test could start last and end the run alone.
export SOFTCAST_TEST_JOBS="${SOFTCAST_TEST_JOBS:-$(nproc)}"
export SOFTCAST_TEST_TIMES="${SOFTCAST_TEST_TIMES:-$BUILD/c-test-times.txt}"
[ -s "$SOFTCAST_TEST_TIMES" ] || cp tests/c-test-times.txt "$SOFTCAST_TEST_TIMES"
started=$(date +%s)
# part NAME CMD...: run CMD into $logs/NAME, its exit status into $logs/NAME.rc.
part() {
    name=$1
    shift
    {
        "$@" >"$logs/$name" 2>&1
        echo $? >"$logs/$name.rc"
        date +%s >"$logs/$name.end"
    } &
    eval "pid_$name=$!"
}
# finish NAME LABEL: wait for the part, print its log and when it ended.
finish() {
    eval "wait \$pid_$1"
    cat "$logs/$1"
    echo "run-tests: $2 ended after $(($(cat "$logs/$1.end") - started)) s (status $(cat "$logs/$1.rc"))"
}
node_tests() {
    for d in tests/server tests/e2e tests/deploy deploy/load; do
        (cd "$d" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
            { echo "run-tests: npm ci failed in $d"; return 1; }
    done
    export SOFTCAST_SERVER="$PWD/$BUILD/test/softcast-server"
    node --test --test-concurrency=1 --test-reporter=tap $NODE_TIMED >"$logs/node.timed" 2>&1
    timed_rc=$?
    rest=$(ls tests/server/*.test.mjs tests/e2e/*.test.mjs tests/deploy/*.test.mjs \
        tests/mutants/*.test.mjs |
        grep -v -x -F "$(printf '%s\n' $NODE_TIMED)")
    # shellcheck disable=SC2086 # file names are words
    node --test --test-concurrency="${SOFTCAST_NODE_JOBS:-3}" --test-reporter=tap $rest \
        >"$logs/node.rest" 2>&1
    rest_rc=$?
    cat "$logs/node.timed" "$logs/node.rest"
    for k in pass fail skipped; do # one summary for both runs, as the tally below reads it
        echo "# $k $(($(node_count "$k" "$logs/node.timed") + $(node_count "$k" "$logs/node.rest")))"
    done
    [ "$timed_rc" = 0 ] && [ "$rest_rc" = 0 ]
}
NODE_TIMED="tests/server/fairness.test.mjs tests/server/latency.test.mjs tests/server/behaviour.test.mjs
    tests/e2e/client.test.mjs tests/deploy/cluster.test.mjs"
# node_count KEY LOG: the count node's summary gives for KEY (pass, fail, skipped); none: 0,
# and a run without its summary fails (pass 0, fail 1).
node_count() {
    c=$(sed -n "s/^# $1 \([0-9]*\)$/\1/p" "$2" | tail -n 1)
    [ -n "$c" ] && { echo "$c"; return; }
    [ "$1" = fail ] && echo 1 || echo 0
}
# The C tests in two binaries (tests/harness.h says why): the long runs in the optimized one,
# then the rest under the sanitizers, each with its own times file; one tally line for both.
tally() { tail -n 1 "$1" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p'; }
c_tests() {
    fast_times="${SOFTCAST_TEST_TIMES%.txt}-fast.txt"
    [ -s "$fast_times" ] || cp tests/c-test-times.txt "$fast_times"
    SOFTCAST_TEST_TIMES="$fast_times" nice -n 19 "$BUILD/softcast-tests-fast" --long "$@" >"$logs/c.long" 2>&1
    long_rc=$?
    nice -n 19 "$BUILD/softcast-tests" --short "$@" >"$logs/c.short" 2>&1
    short_rc=$?
    echo "run-tests: the long runs, optimized (softcast-tests-fast --long):"
    cat "$logs/c.long"
    echo "run-tests: the rest, under ASan and UBSan (softcast-tests --short):"
    cat "$logs/c.short"
    set -- $(tally "$logs/c.long") $(tally "$logs/c.short")
    [ $# = 6 ] || set -- 0 1 0 0 1 0 # a binary that did not end with its tally failed
    echo "$(($1 + $4)) passed, $(($2 + $5)) failed, $(($3 + $6)) skipped"
    [ "$long_rc" = 0 ] && [ "$short_rc" = 0 ]
}
parts="the C tests (nice 19)"
part c c_tests "$@"
if [ -z "${SOFTCAST_C_ONLY:-}" ]; then
    part node node_tests
    parts="$parts, the node tests"
fi
if [ -n "${SOFTCAST_FUZZ_SMOKE:-}" ]; then
    # shellcheck disable=SC2086 # SECONDS JOBS TARGET... are words
    part fuzz idle tests/fuzz/smoke.sh "$BUILD" $SOFTCAST_FUZZ_SMOKE
    parts="$parts, the fuzz smoke (idle priority)"
fi
echo "run-tests: $parts run at once; each prints its log when it ends"

finish c "the C tests"
c_status=$(cat "$logs/c.rc")
set -- $(tally "$logs/c")
c_pass=${1:-0} c_fail=${2:-1} c_skip=${3:-0}

n_pass=0 n_fail=0 n_skip=0
if [ -z "${SOFTCAST_C_ONLY:-}" ]; then
    finish node "the node tests"
    n_pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$logs/node" | tail -n 1)
    n_fail=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$logs/node" | tail -n 1)
    n_skip=$(sed -n 's/^# skipped \([0-9]*\)$/\1/p' "$logs/node" | tail -n 1)
    [ -n "$n_pass" ] || { n_pass=0; n_fail=1; }
fi
f_fail=0
if [ -n "${SOFTCAST_FUZZ_SMOKE:-}" ]; then
    finish fuzz "the fuzz smoke"
    [ "$(cat "$logs/fuzz.rc")" = 0 ] || f_fail=1
fi
rm -rf "$logs"
pass=$((c_pass + n_pass)) fail=$((c_fail + ${n_fail:-0} + f_fail)) skip=$((c_skip + ${n_skip:-0}))
[ "$c_status" = 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
