#!/bin/sh
# check_msl.sh DIR NAME...: each kernel variant NAME has DIR/NAME.metal, generated from its
# SPIR-V by spirv-cross, with one compute function taking the push constants at buffer(0) and
# the destination at buffer(1) (the layout a Metal host binds; common.glsl). Run by ctest.
set -eu
dir=$1
shift
[ $# -gt 0 ] || { echo "check_msl: no kernels named" >&2; exit 1; }
for n in "$@"; do
    f=$dir/$n.metal
    [ -s "$f" ] || { echo "check_msl: $f missing or empty" >&2; exit 1; }
    grep -q "^kernel void main0(" "$f" || { echo "check_msl: $f has no kernel main0" >&2; exit 1; }
    grep -q "^kernel void main0(constant [^,]* \[\[buffer(0)\]\]" "$f" || { echo "check_msl: $f: push constants not at buffer(0)" >&2; exit 1; }
    grep -q "\[\[buffer(1)\]\]" "$f" || { echo "check_msl: $f: no destination at buffer(1)" >&2; exit 1; }
    [ "$f" -nt "$(dirname "$0")/kernels/common.glsl" ] || { echo "check_msl: $f older than the kernels" >&2; exit 1; }
done
echo "check_msl: $# kernels have current MSL"
