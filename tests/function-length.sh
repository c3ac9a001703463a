#!/bin/sh
# function-length.sh: no function in sim/, server/ or protocol/ runs over MAX lines (default
# 100), counted from the first line of its signature to its closing brace (STYLE.md: short
# enough to read at once). clang-format puts a function's braces alone at column 0, so a
# body is a "{" line to the next "}" line; its signature starts at the last line before it
# that begins at column 0. Prints each offender and fails; `make format-check` runs it.
MAX=${1:-100}
cd "$(dirname "$0")/.." || exit 2
files=$(ls sim/*.h sim/*/*.c sim/*/*.h sim/*/*.cu server/*.c server/*.h protocol/*.c 2>/dev/null)
[ -n "$files" ] || { echo "function-length: no sources under $(pwd)"; exit 2; }
awk -v max="$MAX" '
    FNR == 1 { sig = 0; start = 0 }
    /^[A-Za-z_]/ && !start { sig = FNR; name = $0 }
    /^\{$/ && !start { start = sig ? sig : FNR }
    /^\}$/ && start {
        n = FNR - start + 1
        if (n > max) { printf "%s:%d: %d lines (over %d): %s\n", FILENAME, start, n, max, name; bad = 1 }
        start = 0; sig = 0
    }
    END { exit bad }
' $files || { echo "function-length: split the functions above (at most $MAX lines each)"; exit 1; }
echo "function-length: ok (at most $MAX lines a function)"
