/* fuzz_manifest.c: libFuzzer target for the OCI manifest parser and the model name parser.
 * Manifest: a refusal leaves *out NULL and a message; an accepted manifest serializes, and the
 * serialization parses back to the same fields (the bytes are the model's identity, so
 * serialize must be a fixed point). Name: the input as a C string; an accepted name formats to
 * a string that parses back to the same name, and displays to one that does too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/manifest.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_manifest: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); abort(); } } while (0)

static int layer_eq(const manifest_layer *a, const manifest_layer *b)
{
    return strcmp(a->media_type, b->media_type) == 0 && strcmp(a->digest, b->digest) == 0 &&
           a->size == b->size && (a->name == NULL) == (b->name == NULL) && (!a->name || strcmp(a->name, b->name) == 0);
}

static void fuzz_manifest(const uint8_t *data, size_t size)
{
    manifest *m = (manifest *)&size, *m2 = NULL;
    char *s = NULL, *s2 = NULL;
    size_t len, len2;

    ms_err_clear();
    if (manifest_parse(&m, (const char *)data, size, "fuzz") < 0) {
        CHECK(m == NULL && ms_err_msg()[0]);
        return;
    }
    CHECK(m->schema_version == 2 && m->media_type && m->config.media_type);
    CHECK(m->n_layers <= MANIFEST_MAX_LAYERS);
    for (size_t i = 0; i < m->n_layers; i++) {
        const manifest_layer *l = &m->layers[i];

        CHECK(l->media_type && strlen(l->digest) == 71 && !strncmp(l->digest, "sha256:", 7));
        CHECK(manifest_layer_find(m, l->media_type, l->name) != NULL);
    }
    CHECK(manifest_serialize(&s, &len, m) == 0);
    CHECK(manifest_parse(&m2, s, len, "reserialized") == 0);
    CHECK(m2->n_layers == m->n_layers && layer_eq(&m2->config, &m->config));
    for (size_t i = 0; i < m->n_layers; i++)
        CHECK(layer_eq(&m2->layers[i], &m->layers[i]));
    CHECK(manifest_serialize(&s2, &len2, m2) == 0 && len2 == len && memcmp(s, s2, len) == 0);
    /* adding a layer to a parsed manifest must keep its array growth invariant */
    CHECK(manifest_layer_add(m, MT_TENSOR, "sha256:0000000000000000000000000000000000000000000000000000000000000000", 1, NULL) == 0 ||
          m->n_layers == MANIFEST_MAX_LAYERS);
    free(s);
    free(s2);
    manifest_free(m2);
    manifest_free(m);
}

static void fuzz_name(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), buf[1024], buf2[1024];
    model_name n, n2;

    CHECK(s);
    memcpy(s, data, size);
    s[size] = '\0';
    ms_err_clear();
    if (name_parse(&n, s) == 0) {
        CHECK(n.model[0] && n.tag[0] && n.namespace_[0]);
        CHECK(!strchr(n.model, '/') && !strchr(n.tag, '/') && !strchr(n.namespace_, '/'));
        CHECK(strcmp(n.model, ".") && strcmp(n.model, ".."));
        name_format(buf, sizeof buf, &n);
        CHECK(name_parse(&n2, buf) == 0);
        CHECK(!strcmp(n.host, n2.host) && !strcmp(n.namespace_, n2.namespace_) && !strcmp(n.model, n2.model) &&
              !strcmp(n.tag, n2.tag));
        name_display(buf2, sizeof buf2, &n);
        CHECK(name_parse(&n2, buf2) == 0);
        name_format(buf2, sizeof buf2, &n2);
        CHECK(strcmp(buf, buf2) == 0);
    } else {
        CHECK(ms_err_msg()[0]);
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_manifest(data, size);
    if (size <= 1024)
        fuzz_name(data, size);
    return 0;
}
