# lib_serve.sh: sourced after lib.sh (and after lib_registry.sh when a test wants both) by the serve tests (family 6). Starts `mstore serve` on a
# free 127.0.0.1 port and installs the real npm clients people use with it, ollama (ollama-js)
# and openai (openai-node), once per build folder, for node scripts to require (npm_frameworks
# adds ajv and LangChain JS for the structured-output and tool tests).
SERVE_PIDS=""
serve_cleanup() {
    local st=$?
    # a failure shows what the server said (a sanitizer report, a refusal)
    [ "$st" -eq 0 ] || [ "$st" -eq 77 ] || tail -n 20 "$WORK"/serve-*.log >&2 2>/dev/null || true
    for p in $SERVE_PIDS ${REG_PIDS:-}; do kill "$p" 2>/dev/null || true; done
    for p in $SERVE_PIDS ${REG_PIDS:-}; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap serve_cleanup EXIT

# free_port / wait_port as lib_registry.sh has them (not every serve test needs a registry).
free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
wait_port() {
    "$PY" - "$1" <<'PYEOF' || fail "nothing listens on 127.0.0.1:$1"
import socket, sys, time
for _ in range(400):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PYEOF
}

# npm_clients: ollama and openai under $MSTORE_BUILD/npm-clients (a lock keeps parallel tests
# from installing at once); sets NODE_PATH. Skips only where node or npm cannot exist.
NPM_DIR=${MSTORE_BUILD:-$WORK}/npm-clients
npm_clients() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
        skip "node and npm are not installed (tests/run.sh installs nodejs and npm)"
    mkdir -p "$NPM_DIR"
    (
        flock 9
        if [ ! -f "$NPM_DIR/node_modules/ollama/package.json" ] || [ ! -f "$NPM_DIR/node_modules/openai/package.json" ]; then
            npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error ollama@0.6 openai@6 >"$WORK/npm.log" 2>&1
        fi
    ) 9>"$NPM_DIR.lock" || fail "npm install ollama openai failed: $(tail -5 "$WORK/npm.log")"
    export NODE_PATH=$NPM_DIR/node_modules
}

# npm_frameworks: npm_clients' clients plus what the structured-output and tool tests use, in the
# same folder under the same lock: ajv (JSON Schema validation, draft 2020 included) with
# ajv-formats, LangChain's core, ollama and openai integrations, and zod. One npm invocation
# installs what is missing; the two clients keep npm_clients' versions.
NPM_FRAMEWORKS="ajv@8 ajv-formats@3 @langchain/core@1 @langchain/ollama@1 @langchain/openai@1 zod@4"
npm_frameworks() {
    local p missing=0
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
        skip "node and npm are not installed (tests/run.sh installs nodejs and npm)"
    mkdir -p "$NPM_DIR"
    (
        flock 9
        for p in ollama openai ajv ajv-formats @langchain/core @langchain/ollama @langchain/openai zod; do
            [ -f "$NPM_DIR/node_modules/$p/package.json" ] || missing=1
        done
        if [ "$missing" = 1 ]; then
            # shellcheck disable=SC2086
            npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error ollama@0.6 openai@6 \
                $NPM_FRAMEWORKS >"$WORK/npm.log" 2>&1
        fi
    ) 9>"$NPM_DIR.lock" || fail "npm install $NPM_FRAMEWORKS failed: $(tail -5 "$WORK/npm.log")"
    export NODE_PATH=$NPM_DIR/node_modules
}

# serve_start [serve options]: sets SERVE_PORT, SERVE (its URL), SERVE_PID, SERVE_LOG.
serve_start() {
    SERVE_PORT=$(free_port)
    SERVE=http://127.0.0.1:$SERVE_PORT
    SERVE_LOG=$WORK/serve-$SERVE_PORT.log
    "$MSTORE_BIN" serve --listen "127.0.0.1:$SERVE_PORT" "$@" >"$SERVE_LOG" 2>&1 &
    SERVE_PID=$!
    SERVE_PIDS="$SERVE_PIDS $SERVE_PID"
    wait_port "$SERVE_PORT"
}

# serve_alive: the server still answers (after a bad request); fails the test if not.
serve_alive() {
    local v
    kill -0 "$SERVE_PID" 2>/dev/null || fail "the server died: $(tail -5 "$SERVE_LOG")"
    v=$(curl -s --max-time 20 ${SERVE_AUTH:+-H "Authorization: Bearer $SERVE_AUTH"} "$SERVE/api/version") ||
        fail "the server stopped answering: $(tail -5 "$SERVE_LOG")"
    contains "$v" '"version"'
}

# stories_fixture: the npm clients, and stories260K ($S260K) imported as "stories:260k"; skips
# where the model file is missing.
stories_fixture() {
    S260K=$MODELS/stories260K/stories260K.gguf
    [ -f "$S260K" ] || skip "stories260K not found under $MODELS"
    npm_clients
    expect_ok mstore import "$S260K" --name stories:260k --quiet
}

# chatml_fixture: stories260K with Qwen 2's ChatML template, imported as "chatml".
chatml_fixture() {
    local mk=${MSTORE_BUILD:-$(dirname "$MSTORE_BIN")}/test_chat
    [ -x "$mk" ] || skip "test_chat (the fixture writer) not built"
    MSTORE_CHAT_WRITE_GGUF=$WORK/chatml.gguf "$mk" || fail "could not write the ChatML GGUF"
    expect_ok mstore import "$WORK/chatml.gguf" --name chatml --quiet
}
