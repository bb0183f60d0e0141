#!/usr/bin/env bash
# compare.sh: mstore's runtime against llama-bench on the same GGUF files, back to back in one
# run, plus a memory bandwidth probe; prints the ratios the runtime issues are judged by.
#
#   bench/compare.sh LLAMA_BENCH_PATH MODEL.gguf [MODEL.gguf ...]
#
# Per model: `mstore bench` (the model imported into a store first, then run by name) and
# `llama-bench -m FILE` with the same -p/-n/-t/-r, one right after the other; then the decode
# ceiling (probe bandwidth / bytes of the weights) and, with RSS=1, the peak RSS and load time of
# a `mstore run` (/usr/bin/time -v). It builds nothing of other projects: only bench/bwprobe.c,
# with cc. The machines are shared: compare ratios from one run, never numbers across runs.
#
# Environment: MSTORE_BIN (default build/mstore), BENCH_HOME (store to import into; default
# /tmp/mstore-compare-home, kept between runs so imports are paid once), THREADS (2), P (64),
# N (32), R (3), RSS (1: also measure `mstore run`), MSTORE_CPU (passed through), DEVICE (cpu;
# vulkan: `mstore bench --device vulkan` against `llama-bench -ngl 99`, which must then be a
# Vulkan build of llama.cpp; the CPU's bandwidth ceiling and RSS columns are left out),
# LLAMA_CLASS (what the llama.cpp build was restricted to, printed in the header; say "avx2" for
# the AVX2 class of issue 38, built outside this tree with
#   cmake -B build-avx2 -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON \
#     -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DLLAMA_BUILD_TESTS=OFF
# and run beside MSTORE_CPU=avx2; default "native", a build for the CPU it runs on).
set -euo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
LLAMA_BENCH=$1
shift
HERE=$(cd "$(dirname "$0")" && pwd)
MSTORE=${MSTORE_BIN:-$HERE/../build/mstore}
HOME_DIR=${BENCH_HOME:-/tmp/mstore-compare-home}
LLAMA_CLASS=${LLAMA_CLASS:-native}
THREADS=${THREADS:-2} P=${P:-64} N=${N:-32} R=${R:-3} RSS=${RSS:-1} DEVICE=${DEVICE:-cpu}
case "$DEVICE" in
cpu) MS_DEV=(--device cpu) LL_DEV=() ;;
vulkan) MS_DEV=(--device vulkan) LL_DEV=(-ngl 99) RSS=0 ;;
*) echo "compare.sh: DEVICE '$DEVICE': expected cpu or vulkan" >&2; exit 2 ;;
esac
[ -x "$MSTORE" ] || { echo "compare.sh: mstore binary '$MSTORE' not found (set MSTORE_BIN)" >&2; exit 2; }
[ -x "$LLAMA_BENCH" ] || { echo "compare.sh: llama-bench '$LLAMA_BENCH' not executable" >&2; exit 2; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -march=native -pthread -o "$TMP/bwprobe" "$HERE/bwprobe.c"
BW=$("$TMP/bwprobe" "$THREADS" 1024 | awk '{print $2}')
echo "# $(date -u +%FT%TZ) threads=$THREADS p=$P n=$N r=$R $("$MSTORE" --version 2>/dev/null | head -1 || true) MSTORE_CPU=${MSTORE_CPU:-auto} llama.cpp build: $LLAMA_CLASS"
echo "# cpu: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | xargs); flags: $(grep -m1 flags /proc/cpuinfo | tr " " "\n" | grep -E "^(avx2|fma|f16c|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$" | tr "\n" " ")"
echo "# bandwidth probe: $BW GB/s ($THREADS threads); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$DEVICE" = cpu ] || echo "# device: $DEVICE: $("$MSTORE" devices 2>/dev/null | awk -v d="$DEVICE" '$0 ~ " " d " " {sub(/ +[a-z]+ +'"$DEVICE"' .*/, ""); print; exit}')"

# llama-bench's CSV: the avg_ts of the row whose n_prompt/n_gen match (commas inside quoted
# fields, as in a GPU's name, become semicolons first)
llama_rate() {   # csv, n_prompt, n_gen
    sed -E ':a; s/^(([^"]*"[^"]*")*[^"]*"[^",]*),/\1;/; ta' "$1" | awk -F, -v p="$2" -v g="$3" '
        NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); col[$i] = i }; next }
        { gsub(/"/, ""); if ($col["n_prompt"] == p && $col["n_gen"] == g) print $col["avg_ts"] }'
}

printf '%-22s %8s | %9s %9s %6s | %9s %9s %6s | %8s %7s' model MB mstore_pp llama_pp ratio mstore_tg llama_tg ratio ceiling tg/ceil
[ "$RSS" = 1 ] && printf ' | %9s %9s %7s' load_ms rss_MB rss/need
printf '\n'
for f in "$@"; do
    base=$(basename "$f" .gguf)
    name="compare-${base//[^a-zA-Z0-9_.-]/-}"
    bytes=$(stat -L -c %s "$f")
    if ! "$MSTORE" --home "$HOME_DIR" show "$name" >/dev/null 2>&1; then
        "$MSTORE" --home "$HOME_DIR" import "$f" --name "$name" >/dev/null
    fi
    "$MSTORE" --home "$HOME_DIR" bench "$name" -p "$P" -n "$N" --threads "$THREADS" -r "$R" "${MS_DEV[@]}" >"$TMP/ms.txt"
    "$LLAMA_BENCH" -m "$f" -p "$P" -n "$N" -t "$THREADS" -r "$R" "${LL_DEV[@]}" -o csv >"$TMP/ll.csv" 2>"$TMP/ll.err" ||
        { echo "llama-bench failed on $f:" >&2; tail -5 "$TMP/ll.err" >&2; exit 1; }
    ms_pp=$(awk -v k="pp$P" '$1 == k {print $2}' "$TMP/ms.txt")
    ms_tg=$(awk -v k="tg$N" '$1 == k {print $2}' "$TMP/ms.txt")
    ll_pp=$(llama_rate "$TMP/ll.csv" "$P" 0)
    ll_tg=$(llama_rate "$TMP/ll.csv" 0 "$N")
    line=$(awk -v m="$base" -v b="$bytes" -v mp="$ms_pp" -v lp="$ll_pp" -v mt="$ms_tg" -v lt="$ll_tg" -v bw="$BW" \
        -v dev="$DEVICE" 'BEGIN {
        ceil = bw * 1e9 / b
        printf "%-22s %8.0f | %9.2f %9.2f %6.2f | %9.2f %9.2f %6.2f | ", m, b / 1048576, mp, lp, mp / lp, mt, lt, mt / lt
        if (dev == "cpu") printf "%8.2f %7.2f", ceil, mt / ceil; else printf "%8s %7s", "-", "-" }')
    if [ "$RSS" = 1 ]; then
        # peak RSS of a whole `run` (weights mapped + KV cache + buffers) against what it must hold
        /usr/bin/time -v "$MSTORE" --home "$HOME_DIR" run "$name" "Once upon a time" --raw -n 16 --temp 0 \
            --ctx 512 --verbose >/dev/null 2>"$TMP/run.err" || true
        rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$TMP/run.err")
        load_ms=$(awk '/^load duration:/ {sub(/ms/, "", $3); print $3}' "$TMP/run.err")
        kv=$("$MSTORE" --home "$HOME_DIR" show "$name" 2>/dev/null | awk '
            $1 == "layers" {l = $2} $1 == "kv" && $2 == "heads" {h = $3} $1 == "head" && $2 == "dim" {d = $3}
            END { print (l && h && d) ? 2 * l * 512 * h * d * 4 : 0 }')
        line+=$(awk -v r="${rss_kb:-0}" -v b="$bytes" -v kv="${kv:-0}" -v ld="${load_ms:--}" 'BEGIN {
            printf " | %9s %9.0f %7.3f", ld, r / 1024, r * 1024 / (b + kv) }')
    fi
    echo "$line"
done
