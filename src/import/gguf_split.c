/* gguf_split.c: a GGUF split by llama.cpp's gguf-split, imported as the one model it is.
 *
 * gguf-split writes shards NAME-0000i-of-0000N.gguf: the first holds all the metadata, every
 * shard its own tensors, and each the keys split.no (its index from 0), split.count (N) and
 * split.tensors.count (the tensors of all shards). llama.cpp loads the set as one model; mstore
 * stores it as one: the shards are merged into one GGUF under the store's tmp/ (the first
 * shard's metadata without the split keys, then every shard's tensors in shard order, as
 * `gguf-split --merge` does less the keys) and that file is imported as any GGUF is. A file
 * split from an unsplit GGUF merges back to that file's bytes, so the import shares its blobs
 * and export gives it back. The set is checked before anything is written: every shard present,
 * each with its own index, one count for all, the tensors adding up; a shard of another model
 * (another count, a tensor named twice) is refused naming the file and the key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import/import_int.h"

#define SPLIT_MAX 1024   /* shards in one set: gguf-split makes tens for the largest models */
#define KEY_NO    "split.no"
#define KEY_COUNT "split.count"
#define KEY_TENSORS "split.tensors.count"

static int split_key(uint64_t *out, const gguf_file *g, const char *key, const char *what)
{
    int rc = gguf_get_uint(g, key, out);

    if (rc == MS_ENOTFOUND)
        return ms_err(MS_EINVALID, "%s: no %s: not a shard of a split GGUF", what, key);
    return rc < 0 ? ms_err_ctx("%s", what) : 0;
}

int import_gguf_split_count(unsigned *n_out, const char *path)
{
    gguf_file *g = NULL;
    uint64_t n = 0;
    int rc;

    *n_out = 0;
    if ((rc = gguf_open(&g, path)) < 0)
        return rc;
    if (gguf_kv_find(g, KEY_COUNT) >= 0 && (rc = split_key(&n, g, KEY_COUNT, path)) == 0) {
        if (n > SPLIT_MAX)
            rc = ms_err(MS_EINVALID, "%s: %s %llu: more shards than mstore takes (%d)", path, KEY_COUNT,
                        (unsigned long long)n, SPLIT_MAX);
        else
            *n_out = n > 1 ? (unsigned)n : 0;   /* 0 or 1: a merged file, gguf-split --merge keeps the keys */
    }
    gguf_close(g);
    return rc;
}

int import_gguf_split_merge(const char *const *paths, const char *const *labels, size_t n, const char *out_path)
{
    gguf_file **g = calloc(n ? n : 1, sizeof *g);
    gguf_writer *w = NULL;
    uint64_t total = 0, tensors = 0, v;
    int rc = 0;

    if (!g)
        return ms_err(MS_ENOMEM, "out of memory for %zu shards", n);
    if (n < 2 || n > SPLIT_MAX) {
        rc = ms_err(MS_EINVALID, "%s: %zu shards: a split GGUF has from 2 to %d", labels[0], n, SPLIT_MAX);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = gguf_open(&g[i], paths[i])) < 0) {
            ms_err_ctx("shard %zu of %zu", i + 1, n);
            goto done;
        }
        if ((rc = split_key(&v, g[i], KEY_NO, labels[i])) < 0)
            goto done;
        if (v != i) {
            rc = ms_err(MS_EINVALID, "%s: %s is %llu, expected %zu (shard %zu of %zu)", labels[i], KEY_NO,
                        (unsigned long long)v, i, i + 1, n);
            goto done;
        }
        if ((rc = split_key(&v, g[i], KEY_COUNT, labels[i])) < 0)
            goto done;
        if (v != n) {
            rc = ms_err(MS_EINVALID, "%s: %s is %llu, but the set has %zu shards", labels[i], KEY_COUNT,
                        (unsigned long long)v, n);
            goto done;
        }
        if ((rc = split_key(&v, g[i], KEY_TENSORS, labels[i])) < 0)
            goto done;
        if (i == 0) {
            total = v;
        } else if (v != total) {
            rc = ms_err(MS_EINVALID, "%s: %s is %llu, the first shard's %llu: a shard of another model", labels[i],
                        KEY_TENSORS, (unsigned long long)v, (unsigned long long)total);
            goto done;
        }
        if (gguf_alignment(g[i]) != gguf_alignment(g[0])) {
            rc = ms_err(MS_EINVALID, "%s: alignment %u, the first shard's %u: a shard of another file", labels[i],
                        gguf_alignment(g[i]), gguf_alignment(g[0]));
            goto done;
        }
        tensors += gguf_tensor_count(g[i]);
    }
    if (tensors != total) {
        rc = ms_err(MS_EINVALID, "%s: %s is %llu, but the %zu shards hold %llu tensors", labels[0], KEY_TENSORS,
                    (unsigned long long)total, n, (unsigned long long)tensors);
        goto done;
    }
    if ((rc = gguf_writer_new(&w, gguf_version(g[0]), gguf_alignment(g[0]))) < 0)
        goto done;
    for (size_t k = 0; k < gguf_kv_count(g[0]); k++) {
        const char *key = gguf_kv_key(g[0], k);
        const uint8_t *val;
        size_t len;
        if (!strncmp(key, "split.", 6))
            continue;
        gguf_kv_value(g[0], k, &val, &len);
        if ((rc = gguf_writer_set_raw(w, key, gguf_kv_type(g[0], k), val, len)) < 0)
            goto merge_failed;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < gguf_tensor_count(g[i]); k++) {
            const gguf_tensor *t = gguf_tensor_at(g[i], k);
            if ((rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes)) < 0) {
                ms_err_ctx("%s: tensor '%s'", labels[i], t->name);
                goto merge_failed;
            }
        }
    }
    if ((rc = gguf_writer_write_file(w, out_path)) < 0)
        goto merge_failed;
    goto done;
merge_failed:
    ms_err_ctx("merging the %zu shards of %s", n, labels[0]);
done:
    gguf_writer_free(w);
    for (size_t i = 0; i < n; i++)
        gguf_close(g[i]);
    free(g);
    return rc;
}

/* The shard paths of the set whose first shard is `path` (NAME-00001-of-0000N.gguf, as
 * llama.cpp's llama_split_path names them), n of them. */
static int sibling_paths(char ***out, const char *path, unsigned n)
{
    char tail[64], **p;
    size_t len = strlen(path), prefix;

    *out = NULL;
    snprintf(tail, sizeof tail, "-%05d-of-%05u.gguf", 1, n);
    if (len <= strlen(tail) || strcmp(path + len - strlen(tail), tail) != 0)
        return ms_err(MS_EINVALID,
                      "%s: split.count is %u, but the name does not end in %s: import the first shard, named as "
                      "gguf-split names it",
                      path, n, tail);
    prefix = len - strlen(tail);
    if (!(p = calloc(n, sizeof *p)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (unsigned i = 0; i < n; i++) {
        if (!(p[i] = malloc(prefix + 64))) {
            for (unsigned j = 0; j < i; j++)
                free(p[j]);
            free(p);
            return ms_err(MS_ENOMEM, "out of memory");
        }
        snprintf(p[i], prefix + 64, "%.*s-%05u-of-%05u.gguf", (int)prefix, path, i + 1, n);
    }
    *out = p;
    return 0;
}

int import_gguf_split_manifest(manifest **out, store_txn *t, const char *const *paths, const char *const *labels,
                               size_t n, const char *label, const import_opts *o)
{
    static unsigned seq;
    char tmp[4200];
    import_opts io = o ? *o : (import_opts){0};
    int rc;

    *out = NULL;
    /* the merged file is ours: a digest to expect names one file, never a set */
    io.expect_digest = NULL;
    snprintf(tmp, sizeof tmp, "%s/tmp/%d-split-%u.gguf", store_home(store_txn_store(t)), (int)getpid(), seq++);
    if ((rc = import_gguf_split_merge(paths, labels, n, tmp)) == 0)
        rc = import_gguf_manifest(out, t, tmp, label, &io);
    unlink(tmp);
    return rc;
}

int import_gguf_split_file(manifest **out, store_txn *t, const char *path, const char *label, unsigned n,
                           const import_opts *o)
{
    char **p = NULL;
    int rc;

    *out = NULL;
    if ((rc = sibling_paths(&p, path, n)) < 0)
        return rc;
    rc = import_gguf_split_manifest(out, t, (const char *const *)p, (const char *const *)p, n, label ? label : path, o);
    for (unsigned i = 0; i < n; i++)
        free(p[i]);
    free(p);
    return rc;
}
