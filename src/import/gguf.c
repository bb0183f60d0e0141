/* gguf.c: import a GGUF file, every weight kept bit for bit (see import.h for the blobs).
 *
 * One pass over the file, in file order: each tensor's bytes are read with pread (source.c:
 * never through the mapping, so a file that shrinks meanwhile is an error, not SIGBUS) into the
 * blob writer, which hashes while it writes; a second thread reads the file alongside and
 * hashes it whole for the source digest (what export must reproduce). The header, from byte 0
 * to the data section, is kept verbatim as its own layer; with the tensors and any non-zero
 * bytes between them, that is everything needed to give the same file back. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"
#include "import/import_int.h"

#define NAME_MAX_LEN 512

typedef struct item {
    const gguf_tensor *t;
    char hf[NAME_MAX_LEN];
    char pack[NAME_MAX_LEN];   /* "" for a tensor with its own blob */
} item;

static int st_dtype_of(st_dtype *out, int ggml)
{
    switch (ggml) {
    case GGML_TYPE_F32: *out = ST_F32; return 1;
    case GGML_TYPE_F16: *out = ST_F16; return 1;
    case GGML_TYPE_BF16: *out = ST_BF16; return 1;
    case GGML_TYPE_F64: *out = ST_F64; return 1;
    case GGML_TYPE_I8: *out = ST_I8; return 1;
    case GGML_TYPE_I16: *out = ST_I16; return 1;
    case GGML_TYPE_I32: *out = ST_I32; return 1;
    case GGML_TYPE_I64: *out = ST_I64; return 1;
    default: *out = ST_U8; return 0;   /* block-quantized: kept as bytes */
    }
}

/* Add one tensor to a blob under construction. In a pack, metadata keys carry ":<name>".
 * With --quantize, float matrices are quantized on the way (`*quantized_out` set). */
static int item_add(st_writer *w, const item *it, int packed, import_quant *q, import_source *src,
                    uint64_t data_offset, int *quantized_out)
{
    const gguf_tensor *t = it->t;
    const char *key = packed ? it->hf : NULL;
    uint64_t shape[GGUF_MAX_DIMS + 1];
    tensor_blob_meta meta = {.gguf_name = t->name};
    int n = 0, rc;
    st_dtype dt;

    *quantized_out = 0;
    if (st_dtype_of(&dt, t->type)) {
        for (int d = t->n_dims - 1; d >= 0; d--)
            shape[n++] = t->ne[d];
        if (import_quant_wants(q, it->hf, dt, n, shape)) {
            /* gguf_name first, then the quantizer's keys: the order the blob has always had */
            if ((rc = tensor_blob_meta_put(w, key, &meta)) < 0)
                return rc;
            void *data = t->nbytes <= SIZE_MAX ? import_quant_buf(q, (size_t)t->nbytes) : NULL;
            if (!data)
                return ms_err(MS_ENOMEM, "out of memory for %llu bytes", (unsigned long long)t->nbytes);
            if ((rc = import_source_read(src, data, data_offset + t->offset, (size_t)t->nbytes)) < 0)
                return rc;
            *quantized_out = 1;
            return import_quant_add(q, w, it->hf, dt, n, shape, data, packed);
        }
    } else {
        uint64_t row;
        if ((rc = ggml_row_nbytes(&row, t->type, t->ne[0])) < 0)
            return rc;
        for (int d = t->n_dims - 1; d >= 1; d--)
            shape[n++] = t->ne[d];
        shape[n++] = row;
        meta.quant_type = ggml_type_name(t->type);
        meta.n_dims = t->n_dims;
        for (int d = 0; d < t->n_dims; d++)
            meta.shape[d] = t->ne[t->n_dims - 1 - d];   /* HF order */
    }
    if ((rc = tensor_blob_meta_put(w, key, &meta)) < 0)
        return rc;
    /* t->data points into the mapping, which is never read: import_sources_emit reads the
     * file at the same offset. */
    return st_writer_add(w, it->hf, dt, n, shape, t->data, t->nbytes);
}

static int cmp_item(const void *a, const void *b)
{
    const item *x = a, *y = b;
    int c = strcmp(x->pack[0] ? x->pack : x->hf, y->pack[0] ? y->pack : y->hf);
    return c ? c : strcmp(x->hf, y->hf);
}

static int cmp_offset(const void *a, const void *b)
{
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* One blob to write: items[first .. first + count) (one tensor, or an expert pack). */
typedef struct unit {
    size_t first, count;
    uint64_t offset;   /* the lowest file offset of its tensors */
    ms_digest digest;
    uint64_t size;
} unit;

static int cmp_unit_offset(const void *a, const void *b)
{
    const unit *x = *(const unit *const *)a, *y = *(const unit *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Tests only: shrink the source to MSTORE_TEST_IMPORT_SHRINK bytes once the first tensor blob is
 * written, so that "the file changed during import" is reproduced at a known point. */
static void test_shrink(const char *path)
{
    const char *v = getenv("MSTORE_TEST_IMPORT_SHRINK");

    if (v && *v)
        (void)!truncate(path, (off_t)strtoll(v, NULL, 10));
}

/* The blob of one unit, written but not named yet (import_tensor_blob_name). Tensor data
 * reaches the writer from the file (import_sources_emit); a tensor quantized on the way is
 * read into memory whole first. */
static int unit_write(blob_writer **bw_out, unit *u, const item *items, store_txn *t, import_source *src,
                      uint64_t data_offset, import_quant *q, json_t *qsum)
{
    st_writer *w = NULL;
    int rc;

    if ((rc = st_writer_new(&w)) < 0)
        return rc;
    for (size_t k = u->first; k < u->first + u->count && rc == 0; k++) {
        const item *it = &items[k];
        int quantized = 0;
        const char *type;
        json_t *c;
        rc = item_add(w, it, items[u->first].pack[0] != '\0', q, src, data_offset, &quantized);
        type = quantized ? q->fmt->name : ggml_type_name(it->t->type);
        c = json_object_get(qsum, type);
        json_object_set_new(qsum, type, json_integer(c ? json_integer_value(c) + 1 : 1));
    }
    *bw_out = NULL;
    if (rc == 0)
        rc = import_tensor_blob_write(bw_out, t, w, &src, 1);
    st_writer_free(w);
    import_quant_release(q);   /* the writer borrowed its buffers until the blob was written */
    return rc;
}

/* Blobs for every tensor, one per tensor or per expert pack. They are written in file order,
 * so that the reads follow the whole-file hash through the file (on a cold cache the disk is
 * read once), and named in the manifest in name order, as before. */
static int tensors_import(store_txn *t, gguf_file *g, import_source *src, const char *path, manifest *m,
                          const char *arch, json_t *qsum, const import_opts *o, import_quant *q)
{
    size_t n = gguf_tensor_count(g), n_units = 0;
    item *items = calloc(n ? n : 1, sizeof *items);
    unit *units = calloc(n ? n : 1, sizeof *units);
    unit **order = calloc(n ? n : 1, sizeof *order);
    uint64_t total = 0, done = 0;
    ms_progress *pr = NULL;
    blob_writer *pend = NULL;   /* the blob of `pu`, written, not named yet */
    unit *pu = NULL;
    int rc = 0;

    if (!items || !units || !order) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n; k++) {
        items[k].t = gguf_tensor_at(g, k);
        gguf_name_to_hf(items[k].hf, sizeof items[k].hf, items[k].pack, sizeof items[k].pack, arch, items[k].t->name);
        total += items[k].t->nbytes;
    }
    qsort(items, n, sizeof *items, cmp_item);
    for (size_t k = 1; k < n; k++)
        if (strcmp(items[k].hf, items[k - 1].hf) == 0) {
            rc = ms_err(MS_EINVALID, "tensors '%s' and '%s' both map to '%s'", items[k - 1].t->name, items[k].t->name, items[k].hf);
            goto done;
        }
    for (size_t i = 0, j; i < n; i = j) {
        unit *u = &units[n_units];
        for (j = i + 1; j < n && items[i].pack[0] && strcmp(items[j].pack, items[i].pack) == 0;)
            j++;
        u->first = i;
        u->count = j - i;
        u->offset = UINT64_MAX;
        for (size_t k = i; k < j; k++)
            if (items[k].t->offset < u->offset)
                u->offset = items[k].t->offset;
        order[n_units++] = u;
    }
    qsort(order, n_units, sizeof *order, cmp_unit_offset);
    pr = o && o->quiet ? NULL : ms_progress_new("import", total, 256u << 20);
    /* Each blob is named after the next one is written (`pend`): its last chunks are hashed
     * while this thread already reads the next blob's. */
    for (size_t k = 0; k <= n_units; k++) {
        unit *u = k < n_units ? order[k] : NULL;
        blob_writer *bw = NULL;
        if (u && (rc = unit_write(&bw, u, items, t, src, gguf_data_offset(g), q, qsum)) < 0) {
            if (!import_source_changed(src))
                ms_err_ctx("tensor '%s'", items[u->first].t->name);
            break;
        }
        if (pend && (rc = import_tensor_blob_name(pu->digest, &pu->size, t, pend, &src, 1)) < 0) {
            pend = NULL;
            if (!import_source_changed(src))
                ms_err_ctx("tensor '%s'", items[pu->first].t->name);
            import_tensor_blob_drop(bw, &src, 1);   /* NULL after the last unit */
            break;
        }
        pend = bw;
        pu = u;
        if (!u)
            break;
        for (size_t i = u->first; i < u->first + u->count; i++)
            done += items[i].t->nbytes;
        ms_progress_update(pr, done);
        if (k == 0)
            test_shrink(path);
    }
    import_tensor_blob_drop(pend, &src, 1);   /* after an error; NULL otherwise */
    for (size_t k = 0; k < n_units && rc == 0; k++) {
        const item *it = &items[units[k].first];
        rc = manifest_layer_add(m, MT_TENSOR, units[k].digest, units[k].size, it->pack[0] ? it->pack : it->hf);
    }
    ms_progress_free(pr);
done:
    MS_FREE_ALL(order, units, items);
    return rc;
}

/* Bytes of the data section that no tensor covers. They are zero in files llama.cpp writes;
 * when they are not, they are kept (in offset order, trailing bytes last) as a layer so that
 * export still gives the same file back. Two passes over the gaps, the second only when a
 * byte is non-zero, and both stream: a huge file with one non-zero byte costs no huge buffer.
 * `pos` only grows: the reader lets an empty tensor sit anywhere, even inside another one,
 * and export (out_gap) skips backwards offsets the same way, so the bytes kept match. */
static int gaps_scan(blob_writer *w, import_source *src, uint8_t *buf, size_t buf_len, const gguf_tensor **by,
                     size_t n, uint64_t base, uint64_t end, uint32_t alignment, uint64_t *len_out, int *nonzero_out)
{
    uint64_t pos = 0;
    int rc;

    *len_out = 0;
    for (size_t k = 0; k <= n; k++) {
        uint64_t next = k < n ? by[k]->offset : end;
        if (next > end)
            next = end;
        for (uint64_t at = pos; at < next && (w || !*nonzero_out);) {
            size_t len = next - at < buf_len ? (size_t)(next - at) : buf_len;
            if ((rc = import_source_read(src, buf, base + at, len)) < 0)
                return rc;
            if (w && (rc = blob_writer_write(w, buf, len)) < 0)
                return rc;
            for (size_t i = 0; !w && i < len && !*nonzero_out; i++)
                *nonzero_out = buf[i] != 0;
            at += len;
        }
        /* Export pads with zeros past the last tensor only up to the alignment (a config's
         * source.size is not trusted further): a longer zero tail is kept. */
        if (!w && k == n && next > pos && next - pos >= alignment)
            *nonzero_out = 1;
        if (next > pos) {
            *len_out += next - pos;
            pos = next;
        }
        if (k < n && by[k]->offset + by[k]->nbytes > pos)
            pos = by[k]->offset + by[k]->nbytes;
    }
    return 0;
}

static int gaps_import(store_txn *t, gguf_file *g, import_source *src, manifest *m, int *has_gaps)
{
    size_t n = gguf_tensor_count(g), buf_len = 1u << 20;
    const gguf_tensor **by = calloc(n ? n : 1, sizeof *by);
    uint8_t *buf = malloc(buf_len);
    blob_writer *w = NULL;
    uint64_t end, gl = 0, size = import_source_size(src);
    int nonzero = 0, rc = 0;
    ms_digest digest;

    *has_gaps = 0;
    if (!by || !buf) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    /* A file without tensors may end before its aligned data section starts. */
    if (size <= gguf_data_offset(g))
        goto done;
    end = size - gguf_data_offset(g);
    for (size_t k = 0; k < n; k++)
        by[k] = gguf_tensor_at(g, k);
    qsort(by, n, sizeof *by, cmp_offset);
    if ((rc = gaps_scan(NULL, src, buf, buf_len, by, n, gguf_data_offset(g), end, gguf_alignment(g), &gl,
                        &nonzero)) < 0 || !nonzero || !gl)
        goto done;
    if ((rc = store_txn_blob_open(t, &w)) < 0 ||
        (rc = gaps_scan(w, src, buf, buf_len, by, n, gguf_data_offset(g), end, gguf_alignment(g), &gl, &nonzero)) < 0)
        goto done;
    rc = store_txn_blob_add(t, digest, NULL, w, NULL);
    w = NULL;
    if (rc == 0)
        rc = manifest_layer_add(m, MT_GGUF_GAPS, digest, gl, NULL);
    *has_gaps = rc == 0;
done:
    blob_writer_abort(w);
    free(buf);
    free(by);
    return rc;
}

/* The config blob: the model fields as src/format reads them from the metadata
 * (gguf_config_json, the reader run --gguf uses too), then the quantization summary and where
 * the weights came from. */
static int config_build(json_t **out, gguf_file *g, uint64_t file_size, json_t *qsum, const char *path,
                        const char *file_digest, int has_gaps)
{
    const char *base = strrchr(path, '/');
    json_t *c;
    int rc;

    if ((rc = gguf_config_json(&c, g)) < 0)
        return rc;
    json_object_set(c, "quantization", qsum);
    json_object_del(c, "source");   /* replaced whole, or absent if the name is not UTF-8 (as ever) */
    json_object_set_new(c, "source", json_pack("{s:s, s:s, s:s, s:I, s:b}", "format", "gguf", "file", base ? base + 1 : path,
                                               "digest", file_digest, "size", (json_int_t)file_size, "gaps", has_gaps));
    *out = c;
    return 0;
}

/* The bytes before the data section, read from the file (not the mapping), and parsed again
 * from that copy: every later look at the metadata (config, template) reads memory that a
 * shrinking file cannot take away. */
static int header_read(uint8_t **buf_out, size_t *len_out, gguf_file **out, gguf_file *g, import_source *src,
                       const char *what)
{
    uint64_t size = import_source_size(src);
    size_t len = (size_t)(gguf_data_offset(g) < size ? gguf_data_offset(g) : size);
    uint8_t *buf = malloc(len ? len : 1);
    int rc;

    *buf_out = NULL;
    *out = NULL;
    if (!buf)
        return ms_err(MS_ENOMEM, "out of memory for a %zu-byte header", len);
    if ((rc = import_source_read(src, buf, 0, len)) < 0 || (rc = gguf_open_buf(out, buf, len, GGUF_HEADER_ONLY, what)) < 0) {
        free(buf);
        return rc;
    }
    *buf_out = buf;
    *len_out = len;
    return 0;
}

/* Everything a GGUF import writes except the name: the blobs go into the caller's transaction,
 * the manifest is returned for the caller to extend (pull adds ollama's layers) and commit.
 *
 * The source is read once, in file order, by two threads: this one writes the blobs (each
 * hashed as it is written), the other hashes the whole file for the config's source.digest.
 * Every blob goes into the transaction's batch, made durable with one sync and renamed into
 * blobs/ only at its commit, which follows the check that the file is unchanged: a file that
 * changes meanwhile leaves nothing under blobs/. */
int import_gguf_manifest(manifest **out, store_txn *t, const char *path, const char *label, const import_opts *o)
{
    gguf_file *g = NULL, *gh = NULL;
    import_source *src = NULL;
    manifest *m = NULL;
    json_t *qsum = json_object(), *config = NULL;
    int rc, has_gaps = 0;
    const char *arch_s, *tmpl, *what = label ? label : path;
    char arch[128] = "unknown";
    ms_digest digest, file_digest;
    uint8_t *header = NULL;
    size_t len, header_len = 0;
    import_quant q;

    *out = NULL;
    {
        /* the first shard of a split GGUF: the set, merged (gguf_split.c) */
        unsigned n_split;
        if ((rc = import_gguf_split_count(&n_split, path)) == 0 && n_split)
            rc = import_gguf_split_file(out, t, path, label, n_split, o);
        if (rc < 0 || n_split) {
            json_decref(qsum);
            return rc;
        }
    }
    if (!qsum)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = import_quant_init(&q, o)) < 0) {
        json_decref(qsum);
        return rc;
    }
    if ((rc = gguf_open(&g, path)) < 0 || (rc = manifest_new(&m)) < 0 ||
        (rc = import_source_open(&src, path, gguf_bytes(g), gguf_file_size(g))) < 0 ||
        (rc = header_read(&header, &header_len, &gh, g, src, what)) < 0)
        goto done;
    if (gguf_get_str(gh, "general.architecture", &arch_s, &len) == 0 && len < sizeof arch) {
        memcpy(arch, arch_s, len);
        arch[len] = '\0';
    }
    if ((rc = import_source_hash_start(src)) < 0 || (rc = tensors_import(t, g, src, path, m, arch, qsum, o, &q)) < 0)
        goto done;
    if ((rc = store_txn_blob_put(t, digest, header, header_len)) < 0 ||
        (rc = manifest_layer_add(m, MT_GGUF_META, digest, header_len, NULL)) < 0)
        goto done;
    if ((rc = gaps_import(t, g, src, m, &has_gaps)) < 0)
        goto done;
    if (gguf_get_str(gh, "tokenizer.chat_template", &tmpl, &len) == 0) {
        if ((rc = store_txn_blob_put(t, digest, tmpl, len)) < 0 || (rc = manifest_layer_add(m, MT_TEMPLATE, digest, len, NULL)) < 0)
            goto done;
    }
    if ((rc = import_source_hash_finish(src, file_digest)) < 0 || (rc = import_source_check(src)) < 0)
        goto done;
    if (o && o->expect_digest && strcmp(o->expect_digest, file_digest) != 0) {
        rc = ms_err(MS_EMISMATCH, "digest mismatch: expected %s, got %s (%llu bytes)", o->expect_digest, file_digest,
                    (unsigned long long)import_source_size(src));
        goto done;
    }
    if ((rc = config_build(&config, gh, import_source_size(src), qsum, what, file_digest, has_gaps)) < 0)
        goto done;
    if (q.fmt) {   /* quantized on import: the file can no longer be rebuilt bit for bit */
        json_object_set_new(config, "quantization_error", import_quant_report(&q));
        json_object_set_new(json_object_get(config, "source"), "quantized_on_import", json_true());
    }
    if ((rc = import_config_store(t, m, config)) < 0)
        goto done;
    *out = m;
    m = NULL;
done:
    import_source_close(src);   /* joins the hash thread when an error came first */
    if (rc < 0 && g)
        ms_err_ctx("%s", what);
    import_quant_release(&q);
    json_decref(config);
    json_decref(qsum);
    manifest_free(m);
    gguf_close(gh);
    free(header);
    gguf_close(g);
    return rc;
}
