#!/usr/bin/env bash
# Loaded models are keyed by their manifest, and a request's options are its own:
#  - a name copied over a loaded model answers with the new weights, and /api/ps shows the
#    digest /api/tags does (issue 40 item 12);
#  - a request refused with "num_ctx": 4 leaves later requests without num_ctx the default
#    context (item 19);
#  - names of one manifest share one load, and at most MSTORE_MAX_LOADED_MODELS models stay
#    loaded, the least recently used idle one unloaded to make room (item 9).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
expect_ok mstore import "$S260K" --name stories:260k --quiet
chatml_fixture
printf 'FROM stories:260k\nPARAMETER top_k 7\n' >"$WORK/Modelfile"
expect_ok mstore create third -f "$WORK/Modelfile" --quiet
expect_ok mstore cp stories:260k loaded:x
expect_ok mstore cp stories:260k alias:x
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 16
want_stories=$out
expect_ok mstore run chatml "Once upon a time" --temp 0 -n 16
want_chatml=$out
[ "$want_stories" != "$want_chatml" ] || fail "the two models answer alike: the test shows nothing"

MSTORE_MAX_LOADED_MODELS=2 serve_start

# gen MODEL [EXTRA_OPTIONS_JSON]: POST /api/generate, not streamed, temperature 0, 16 tokens;
# sets code and body.
gen() {
    local opts='{"temperature": 0, "num_predict": 16'${2:+, $2}'}'
    body=$(curl -s --max-time 120 -o - -w '\n%{http_code}' "$SERVE/api/generate" \
        -d '{"model": "'"$1"'", "prompt": "Once upon a time", "stream": false, "options": '"$opts"'}')
    code=${body##*$'\n'}
    body=${body%$'\n'*}
}
field() { printf '%s' "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)'"$2"')'; }
ps_json() { curl -s --max-time 60 "$SERVE/api/ps"; }
tag_digest() {
    curl -s --max-time 60 "$SERVE/api/tags" | "$PY" -c '
import json,sys
print([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"] == sys.argv[1]][0])' "$1"
}

# 12: a copy over a loaded name
gen loaded:x
[ "$code" = 200 ] || fail "generate loaded:x: $code $body"
[ "$(field "$body" '["response"]')" = "$want_stories" ] || fail "loaded:x before the copy: $body"
expect_ok mstore cp chatml loaded:x
gen loaded:x
[ "$code" = 200 ] || fail "generate loaded:x after the copy: $code $body"
[ "$(field "$body" '["response"]')" = "$want_chatml" ] ||
    fail "loaded:x after 'cp chatml loaded:x' answers with the old weights: $(field "$body" '["response"]')"
tags_digest=$(tag_digest loaded:x)
ps_digests=$(ps_json | "$PY" -c '
import json,sys
print(" ".join(m["digest"] for m in json.load(sys.stdin)["models"] if m["name"] == "loaded:x"))')
[ "$ps_digests" = "$tags_digest" ] || fail "/api/ps says loaded:x is '$ps_digests', /api/tags '$tags_digest'"

# 19: one request's num_ctx is not the next one's
gen stories:260k '"num_ctx": 4'
[ "$code" = 400 ] || fail "a prompt longer than num_ctx 4: $code $body"
gen stories:260k
[ "$code" = 200 ] || fail "a request without num_ctx after one with num_ctx 4: $code $body"
[ "$(field "$body" '["response"]')" = "$want_stories" ] || fail "after num_ctx 4: $body"
ctx=$(ps_json | "$PY" -c '
import json,sys
print([m["context_length"] for m in json.load(sys.stdin)["models"] if m["name"] == "stories:260k"][0])')
[ "$ctx" -gt 4 ] || fail "stories:260k still loaded with a context of $ctx"

# 9: names of one manifest share a load; the cap unloads the least recently used
gen stories:260k
gen alias:x
[ "$code" = 200 ] && [ "$(field "$body" '["response"]')" = "$want_stories" ] || fail "alias:x: $code $body"
n=$(ps_json | "$PY" -c '
import json,sys
print(sum(m["digest"] == sys.argv[1] for m in json.load(sys.stdin)["models"]))' "$(tag_digest alias:x)")
[ "$n" = 1 ] || fail "stories:260k and alias:x (one manifest): $n loads, want 1: $(ps_json)"
gen loaded:x # now alias:x's load (stories) is the least recently used
gen third
[ "$code" = 200 ] || fail "third: $code $body"
names=$(ps_json | "$PY" -c 'import json,sys; print(" ".join(sorted(m["name"] for m in json.load(sys.stdin)["models"])))')
[ "$names" = "loaded:x third:latest" ] || fail "with MSTORE_MAX_LOADED_MODELS=2, loaded: '$names', want 'loaded:x third:latest'"
gen stories:260k
[ "$code" = 200 ] && [ "$(field "$body" '["response"]')" = "$want_stories" ] || fail "stories after eviction: $code $body"
serve_alive
echo "ok $TEST_NAME"
