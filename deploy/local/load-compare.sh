#!/bin/sh
# deploy/local/load-compare.sh [softcast-load flags]: the same load (default 6 sessions x 5
# clients for 10 s at 48x48x32) against one server process directly, one behind the local
# cluster's router (TLS), and three behind it; one JSON line each from softcast-load.
# Release build (make), and npm ci in deploy/load, first.
set -eu
cd "$(dirname "$0")/../.."
LOAD=${*:-"--sessions 6 --clients 5 --seconds 10 --dims 48x48x32"}
echo "load: $LOAD (1 driver, the other clients viewers); $(nproc) cores"
build/softcast-server --http-port 18280 --ws-port 18281 --max-sessions-per-address 100 >/dev/null 2>&1 &
pid=$!
sleep 1
echo "1 process, direct (--threads default: the cores shared among the sessions stepping):"
# shellcheck disable=SC2086
node deploy/load/softcast-load.mjs --url http://127.0.0.1:18280/ $LOAD
kill $pid
wait $pid 2>/dev/null || true
dir=$(mktemp -d)
for n in 1 3; do
    threads=$((n == 1 ? 0 : 1))
    SOFTCAST_SERVER=$PWD/build/softcast-server \
        SOFTCAST_SERVER_ARGS="--max-sessions-per-address 100 --threads $threads" \
        deploy/local/cluster.sh start "$dir/$n" "$n" >"$dir/$n.json"
    url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$dir/$n.json")
    echo "$n process(es) behind the router over TLS (--threads $threads):"
    # shellcheck disable=SC2086
    NODE_EXTRA_CA_CERTS="$dir/$n/cert.pem" node deploy/load/softcast-load.mjs --url "$url/" $LOAD
    deploy/local/cluster.sh stop "$dir/$n"
done
rm -rf "$dir"
