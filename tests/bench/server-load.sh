#!/bin/sh
# server-load.sh: make bench's server figures (issue 14). The release server on loopback
# (ephemeral ports, --max-sessions-per-address 64: every session comes from here), driven by
# build/softcast-load (the C load generator), one JSON line per run:
#   - 1 session, 1 driver, on a 128x128x75 drag: the server's mean step and encode times
#     per frame (server_step_ms, server_encode_ms, from its /metrics);
#   - sessions of 1 driver and 4 viewers on a 64^3 drag, 1 to 32 of them: frames/s per
#     client (the slowest and the fastest session's too) and input-to-frame latency;
#   - 1 session of 1 driver and 100 viewers on a 64^3 drag, five runs.
# Usage: tests/bench/server-load.sh [SECONDS per run, default 10]; SERVER_ARGS="--rate 30"
# adds flags to the server's. Needs build/softcast-server and build/softcast-load (make builds
# both).
set -eu
BUILD=${BUILD:-build}
SECONDS_PER_RUN=${1:-10}
log=$(mktemp)
"$BUILD/softcast-server" --http-port 0 --ws-port 0 --bind 127.0.0.1 \
    --max-sessions-per-address 64 ${SERVER_ARGS:-} >"$log" 2>&1 &
pid=$!
trap 'kill -INT $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
i=0
until grep -q '"event":"listening"' "$log"; do
    i=$((i + 1))
    if [ $i -gt 300 ] || ! kill -0 $pid 2>/dev/null; then
        echo "server-load: the server did not start:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 0.1
done
url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$log" | head -n 1)
load() { "$BUILD/softcast-load" --url "$url" --seconds "$SECONDS_PER_RUN" "$@"; }
echo "# server-load: $url, $SECONDS_PER_RUN s a run, $(nproc) cores, server flags: ${SERVER_ARGS:-none}"
echo "# 128x128x75 drag, 1 session x 1 client: step and encode per frame (server metrics)"
load --sessions 1 --clients 1 --dims 128x128x75
echo "# 64^3 drag, 1 driver + 4 viewers a session"
for n in 1 8 12 16 24 32; do
    load --sessions $n --clients 5 --dims 64x64x64
done
echo "# 64^3 drag, 1 driver + 100 viewers, five runs"
for k in 1 2 3 4 5; do
    load --sessions 1 --clients 101 --dims 64x64x64
done
