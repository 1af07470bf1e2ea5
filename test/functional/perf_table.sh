#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# fc_perf --table and contrib/bench/seed_table.sh: one row per provider in
# the table file, a rerun replaces its row, the side-by-side table with a
# speed-up per size, CSV, checked results, and a failing provider reported.
set -u
here=$(cd "$(dirname "$0")" && pwd)
fc_run=${FC_RUN:-$here/../../fc_run}
build=$(cd "$(dirname "$fc_run")" && pwd)
script="$here/../../contrib/bench/seed_table.sh"
fails=0
check() { # description, expected, actual
    if [ "$2" = "$3" ]; then echo "PASS $1"; else echo "FAIL $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
f="$tmp/table.txt"

out=$("$script" -b "$build" -n 2 -p "tcp shm" -o "$f" -- -n 3 -w 1 -c 2>"$tmp/err")
check "seed_table.sh tcp+shm exits 0" 0 $?
check "one row per provider in the file" 2 "$(grep -c '^fc_perf-table 1 ' "$f")"
check "rows keyed by provider" "shm tcp" "$(awk '{sub(/;.*/, "", $3); print $3}' "$f" | sort | tr '\n' ' ' | sed 's/ $//')"
check "three sizes, two columns and a speed-up each" 3 \
    "$(echo "$out" | grep -cE '^ +(256 KiB|1 MiB|16 MiB)( \| +[0-9]+\.[0-9]{3}){2} \| [0-9.]+x$')"
check "header names both providers" yes "$(echo "$out" | grep -q 'speed-up, .* over ' && echo yes || echo no)"
check "results checked" yes "$(echo "$out" | grep -q '^# all results correct' && echo yes || echo no)"

# a rerun on one provider replaces its row, keeps the other
"$fc_run" -n 2 -p shm "$build/fc_perf" --table-file "$f" -n 3 -w 1 >/dev/null 2>&1
check "rerun exits 0" 0 $?
check "rerun replaces its row" 2 "$(grep -c '^fc_perf-table 1 ' "$f")"

# another rank count is another table
out3=$("$fc_run" -n 3 -p shm "$build/fc_perf" --table-file "$f" -n 3 -w 1 2>/dev/null)
check "3 ranks: own row" 3 "$(grep -c '^fc_perf-table 1 ' "$f")"
check "3 ranks: one column, no speed-up" 0 "$(echo "$out3" | grep -c 'speed-up')"

# CSV
csv=$("$fc_run" -n 2 -p tcp "$build/fc_perf" --table-file "$f" --csv -n 3 -w 1 2>/dev/null)
check "CSV header" yes "$(echo "$csv" | head -1 | grep -qE '^message_bytes,tcp[^,]*_ms,shm_ms,speedup$' && echo yes || echo no)"
check "CSV rows" 3 "$(echo "$csv" | grep -cE '^[0-9]+,[0-9.]+,[0-9.]+,[0-9.]+$')"

# a provider that does not exist: nonzero status, said on stderr, other rows kept
"$script" -b "$build" -n 2 -p "nosuchprovider" -o "$f" -- -n 3 >/dev/null 2>"$tmp/err"
check "unknown provider fails" yes "$([ $? -ne 0 ] && echo yes || echo no)"
check "failure named" yes "$(grep -q 'the run on nosuchprovider failed' "$tmp/err" && echo yes || echo no)"
check "rows kept after a failed run" 3 "$(grep -c '^fc_perf-table 1 ' "$f")"

[ $fails = 0 ] && echo "perf table: all passed" || echo "perf table: $fails FAILED"
exit $((fails > 0))
