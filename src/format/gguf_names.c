/* gguf_names.c: GGUF tensor names <-> canonical (Hugging Face) names, one table row per tensor
 * kind: the one table both the importer and the runtime's direct GGUF reading use (DESIGN.md:
 * GGUF arch tables live in src/format), so a tensor has the same name in the store and in a
 * GGUF opened with run --gguf.
 *
 * A row applies to every architecture unless `arch` names one; rows for a specific
 * architecture are tried first, so gemma3's norms can differ from llama's without a special
 * case in code. Names of architectures not listed in `archs` are kept as they are.
 *
 * The architecture table is the one list of what mstore runs: the runtime's config reader
 * (gguf_arch_decoder) and the name mapping (gguf_arch_known) both read it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"

/* The architectures mstore runs, by every name a file gives them -> the decoder that runs them
 * (runtime.h). `gguf`: the name is a GGUF general.architecture, whose tensor names the rows
 * below map; the others are Hugging Face model_type spellings met in config.json. */
static const struct arch {
    const char *name, *decoder;
    int gguf;
    /* The canonical names of layer N's tensors start "<layers>N." (NULL: "model.layers.", a
     * decoder's). The encoders keep Hugging Face's BertModel / NomicBertModel names, and only
     * their own rows below apply to them. */
    const char *layers;
} archs[] = {
    { "llama", "llama", 1, NULL },        { "mistral", "llama", 1, NULL },     { "mixtral", "llama", 1, NULL },
    { "qwen2", "qwen2", 1, NULL },        { "qwen3", "qwen3", 1, NULL },       { "qwen2moe", "qwen2moe", 1, NULL },
    { "qwen2_moe", "qwen2moe", 0, NULL }, { "qwen3moe", "qwen3moe", 1, NULL }, { "qwen3_moe", "qwen3moe", 0, NULL },
    { "gemma3", "gemma3", 1, NULL },      { "gemma3_text", "gemma3", 0, NULL }, { "phi3", "phi3", 1, NULL },
    { "gpt-oss", "gpt-oss", 1, NULL },     { "deepseek2", "deepseek2", 1, NULL },
    { "deepseek_v2", "deepseek2", 0, NULL }, { "deepseek_v3", "deepseek2", 0, NULL },
    { "bert", "bert", 1, "encoder.layer." },
    { "nomic-bert", "nomic-bert", 1, "encoder.layers." }, { "nomic_bert", "nomic-bert", 0, "encoder.layers." },
};

static const struct arch *arch_find(const char *name)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(name, archs[i].name) == 0)
            return &archs[i];
    return NULL;
}

static const struct row {
    const char *arch;   /* NULL: any known decoder; else the runtime's name (gguf_arch_decoder) */
    const char *gguf;   /* the part after "blk.N." (or the whole name for non-layer tensors) */
    const char *hf;     /* the part after "model.layers.N." (or the whole name) */
    const char *pack;   /* expert pack this tensor goes into, after "model.layers.N.", or NULL */
} rows[] = {
    /* gemma3 puts four norms around each block. */
    { "gemma3", "attn_norm", "input_layernorm", NULL },
    { "gemma3", "post_attention_norm", "post_attention_layernorm", NULL },
    { "gemma3", "ffn_norm", "pre_feedforward_layernorm", NULL },
    { "gemma3", "post_ffw_norm", "post_feedforward_layernorm", NULL },
    /* gpt-oss: a norm after attention that is its FFN's input norm (HF's name), and attention sinks */
    { "gpt-oss", "post_attention_norm", "post_attention_layernorm", NULL },
    { "gpt-oss", "attn_sinks", "self_attn.sinks", NULL },
    /* deepseek2: MLA's low-rank projections (HF's DeepSeek V2 / V3 names; k_b / v_b are a later
     * converter's split of kv_b) and the router's selection bias */
    { "deepseek2", "attn_q_a", "self_attn.q_a_proj", NULL },
    { "deepseek2", "attn_q_a_norm", "self_attn.q_a_layernorm", NULL },
    { "deepseek2", "attn_q_b", "self_attn.q_b_proj", NULL },
    { "deepseek2", "attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa", NULL },
    { "deepseek2", "attn_kv_a_norm", "self_attn.kv_a_layernorm", NULL },
    { "deepseek2", "attn_kv_b", "self_attn.kv_b_proj", NULL },
    { "deepseek2", "attn_k_b", "self_attn.k_b_proj", NULL },
    { "deepseek2", "attn_v_b", "self_attn.v_b_proj", NULL },
    { "deepseek2", "exp_probs_b", "mlp.gate.e_score_correction", NULL },
    /* phi3 fuses Q, K, V and gate, up. */
    { "phi3", "attn_qkv", "self_attn.qkv_proj", NULL },
    { "phi3", "ffn_up", "mlp.gate_up_proj", NULL },
    /* bert (BertModel, as sentence-transformers saves it): post-norm blocks with biases */
    { "bert", "attn_q", "attention.self.query", NULL },
    { "bert", "attn_k", "attention.self.key", NULL },
    { "bert", "attn_v", "attention.self.value", NULL },
    { "bert", "attn_output", "attention.output.dense", NULL },
    { "bert", "attn_output_norm", "attention.output.LayerNorm", NULL },
    { "bert", "ffn_up", "intermediate.dense", NULL },
    { "bert", "ffn_down", "output.dense", NULL },
    { "bert", "layer_output_norm", "output.LayerNorm", NULL },
    /* nomic-bert (NomicBertModel): fused Wqkv, SwiGLU with fc11 up and fc12 the gate */
    { "nomic-bert", "attn_qkv", "attn.Wqkv", NULL },
    { "nomic-bert", "attn_output", "attn.out_proj", NULL },
    { "nomic-bert", "attn_output_norm", "norm1", NULL },
    { "nomic-bert", "ffn_up", "mlp.fc11", NULL },
    { "nomic-bert", "ffn_gate", "mlp.fc12", NULL },
    { "nomic-bert", "ffn_down", "mlp.fc2", NULL },
    { "nomic-bert", "layer_output_norm", "norm2", NULL },
    { NULL, "attn_norm", "input_layernorm", NULL },
    { NULL, "ffn_norm", "post_attention_layernorm", NULL },
    { NULL, "attn_q", "self_attn.q_proj", NULL },
    { NULL, "attn_k", "self_attn.k_proj", NULL },
    { NULL, "attn_v", "self_attn.v_proj", NULL },
    { NULL, "attn_output", "self_attn.o_proj", NULL },
    { NULL, "attn_q_norm", "self_attn.q_norm", NULL },
    { NULL, "attn_k_norm", "self_attn.k_norm", NULL },
    { NULL, "attn_rot_embd", "self_attn.rotary_emb.inv_freq", NULL },
    { NULL, "ffn_gate", "mlp.gate_proj", NULL },
    { NULL, "ffn_up", "mlp.up_proj", NULL },
    { NULL, "ffn_down", "mlp.down_proj", NULL },
    { NULL, "ffn_gate_inp", "mlp.gate", NULL },
    { NULL, "ffn_gate_exps", "mlp.experts.gate_proj", "mlp.experts" },
    { NULL, "ffn_up_exps", "mlp.experts.up_proj", "mlp.experts" },
    { NULL, "ffn_down_exps", "mlp.experts.down_proj", "mlp.experts" },
    { NULL, "ffn_gate_inp_shexp", "mlp.shared_expert_gate", NULL },
    { NULL, "ffn_gate_shexp", "mlp.shared_experts.gate_proj", "mlp.shared_experts" },
    { NULL, "ffn_up_shexp", "mlp.shared_experts.up_proj", "mlp.shared_experts" },
    { NULL, "ffn_down_shexp", "mlp.shared_experts.down_proj", "mlp.shared_experts" },
};

/* Tensors outside the layers; `arch` as in rows (NULL: every decoder). */
static const struct { const char *arch, *gguf, *hf; } globals[] = {
    { "bert", "token_embd", "embeddings.word_embeddings" },
    { "bert", "position_embd", "embeddings.position_embeddings" },
    { "bert", "token_types", "embeddings.token_type_embeddings" },
    { "bert", "token_embd_norm", "embeddings.LayerNorm" },
    { "nomic-bert", "token_embd", "embeddings.word_embeddings" },
    { "nomic-bert", "token_types", "embeddings.token_type_embeddings" },
    { "nomic-bert", "token_embd_norm", "emb_ln" },
    { NULL, "token_embd", "model.embed_tokens" },
    { NULL, "output_norm", "model.norm" },
    { NULL, "output", "lm_head" },
    { NULL, "rope_freqs", "model.rope_freqs" },
};

/* Whether a table row for `row_arch` applies to architecture a: its own rows, and the shared
 * ones (NULL) only for the decoders, whose layers share the "model.layers." names. */
static int row_applies(const char *row_arch, const struct arch *a, int pass)
{
    if (pass == 0)
        return row_arch && strcmp(row_arch, a->decoder) == 0;
    return !row_arch && !a->layers;
}

int gguf_arch_known(const char *arch)
{
    const struct arch *a = arch_find(arch);

    return a && a->gguf;
}

const char *gguf_arch_decoder(const char *arch)
{
    const struct arch *a = arch_find(arch);

    return a ? a->decoder : NULL;
}

/* Split "blk.12.attn_q.weight" into layer 12, kind "attn_q", suffix ".weight". */
static int split(const char *name, long *layer, char *kind, size_t kind_len, const char **suffix)
{
    const char *p = name, *dot;
    char *end;

    *layer = -1;
    if (strncmp(p, "blk.", 4) == 0) {
        *layer = strtol(p + 4, &end, 10);
        if (end == p + 4 || *end != '.' || *layer < 0)
            return -1;
        p = end + 1;
    }
    dot = strrchr(p, '.');
    if (!dot || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".bias") != 0))
        return -1;
    if ((size_t)(dot - p) >= kind_len)
        return -1;
    memcpy(kind, p, (size_t)(dot - p));
    kind[dot - p] = '\0';
    *suffix = dot;
    return 0;
}

void gguf_name_to_hf(char *out, size_t len, char *pack, size_t pack_len, const char *arch, const char *gguf)
{
    const struct arch *a = arch_find(arch);
    const char *suffix;
    char kind[128];
    long layer;

    snprintf(out, len, "%s", gguf);
    if (pack)
        pack[0] = '\0';
    if (!a || !a->gguf || split(gguf, &layer, kind, sizeof kind, &suffix) < 0)
        return;
    if (layer < 0) {
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
                if (row_applies(globals[i].arch, a, pass) && strcmp(kind, globals[i].gguf) == 0) {
                    snprintf(out, len, "%s%s", globals[i].hf, suffix);
                    return;
                }
        return;
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            const struct row *r = &rows[i];
            if (!row_applies(r->arch, a, pass) || strcmp(kind, r->gguf) != 0)
                continue;
            snprintf(out, len, "%s%ld.%s%s", a->layers ? a->layers : "model.layers.", layer, r->hf, suffix);
            if (pack && r->pack)
                snprintf(pack, pack_len, "model.layers.%ld.%s", layer, r->pack);
            return;
        }
}

int gguf_name_from_hf(char *out, size_t len, const char *arch, const char *hf)
{
    const struct arch *a = arch_find(arch);
    static const struct arch none = { "", "", 0, NULL };   /* an unknown architecture: the shared rows */
    const char *p = hf, *dot, *prefix;
    char kind[128];
    long layer = -1;
    size_t plen;

    if (!a)
        a = &none;
    prefix = a->layers ? a->layers : "model.layers.";
    plen = strlen(prefix);
    if (strncmp(p, prefix, plen) == 0) {
        char *end;
        layer = strtol(p + plen, &end, 10);
        if (end == p + plen || *end != '.')
            return -1;
        p = end + 1;
    }
    dot = strrchr(p, '.');
    if (!dot || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".bias") != 0) || (size_t)(dot - p) >= sizeof kind)
        return -1;
    memcpy(kind, p, (size_t)(dot - p));
    kind[dot - p] = '\0';
    if (layer < 0) {
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
                if (row_applies(globals[i].arch, a, pass) && strcmp(kind, globals[i].hf) == 0) {
                    snprintf(out, len, "%s%s", globals[i].gguf, dot);
                    return 0;
                }
        return -1;
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            const struct row *r = &rows[i];
            if (!row_applies(r->arch, a, pass) || strcmp(kind, r->hf) != 0)
                continue;
            snprintf(out, len, "blk.%ld.%s%s", layer, r->gguf, dot);
            return 0;
        }
    return -1;
}
