#!/usr/bin/env bash
# mstore serve answers only this machine's browser pages, as ollama does (issue 40): a request
# whose Origin is another site's is refused with 403 before any work (the copy it asked for
# does not happen), one from an allowed page gets CORS headers and its preflight answered, a
# Host that does not name this machine (DNS rebinding) is refused while listening on loopback,
# and MSTORE_ORIGINS adds origins. Requests without Origin (curl, the CLI) are served as ever.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
command -v curl >/dev/null || skip "no curl"
make_hf "$WORK/a"
expect_ok mstore import "$WORK/a" --name tiny --quiet
serve_start

# req METHOD PATH [curl args]: sets $code, $body and $headers (lower-cased names).
req() {
    local m=$1 p=$2
    shift 2
    code=$(curl -s -o "$WORK/body" -D "$WORK/headers" -w '%{http_code}' --max-time 60 -X "$m" "$@" "$SERVE$p")
    body=$(cat "$WORK/body")
    headers=$(tr -d '\r' <"$WORK/headers" | tr 'A-Z' 'a-z')
}
copy() { # copy DEST [curl args]: POST /api/copy tiny -> DEST, as a page's fetch() sends it
    local d=$1
    shift
    req POST /api/copy -H 'Content-Type: text/plain' --data-binary "{\"source\": \"tiny\", \"destination\": \"$d\"}" "$@"
}
no_cors() { case "$headers" in *access-control-allow-origin*) fail "CORS headers on a refusal: $headers" ;; esac; }

# A page of another site: 403 with a JSON error, no CORS header, and no copy made.
before=$(store_state)
copy evil -H 'Origin: http://evil.example'
[ "$code" = 403 ] || fail "Origin http://evil.example: HTTP $code, want 403: $body"
contains "$body" '{"error":"forbidden: origin '"'"'http://evil.example'"'"' is not allowed'
contains "$body" MSTORE_ORIGINS
no_cors
for o in https://evil.example http://localhost.evil.example http://127.0.0.1.evil.example null; do
    copy evil -H "Origin: $o"
    [ "$code" = 403 ] || fail "Origin $o: HTTP $code, want 403: $body"
done
# the same refusal under /v1 and /v2, in their APIs' shapes
req GET /v1/models -H 'Origin: http://evil.example'
[ "$code" = 403 ] || fail "/v1 from another site: HTTP $code"
contains "$body" '"code":"forbidden"'
req GET /v2/_catalog -H 'Origin: http://evil.example'
[ "$code" = 403 ] || fail "/v2 from another site: HTTP $code"
contains "$body" '"code":"DENIED"'
[ "$(store_state)" = "$before" ] || fail "a refused request changed the store"
expect_ok mstore list
case "$out" in *evil*) fail "the refused copy happened: $out" ;; esac

# A page on this machine: served, with the CORS header that lets it read the answer.
copy fromlocal -H "Origin: http://localhost:3000"
[ "$code" = 200 ] || fail "Origin http://localhost:3000: HTTP $code: $body"
contains "$headers" 'access-control-allow-origin: http://localhost:3000'
for o in http://127.0.0.1 https://127.0.0.1:8443 http://0.0.0.0:5173 app://obsidian.md vscode-webview://abc \
    chrome-extension://abcdef; do
    req GET /api/version -H "Origin: $o"
    [ "$code" = 200 ] || fail "Origin $o: HTTP $code: $body"
    contains "$headers" "access-control-allow-origin: $o"
done
# its preflight (what fetch() sends first for application/json): 204 with the allowed methods
# and headers, and no work done
req OPTIONS /api/copy -H 'Origin: http://localhost:3000' -H 'Access-Control-Request-Method: POST' \
    -H 'Access-Control-Request-Headers: content-type'
[ "$code" = 204 ] || fail "preflight: HTTP $code: $body"
contains "$headers" 'access-control-allow-origin: http://localhost:3000'
contains "$headers" 'access-control-allow-methods: get, post'
contains "$headers" 'access-control-allow-headers: authorization, content-type'
# another site's preflight is refused
req OPTIONS /api/copy -H 'Origin: http://evil.example' -H 'Access-Control-Request-Method: POST'
[ "$code" = 403 ] || fail "another site's preflight: HTTP $code"
no_cors

# No Origin (curl, the CLI, ollama's own clients): served as before, without CORS headers.
copy fromcurl
[ "$code" = 200 ] || fail "no Origin: HTTP $code: $body"
no_cors

# DNS rebinding: evil.example re-resolved to 127.0.0.1 sends Host: evil.example. Refused (403,
# nothing done); this machine's names and addresses are answered.
before=$(store_state)
copy rebound -H 'Host: evil.example' -H 'Origin: http://evil.example'
[ "$code" = 403 ] || fail "Host evil.example with its Origin: HTTP $code"
for h in evil.example evil.example:$SERVE_PORT 8.8.8.8 127.0.0.1.nip.io; do
    copy rebound -H "Host: $h"
    [ "$code" = 403 ] || fail "Host $h: HTTP $code, want 403: $body"
    contains "$body" "forbidden: Host '$h' does not name this machine"
done
[ "$(store_state)" = "$before" ] || fail "a request to a foreign Host changed the store"
for h in localhost localhost:$SERVE_PORT 127.0.0.1 "[::1]:$SERVE_PORT" app.localhost "$(hostname)" 10.1.2.3; do
    req GET /api/version -H "Host: $h"
    [ "$code" = 200 ] || fail "Host $h: HTTP $code: $body"
done
serve_alive

# MSTORE_ORIGINS adds origins (a list, with a wildcard); the defaults stay.
kill "$SERVE_PID"
MSTORE_ORIGINS='https://chat.example.com, http://*.lan.example:8080' serve_start
copy fromchat -H 'Origin: https://chat.example.com'
[ "$code" = 200 ] || fail "an MSTORE_ORIGINS origin: HTTP $code: $body"
contains "$headers" 'access-control-allow-origin: https://chat.example.com'
req GET /api/version -H 'Origin: http://box.lan.example:8080'
[ "$code" = 200 ] || fail "an MSTORE_ORIGINS wildcard: HTTP $code: $body"
req GET /api/version -H 'Origin: http://localhost:3000'
[ "$code" = 200 ] || fail "the defaults with MSTORE_ORIGINS set: HTTP $code"
copy evil -H 'Origin: http://evil.example'
[ "$code" = 403 ] || fail "another site with MSTORE_ORIGINS set: HTTP $code"
expect_ok mstore list
contains "$out" fromchat
case "$out" in *evil*) fail "the refused copy happened: $out" ;; esac
kill "$SERVE_PID"
MSTORE_ORIGINS='http://*.a.*' expect_fail 1 "MSTORE_ORIGINS: 'http://*.a.*': at most one '*'" mstore serve --listen 127.0.0.1:0

# Listening wider than loopback, Host is not checked (anyone who can connect may; the origin
# check stands), as ollama does.
port=$(free_port)
mstore serve --listen "0.0.0.0:$port" >"$WORK/wide.log" 2>&1 &
SERVE_PIDS="$SERVE_PIDS $!"
wait_port "$port"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 -H 'Host: box.example' "http://127.0.0.1:$port/api/version")
[ "$code" = 200 ] || fail "listening on 0.0.0.0, Host box.example: HTTP $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 -H 'Origin: http://evil.example' "http://127.0.0.1:$port/api/version")
[ "$code" = 403 ] || fail "listening on 0.0.0.0, another site's Origin: HTTP $code"
echo "ok $TEST_NAME"
