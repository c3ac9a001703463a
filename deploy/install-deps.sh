#!/bin/sh
# Install the Debian 12 packages the build needs (with --test: those only the tests need),
# only those missing.
# Idempotent and quick when everything is there. As root it installs; otherwise it
# prints the exact command to run and fails.
set -eu

PKGS="gcc make libc6-dev zlib1g-dev libnifti2-dev clang-format"
# sim/: DICOM series through GDCM (C++: g++, below) and .zip of them through libzip.
PKGS="$PKGS libgdcm-dev libzip-dev"
# sim/growth: the truss's reference solve (SuiteSparse's CHOLMOD).
PKGS="$PKGS libsuitesparse-dev"
# protocol/: compression, the vertex codec, JSON.
PKGS="$PKGS libzstd-dev libmeshoptimizer-dev libcjson-dev"
# server/: HTTP and WebSocket.
PKGS="$PKGS libmicrohttpd-dev libwebsockets-dev"
# The bench: Bullet's soft bodies as the cloth's peer (C++); g++ also builds the DICOM reader.
PKGS="$PKGS g++ libbullet-dev"
# The integration tests run under node; take Debian's unless one is already installed.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
# --test: what only the tests need. The browser end-to-end tests drive Debian's Chromium;
# make fuzz-smoke builds its libFuzzer targets with clang (libFuzzer is in libclang-rt).
# make test-deploy runs Debian's nginx as the router of a local cluster, over TLS with a
# certificate that openssl makes.
# The manifests' test renders them with kubectl kustomize: Debian's kubectl
# (kubernetes-client) unless one is already installed.
if [ "${1:-}" = --test ]; then
    PKGS="chromium clang libclang-rt-14-dev nginx openssl"
    command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
fi

missing=""
for p in $PKGS; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "softcast: missing packages:$missing" >&2
    echo "softcast: run:  sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi
echo "softcast: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Installed, not started: nginx's package would start a system nginx on port 80 (the tests
# run their own on loopback ports). policy-rc.d is Debian's switch for that, put back after.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && own_policy=1
fi
status=0
apt-get install -y -qq --no-install-recommends $missing || status=$?
[ -z "$own_policy" ] || rm -f "$policy"
exit $status
