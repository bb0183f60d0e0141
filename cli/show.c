/* show.c: mstore show NAME [--tensors] [--json] [--verbose] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "modelfile/modelfile.h"

static const char help[] =
    "usage: mstore show NAME [--tensors] [--json] [--verbose]\n"
    "       mstore show NAME --modelfile|--parameters|--template|--system|--license\n\n"
    "Show a model's configuration summary and layers.\n\n"
    "  --tensors   one line per tensor: name, dtype, shape, quant type, blob digest\n"
    "  --json      print everything as one JSON object\n"
    "  --verbose   also the quantization details: the source's quantization config and,\n"
    "              for models quantized on import, the error against the float weights\n"
    "  --modelfile, --parameters, --template, --system, --license\n"
    "              print that part of the model as ollama's show does (nothing when it has none)\n";

/* Text from a model's layers, control bytes other than newline and tab escaped. */
static void print_escaped(const char *t)
{
    for (; t && *t; t++) {
        unsigned char c = (unsigned char)*t;
        if (c < 0x20 && c != '\n' && c != '\t')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static int show_part(store_model *sm, const char *part)
{
    model_info i;
    const char *t;

    if (model_info_load(&i, sm) < 0)
        return cli_fail();
    t = !strcmp(part, "--modelfile")    ? i.modelfile
        : !strcmp(part, "--parameters") ? i.parameters
        : !strcmp(part, "--template")   ? i.template_
        : !strcmp(part, "--system")     ? i.system
                                        : i.license;
    print_escaped(t);
    if (t && *t && t[strlen(t) - 1] != '\n')
        putchar('\n');
    model_info_fini(&i);
    return 0;
}

static json_t *config_load(store_model *sm)
{
    const manifest *m = store_model_manifest(sm);
    json_error_t jerr;
    const uint8_t *data;
    size_t len;
    json_t *c;

    if (store_model_config(&data, &len, sm) < 0)
        return NULL;
    c = json_loadb((const char *)data, len, 0, &jerr);
    if (!c)
        ms_err(MS_EINVALID, "config %s: %s", m->config.digest, jerr.text);
    return c;
}

static void print_field(json_t *c, const char *label, const char *key)
{
    json_t *v = json_object_get(c, key);
    char *t, safe[4096];

    if (!v || json_is_null(v))
        return;
    t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (t && json_is_string(v))
        printf("  %-22s %s\n", label, ms_str_safe(safe, sizeof safe, json_string_value(v)));
    else if (t)
        printf("  %-22s %s\n", label, ms_str_safe(safe, sizeof safe, t));
    free(t);
}

static void print_text(const char *digest, json_t *c, const manifest *m)
{
    uint64_t total = m->config.size;
    char b[32];

    for (size_t i = 0; i < m->n_layers; i++)
        total += m->layers[i].size;
    printf("  %-22s %s\n", "digest", digest);
    printf("  %-22s %s\n", "size", ms_fmt_bytes(b, sizeof b, total));
    print_field(c, "architecture", "architecture");
    print_field(c, "layers", "num_hidden_layers");
    print_field(c, "embedding length", "hidden_size");
    print_field(c, "heads", "num_attention_heads");
    print_field(c, "kv heads", "num_key_value_heads");
    print_field(c, "head dim", "head_dim");
    print_field(c, "feed forward length", "intermediate_size");
    print_field(c, "vocab size", "vocab_size");
    print_field(c, "context length", "max_position_embeddings");
    print_field(c, "experts", "num_experts");
    print_field(c, "experts per token", "num_experts_per_tok");
    print_field(c, "expert ffn length", "moe_intermediate_size");
    print_field(c, "shared expert length", "shared_expert_intermediate_size");
    print_field(c, "sliding window", "sliding_window");
    print_field(c, "kv lora rank", "kv_lora_rank");   /* DeepSeek's MLA: its cache keeps this latent */
    print_field(c, "q lora rank", "q_lora_rank");
    print_field(c, "shared experts", "n_shared_experts");
    print_field(c, "rope theta", "rope_theta");
    print_field(c, "rms norm eps", "rms_norm_eps");
    print_field(c, "quantization", "quantization");
    print_field(c, "source", "source");
    printf("  %-22s %zu\n", "layers in manifest", m->n_layers);
    if (manifest_layer_find(m, MT_SOURCE_MANIFEST, NULL))   /* pulled: the registry's own manifest */
        printf("  %-22s %s\n", "pulled manifest", manifest_layer_find(m, MT_SOURCE_MANIFEST, NULL)->digest);
}

/* --verbose: how the weights were quantized and, when mstore quantized them, how far they are
 * from the source ("quantization_error", written at import). */
static void print_quant(json_t *c)
{
    json_t *e = json_object_get(c, "quantization_error"), *hf = json_object_get(c, "hf_config"), *q;

    q = json_object_get(hf, "quantization");
    if (!q)
        q = json_object_get(hf, "quantization_config");
    char safe[256];

    if (json_is_object(q)) {
        json_t *g = json_object_get(q, "group_size"), *b = json_object_get(q, "bits"), *m = json_object_get(q, "mode");
        size_t overrides = json_object_size(q) - (g != NULL) - (b != NULL) - (m != NULL);
        printf("  %-22s %s, %lld bits, group size %lld, %zu per-module overrides\n", "source quantization",
               ms_str_safe(safe, sizeof safe, json_is_string(m) ? json_string_value(m) : "affine"), (long long)json_integer_value(b),
               (long long)json_integer_value(g), overrides);
    }
    if (json_is_object(e))
        printf("  %-22s %s group %lld over %lld tensors: max abs %.6g, rms relative %.6g\n", "quantization error",
               ms_str_safe(safe, sizeof safe, json_string_value(json_object_get(e, "quant_type"))), (long long)json_integer_value(json_object_get(e, "group_size")),
               (long long)json_integer_value(json_object_get(e, "n_tensors")), json_number_value(json_object_get(e, "max_abs")),
               json_number_value(json_object_get(e, "rms_rel")));
    else if (!json_is_object(q))
        printf("  %-22s none (weights as the source had them)\n", "quantization error");
}

static json_t *tensor_json(const store_tensor *t)
{
    return json_pack("{s:s, s:s, s:s, s:s?, s:I, s:s}", "name", t->name, "dtype", t->dtype, "shape", t->shape,
                     "quant_type", t->quant_type, "group_size", (json_int_t)t->group_size, "blob", t->blob_digest);
}

int cmd_show(int argc, char **argv)
{
    int want_tensors = 0, want_json = 0, verbose = 0, rc = 1;
    const char *arg = NULL, *part = NULL;
    store_tensor *t = NULL;
    const manifest *m;
    store_model *sm = NULL;
    json_t *config = NULL;
    const char *digest;
    model_name name;
    size_t n = 0;
    store *s;

    const cli_opt opts[] = {
        { "--tensors", NULL, CLI_OPT_FLAG, &want_tensors, NULL, 0, 0 },
        { "--json", NULL, CLI_OPT_FLAG, &want_json, NULL, 0, 0 },
        { "--verbose", "-v", CLI_OPT_FLAG, &verbose, NULL, 0, 0 },
        { "--modelfile", NULL, CLI_OPT_SELF, &part, NULL, 0, 0 },
        { "--parameters", NULL, CLI_OPT_SELF, &part, NULL, 0, 0 },
        { "--template", NULL, CLI_OPT_SELF, &part, NULL, 0, 0 },
        { "--system", NULL, CLI_OPT_SELF, &part, NULL, 0, 0 },
        { "--license", NULL, CLI_OPT_SELF, &part, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };

    if ((rc = cli_args_parse(argc, argv, help, opts, &arg, 1, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    rc = 1;
    if (!arg)
        return cli_usage_error("show", "needs a NAME");
    if (cli_name_parse(&name, arg) < 0 || !(s = cli_store_open()))
        return 1;
    if (store_model_open(&sm, s, &name) < 0) {
        cli_fail();
        goto done;
    }
    if (part) {
        rc = show_part(sm, part);
        goto done;
    }
    m = store_model_manifest(sm);
    digest = store_model_digest(sm);
    if (!(config = config_load(sm)) || (want_tensors && store_tensors_list(s, digest, &t, &n) < 0)) {
        cli_fail();
        goto done;
    }
    if (want_json) {
        json_t *o = json_pack("{s:s, s:s, s:O}", "name", arg, "digest", digest, "config", config), *arr;
        char *text;
        if (want_tensors && (arr = json_array())) {
            for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, tensor_json(&t[i]));
            json_object_set_new(o, "tensors", arr);
        }
        /* ENSURE_ASCII: every byte of the model's strings beyond ASCII, control characters
         * included, comes out as a \u escape, never raw on the terminal. */
        text = json_dumps(o, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(o);
    } else {
        char s1[2048], s2[64], s3[256], s4[64];
        printf("Model %s\n", ms_str_safe(s1, sizeof s1, arg));
        print_text(digest, config, m);
        if (verbose)
            print_quant(config);
        if (want_tensors) {
            printf("\nTensors\n");
            for (size_t i = 0; i < n; i++)
                printf("  %-50s %-5s %-18s %-6s %s\n", ms_str_safe(s1, sizeof s1, t[i].name),
                       ms_str_safe(s2, sizeof s2, t[i].dtype), ms_str_safe(s3, sizeof s3, t[i].shape),
                       ms_str_safe(s4, sizeof s4, t[i].quant_type ? t[i].quant_type : "-"), t[i].blob_digest);
        }
    }
    rc = 0;
done:
    store_tensors_free(t, n);
    json_decref(config);
    store_model_close(sm);
    store_close(s);
    return rc;
}
