#!/bin/sh
# tests/fuzz/smoke.sh BUILD SECONDS JOBS TARGET...: run each libFuzzer target for SECONDS
# from its committed corpus with a fixed seed (-seed=1), JOBS at a time. New inputs go to
# BUILD/fuzz/smoke-TARGET/, never into tests/fuzz/corpus/. One line per target: its
# executions, or the crash's log tail. Exit status 1 when any target found something.
set -u
build=$1 seconds=$2 jobs=$3
shift 3
status=0
running=0
pids=""
one() {
    t=$1
    dir="$build/fuzz/smoke-$t" log="$build/fuzz/smoke-$t.log"
    rm -rf "$dir" && mkdir -p "$dir"
    if "$build/fuzz/fuzz_$t" -seed=1 -max_total_time="$seconds" -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$dir/" "$dir" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
        echo "fuzz-smoke: $t $(sed -n 's/^stat::number_of_executed_units: *//p' "$log") executions in $seconds s, no finding"
    else
        tail -n 40 "$log"
        echo "fuzz-smoke: $t found a crash (the input is in $dir or the log $log)"
        return 1
    fi
}
for t in "$@"; do
    # At most JOBS at a time: wait for the oldest before starting another.
    if [ "$running" -ge "$jobs" ]; then
        set -- $pids
        wait "$1" || status=1
        shift
        pids="$*"
        running=$((running - 1))
    fi
    one "$t" &
    pids="$pids $!"
    running=$((running + 1))
done
for p in $pids; do
    wait "$p" || status=1
done
exit $status
