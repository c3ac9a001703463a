#!/bin/sh
# deploy/runtime-packages.sh BINARY: the Debian packages that hold the shared libraries
# BINARY loads (ldd, then dpkg -S), one a line: what a runtime image must install.
# Libraries no package holds (a toolkit under /usr/local) are left out.
set -eu
ldd "$1" | awk '/=> \// { print $3 }' | while read -r lib; do
    dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
done | cut -d: -f1 | sort -u
