#!/bin/sh
# Run the C test binary. First fetch the optional real-CT data (Debian's
# invesalius-examples head CT) into BUILD/data; a failed fetch only makes the
# test that needs it skip, saying why.
set -u
BUILD=${1:-build}
DATA="$BUILD/data"
mkdir -p "$DATA"
if [ ! -s "$DATA/cranium_256x256x108_i16.raw" ]; then
    tmp=$(mktemp -d)
    fetch() { (cd "$tmp" && apt-get download invesalius-examples >"$tmp/log" 2>&1); }
    # A machine whose package lists were never fetched needs one update first.
    if fetch || { [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && fetch; }; then
        dpkg -x "$tmp"/invesalius-examples_*.deb "$tmp/x" &&
            tar -xzf "$tmp/x/usr/share/doc/invesalius-examples/examples/Cranium.inv3" -C "$tmp" &&
            mv "$(find "$tmp" -name matrix.dat | head -n 1)" "$DATA/cranium_256x256x108_i16.raw" ||
            echo "run-tests: could not unpack invesalius-examples (see $tmp)"
    else
        echo "run-tests: apt-get download invesalius-examples failed: $(tail -n 1 "$tmp/log")"
    fi
    rm -rf "$tmp"
fi
export SOFTCAST_DATA="$DATA"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
shift 2>/dev/null || true
exec "$BUILD/softcast-tests" "$@"
