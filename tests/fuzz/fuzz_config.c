/* fuzz_config.c: libFuzzer target for the model hyper-parameters readers: the config blob's
 * JSON (runtime_config_from_json, what a pulled model's config says) and a GGUF header's
 * <arch>.* keys (runtime_config_from_gguf). An accepted config must hold every relation the
 * decoder sizes buffers and divides by (the checks below), and its rope frequencies must be
 * finite and positive: a config that passes with a NaN or a zero there gives garbage or a crash
 * later, far from the file that caused it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_config: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); abort(); } } while (0)

static void check_config(const runtime_config *c)
{
    double *freqs;

    CHECK(c->architecture[0]);
    CHECK(c->dim >= 1 && c->n_layers >= 1 && c->n_heads >= 1 && c->ffn_dim >= 1 && c->vocab_size >= 1 &&
          c->ctx_len >= 1);
    CHECK(c->n_kv_heads >= 1 && c->n_heads % c->n_kv_heads == 0);
    CHECK(c->head_dim >= 1 && c->head_dim <= 1024 && c->n_rot >= 2 && c->n_rot <= c->head_dim && c->n_rot % 2 == 0);
    CHECK(c->n_experts >= 0 && c->n_experts_used >= 0 && c->n_experts_used <= c->n_experts);
    CHECK(c->n_experts == 0 || c->expert_ffn_dim >= 1);
    CHECK(c->sliding_window >= 0 && c->swa_pattern >= 0);
    CHECK(c->bos_id >= -1 && c->eos_id >= -1);
    CHECK(c->rms_eps > 0 && c->rms_eps < 1 && c->rope_theta > 1 && isfinite(c->rope_theta));
    CHECK(isfinite(c->rope_local_theta) && c->rope_local_theta > 0);
    CHECK(isfinite(c->attn_scale) && c->attn_scale >= 0);
    CHECK(isfinite(c->final_softcap) && c->final_softcap >= 0);
    CHECK(isfinite(c->norm_offset));
    CHECK(isfinite(c->rope_attn_factor) && c->rope_attn_factor >= 0);
    CHECK(c->rope_n_factors >= 0 && c->rope_n_factors <= RUNTIME_ROPE_MAX_FACTORS);
    CHECK(c->pooling >= 0 && c->pooling <= 4);   /* encoders: their sizes and LayerNorm epsilon */
    CHECK(!c->encoder || (c->head_dim * c->n_heads == c->dim && c->norm_eps > 0 && c->norm_eps < 1));
    CHECK(c->rope_n_factors == 0 || c->rope_n_factors == c->n_rot / 2);
    for (int i = 0; i < c->rope_n_factors; i++)
        CHECK(isfinite(c->rope_long[i]) && c->rope_long[i] > 0 && isfinite(c->rope_short[i]) && c->rope_short[i] > 0);
    freqs = malloc((size_t)c->n_rot / 2 * sizeof *freqs);
    CHECK(freqs);
    runtime_rope_freqs(freqs, c);
    for (int i = 0; i < c->n_rot / 2; i++)
        CHECK(isfinite(freqs[i]) && freqs[i] > 0);
    free(freqs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    runtime_config c;
    gguf_file *g = NULL;

    ms_err_clear();
    if (runtime_config_from_json(&c, (const char *)data, size, "fuzz") == 0)
        check_config(&c);
    else
        CHECK(ms_err_msg()[0]);
    /* the same bytes as a GGUF header: only the metadata matters here */
    if (gguf_open_buf(&g, data, size, GGUF_HEADER_ONLY, "fuzz") == 0) {
        ms_err_clear();
        if (runtime_config_from_gguf(&c, g) == 0)
            check_config(&c);
        else
            CHECK(ms_err_msg()[0]);
        gguf_close(g);
    }
    return 0;
}
