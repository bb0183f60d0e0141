/* model.c: store_model, a stored model opened once (store.h says why and what it hands out).
 * Slot i < n_layers is layer i; slot n_layers is the config. A slot is mapped on first use; a
 * slot whose digest an earlier slot already mapped borrows that slot's mapping (`owner`), so
 * each blob is mapped once whatever the number of layers that list it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "store/store_int.h"

typedef struct slot {
    int mapped;          /* 1: view valid (own or borrowed) */
    int owner;           /* 1: this slot made the mapping and unmaps it at close */
    blob_view view;
    st_file *st;         /* tensor layers: parsed header, owned by the slot that owns the view */
    struct slot *st_from;   /* the slot whose st this one shares (itself when it parsed) */
} slot;

struct store_model {
    char *home;
    int named;
    model_name name;
    char shown[NAME_HOST_MAX + 3 * NAME_PART_MAX];
    ms_digest digest;
    char *bytes;         /* the manifest, exactly as stored */
    size_t len;
    manifest *m;
    slot *slots;         /* n_layers + 1 */
};

static int open_digest(store_model **out, store *s, const char *digest, const model_name *name)
{
    store_model *m = calloc(1, sizeof *m);
    int rc;

    *out = NULL;
    if (!m)
        return ms_err(MS_ENOMEM, "out of memory");
    if (name) {
        m->named = 1;
        m->name = *name;
        name_display(m->shown, sizeof m->shown, name);
    } else {
        snprintf(m->shown, sizeof m->shown, "%s", digest);
    }
    snprintf(m->digest, sizeof m->digest, "%s", digest);
    if (!(m->home = strdup(store_home(s)))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = store_manifest_bytes(s, digest, &m->bytes, &m->len)) < 0 ||
        (rc = manifest_parse(&m->m, m->bytes, m->len, digest)) < 0) {
        if (name)
            ms_err_ctx("model '%s'", m->shown);
        goto fail;
    }
    if (!(m->slots = calloc(m->m->n_layers + 1, sizeof *m->slots))) {
        rc = ms_err(MS_ENOMEM, "%s: out of memory", m->shown);
        goto fail;
    }
    *out = m;
    return 0;
fail:
    store_model_close(m);
    return rc;
}

int store_model_open(store_model **out, store *s, const model_name *name)
{
    ms_digest digest;
    int rc;

    *out = NULL;
    if ((rc = store_name_resolve(s, name, digest)) < 0)
        return rc;
    return open_digest(out, s, digest, name);
}

int store_model_open_digest(store_model **out, store *s, const char *manifest_digest)
{
    *out = NULL;
    if (!manifest_digest || !blob_digest_valid(manifest_digest))
        return ms_err(MS_EINVALID, "'%s' is not a manifest digest", manifest_digest ? manifest_digest : "");
    return open_digest(out, s, manifest_digest, NULL);
}

void store_model_close(store_model *m)
{
    if (!m)
        return;
    if (m->slots && m->m) {
        for (size_t i = 0; i <= m->m->n_layers; i++) {
            slot *sl = &m->slots[i];
            if (sl->st_from == sl)
                st_free(sl->st);
            if (sl->owner)
                blob_close(&sl->view);
        }
    }
    free(m->slots);
    manifest_free(m->m);
    MS_FREE_ALL(m->bytes, m->home, m);
}

const model_name *store_model_name(const store_model *m) { return m->named ? &m->name : NULL; }
const char *store_model_shown(const store_model *m) { return m->shown; }
const char *store_model_digest(const store_model *m) { return m->digest; }
const manifest *store_model_manifest(const store_model *m) { return m->m; }

const char *store_model_manifest_bytes(const store_model *m, size_t *len_out)
{
    if (len_out)
        *len_out = m->len;
    return m->bytes;
}

/* The slot index of `l`, or -1 when it is not one of m's layers (compared as addresses, since
 * the caller's pointer may come from anywhere). */
static long slot_of(const store_model *m, const manifest_layer *l)
{
    uintptr_t p = (uintptr_t)l, base = (uintptr_t)m->m->layers;

    if (l == &m->m->config)
        return (long)m->m->n_layers;
    if (!m->m->layers || p < base || (p - base) % sizeof *l != 0 || (p - base) / sizeof *l >= m->m->n_layers)
        return -1;
    return (long)((p - base) / sizeof *l);
}

static const manifest_layer *layer_at(const store_model *m, size_t i)
{
    return i == m->m->n_layers ? &m->m->config : &m->m->layers[i];
}

static const char *layer_label(const manifest_layer *l)
{
    return l->name ? l->name : l->media_type ? l->media_type : "?";
}

static int slot_map(slot **out, store_model *m, const manifest_layer *l)
{
    long i = slot_of(m, l);
    slot *sl;
    int rc;

    *out = NULL;
    if (i < 0)
        return ms_err(MS_EINVALID, "%s: a layer that is not this model's", m->shown);
    sl = &m->slots[i];
    if (!sl->mapped) {
        /* another slot with the same digest: share its mapping */
        for (size_t j = 0; j <= m->m->n_layers; j++) {
            slot *o = &m->slots[j];
            if (o->owner && strcmp(layer_at(m, j)->digest, l->digest) == 0) {
                sl->view = o->view;
                sl->mapped = 1;
                break;
            }
        }
    }
    if (!sl->mapped) {
        if ((rc = blob_open(&sl->view, m->home, l->digest)) < 0)
            return ms_err_ctx("model '%s': layer '%s'", m->shown, layer_label(l));
        sl->mapped = sl->owner = 1;
    }
    /* checked on every slot, not only the owner: two layers may claim one digest with two sizes */
    if (sl->view.size != l->size)
        return ms_err(MS_EMISMATCH,
                      "model '%s': layer '%s': blob %s has %zu bytes, the manifest says %llu: the blob is "
                      "damaged or the manifest wrong (mstore verify checks every blob)",
                      m->shown, layer_label(l), l->digest, sl->view.size, (unsigned long long)l->size);
    *out = sl;
    return 0;
}

int store_model_layer_bytes(const uint8_t **data, size_t *len, store_model *m, const manifest_layer *l)
{
    slot *sl;
    int rc;

    *data = NULL;
    if (len)
        *len = 0;
    if ((rc = slot_map(&sl, m, l)) < 0)
        return rc;
    *data = sl->view.data;
    if (len)
        *len = sl->view.size;
    return 0;
}

int store_model_config(const uint8_t **data, size_t *len, store_model *m)
{
    return store_model_layer_bytes(data, len, m, &m->m->config);
}

int store_model_find(const uint8_t **data, size_t *len, store_model *m, const char *media_type, const char *name)
{
    const manifest_layer *l = manifest_layer_find(m->m, media_type, name);

    *data = NULL;
    if (len)
        *len = 0;
    if (!l)
        return ms_err(MS_ENOTFOUND, "model '%s': no %s layer%s%s", m->shown, media_type, name ? " named " : "",
                      name ? name : "");
    return store_model_layer_bytes(data, len, m, l);
}

int store_model_tensors(const st_file **out, store_model *m, const manifest_layer *l)
{
    slot *sl;
    int rc;

    *out = NULL;
    if (slot_of(m, l) >= 0 && (!l->media_type || strcmp(l->media_type, MT_TENSOR) != 0))
        return ms_err(MS_EINVALID, "model '%s': layer '%s' is not a tensor layer", m->shown, layer_label(l));
    if ((rc = slot_map(&sl, m, l)) < 0)
        return rc;
    if (!sl->st_from) {
        /* a blob listed twice is parsed once: share the header of a slot that parsed it */
        for (size_t j = 0; j <= m->m->n_layers && !sl->st_from; j++) {
            slot *o = &m->slots[j];
            if (o->st_from == o && o->view.data == sl->view.data)
                sl->st_from = o, sl->st = o->st;
        }
    }
    if (!sl->st_from) {
        if ((rc = st_parse(&sl->st, sl->view.data, sl->view.size, 0, 0, l->digest)) < 0)
            return ms_err_ctx("model '%s': layer '%s'", m->shown, layer_label(l));
        sl->st_from = sl;
    }
    *out = sl->st;
    return 0;
}
