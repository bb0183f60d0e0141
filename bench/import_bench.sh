#!/bin/sh
# import_bench.sh FILE [REPS]: `mstore import FILE` beside two baselines on the same file, warm
# cache, in one run, as ratios (issue 18 item 29: import <= 1.2x `cp` + sync):
#   cp + sync              cp FILE x && sync x   (what copying the bytes durably costs)
#   cp + sha256sum + sync  the same, plus hashing the copy with coreutils
# Each is timed as a whole process (wall, and user + system CPU) into a fresh store / file under
# BENCH_DIR (default /tmp). They are interleaved, one of each per repetition, so that a load
# change on a shared machine hits them alike; medians are compared. MSTORE_BIN_BEFORE=older
# mstore adds that build's import to the same loop (before and after a change, in one run).
set -eu
file=$1
reps=${2:-5}
mstore=${MSTORE_BIN:-$(dirname "$0")/../build/mstore}
before=${MSTORE_BIN_BEFORE:-}
dir=${BENCH_DIR:-/tmp}
work=$(mktemp -d "$dir/import-bench-XXXXXX")
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cat "$file" > /dev/null   # warm the cache
export MSTORE_NO_PROGRESS=1

# timed NAME CMD...: appends "wall cpu" of one run to $work/NAME.
timed() {
    name=$1
    shift
    /usr/bin/time -f '%e %U %S' -o "$work/t" "$@" > /dev/null
    awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$work/t" >> "$work/$name"
}
fresh() { chmod -R u+w "$work/x" 2>/dev/null || true; rm -rf "$work/x"; sync; }

for r in $(seq "$reps"); do
    fresh; timed cp sh -c 'cp "$1" "$2" && sync "$2"' sh "$file" "$work/x"
    fresh; timed pair sh -c 'cp "$1" "$2" && sha256sum "$2" && sync "$2"' sh "$file" "$work/x"
    fresh; timed import env MSTORE_HOME="$work/x" "$mstore" import "$file" --name bench
    if [ -n "$before" ]; then
        fresh; timed before env MSTORE_HOME="$work/x" "$before" import "$file" --name bench
    fi
done
fresh

median() { sort -g "$work/$1" | sed -n "$(( (reps + 1) / 2 ))p"; }   # by wall time
cpu_median() { awk '{ print $2 }' "$work/$1" | sort -g | sed -n "$(( (reps + 1) / 2 ))p"; }
show() {
    printf '%-22s wall %6.2f s  cpu %6.2f s  (medians; walls:' "$2" "$(median "$1" | cut -d' ' -f1)" "$(cpu_median "$1")"
    printf ' %s' $(awk '{ print $1 }' "$work/$1")
    echo ')'
}
ratio() { echo "$(median "$1" | cut -d' ' -f1) / $(median "$2" | cut -d' ' -f1)" | bc -l; }
cpu_ratio() { echo "$(cpu_median "$1") / $(cpu_median "$2")" | bc -l; }

echo "file: $file, $(stat -c %s "$file") bytes, $reps repetitions, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
show import "import"
[ -z "$before" ] || show before "import (before)"
show cp "cp + sync"
show pair "cp + sha256sum + sync"
printf 'import / (cp + sync):             wall %.2f  cpu %.2f\n' "$(ratio import cp)" "$(cpu_ratio import cp)"
printf 'import / (cp + sha256sum + sync): wall %.2f  cpu %.2f\n' "$(ratio import pair)" "$(cpu_ratio import pair)"
if [ -n "$before" ]; then
    printf 'before / (cp + sync):             wall %.2f  cpu %.2f\n' "$(ratio before cp)" "$(cpu_ratio before cp)"
    printf 'before / (cp + sha256sum + sync): wall %.2f  cpu %.2f\n' "$(ratio before pair)" "$(cpu_ratio before pair)"
fi
