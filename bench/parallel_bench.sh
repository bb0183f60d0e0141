#!/usr/bin/env bash
# parallel_bench.sh URL MODEL [-- SERVER_CMD...]: concurrent streaming decoding through one
# OpenAI /v1/completions server (mstore serve --parallel N or llama-server -np N -cb; issue 35).
#
#   - waves of N = 1 2 4 8 concurrent streamed requests (temperature 0, max_tokens T, a distinct
#     short prompt each, so that no prefix cache shares them), started together. Per wave:
#       aggregate tok/s = tokens received by all N / (last token of the wave - start of the wave)
#       (prefill included: it is what N clients see together), its ratio to the N=1 wave, and
#       the per-sequence decode rate, median over the N of (tokens - 1) / (last - first token).
#     "Tokens" are the usage's completion_tokens where the server reports it at the end of the
#     stream (llama-server does), else the chunks with non-empty text (a token that ends inside
#     a UTF-8 character comes out with the next one, so these can be a few fewer); the chunks
#     are printed too, and a wave where a request got fewer than T tokens says so.
#   - time to first token of a request that arrives while 7 others stream: 7 requests with a
#     long max_tokens are started, and once each has received TTFT_AFTER tokens (the script
#     waits on their readers, no sleeps) and STEP_GAPS more, an 8th is sent. Printed: its TTFT,
#     the TTFT of the N=1 wave (its prompt's prefill alone) and the decode step of the 7 (the
#     median gap between their tokens over those last STEP_GAPS, all 7 decoding), so that
#     "TTFT <= prefill + one step" can be read.
#
# URL is the server's base (http://127.0.0.1:8080), MODEL the name sent as "model". With
# "-- SERVER_CMD..." the script starts that server itself, waits until a 1-token completion
# answers (which also loads the model and warms it), measures, and stops it. Environment:
# T (64) tokens per request in the waves, WAVES ("1 2 4 8"), REPS (1; medians over REPS waves),
# TTFT_STREAMS (7), TTFT_AFTER (4), STEP_GAPS (4), TTFT_MAX (256) max_tokens of the 7,
# READY_S (600) the wait for the server. Needs bash and python3 (standard library only).
#
#   bench/parallel_bench.sh http://127.0.0.1:8081 x -- \
#       llama-server -m llama-1b-q4_0.gguf -t 2 -np 8 -cb -c 4096 --port 8081
#   MSTORE_HOME=/tmp/h build-rel/mstore import llama-1b-q4_0.gguf --name bench:q4
#   MSTORE_HOME=/tmp/h bench/parallel_bench.sh http://127.0.0.1:8082 bench:q4 -- \
#       build-rel/mstore serve --listen 127.0.0.1:8082 --parallel 8 --threads 2
set -eu
[ $# -ge 2 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
URL=$1 MODEL=$2
shift 2
SPID=
if [ $# -gt 0 ]; then
    [ "$1" = "--" ] || { echo "parallel_bench.sh: expected -- before the server command, got '$1'" >&2; exit 2; }
    shift
    LOG=${SERVER_LOG:-$(mktemp /tmp/parallel_bench.XXXXXX.log)}
    "$@" >"$LOG" 2>&1 &
    SPID=$!
    trap 'kill $SPID 2>/dev/null || true; wait $SPID 2>/dev/null || true' EXIT
    echo "== server: $* (pid $SPID, log $LOG)"
fi
echo "== load at start: $(uptime)"
export URL MODEL SPID
python3 - <<'PY'
import http.client, json, os, socket, statistics, sys, threading, time, urllib.parse

URL, MODEL = os.environ["URL"], os.environ["MODEL"]
T = int(os.environ.get("T", "64"))
WAVES = [int(n) for n in os.environ.get("WAVES", "1 2 4 8").split()]
REPS = int(os.environ.get("REPS", "1"))
TTFT_STREAMS = int(os.environ.get("TTFT_STREAMS", "7"))
TTFT_AFTER = int(os.environ.get("TTFT_AFTER", "4"))
TTFT_MAX = int(os.environ.get("TTFT_MAX", "256"))
STEP_GAPS = int(os.environ.get("STEP_GAPS", "4"))
READY_S = float(os.environ.get("READY_S", "600"))
SPID = os.environ.get("SPID")
u = urllib.parse.urlsplit(URL)
HOST, PORT = u.hostname, u.port or 80

# Distinct first words: a shared prefix would let a prefix cache skip most of a prompt.
WORDS = ["Once", "Yesterday", "Somewhere", "Beyond", "Underneath", "Tomorrow", "Inside", "Across",
         "Quietly", "Suddenly", "Long", "Far", "Deep", "High", "After", "Before"]

def prompt(i):
    return "%s upon a time, story number %d began" % (WORDS[i % len(WORDS)], i)

class Stream:
    """One streamed /v1/completions request read on its own thread; the token times kept."""
    def __init__(self, i, max_tokens, cond=None):
        self.i, self.max_tokens, self.cond = i, max_tokens, cond
        self.times, self.usage, self.finish, self.error, self.done = [], None, None, None, False
        self.conn = self.sock = None
        self.stop = False

    def run(self):
        body = json.dumps({"model": MODEL, "prompt": prompt(self.i), "stream": True, "temperature": 0,
                           "max_tokens": self.max_tokens})
        try:
            self.conn = http.client.HTTPConnection(HOST, PORT, timeout=600)
            self.t0 = time.perf_counter()
            self.conn.connect()
            self.sock = self.conn.sock  # http.client drops its own reference when the server says close
            self.conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = self.conn.getresponse()
            if r.status != 200:
                raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:300]))
            while not self.stop:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    self.done = True
                    break
                o = json.loads(data)
                if "error" in o:
                    raise RuntimeError(str(o["error"]))
                if o.get("usage"):
                    self.usage = o["usage"].get("completion_tokens")
                for c in o.get("choices") or []:
                    if c.get("finish_reason"):
                        self.finish = c["finish_reason"]
                    if c.get("text"):
                        t = time.perf_counter()
                        if self.cond:
                            with self.cond:
                                self.times.append(t)
                                self.cond.notify_all()
                        else:
                            self.times.append(t)
            if not self.done and not self.stop:
                raise RuntimeError("the stream ended without 'data: [DONE]' after %d chunks" % len(self.times))
        except Exception as e:  # reported by the caller, which needs every reader's outcome
            if not self.stop:
                self.error = "request %d: %s" % (self.i, e)
        finally:
            if self.conn:
                self.conn.close()
            if self.cond:
                with self.cond:
                    self.cond.notify_all()

    def tokens(self):
        return self.usage if self.usage is not None else len(self.times)

    def start(self):
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()
        return self

    def close(self):
        """Leave early: closing the socket is how both servers learn that the client went."""
        self.stop = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except Exception:
            pass

def check(streams):
    for s in streams:
        if s.error:
            sys.exit("parallel_bench.sh: " + s.error)

def ready():
    if SPID:
        with open("/proc/%s/stat" % SPID):  # the server has not exited
            pass
    s = Stream(999, 1)
    s.run()
    return s.error is None and len(s.times) == 1

deadline = time.time() + READY_S
while not ready():
    if time.time() > deadline:
        sys.exit("parallel_bench.sh: no 1-token completion from %s within %.0f s" % (URL, READY_S))
    time.sleep(0.5)  # waiting for a server to come up, not synchronizing a measurement

def wave(n, first):
    streams = [Stream(first + k, T) for k in range(n)]
    for s in streams:
        s.start()
    for s in streams:
        s.th.join()
    check(streams)
    t0 = min(s.t0 for s in streams)
    toks = sum(s.tokens() for s in streams)
    last = max(s.times[-1] for s in streams if s.times)
    per_seq = statistics.median((s.tokens() - 1) / (s.times[-1] - s.times[0]) if len(s.times) > 1 else 0.0
                                for s in streams)
    ttft = statistics.median(s.times[0] - s.t0 for s in streams if s.times)
    short = sum(1 for s in streams if s.tokens() < T)
    return dict(agg=toks / (last - t0), per_seq=per_seq, ttft=ttft, toks=toks, wall=last - t0,
                chunks=sum(len(s.times) for s in streams), usage=all(s.usage is not None for s in streams), short=short)

print("== waves: %s concurrent requests, max_tokens %d, temperature 0, %d rep(s)" % (WAVES, T, REPS))
print("%3s %12s %8s %14s %10s %8s %7s %s" % ("N", "agg_tok_s", "x_N1", "per_seq_tok_s", "ttft_ms", "tokens", "wall_s",
                                             "chunks"))
base = None
first = 0
ttft_alone = None
for n in WAVES:
    rows = []
    for _ in range(REPS):
        rows.append(wave(n, first))
        first += n  # every request of the run gets its own prompt
    r = sorted(rows, key=lambda x: x["agg"])[len(rows) // 2]
    if base is None:
        base = r["agg"]
    if n == 1:
        ttft_alone = r["ttft"]
    note = "" if not r["short"] else "  (%d request(s) ended before %d tokens)" % (r["short"], T)
    print("%3d %12.2f %8.2f %14.2f %10.1f %8d %7.2f %d%s%s" % (n, r["agg"], r["agg"] / base, r["per_seq"], r["ttft"] * 1e3,
                                                          r["toks"], r["wall"], r["chunks"],
                                                          "" if r["usage"] else " (tokens = chunks)", note))
sys.stdout.flush()

# The TTFT of a request arriving while TTFT_STREAMS others decode.
cond = threading.Condition()
busy = [Stream(first + k, TTFT_MAX, cond).start() for k in range(TTFT_STREAMS)]
first += TTFT_STREAMS
def wait_tokens(need):
    with cond:
        cond.wait_for(lambda: all(len(s.times) >= n or not s.th.is_alive() for s, n in zip(busy, need)))
    check(busy)
    for s, n in zip(busy, need):
        if len(s.times) < n:
            sys.exit("parallel_bench.sh: request %d ended after %d tokens, before all %d streamed at once (a server "
                     "that decodes one at a time, or an end token before TTFT_MAX %d)" %
                     (s.i, len(s.times), TTFT_STREAMS, TTFT_MAX))

wait_tokens([TTFT_AFTER] * TTFT_STREAMS)
# then STEP_GAPS more tokens each: the decode step of the 7 in the steady state, all of them decoding
with cond:
    t_ready, need = time.perf_counter(), [len(s.times) + STEP_GAPS for s in busy]
wait_tokens(need)
late = Stream(first, 8)
t_send = time.perf_counter()
late.start()
late.th.join()
with cond:
    gaps = [b - a for s in busy for a, b in zip(s.times, s.times[1:]) if a >= t_ready and b <= t_send]
for s in busy:
    s.close()
for s in busy:
    s.th.join()
check([late])
if not late.times:
    sys.exit("parallel_bench.sh: the late request received no token")
step = statistics.median(gaps)
ttft = late.times[0] - late.t0
print("== TTFT of a request arriving while %d stream (each had >= %d tokens):" % (TTFT_STREAMS, TTFT_AFTER))
print("ttft_ms %.1f  alone_ttft_ms %.1f  decode_step_ms %.1f (median of %d gaps)  alone+step_ms %.1f" %
      (ttft * 1e3, ttft_alone * 1e3 if ttft_alone else float("nan"), step * 1e3, len(gaps),
       ((ttft_alone or float("nan")) + step) * 1e3))
PY
echo "== load at end: $(uptime)"
