/* layout.c: offline transfer through an OCI image layout directory:
 *   <dir>/oci-layout          {"imageLayoutVersion":"1.0.0"}
 *   <dir>/index.json          {"schemaVersion":2,"manifests":[descriptor + annotations ref.name]}
 *   <dir>/blobs/sha256/<hex>  content, named by its sha256
 * A pull from a directory verifies every byte like a registry pull: the directory may have been
 * carried on a USB stick or edited by anyone. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "registry/registry_int.h"

#define REF_NAME "org.opencontainers.image.ref.name"
#define INDEX_MAX_BYTES (64u << 20)

static char *layout_blob_path(const char *dir, const char *digest)
{
    return ms_strdup_printf("%s/blobs/sha256/%s", dir, blob_digest_hex(digest));
}

/* ------------------------------------------------------------------ lock, leftovers, names */

/* Pushes of different names into one directory each read index.json, add their entry and
 * rename a new index.json over it: without a lock the last rename wins and the other names
 * vanish. An exclusive flock on the directory itself (no lock file left in the layout) makes
 * the read-modify-write one at a time. Returns the fd holding the lock, or a negative code. */
static int layout_lock(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0)
        return ms_err_os("%s: open", dir);
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR) {
            int rc = ms_err_os("%s: lock", dir);
            close(fd);
            return rc;
        }
    return fd;
}

/* A killed push leaves <hex>.<pid>.tmp in blobs/sha256 (blob_export's temp name). Under the
 * layout lock no push of ours is writing one; a file whose pid still runs is spared anyway (a
 * push from before the lock existed). */
static void layout_tmp_clean(const char *sub)
{
    DIR *d = opendir(sub);
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        const char *dot = strchr(e->d_name, '.');   /* <64 hex>.<pid>.tmp */
        char *end, *path;
        long pid;

        if (!dot || dot - e->d_name != 64 || n < 4 || strcmp(e->d_name + n - 4, ".tmp") != 0)
            continue;
        pid = strtol(dot + 1, &end, 10);
        if (end != e->d_name + n - 4 || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno == EPERM)
            continue;
        if ((path = ms_path_join(sub, e->d_name)))
            unlink(path);
        free(path);
    }
    closedir(d);
}

/* Whether a ref.name denotes `name`. Entries are keyed by the full name (ref.name as
 * name_display writes it, "tiny:latest", "team/tiny:v1"); any spelling that parses to the
 * same name matches. A bare tag ("latest", as skopeo and older mstore write) is not a name. */
static int ref_is_name(const char *rn, const model_name *name)
{
    model_name r;

    if (!rn || !strchr(rn, ':') || name_parse(&r, rn) < 0)
        return 0;
    return !strcmp(r.host, name->host) && !strcmp(r.namespace_, name->namespace_) && !strcmp(r.model, name->model) &&
           !strcmp(r.tag, name->tag);
}

/* ------------------------------------------------------------------ push */

/* 1 when `path` is a regular file of `len` bytes that hash to `digest`, else 0. A file of the
 * right size may still hold other bytes (a damaged earlier push, bit rot on the stick): it is
 * read through, or a push would keep it forever. */
static int layout_file_intact(const char *path, const char *digest, size_t len)
{
    const size_t cap = (size_t)1 << 20;
    unsigned char *buf = NULL;
    blob_hash *h = NULL;
    struct stat st;
    ms_digest got = "";
    ssize_t n = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

    if (fd < 0)
        return 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == len && (buf = malloc(cap)) &&
        (h = blob_hash_new())) {
        while ((n = read(fd, buf, cap)) > 0 || (n < 0 && errno == EINTR))
            if (n > 0)
                blob_hash_update(h, buf, (size_t)n);
        blob_hash_final(got, h);
    }
    close(fd);
    free(buf);
    return n == 0 && strcmp(got, digest) == 0;
}

/* Copy a stored blob into the layout unless an intact copy is there already (a damaged one is
 * replaced). The copy goes to a temp name first: a reader of the directory never sees a half
 * blob. The bytes are hashed as they are written: a stored blob whose bytes no longer hash to
 * its name (bit rot) fails the push, MS_EMISMATCH, and leaves no file. */
static int blob_export(store *s, const char *dir, const char *digest, const void *buf, size_t len)
{
    char *dst = layout_blob_path(dir, digest), *tmp = NULL;
    blob_view v = { 0 };
    ms_atomic a = { .fd = -1 };
    blob_hash *h = NULL;
    ms_digest got;
    int rc = 0;

    if (!dst)
        return ms_err(MS_ENOMEM, "out of memory");
    if (!buf) {
        if ((rc = store_blob_open(&v, s, digest)) < 0)
            goto done;
        buf = v.data;
        len = v.size;
    }
    if (layout_file_intact(dst, digest, len))
        goto done;
    if (!(tmp = ms_strdup_printf("%s.%ld.tmp", dst, (long)getpid())) || !(h = blob_hash_new())) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    /* "<hex>.<pid>.tmp": the name layout_tmp_clean looks for */
    if ((rc = ms_atomic_open(&a, dst, tmp, 0644)) < 0)
        goto done;
    for (size_t off = 0; off < len;) {
        size_t n = len - off < ((size_t)4 << 20) ? len - off : ((size_t)4 << 20);
        blob_hash_update(h, (const char *)buf + off, n);
        if (ms_write_all(a.fd, (const char *)buf + off, n) < 0) {
            rc = ms_err_os("%s: write", tmp);
            goto done;
        }
        off += n;
    }
    blob_hash_final(got, h);
    h = NULL;
    if (strcmp(got, digest) != 0) {
        rc = reg_blob_damaged(digest, len, got);
        goto done;
    }
    rc = ms_atomic_commit(&a);
done:
    blob_hash_free(h);
    ms_atomic_abort(&a);
    blob_close(&v);
    free(tmp);
    free(dst);
    return rc;
}

static int index_load(json_t **out, const char *dir, int must_exist)
{
    char *path = ms_path_join(dir, "index.json"), *buf = NULL;
    json_error_t jerr;
    json_t *root = NULL, *ms;
    size_t len;
    int rc = 0;

    *out = NULL;
    if (!path)
        return ms_err(MS_ENOMEM, "out of memory");
    if (!must_exist && !ms_is_file(path)) {
        root = json_pack("{s:i, s:[]}", "schemaVersion", 2, "manifests");
        rc = root ? 0 : ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = ms_file_read(&buf, &len, path, INDEX_MAX_BYTES)) < 0)
        goto done;
    if (!(root = json_loadb(buf, len, 0, &jerr))) {
        rc = ms_err(MS_EINVALID, "%s: line %d: %s", path, jerr.line, jerr.text);
        goto done;
    }
    ms = json_object_get(root, "manifests");
    if (!json_is_object(root) || !json_is_array(ms))
        rc = ms_err(MS_EINVALID, "%s: no \"manifests\" array", path);
done:
    if (rc < 0) {
        json_decref(root);
        root = NULL;
    }
    *out = root;
    free(buf);
    free(path);
    return rc;
}

static const char *ref_name(json_t *desc)
{
    json_t *a = json_object_get(desc, "annotations");
    json_t *n = a ? json_object_get(a, REF_NAME) : NULL;
    return json_is_string(n) ? json_string_value(n) : NULL;
}

int registry_layout_push(store *s, const model_name *name, const char *dir, const registry_opts *o,
                         ms_digest digest_out)
{
    char *bytes = NULL, *sub = NULL, *path = NULL, *text = NULL, label[600];
    json_t *index = NULL, *ms, *desc;
    manifest *m = NULL;
    store_txn *made = NULL;   /* dmr: holds the GGUF blob export made while it is copied */
    store_model *sm = NULL;
    size_t len = 0;
    int rc, lock_fd = -1;

    digest_out[0] = '\0';
    name_display(label, sizeof label, name);
    if ((rc = store_model_open(&sm, s, name)) < 0 ||
        (rc = o->dmr_format || o->modelpack_format
                  ? reg_dmr_build(&bytes, &len, &m, &made, s, sm, name, o->modelpack_format)
                  : reg_manifest_load(&bytes, &len, &m, sm, o)) < 0)
        goto done;
    blob_digest_buf(digest_out, bytes, len);
    if (!(sub = ms_strdup_printf("%s/blobs/sha256", dir))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = ms_mkdir_p(sub, 0755)) < 0 || (rc = lock_fd = layout_lock(dir)) < 0 ||
        (rc = index_load(&index, dir, 0)) < 0)
        goto done;
    layout_tmp_clean(sub);
    for (size_t i = 0; i <= m->n_layers; i++)
        if ((rc = blob_export(s, dir, i == 0 ? m->config.digest : m->layers[i - 1].digest, NULL, 0)) < 0)
            goto done;
    if ((rc = blob_export(s, dir, digest_out, bytes, len)) < 0)
        goto done;
    free(path);
    if (!(path = ms_path_join(dir, "oci-layout"))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if (!ms_is_file(path) && (rc = ms_file_write_atomic(path, "{\"imageLayoutVersion\":\"1.0.0\"}", 30)) < 0)
        goto done;
    /* One entry per name: pushing a name again replaces its entry, and only its entry; keyed
     * by tag alone, "b:latest" replaced "a:latest" and a pull of a then gave b. */
    ms = json_object_get(index, "manifests");
    for (size_t i = json_array_size(ms); i-- > 0;)
        if (ref_is_name(ref_name(json_array_get(ms, i)), name))
            json_array_remove(ms, i);
    desc = json_pack("{s:s, s:s, s:I, s:{s:s}}", "mediaType", m->media_type, "digest", digest_out, "size",
                     (json_int_t)len, "annotations", REF_NAME, label);
    if (!desc || json_array_append_new(ms, desc) < 0 || !(text = json_dumps(index, JSON_COMPACT))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    free(path);
    if (!(path = ms_path_join(dir, "index.json"))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    /* index.json last: until it names the manifest, the new blobs are just unreferenced files. */
    rc = ms_file_write_atomic(path, text, strlen(text));
done:
    if (rc < 0) {
        digest_out[0] = '\0';
        ms_err_ctx("push %s to %s", label, dir);
    }
    if (lock_fd >= 0)
        close(lock_fd);   /* after index.json is in place: drops the lock */
    if (made)
        reg_ollama_release(s, m);
    store_txn_abort(made);
    store_model_close(sm);
    json_decref(index);
    manifest_free(m);
    MS_FREE_ALL(text, path, sub, bytes);
    return rc;
}

/* ------------------------------------------------------------------ pull */

/* Copy <dir>/blobs/sha256/<hex> into the pull's transaction, checking the digest. */
static int blob_import(store_txn *t, const char *dir, const char *digest, uint64_t size)
{
    char *src = layout_blob_path(dir, digest);
    ms_digest got;
    blob_writer *w = NULL;
    int fd = -1, rc = 0;

    if (!src) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((fd = ms_open_regular(src)) < 0) {
        rc = fd;
        goto done;
    }
    if ((rc = store_txn_blob_open(t, &w)) < 0)
        goto done;
    if ((rc = blob_writer_write_fd(w, fd, src, size)) < 0) {
        ms_err_ctx("blob %s (the manifest says %" PRIu64 " bytes)", digest, size);
        goto done;
    }
    if (blob_writer_size(w) != size) {
        rc = ms_err(MS_EMISMATCH, "blob %s: %s has %" PRIu64 " bytes, the manifest says %" PRIu64, digest, src,
                    blob_writer_size(w), size);
        goto done;
    }
    rc = store_txn_blob_add(t, got, NULL, w, digest);
    w = NULL;
    if (rc < 0)
        ms_err_ctx("blob %s (%s)", digest, src);
done:
    blob_writer_abort(w);
    if (fd >= 0)
        close(fd);
    free(src);
    return rc;
}

/* The manifest descriptor whose ref.name is the tag (or the full name); its digest and size. */
static int index_find(ms_digest digest_out, uint64_t *size_out, json_t *index, const model_name *name,
                      const char *dir)
{
    json_t *ms = json_object_get(index, "manifests");
    size_t i = json_array_size(ms);

    /* A reference by digest: the entry with that digest, whatever its ref.name (the bytes are
     * checked against it by the caller). */
    for (size_t k = 0; name->digest[0] && k < json_array_size(ms) && i == json_array_size(ms); k++) {
        const char *dg = json_string_value(json_object_get(json_array_get(ms, k), "digest"));
        if (dg && !strcmp(dg, name->digest))
            i = k;
    }
    if (name->digest[0] && i == json_array_size(ms))
        return ms_err(MS_ENOTFOUND, "%s/index.json: no manifest with digest %s", dir, name->digest);
    /* The entry of the full name; failing that, one keyed by the bare tag (skopeo's and older
     * layouts), so a name never resolves to another name's entry when its own is there. */
    for (size_t k = 0; k < json_array_size(ms) && i == json_array_size(ms); k++)
        if (ref_is_name(ref_name(json_array_get(ms, k)), name))
            i = k;
    for (size_t k = 0; k < json_array_size(ms) && i == json_array_size(ms); k++) {
        const char *rn = ref_name(json_array_get(ms, k));
        if (rn && !strcmp(rn, name->tag))
            i = k;
    }
    if (i < json_array_size(ms)) {
        json_t *d = json_array_get(ms, i);
        const char *dg = json_string_value(json_object_get(d, "digest"));
        json_t *sz = json_object_get(d, "size");

        if (!dg || !blob_digest_valid(dg))
            return ms_err(MS_EINVALID, "%s/index.json: manifests[%zu]: digest '%.80s' is not sha256:<64 hex>", dir, i,
                          dg ? dg : "");
        if (!json_is_integer(sz) || json_integer_value(sz) < 0 || json_integer_value(sz) > MANIFEST_MAX_BYTES)
            return ms_err(MS_EINVALID, "%s/index.json: manifests[%zu]: size is not an integer from 0 to %u", dir, i,
                          MANIFEST_MAX_BYTES);
        snprintf(digest_out, sizeof(ms_digest), "%s", dg);
        *size_out = (uint64_t)json_integer_value(sz);
        return 0;
    }
    {
        char shown[600];
        name_display(shown, sizeof shown, name);
        return ms_err(MS_ENOTFOUND, "%s/index.json: no manifest with %s '%s' or '%s'", dir, REF_NAME, shown,
                      name->tag);
    }
}

/* ------------------------------------------------------------------ the directory as a source */

typedef struct dir_source {
    reg_source base;   /* first: a reg_source * is a dir_source * */
    const char *dir;
    char *path;        /* the manifest's file, named in parse messages */
} dir_source;

/* The manifest the index names, its bytes checked against the descriptor's digest and size. */
static int dir_manifest_get(reg_source *src, const model_name *name, char **bytes_out, size_t *len_out,
                            const char **what_out)
{
    dir_source *d = (dir_source *)src;
    ms_digest want, got;
    json_t *index = NULL;
    uint64_t want_size = 0;
    int rc;

    *bytes_out = NULL;
    if ((rc = index_load(&index, d->dir, 1)) < 0 || (rc = index_find(want, &want_size, index, name, d->dir)) < 0)
        goto done;
    if (!(d->path = layout_blob_path(d->dir, want))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    *what_out = d->path;
    if ((rc = ms_file_read(bytes_out, len_out, d->path, MANIFEST_MAX_BYTES)) < 0)
        goto done;
    blob_digest_buf(got, *bytes_out, *len_out);
    if (strcmp(got, want) != 0 || *len_out != want_size)
        rc = ms_err(MS_EMISMATCH, "manifest %s: digest mismatch: %s hashes to %s (%zu bytes, index says %" PRIu64 ")",
                    want, d->path, got, *len_out, want_size);
done:
    json_decref(index);
    return rc;
}

static int dir_blobs_fetch(reg_source *src, store_txn *t, const manifest *m, const unsigned char *ok,
                           const registry_opts *o, const char *label)
{
    dir_source *d = (dir_source *)src;
    int rc = 0;

    (void)o;
    (void)label;
    for (size_t i = 0; i <= m->n_layers && rc == 0; i++) {
        const manifest_layer *l = i == 0 ? &m->config : &m->layers[i - 1];
        if (!ok[i])
            rc = blob_import(t, d->dir, l->digest, l->size);
    }
    return rc;
}

static const reg_source_ops dir_ops = { dir_manifest_get, dir_blobs_fetch };

int registry_layout_pull(store *s, const char *dir, const model_name *name, const registry_opts *o,
                         ms_digest digest_out)
{
    dir_source d = { .base = { .ops = &dir_ops, .where = dir }, .dir = dir };
    int rc = reg_pull(s, &d.base, name, o, digest_out);

    free(d.path);
    return rc;
}
