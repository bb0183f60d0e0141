# lib_registry.sh: sourced after lib.sh by the pull/push tests (family 4). Starts Debian's
# docker-registry (the Distribution registry 2.x) on 127.0.0.1 with filesystem storage in the
# test's temp folder, and stops it when the test exits. Network never leaves loopback.
REGISTRY_BIN=${MSTORE_REGISTRY_BIN:-/usr/bin/docker-registry}
[ -x "$REGISTRY_BIN" ] || skip "no $REGISTRY_BIN (apt-get install docker-registry)"

REG_PIDS=""
reg_cleanup() {
    for p in $REG_PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $REG_PIDS; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap reg_cleanup EXIT

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_port PORT: until something accepts on 127.0.0.1:PORT (10 s at most).
wait_port() {
    "$PY" - "$1" <<'PYEOF' || fail "nothing listens on 127.0.0.1:$1"
import socket, sys, time
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PYEOF
}

# registry_start: sets REG_PORT, REG_HOST (127.0.0.1:PORT), REG_ROOT (its storage folder) and
# REG_LOG (its log, with one access line per request: tests grep it for requests made).
registry_start() {
    REG_PORT=$(free_port)
    REG_HOST=127.0.0.1:$REG_PORT
    REG_ROOT=$WORK/registry
    mkdir -p "$REG_ROOT"
    cat >"$WORK/registry.yml" <<YML
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $REG_ROOT
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$REG_PORT
YML
    REG_LOG=$WORK/registry.log
    "$REGISTRY_BIN" serve "$WORK/registry.yml" >"$REG_LOG" 2>&1 &
    REG_PIDS="$REG_PIDS $!"
    wait_port "$REG_PORT"
}

# proxy_start [dropproxy options]: a proxy in front of the registry; sets PROXY_HOST.
proxy_start() {
    local port
    port=$(free_port)
    "$PY" "$MSTORE_SRC/tests/e2e/dropproxy.py" --listen "$port" --target "$REG_PORT" "$@" \
        >"$WORK/proxy.log" 2>&1 &
    REG_PIDS="$REG_PIDS $!"
    wait_port "$port"
    PROXY_HOST=127.0.0.1:$port
}

# make_layout DIR TAG SIZE_MB [N_LAYERS]: an OCI image layout holding one model whose layers
# are random bytes (SIZE_MB in all), so tests get big blobs without a slow fixture writer.
make_layout() {
    "$PY" - "$@" <<'PYEOF'
import hashlib, json, os, sys
d, tag, mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
n = int(sys.argv[4]) if len(sys.argv) > 4 else 2
os.makedirs(d + "/blobs/sha256", exist_ok=True)
def put(b):
    h = hashlib.sha256(b).hexdigest()
    open("%s/blobs/sha256/%s" % (d, h), "wb").write(b)
    return {"digest": "sha256:" + h, "size": len(b)}
cfg = put(json.dumps({"architecture": "test", "tag": tag}).encode())
layers = []
for i in range(n):
    size = (mb << 20) // n + i   # different sizes: blobs are not all one part count
    l = put(os.urandom(size))
    l.update(mediaType="application/vnd.mstore.test.data", name="part%d" % i)
    layers.append(l)
cfg["mediaType"] = "application/vnd.mstore.model.config.v1+json"
m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": cfg, "layers": layers}, separators=(",", ":")).encode()
md = put(m)
md.update(mediaType="application/vnd.oci.image.manifest.v1+json",
          annotations={"org.opencontainers.image.ref.name": tag})
open(d + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
open(d + "/index.json", "w").write(json.dumps({"schemaVersion": 2, "manifests": [md]}))
PYEOF
}

# blob_digests: every blob file name in the store, as sha256:<hex>, one a line, sorted.
blob_digests() { ls "$MSTORE_HOME/blobs" | sed 's/^sha256-/sha256:/' | sort; }

# ollama_model DIR GGUF [TEMPLATE_FILE] [PARAMS_JSON] [SYSTEM_TEXT]: the blobs and the manifest
# of a model as ollama's registry serves it (Docker v2 manifest, ollama's ConfigV2, one whole
# GGUF layer, then template / params / system layers when given) in DIR: blobs as DIR/<hex>,
# DIR/manifest.json, and DIR/blobs.txt with one "digest" per blob line.
ollama_model() {
    "$PY" - "$MSTORE_SRC/tests/e2e" "$@" <<'PYEOF'
import json, os, sys
sys.path.insert(0, sys.argv.pop(1))
from artifact_blobs import Artifact
d, gguf = sys.argv[1], sys.argv[2]
tmpl = sys.argv[3] if len(sys.argv) > 3 else ""
params = sys.argv[4] if len(sys.argv) > 4 else ""
system = sys.argv[5] if len(sys.argv) > 5 else ""
a = Artifact(d)
put = a.put
layers = [put(open(gguf, "rb").read(), "application/vnd.ollama.image.model")]
if tmpl:
    layers.append(put(open(tmpl, "rb").read(), "application/vnd.ollama.image.template"))
if params:
    layers.append(put(params.encode(), "application/vnd.ollama.image.params"))
if system:
    layers.append(put(system.encode(), "application/vnd.ollama.image.system"))
cfg = {"model_format": "gguf", "model_family": "llama", "model_families": ["llama"], "model_type": "260K",
       "file_type": "F32", "architecture": "amd64", "os": "linux",
       "rootfs": {"type": "layers", "diff_ids": [l["digest"] for l in layers]}}
config = put(json.dumps(cfg).encode(), "application/vnd.docker.container.image.v1+json")
m = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
     "config": config, "layers": layers}
a.write(m)
PYEOF
}

# dmr_model DIR GGUF [CONTEXT_SIZE] [TEMPLATE_FILE] [LICENSE_TEXT]: a Docker Model Runner
# artifact as `docker model package --gguf` writes it (docker/model-runner
# pkg/distribution/types): an OCI manifest, config v0.1 (format, quantization, context_size;
# rootfs diff_ids), the GGUF as application/vnd.docker.ai.gguf.v3 with its file path
# annotation, then license and Jinja chat template layers. Files as ollama_model's. GGUF may be
# a comma-separated list of shards (model-0000i-of-0000N.gguf): one GGUF layer each, in order.
dmr_model() {
    "$PY" - "$MSTORE_SRC/tests/e2e" "$@" <<'PYEOF'
import json, os, sys
sys.path.insert(0, sys.argv.pop(1))
from artifact_blobs import Artifact
d, gguf = sys.argv[1], sys.argv[2]
ctx = sys.argv[3] if len(sys.argv) > 3 else ""
tmpl = sys.argv[4] if len(sys.argv) > 4 else ""
lic = sys.argv[5] if len(sys.argv) > 5 else ""
a = Artifact(d)
put = a.put
# GGUF as "A,B,...": the shards of a split GGUF, one layer each in that order, by their names
ggufs = gguf.split(",")
layers = [put(open(g, "rb").read(), "application/vnd.docker.ai.gguf.v3",
              os.path.basename(g) if len(ggufs) > 1 else "model.gguf") for g in ggufs]
if lic:
    layers.append(put(lic.encode(), "application/vnd.docker.ai.license", "LICENSE"))
if tmpl:
    layers.append(put(open(tmpl, "rb").read(), "application/vnd.docker.ai.chat.template.jinja", "template.jinja"))
cfg = {"config": {"format": "gguf", "quantization": "F32", "parameters": "260K", "architecture": "llama",
                  "size": "1.19MB"},
       "descriptor": {"created": "2025-06-01T00:00:00Z"},
       "rootfs": {"type": "rootfs", "diff_ids": [l["digest"] for l in layers[:len(ggufs)]]}}
if ctx:
    cfg["config"]["context_size"] = json.loads(ctx)
config = put(json.dumps(cfg).encode(), "application/vnd.docker.ai.model.config.v0.1+json")
m = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
     "artifactType": "application/vnd.docker.ai.model.config.v0.1+json", "config": config, "layers": layers}
a.write(m)
PYEOF
}

# modelpack_model DIR FORMAT FILE[,FILE...] [raw|tar|astar]: a CNCF ModelPack artifact
# (modelpack/model-spec docs/spec.md, docs/config.md): an OCI manifest with artifactType
# application/vnd.cncf.model.manifest.v1+json, config application/vnd.cncf.model.config.v1+json
# (descriptor, config {architecture, format FORMAT, paramSize, precision}, modelfs diffIds), each
# FILE a application/vnd.cncf.model.weight.v1.raw layer with its org.cncf.model.filepath
# annotation; with `tar`, each FILE in an uncompressed tar layer (.v1.tar) as Python's tarfile
# writes one (pax headers, a time, owner names: not mstore's own form); with `astar`, each FILE
# is already an archive and goes in as the tar layer. Files as ollama_model's.
modelpack_model() {
    "$PY" - "$MSTORE_SRC/tests/e2e" "$@" <<'PYEOF'
import io, json, os, sys, tarfile
sys.path.insert(0, sys.argv.pop(1))
from artifact_blobs import Artifact
d, fmt, files = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
kind = sys.argv[4] if len(sys.argv) > 4 else "raw"
a = Artifact(d)
def put(b, mt, path=None):
    meta = {"org.cncf.model.file.metadata+json": json.dumps({"name": path, "mode": 420, "size": len(b), "typeflag": 48})}
    return a.put(b, mt, path, meta if path else None)
def wrap(f):
    if kind == "astar":
        return open(f, "rb").read()
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
        i = t.gettarinfo(f, arcname="./" + os.path.basename(f))
        i.mtime, i.uname, i.gname, i.uid, i.gid = 1748736000, "modctl", "modctl", 1000, 1000
        i.pax_headers = {"comment": "written by a test"}
        with open(f, "rb") as fh:
            t.addfile(i, fh)
    return b.getvalue()
if kind == "raw":
    layers = [put(open(f, "rb").read(), "application/vnd.cncf.model.weight.v1.raw", os.path.basename(f)) for f in files]
else:
    layers = [put(wrap(f), "application/vnd.cncf.model.weight.v1.tar", os.path.basename(f)) for f in files]
cfg = {"descriptor": {"name": "stories260K", "family": "llama", "createdAt": "2025-06-01T00:00:00Z"},
       "config": {"architecture": "transformer", "format": fmt, "paramSize": "260K", "precision": "float32"},
       "modelfs": {"type": "layers", "diffIds": [l["digest"] for l in layers]}}
config = put(json.dumps(cfg).encode(), "application/vnd.cncf.model.config.v1+json")
m = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
     "artifactType": "application/vnd.cncf.model.manifest.v1+json", "config": config, "layers": layers}
a.write(m)
PYEOF
}

# hf_artifact DIR HFDIR dmr2|dmr1|modelpack: a Hugging Face safetensors directory as an artifact,
# each layer with its org.cncf.model.filepath annotation (docker/model-runner
# pkg/distribution/builder, modelpack/model-spec): dmr2 as `docker model package --safetensors-dir`
# writes it now (config v0.2, a layer per file: .safetensors as application/vnd.docker.ai.safetensors,
# the rest application/vnd.docker.ai.model.file), dmr1 as it wrote it before (config v0.1, the
# non-weight files in one application/vnd.docker.ai.vllm.config.tar), modelpack with the spec's
# raw weight and weight-config layers and format safetensors. Files as ollama_model's.
hf_artifact() {
    "$PY" - "$MSTORE_SRC/tests/e2e" "$@" <<'PYEOF'
import io, json, os, sys, tarfile
sys.path.insert(0, sys.argv.pop(1))
from artifact_blobs import Artifact
d, src, kind = sys.argv[1:4]
a = Artifact(d)
put = a.put
names = sorted(os.listdir(src))
weights = [n for n in names if n.endswith(".safetensors")]
others = [n for n in names if n not in weights]
read = lambda n: open(os.path.join(src, n), "rb").read()
if kind == "modelpack":
    layers = [put(read(n), "application/vnd.cncf.model.weight.v1.raw", n) for n in weights]
    layers += [put(read(n), "application/vnd.cncf.model.weight.config.v1.raw", n) for n in others]
    cfg = {"descriptor": {"name": "tiny-hf", "createdAt": "2025-06-01T00:00:00Z"},
           "config": {"architecture": "transformer", "format": "safetensors", "paramSize": "3M",
                      "precision": "float32"},
           "modelfs": {"type": "layers", "diffIds": [l["digest"] for l in layers]}}
    config = put(json.dumps(cfg).encode(), "application/vnd.cncf.model.config.v1+json")
    m = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
         "artifactType": "application/vnd.cncf.model.manifest.v1+json", "config": config, "layers": layers}
else:
    layers = [put(read(n), "application/vnd.docker.ai.safetensors", n) for n in weights]
    if kind == "dmr2":
        layers += [put(read(n), "application/vnd.docker.ai.model.file", n) for n in others]
    else:
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w") as t:
            for n in others:
                t.add(os.path.join(src, n), arcname=n)
        layers.append(put(b.getvalue(), "application/vnd.docker.ai.vllm.config.tar", "config.tar"))
    cfg = {"config": {"format": "safetensors", "quantization": "F32", "parameters": "3M", "architecture": "llama",
                      "size": "13MB", "safetensors": {"total": "1"}},
           "descriptor": {"created": "2025-06-01T00:00:00Z"},
           "rootfs": {"type": "rootfs", "diff_ids": [l["digest"] for l in layers]}}
    mt = "application/vnd.docker.ai.model.config.v0.%s+json" % ("2" if kind == "dmr2" else "1")
    config = put(json.dumps(cfg).encode(), mt)
    m = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": config,
         "layers": layers}
a.write(m)
PYEOF
}

# curl_push DIR REPO TAG: upload what ollama_model wrote to the loopback registry with curl
# (POST an upload, PUT the bytes with ?digest=), then PUT the manifest. Prints its digest.
curl_push() {
    local dir=$1 repo=$2 tag=$3 d loc mt
    while read -r d; do
        loc=$(curl -sS -o /dev/null -D - -X POST "http://$REG_HOST/v2/$repo/blobs/uploads/" |
            tr -d '\r' | sed -n 's/^[Ll]ocation: //p')
        [ -n "$loc" ] || fail "no upload location for $d"
        case "$loc" in http*) ;; *) loc="http://$REG_HOST$loc" ;; esac
        case "$loc" in *\?*) loc="$loc&digest=$d" ;; *) loc="$loc?digest=$d" ;; esac
        curl -sSf -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' \
            --data-binary "@$dir/${d#sha256:}" "$loc" || fail "upload of $d failed"
    done <"$dir/blobs.txt"
    # the manifest's own media type (Docker v2 for ollama_model, OCI for dmr_model)
    mt=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["mediaType"])' "$dir/manifest.json")
    curl -sSf -o /dev/null -X PUT -H "Content-Type: $mt" \
        --data-binary "@$dir/manifest.json" "http://$REG_HOST/v2/$repo/manifests/$tag" || fail "manifest PUT failed"
    echo "sha256:$(sha256sum "$dir/manifest.json" | cut -d' ' -f1)"
}
