#!/bin/sh
# pull-across-n.sh: make bench's uniform pull at N = 32, 48, 64, 128 (issue 14's target: the
# median frame time within 1.3x across N, and under 0.5 ms). Runs softcast-bench ROUNDS times
# at each N, the sizes interleaved (this machine's speed drifts from minute to minute), and
# prints its JSON lines; then one line that sets the sizes side by side for each of the three
# medians (checked, back to back, caches emptied; sim/README.md says what each compares):
# per N the median over the rounds, and across N the largest over the smallest.
# Usage: BUILD=build ROUNDS=3 tests/bench/pull-across-n.sh
set -eu
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
r=0
while [ $r -lt "$ROUNDS" ]; do
    for n in 32 48 64 128; do
        "$BUILD/softcast-bench" volume --uniform 0 --dims "${n}x${n}x${n}" --threads 1 --pull 3 |
            tee -a "$out"
    done
    r=$((r + 1))
done
# across KEY NAME: "NAME":[per N, the median of its rounds],"NAME_ratio":largest/smallest.
# The exact key (the quote and colon after it) keeps ms_per_frame_median from matching its
# longer siblings.
across() {
    sed -n "s/.*\"dims\":\"\([0-9]*\)x.*\"$1\":\([0-9.]*\).*/\1 \2/p" "$out" | sort -n -k1,1 -k2,2 |
        awk -v name="$2" -v rounds="$ROUNDS" '
        { n[NR] = $1; v[NR] = $2 + 0 }
        END {
            if (NR != 4 * rounds) { print "pull-across-n: " NR " figures for " name > "/dev/stderr"; exit 1 }
            for (k = 0; k < 4; k++) { # rows k*rounds+1 .. (k+1)*rounds: one N, sorted by value
                m = v[k * rounds + int((rounds + 1) / 2)]
                s = s (k ? "," : "") sprintf("%.3f", m)
                if (k == 0 || m < lo) lo = m
                if (k == 0 || m > hi) hi = m
            }
            printf "\"%s\":[%s],\"%s_ratio\":%.2f", name, s, name, hi / lo
        }'
}
# Assigned first, so that a run that printed no figure fails the script (set -e).
checked=$(across ms_per_frame_median checked)
back=$(across ms_per_frame_median_back_to_back back_to_back)
evicted=$(across ms_per_frame_median_evicted evicted)
printf '{"bench":"volume uniform pull across N","threads":1,"pull":3,"N":[32,48,64,128],"rounds":%d,%s,%s,%s,"target_ratio":1.3,"target_ms":0.5}\n' \
    "$ROUNDS" "$checked" "$back" "$evicted"
