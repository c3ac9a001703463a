#!/bin/sh
# deploy/local/cluster.sh: a cluster on one machine, for tests and trials: N softcast-server
# processes and the router in front of them (Debian's nginx with the rules the Kubernetes
# router uses, deploy/k8s/base/router/), on loopback ports, over TLS with a certificate made
# here. Each process is "softcast-K" (as a StatefulSet's pods are), keeps its sessions in
# DIR/state-K, and hands out links through the router.
#   cluster.sh start DIR [N]      start N processes (default 3) and the router; prints one JSON
#                                 line: {"url", "ca" (the certificate to trust), "processes"}
#   cluster.sh signal DIR K SIG   send SIG to process K (TERM drains it: snapshots, then exits)
#   cluster.sh restart DIR K      start process K again, on its ports, from its state
#   cluster.sh stop DIR           stop everything (the servers with TERM)
# SOFTCAST_SERVER: the server binary (default build/softcast-server); SOFTCAST_SERVER_ARGS:
# more flags for every process (scene options such as --dims).
set -eu
cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
rules="$here/../k8s/base/router"
server=${SOFTCAST_SERVER:-$here/../../build/softcast-server}
# Several processes share these cores: OpenMP threads that spin while they wait would take
# the cores from the other processes' steps (measured: a session's frames 700 ms apart).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"

die() { echo "cluster.sh: $*" >&2; exit 1; }

free_port() {
    node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

# start_process K HTTP_PORT WS_PORT: run process K (ports 0: any free) and wait (bounded) for
# its "listening" line; its ports go to DIR/proc-K.
start_process() {
    k=$1
    n=$(cat "$dir/n")
    peers=$(seq -s, -f 'softcast-%g' 0 $((n - 1)))
    mkdir -p "$dir/state-$k"
    rm -f "$dir/server-$k.out" # (a restart must not read the last run's line)
    # shellcheck disable=SC2086 # SOFTCAST_SERVER_ARGS is a list of flags
    "$server" --bind 127.0.0.1 --http-port "$2" --ws-port "$3" --process-name "softcast-$k" \
        --peers "$peers" --public-url "https://127.0.0.1:$(cat "$dir/router_port")" \
        --trusted-proxy 127.0.0.1 --state-dir "$dir/state-$k" --max-http-per-address 1000 \
        ${SOFTCAST_SERVER_ARGS:-} >"$dir/server-$k.out" 2>>"$dir/server-$k.log" &
    echo $! >"$dir/proc-$k.pid"
    i=0
    until grep -q '"event":"listening"' "$dir/server-$k.out" 2>/dev/null; do
        kill -0 "$(cat "$dir/proc-$k.pid")" 2>/dev/null || die "process $k exited: $(tail -n 5 "$dir/server-$k.log")"
        i=$((i + 1))
        [ $i -le 600 ] || die "process $k did not listen within 60 s"
        sleep 0.1
    done
    line=$(grep '"event":"listening"' "$dir/server-$k.out" | tail -n 1)
    echo "$line" | sed -n 's/.*"http_port":\([0-9]*\),"ws_port":\([0-9]*\).*/\1 \2/p' >"$dir/proc-$k"
}

# process_map VAR FIELD DEFAULT: nginx's map from a process name to its port (FIELD 1: HTTP,
# 2: WebSocket, from DIR/proc-K) on loopback.
process_map() {
    echo "    map \$sc_process \$$1 {"
    for k in $(seq 0 $(($(cat "$dir/n") - 1))); do
        echo "        softcast-$k 127.0.0.1:$(cut -d' ' -f"$2" "$dir/proc-$k");"
    done
    echo "        default $3;"
    echo "    }"
}

write_router_conf() {
    n=$(cat "$dir/n")
    {
        echo "worker_processes 1;"
        echo "pid $dir/nginx.pid;"
        echo "error_log $dir/nginx-error.log warn;"
        echo "events { worker_connections 4096; }"
        echo "http {"
        echo "    access_log off;"
        for t in client_body proxy fastcgi uwsgi scgi; do
            echo "    ${t}_temp_path $dir/tmp/$t;"
        done
        echo "    include $rules/maps.conf;"
        echo "    upstream softcast_any {"
        for k in $(seq 0 $((n - 1))); do
            # max_fails=0: a full process (503) is not marked down, or once all were full a
            # create would get nginx's 502 instead of the servers' "no room".
            echo "        server 127.0.0.1:$(cut -d' ' -f1 "$dir/proc-$k") max_fails=0;"
        done
        echo "    }"
        process_map sc_http 1 softcast_any
        process_map sc_ws 2 '""'
        echo "    server {"
        echo "        listen 127.0.0.1:$(cat "$dir/router_port") ssl;"
        echo "        ssl_certificate $dir/cert.pem;"
        echo "        ssl_certificate_key $dir/key.pem;"
        echo "        include $rules/routes.conf;"
        echo "    }"
        echo "}"
    } >"$dir/nginx.conf"
}

status_json() {
    n=$(cat "$dir/n")
    printf '{"url":"https://127.0.0.1:%s","ca":"%s/cert.pem","processes":[' "$(cat "$dir/router_port")" "$dir"
    for k in $(seq 0 $((n - 1))); do
        [ "$k" = 0 ] || printf ','
        printf '{"name":"softcast-%s","pid":%s,"http_port":%s,"ws_port":%s}' "$k" \
            "$(cat "$dir/proc-$k.pid")" "$(cut -d' ' -f1 "$dir/proc-$k")" "$(cut -d' ' -f2 "$dir/proc-$k")"
    done
    printf ']}\n'
}

case "$cmd" in
start)
    n=${3:-3}
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || die "nginx not found (make test-deps installs Debian's)"
    [ -x "$server" ] || die "no server at $server (make, or set SOFTCAST_SERVER)"
    mkdir -p "$dir/tmp"
    dir=$(cd "$dir" && pwd)
    echo "$n" >"$dir/n"
    free_port >"$dir/router_port"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>"$dir/openssl.log" || die "openssl: $(cat "$dir/openssl.log")"
    for k in $(seq 0 $((n - 1))); do start_process "$k" 0 0; done
    write_router_conf
    PATH="$PATH:/usr/sbin" nginx -p "$dir" -e "$dir/nginx-error.log" -c "$dir/nginx.conf" ||
        die "nginx did not start: $(tail -n 5 "$dir/nginx-error.log")"
    status_json
    ;;
signal)
    kill -s "$4" "$(cat "$dir/proc-$3.pid")"
    ;;
restart)
    start_process "$3" "$(cut -d' ' -f1 "$dir/proc-$3")" "$(cut -d' ' -f2 "$dir/proc-$3")"
    status_json
    ;;
stop)
    pids=""
    [ -f "$dir/nginx.pid" ] && pids=$(cat "$dir/nginx.pid")
    for f in "$dir"/proc-*.pid; do
        [ -f "$f" ] && pids="$pids $(cat "$f")"
    done
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null || true
    # Until they are gone (the servers snapshot their sessions first), 60 s at most.
    i=0
    for p in $pids; do
        while kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null; do
            i=$((i + 1))
            [ $i -le 600 ] || die "process $p still running after 60 s"
            sleep 0.1
        done
    done
    ;;
*)
    die "unknown command $cmd (start, signal, restart, stop)"
    ;;
esac
