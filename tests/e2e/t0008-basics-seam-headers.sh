#!/usr/bin/env bash
# t0008: the backend seam owns its tensor. backend.h and every source under src/backend,
# src/cpu, src/gpu, src/vulkan and src/metal compile against an include tree holding only the
# modules below the seam (util, format, quant and the devices themselves): not the store, the
# tokenizer or the decoder, as ggml's backends never see llama. Each file is compiled with the
# build's own flags (compile_commands.json), syntax only. Before, backend.h included
# runtime/runtime.h, which pulled in store.h and tokenizer.h.
. "$(dirname "$0")/lib.sh"

db=${MSTORE_BUILD:-}/compile_commands.json
[ -n "${MSTORE_BUILD:-}" ] && [ -f "$db" ] || skip "no compile_commands.json in the build folder (ctest sets MSTORE_BUILD)"
[ -d "$MSTORE_SRC/src/backend" ] || skip "no source tree at $MSTORE_SRC"

# The include tree: a link to each module the seam may use.
mkdir -p "$WORK/inc"
for m in util format quant backend cpu gpu vulkan metal; do
    [ -d "$MSTORE_SRC/src/$m" ] && ln -s "$MSTORE_SRC/src/$m" "$WORK/inc/$m"
done

"$PY" - "$db" "$MSTORE_SRC/src" "$WORK/inc" "$WORK" <<'PYEOF' || fail "a source below the backend seam needs a module above it (see above)"
import json, os, shlex, subprocess, sys
db, src, inc, work = sys.argv[1:]
seam = ("backend", "cpu", "gpu", "vulkan", "metal")
ran = failed = 0
for e in json.load(open(db)):
    f = os.path.realpath(e["file"])
    rel = os.path.relpath(f, src)
    if rel.startswith("..") or rel.split(os.sep)[0] not in seam:
        continue
    args = e.get("arguments") or shlex.split(e["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        if a == "-I" + src:
            a = "-I" + inc
        out.append(a)
    # A header above the seam found through the source's own folder would not show: the
    # seam's files include "module/header.h", never a bare name of another module.
    r = subprocess.run(out + ["-fsyntax-only", "-c", f], cwd=e["directory"], capture_output=True, text=True)
    ran += 1
    if r.returncode != 0:
        failed += 1
        print("%s:\n%s" % (rel, "\n".join(r.stderr.splitlines()[:6])), file=sys.stderr)
if ran == 0:
    print("no source of src/backend, src/cpu, src/gpu, src/vulkan in %s" % db, file=sys.stderr)
    sys.exit(1)
print("%d sources below the seam compiled without the store, tokenizer or decoder" % ran)
sys.exit(1 if failed else 0)
PYEOF
echo "ok $TEST_NAME"
