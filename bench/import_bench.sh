#!/bin/sh
# import_bench.sh FILE [REPS]: mstore's import time beside `cp FILE x && sha256sum x` on the
# same file, warm cache, in one run, as a ratio (issue: import no slower than that pair).
# Both write to the same file system (BENCH_DIR, default /tmp).
set -eu
file=$1
reps=${2:-3}
mstore=${MSTORE_BIN:-$(dirname "$0")/../build/mstore}
dir=${BENCH_DIR:-/tmp}
cat "$file" > /dev/null   # warm the cache

pair=""
for r in $(seq "$reps"); do
    rm -f "$dir/import-bench-copy"
    t0=$(date +%s.%N)
    cp "$file" "$dir/import-bench-copy" && sha256sum "$dir/import-bench-copy" > /dev/null && sync "$dir/import-bench-copy"
    t1=$(date +%s.%N)
    pair="$pair $(echo "$t1 - $t0" | bc -l)"
    rm -f "$dir/import-bench-copy"
done
pair_med=$(printf '%s\n' $pair | sort -g | sed -n "$(( (reps + 1) / 2 ))p")
out=$("$mstore" bench-import "$file" -r "$reps" --dir "$dir")
echo "$out"
imp_med=$(echo "$out" | sed -n 's/.* in \([0-9.]*\) s (median.*/\1/p')
size=$(stat -c %s "$file")
printf 'cp + sha256sum + sync: %.3f s (median of %s), %.1f MB/s\n' "$pair_med" "$reps" "$(echo "$size / 1000000 / $pair_med" | bc -l)"
printf 'ratio import / (cp + sha256sum + sync): %.2f\n' "$(echo "$imp_med / $pair_med" | bc -l)"
