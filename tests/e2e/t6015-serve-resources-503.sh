#!/usr/bin/env bash
# A model that cannot be opened or loaded for want of file descriptors is answered 503 ("try
# again later"), not 500: the server is short of resources, the request is fine; once there
# are descriptors again the same request answers (issue 40 item 9). The server's own limit is
# lowered while it runs (prlimit) to its open descriptors and one more: the connection's
# socket fits, the store's database and the model's files do not.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
command -v prlimit >/dev/null || skip "no prlimit (util-linux)"
[ -d /proc/self/fd ] || skip "no /proc"
expect_ok mstore import "$S260K" --name stories:260k --quiet
printf 'FROM stories:260k\nPARAMETER top_k 7\n' >"$WORK/Modelfile"
expect_ok mstore create other -f "$WORK/Modelfile" --quiet
serve_start
gen() { # gen MODEL: sets code and body
    body=$(curl -s --max-time 120 -o - -w '\n%{http_code}' "$SERVE/api/generate" \
        -d '{"model": "'"$1"'", "prompt": "Once upon a time", "stream": false, "options": {"num_predict": 2}}')
    code=${body##*$'\n'}
    body=${body%$'\n'*}
}
gen stories:260k
[ "$code" = 200 ] || fail "warm-up: $code $body"

n=$(ls "/proc/$SERVE_PID/fd" | wc -l)
prlimit --pid "$SERVE_PID" --nofile=$((n + 1)): || skip "prlimit cannot lower the server's descriptor limit here"
gen other
[ "$code" = 503 ] || fail "a load without descriptors: $code $body, want 503"
contains "$body" "not enough resources to"
contains "$body" "try again later"
prlimit --pid "$SERVE_PID" --nofile=1024: || fail "prlimit cannot raise the limit back"
gen other
[ "$code" = 200 ] || fail "the same request with descriptors again: $code $body"
serve_alive
echo "ok $TEST_NAME"
