/* export.c: write a stored model back out as a GGUF file.
 *
 * A model imported from GGUF keeps the file's header verbatim (MT_GGUF_META), each tensor's
 * bytes unchanged with its GGUF name, and any non-zero bytes between tensors (MT_GGUF_GAPS):
 * the export lays them out at the header's offsets and so gives the same file back. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"
#include "export/export_int.h"

typedef struct src_tensor {
    const char *gguf_name;
    const uint8_t *data;
    uint64_t nbytes;
} src_tensor;

typedef struct exporter {
    store_model *sm;      /* owns every mapping and parsed header used below */
    const manifest *m;
    src_tensor *tensors;
    size_t n_tensors;
    gguf_file *header;
    const uint8_t *gaps;
    uint64_t gaps_len, gaps_at;
    int fd;
    blob_hash *hash;
    uint64_t written;
} exporter;

static int cmp_src(const void *a, const void *b)
{
    return strcmp(((const src_tensor *)a)->gguf_name, ((const src_tensor *)b)->gguf_name);
}

static int out_write(exporter *e, const void *buf, size_t len)
{
    blob_hash_update(e->hash, buf, len);
    if (ms_write_all(e->fd, buf, len) < 0)
        return ms_err_os("write");
    e->written += len;
    return 0;
}

/* Fill the bytes between `e->written` and `upto` (absolute) with the kept gap bytes, or zeros. */
static int out_gap(exporter *e, uint64_t upto)
{
    static const uint8_t zeros[4096];

    while (e->written < upto) {
        size_t n = (size_t)(upto - e->written);
        if (e->gaps) {
            if (e->gaps_at + n > e->gaps_len)
                return ms_err(MS_EINVALID, "gaps layer is shorter than the file's gaps");
            if (out_write(e, e->gaps + e->gaps_at, n) < 0)
                return MS_EIO;
            e->gaps_at += n;
        } else {
            if (n > sizeof zeros)
                n = sizeof zeros;
            if (out_write(e, zeros, n) < 0)
                return MS_EIO;
        }
    }
    return 0;
}

/* Export reads every byte of every blob anyway: hash them against their names first, so a
 * damaged blob fails the export (naming it) instead of going out as a file that exits 0. */
static int view_check(const uint8_t *data, size_t len, const char *digest)
{
    ms_digest got;

    blob_digest_buf(got, data, len);
    if (strcmp(got, digest) != 0)
        return ms_err(MS_EMISMATCH, "blob %s is damaged: its bytes hash to %s (mstore verify lists the damage)",
                      digest, got);
    return 0;
}

static int layers_open(exporter *e)
{
    size_t cap = 0;
    int rc;

    for (size_t i = 0; i < e->m->n_layers; i++) {
        const manifest_layer *l = &e->m->layers[i];
        const uint8_t *data;
        const st_file *st;
        size_t len;
        if (strcmp(l->media_type, MT_TENSOR) != 0 && strcmp(l->media_type, MT_GGUF_META) != 0 &&
            strcmp(l->media_type, MT_GGUF_GAPS) != 0)
            continue;
        if ((rc = store_model_layer_bytes(&data, &len, e->sm, l)) < 0 || (rc = view_check(data, len, l->digest)) < 0)
            return rc;
        if (strcmp(l->media_type, MT_GGUF_META) == 0) {
            if ((rc = gguf_open_buf(&e->header, data, len, GGUF_HEADER_ONLY, l->digest)) < 0)
                return rc;
            continue;
        }
        if (strcmp(l->media_type, MT_GGUF_GAPS) == 0) {
            e->gaps = data;
            e->gaps_len = len;
            continue;
        }
        if ((rc = store_model_tensors(&st, e->sm, l)) < 0)
            return rc;
        for (size_t k = 0; k < st_count(st); k++) {
            const st_tensor *t = st_at(st, k);
            tensor_blob_meta tm;
            const char *gn;
            if ((rc = tensor_blob_meta_get(&tm, st, t, l->name, l->digest)) < 0)
                return rc;
            if (!(gn = tm.gguf_name))
                return ms_err(MS_EINVALID, "layer '%s' (%s): tensor '%s' has no gguf_name", l->name ? l->name : "",
                              l->digest, t->name);
            if (e->n_tensors == cap) {
                src_tensor *n = realloc(e->tensors, (cap = cap ? cap * 2 : 256) * sizeof *n);
                if (!n)
                    return ms_err(MS_ENOMEM, "out of memory");
                e->tensors = n;
            }
            e->tensors[e->n_tensors++] = (src_tensor){ gn, t->data, t->nbytes };
        }
    }
    if (!e->header)
        return ms_err(MS_EINVALID, "the manifest has no GGUF metadata layer");
    if (e->n_tensors)   /* a vocab-only model has none, and qsort(NULL, 0) is undefined */
        qsort(e->tensors, e->n_tensors, sizeof *e->tensors, cmp_src);
    return 0;
}

static int cmp_info(const void *a, const void *b)
{
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int body_write(exporter *e, uint64_t file_size)
{
    size_t n = gguf_tensor_count(e->header);
    const gguf_tensor **by = calloc(n ? n : 1, sizeof *by);
    uint64_t base = gguf_data_offset(e->header);
    int rc = 0;

    if (!by)
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t k = 0; k < n; k++)
        by[k] = gguf_tensor_at(e->header, k);
    qsort(by, n, sizeof *by, cmp_info);
    if ((rc = out_write(e, gguf_bytes(e->header), gguf_file_size(e->header))) < 0)
        goto done;
    for (size_t k = 0; k < n && rc == 0; k++) {
        src_tensor key = { by[k]->name, NULL, 0 };
        src_tensor *t = e->n_tensors ? bsearch(&key, e->tensors, e->n_tensors, sizeof key, cmp_src) : NULL;
        if (!t) {
            rc = ms_err(MS_ENOTFOUND, "tensor '%s' is in the GGUF header but in no layer", by[k]->name);
            break;
        }
        if (t->nbytes != by[k]->nbytes) {
            rc = ms_err(MS_EINVALID, "tensor '%s': stored %llu bytes, header says %llu", by[k]->name,
                        (unsigned long long)t->nbytes, (unsigned long long)by[k]->nbytes);
            break;
        }
        if ((rc = out_gap(e, base + by[k]->offset)) == 0)
            rc = out_write(e, t->data, t->nbytes);
    }
    /* source.size comes from the config blob, which a pulled model writes as it likes: zeros
     * past the last tensor are padding to the alignment at most (import keeps a longer zero
     * tail in the gaps layer), so a larger size is refused, not written until the disk fills. */
    if (rc == 0 && !e->gaps && file_size > e->written && file_size - e->written >= gguf_alignment(e->header))
        rc = ms_err(MS_EINVALID,
                    "config source.size %llu: %llu bytes past the last tensor (at %llu), the alignment %u allows less",
                    (unsigned long long)file_size, (unsigned long long)(file_size - e->written),
                    (unsigned long long)e->written, gguf_alignment(e->header));
    if (rc == 0)
        rc = out_gap(e, file_size > e->written ? file_size : e->written);
done:
    free(by);
    return rc;
}

static void exporter_free(exporter *e)
{
    free(e->tensors);
    gguf_close(e->header);
    blob_hash_free(e->hash);
    store_model_close(e->sm);
}

/* A killed export leaves <out>.partial.<pid> beside its output (the rename never came): remove
 * those of `out_path` whose process is gone before writing a new one. A pid still running is
 * another export of the same path, at work. */
static void partials_clean(const char *out_path)
{
    const char *slash = strrchr(out_path, '/');
    char *dir = slash ? strndup(out_path, (size_t)(slash - out_path + 1)) : strdup("./");
    const char *base = slash ? slash + 1 : out_path;
    size_t bl = strlen(base);
    struct dirent *e;
    DIR *d;

    if (!dir || !(d = opendir(dir))) {
        free(dir);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        char *end, *path;
        long pid;

        if (strncmp(e->d_name, base, bl) != 0 || strncmp(e->d_name + bl, ".partial.", 9) != 0)
            continue;
        pid = strtol(e->d_name + bl + 9, &end, 10);
        if (*end || end == e->d_name + bl + 9 || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno == EPERM)
            continue;
        if ((path = ms_strdup_printf("%s%s", dir, e->d_name)))
            unlink(path);
        free(path);
    }
    closedir(d);
    free(dir);
}

/* Write e's body (its header, then the tensors at the header's offsets) to `out_path` through a
 * "<out>.partial.<pid>" temp file; res gets the digest and size. */
static int exporter_write(exporter *e, uint64_t file_size, const char *out_path, export_result *res)
{
    ms_atomic out = { .fd = -1 };
    char *tmp = NULL;
    int rc;

    partials_clean(out_path);
    if (!(tmp = ms_strdup_printf("%s.partial.%ld", out_path, (long)getpid())) || !(e->hash = blob_hash_new())) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    /* the temp name is "<out>.partial.<pid>", the pattern partials_clean looks for */
    if ((rc = ms_atomic_open(&out, out_path, tmp, 0644)) < 0)
        goto done;
    e->fd = out.fd;
    if ((rc = body_write(e, file_size)) < 0) {
        ms_err_ctx("%s", out.tmp);
        goto done;
    }
    e->fd = -1;
    if ((rc = ms_atomic_commit(&out)) < 0)
        goto done;
    blob_hash_final(res->digest, e->hash);
    e->hash = NULL;
    res->nbytes = e->written;
done:
    ms_atomic_abort(&out);   /* after an error: closes the fd and removes the partial file */
    free(tmp);
    return rc;
}

int export_gguf(store *s, const model_name *name, const char *out_path, export_result *res)
{
    exporter e = { .fd = -1 };
    json_t *config = NULL, *src;
    const uint8_t *cfg;
    size_t cfg_len;
    json_error_t jerr;
    uint64_t file_size = 0;
    int rc;

    memset(res, 0, sizeof *res);
    if ((rc = store_model_open(&e.sm, s, name)) < 0)
        goto done;
    e.m = store_model_manifest(e.sm);
    if ((rc = store_model_config(&cfg, &cfg_len, e.sm)) < 0)
        goto done;
    if (!(config = json_loadb((const char *)cfg, cfg_len, 0, &jerr))) {
        rc = ms_err(MS_EINVALID, "config %s: %s", e.m->config.digest, jerr.text);
        goto done;
    }
    src = json_object_get(config, "source");
    if (!json_is_string(json_object_get(src, "format")) || strcmp(json_string_value(json_object_get(src, "format")), "gguf") != 0) {
        rc = export_gguf_generate(e.sm, config, store_model_shown(e.sm), out_path, res);
        goto done;
    }
    if (json_is_true(json_object_get(src, "quantized_on_import"))) {
        rc = ms_err(MS_EUNSUPPORTED, "model was quantized on import (%s): its GGUF cannot be rebuilt",
                    json_string_value(json_object_get(json_object_get(config, "quantization_error"), "quant_type")));
        goto done;
    }
    file_size = (uint64_t)json_integer_value(json_object_get(src, "size"));
    if ((rc = layers_open(&e)) < 0 || (rc = exporter_write(&e, file_size, out_path, res)) < 0)
        goto done;
    res->identical = json_is_string(json_object_get(src, "digest")) &&
                     strcmp(json_string_value(json_object_get(src, "digest")), res->digest) == 0;
done:
    json_decref(config);
    exporter_free(&e);
    return rc;
}

int export_gguf_shard_fits(const uint8_t *file, uint64_t size, const char *what, uint64_t *header_len)
{
    gguf_file *g = NULL;
    const gguf_tensor **by = NULL;
    uint64_t base, pos, last;
    size_t n;
    int rc, fits = 1;

    *header_len = 0;
    if ((rc = gguf_open_buf(&g, file, (size_t)size, 0, what)) < 0)
        return rc;
    n = gguf_tensor_count(g);
    if (!(by = calloc(n ? n : 1, sizeof *by))) {
        gguf_close(g);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < n; k++)
        by[k] = gguf_tensor_at(g, k);
    qsort(by, n, sizeof *by, cmp_info);
    /* body_write's walk without a gaps layer: zeros up to each tensor (never backwards), the
     * tensor, and past the last one zeros shorter than the alignment */
    base = pos = last = gguf_data_offset(g);
    fits = size >= base;   /* a file without tensors may end before its data section */
    for (size_t k = 0; fits && k <= n; k++) {
        uint64_t to = k < n ? base + by[k]->offset : size;
        if (k == n)
            last = pos;
        for (; fits && pos < to; pos++)
            fits = file[pos] == 0;
        if (k < n && base + by[k]->offset + by[k]->nbytes > pos)
            pos = base + by[k]->offset + by[k]->nbytes;
    }
    if (fits && size - last >= gguf_alignment(g))
        fits = 0;
    if (fits)
        *header_len = base;
    free(by);
    gguf_close(g);
    return fits;
}

int export_gguf_shard(store *s, const model_name *name, const uint8_t *header, size_t header_len, uint64_t file_size,
                      const char *out_path, export_result *res)
{
    exporter e = { .fd = -1 };
    int rc;

    memset(res, 0, sizeof *res);
    if ((rc = store_model_open(&e.sm, s, name)) < 0)
        goto done;
    e.m = store_model_manifest(e.sm);
    if ((rc = layers_open(&e)) < 0)
        goto done;
    /* the shard's own header in place of the model's, zeros between its tensors */
    gguf_close(e.header);
    e.header = NULL;
    e.gaps = NULL;
    if ((rc = gguf_open_buf(&e.header, header, header_len, GGUF_HEADER_ONLY, "shard header")) < 0 ||
        (rc = exporter_write(&e, file_size, out_path, res)) < 0)
        goto done;
    res->identical = 0;
done:
    exporter_free(&e);
    return rc;
}
