/* serve.c: mstore serve - the ollama, OpenAI and read-only OCI APIs over HTTP. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "server/server.h"

static const char help[] =
    "usage: mstore serve [--listen HOST:PORT] [options]\n\n"
    "Serve the store over HTTP until Ctrl-C or SIGTERM:\n"
    "  /api/*  ollama's API (generate, chat, tags, show, ps, copy, delete, pull, push, blobs)\n"
    "  /v1/*   OpenAI's API (chat/completions, completions, models)\n"
    "  /v2/*   the store as a read-only OCI registry (mstore pull --insecure HOST:PORT/library/NAME)\n"
    "Models stay loaded between requests for keep_alive (default 5m); one load serves every client.\n"
    "Each model runs up to --parallel requests at once, their tokens decoded together in one\n"
    "pass over the weights; later requests wait in order.\n\n"
    "  --listen HOST:PORT    where to listen (default $MSTORE_HOST, else 127.0.0.1:11434); loopback\n"
    "                        unless you say otherwise: set MSTORE_API_KEY before listening wider\n"
    "  --keep-alive SECONDS  how long an idle model stays loaded (default 300; -1 forever)\n"
    "  --max-body BYTES      largest JSON request body (default 16 MiB)\n"
    "  --max-clients N       connections at once (default 64); when all are taken, the one that\n"
    "                        has waited longest without sending a whole request gives way\n"
    "  --parallel N          requests one model runs at once, each with a KV cache of its own\n"
    "                        (default $MSTORE_NUM_PARALLEL, else 4, fewer when their caches would\n"
    "                        take over a quarter of the free memory; 1 runs them one by one)\n"
    "  --threads N           worker threads per model (default: all cores)\n"
    "  --ctx N               context length (default: the model's, at most 4096; num_ctx overrides)\n"
    "  --kv-f16              keep KV caches in f16\n"
    "  --no-remote-pull      /api/pull and /api/push refuse names with a host other than\n"
    "                        $MSTORE_REGISTRY's (403): clients cannot make the server reach a host\n"
    "                        they name (default: any host, as ollama)\n\n"
    "Environment: MSTORE_HOST (listen address), MSTORE_API_KEY (every request must then send\n"
    "'Authorization: Bearer KEY', /v2 included), MSTORE_ORIGINS (web pages that may use the\n"
    "server besides localhost's, comma-separated, '*' matching any characters:\n"
    "'https://chat.example.com,http://192.168.1.*'). A request from a page of any other origin,\n"
    "or, listening on loopback, one sent to a Host name that is not this machine's, gets 403.\n"
    "MSTORE_MAX_LOADED_MODELS: models loaded at once (default 3); the least recently used idle\n"
    "one is unloaded to make room.\n";

int cmd_serve(int argc, char **argv)
{
    server_opts o;
    server *srv = NULL;
    store *s;
    sigset_t set;
    const char *v0;
    long l;
    int sig;

    server_opts_init(&o);
    o.listen = getenv("MSTORE_HOST");
    o.api_key = getenv("MSTORE_API_KEY");
    o.origins = getenv("MSTORE_ORIGINS");
    if ((v0 = getenv("MSTORE_MAX_LOADED_MODELS")) && *v0) {
        if (cli_parse_long(&l, "serve", "MSTORE_MAX_LOADED_MODELS", v0, 1, 1024) < 0)
            return 2;
        o.max_loaded = (int)l;
    }
    if ((v0 = getenv("MSTORE_NUM_PARALLEL")) && *v0) {
        if (cli_parse_long(&l, "serve", "MSTORE_NUM_PARALLEL", v0, 1, RUNTIME_MAX_SEQ) < 0)
            return 2;
        o.parallel = (int)l;
    }
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(f)) {
            fputs(help, stdout);
            return 0;
        } else if (strcmp(f, "--kv-f16") == 0) {
            o.ro.kv_f16 = 1;
        } else if (strcmp(f, "--no-remote-pull") == 0) {
            o.no_remote_pull = 1;
        } else if (strcmp(f, "--listen") == 0 && v) {
            o.listen = v, i++;
        } else if (strcmp(f, "--keep-alive") == 0) {
            if (cli_parse_long(&l, "serve", f, v, -1, 1L << 30) < 0)
                return 2;
            o.keep_alive_s = (int)l, i++;
        } else if (strcmp(f, "--max-body") == 0) {
            if (cli_parse_long(&l, "serve", f, v, 1024, 1L << 32) < 0)
                return 2;
            o.max_body = (size_t)l, i++;
        } else if (strcmp(f, "--max-clients") == 0) {
            if (cli_parse_long(&l, "serve", f, v, 1, 4096) < 0)
                return 2;
            o.max_clients = (int)l, i++;
        } else if (strcmp(f, "--parallel") == 0) {
            if (cli_parse_long(&l, "serve", f, v, 1, RUNTIME_MAX_SEQ) < 0)
                return 2;
            o.parallel = (int)l, i++;
        } else if (strcmp(f, "--threads") == 0) {
            if (cli_parse_long(&l, "serve", f, v, 1, 512) < 0)
                return 2;
            o.ro.n_threads = (int)l, i++;
        } else if (strcmp(f, "--ctx") == 0) {
            if (cli_parse_long(&l, "serve", f, v, 1, 1L << 22) < 0)
                return 2;
            o.ro.n_ctx = (int)l, i++;
        } else {
            return cli_usage_error("serve", "unknown option or missing value '%s'", f);
        }
    }
    if (!(s = cli_store_open())) /* creates the home, and says where it is, before listening */
        return 1;
    store_close(s);
    o.home = cli_home;
    /* Blocked before the server's threads start, so that only sigwait below sees them; a client
     * gone mid-stream must give its writer EPIPE, not kill the server. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (server_start(&srv, &o) < 0)
        return cli_fail();
    fprintf(stderr, "mstore: listening on http://%s (ollama /api, OpenAI /v1, OCI /v2)%s\n", server_address(srv),
            o.api_key && *o.api_key ? ", bearer token required" : "");
    sigwait(&set, &sig);
    fprintf(stderr, "mstore: stopping\n");
    server_stop(srv);
    return 0;
}
