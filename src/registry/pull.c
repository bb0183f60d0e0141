/* pull.c: fetch a manifest and its missing blobs from a registry, in resumable ranged parts on
 * several threads, and commit the model once every blob is verified and stored. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "registry/registry_int.h"

/* A part is the unit of parallelism and of resume. 64 MB keeps a 1 GB blob busy on 4 threads
 * while the per-request overhead stays negligible. */
#define PART_BYTES ((uint64_t)64 << 20)
#define COPY_CHUNK (4u << 20)

typedef struct pull_blob {
    const char *digest;
    uint64_t size;
    int parts_left;   /* atomic: the thread that finishes the last part assembles the blob */
    int n_parts;
} pull_blob;

typedef struct pull_part {
    pull_blob *blob;
    uint64_t off, len;
} pull_part;

typedef struct pull_job {
    reg_client *c;
    const char *home;
    pull_part *parts;
    size_t n_parts, next;
    pthread_mutex_t mu;
    int failed, err_code;
    char err_msg[2048];
    uint64_t done_bytes;   /* atomic, for the progress display */
    int running;           /* atomic */
} pull_job;

static char *part_path(const char *home, const char *digest, uint64_t off)
{
    return ms_strdup_printf("%s/tmp/pull/%s-%" PRIu64 ".partial", home, digest + 7, off);
}

static int job_failed(pull_job *j) { return __atomic_load_n(&j->failed, __ATOMIC_RELAXED); }

/* Keep the first error: the others are usually its consequences. */
static void job_fail(pull_job *j, int code)
{
    pthread_mutex_lock(&j->mu);
    if (!j->failed) {
        j->failed = 1;
        j->err_code = code;
        snprintf(j->err_msg, sizeof j->err_msg, "%s", ms_err_msg());
    }
    pthread_mutex_unlock(&j->mu);
}

typedef struct part_sink {
    pull_job *job;
    reg_resp *r;
    const char *path;
    int fd;
    uint64_t off, have, len, skip;   /* the part's offset in the blob, bytes on disk, part length */
    int started;
} part_sink;

static int part_write(void *ctx, const void *buf, size_t n)
{
    part_sink *ps = ctx;
    const char *p = buf;

    if (!ps->started) {
        /* 200 instead of 206: the server ignored Range and sends the whole blob from byte 0. */
        ps->started = 1;
        ps->skip = ps->r->status == 200 ? ps->off + ps->have : 0;
    }
    if (ps->skip) {
        size_t k = n < ps->skip ? n : (size_t)ps->skip;
        p += k;
        n -= k;
        ps->skip -= k;
    }
    if (n > ps->len - ps->have)
        n = (size_t)(ps->len - ps->have);
    while (n > 0) {
        ssize_t w = pwrite(ps->fd, p, n, (off_t)ps->have);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return ms_err_os("%s: write", ps->path);
        p += w;
        n -= (size_t)w;
        ps->have += (uint64_t)w;
        __atomic_add_fetch(&ps->job->done_bytes, (uint64_t)w, __ATOMIC_RELAXED);
    }
    if (ps->have == ps->len)
        return 1;
    return job_failed(ps->job) ? MS_EINTR : 0;
}

/* Bring the part file up to its full length, resuming from the bytes it already has. */
static int part_fetch(pull_job *j, CURL *h, pull_part *pt)
{
    const char *digest = pt->blob->digest;
    char url[400], range[96], *path = part_path(j->home, digest, pt->off);
    const char *hdrs[] = { range, NULL };
    reg_resp r = { 0 };
    part_sink ps = { 0 };
    struct stat st;
    int rc = 0, attempt = 0, transient;

    ps.fd = -1;
    if (!path)
        return ms_err(MS_ENOMEM, "out of memory");
    if (blob_exists(j->home, digest, NULL))
        goto done;   /* another pull into this store finished the blob meanwhile */
    for (int tries = 0; (ps.fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) < 0 && errno == ENOENT && tries < 3;
         tries++) {
        /* Another pull that just finished removes tmp/pull/ when it looks empty: make it again. */
        char *dir = ms_strdup_printf("%s/tmp/pull", j->home);
        if (dir)
            ms_mkdir_p(dir, 0755);
        free(dir);
    }
    if (ps.fd < 0 || fstat(ps.fd, &st) < 0) {
        rc = ms_err_os("%s: open", path);
        goto done;
    }
    ps.have = (uint64_t)st.st_size;
    if (ps.have > pt->len) {   /* not ours to trust: start the part over */
        if (ftruncate(ps.fd, 0) < 0) {
            rc = ms_err_os("%s: truncate", path);
            goto done;
        }
        ps.have = 0;
    }
    __atomic_add_fetch(&j->done_bytes, ps.have, __ATOMIC_RELAXED);
    ps.job = j;
    ps.r = &r;
    ps.path = path;
    ps.len = pt->len;
    ps.off = pt->off;
    r.sink = part_write;
    r.sink_ctx = &ps;
    snprintf(url, sizeof url, "/v2/%s/blobs/%s", j->c->repo, digest);
    while (ps.have < pt->len) {
        uint64_t before = ps.have;

        if (job_failed(j)) {
            rc = MS_EINTR;
            goto done;
        }
        snprintf(range, sizeof range, "Range: bytes=%" PRIu64 "-%" PRIu64, pt->off + ps.have, pt->off + pt->len - 1);
        ps.started = 0;
        rc = reg_request(j->c, h, "GET", url, hdrs, NULL, &r, &transient);
        if (rc == 0 && (r.status == 200 || r.status == 206) && ps.have == pt->len)
            break;
        if (rc == 0 && r.status == 416) {
            rc = ms_err(MS_EMISMATCH, "blob %s: the registry has fewer bytes than the manifest's size %" PRIu64,
                        digest, pt->blob->size);
            goto done;
        }
        if (rc == 0 && r.status >= 400 && r.status < 500 && r.status != 429) {
            rc = reg_http_err(r.status == 404 ? MS_ENOTFOUND : MS_EIO, "blob", &r);
            ms_err_ctx("%s %s", url, digest);
            goto done;
        }
        if (rc < 0 && !transient)
            goto done;   /* disk error, stop requested, or a failure that retrying cannot fix */
        /* Transport error, 5xx, or a body that ended early: retry from where the bytes stop.
         * Progress resets the count, so a slow but moving download is never given up. */
        if (ps.have > before)
            attempt = 0;
        if (++attempt >= REG_MAX_ATTEMPTS) {
            if (rc == 0)
                rc = reg_http_err(MS_EIO, "blob", &r);
            ms_err_ctx("%s: giving up after %d attempts", digest, attempt);
            goto done;
        }
        reg_backoff(attempt);
    }
    rc = 0;
done:
    if (ps.fd >= 0)
        close(ps.fd);
    reg_resp_reset(&r);
    free(path);
    return rc;
}

/* Stream the parts, in order, through a blob writer that checks the manifest's digest: the
 * writer is what puts the blob under its final name, and only when the bytes match. */
static int blob_assemble(pull_job *j, pull_blob *b)
{
    char digest[BLOB_DIGEST_LEN + 1], *path = NULL;
    uint8_t *buf = malloc(COPY_CHUNK);
    blob_writer *w = NULL;
    int fd = -1, rc = 0;

    if (!buf)
        return ms_err(MS_ENOMEM, "out of memory");
    if (blob_exists(j->home, b->digest, NULL))
        goto drop_parts;   /* another pull stored it while we fetched: ours are redundant */
    if ((rc = blob_writer_open(&w, j->home)) < 0)
        goto done;
    for (uint64_t off = 0; off < b->size || (off == 0 && b->size == 0); off += PART_BYTES) {
        free(path);
        if (!(path = part_path(j->home, b->digest, off))) {
            rc = ms_err(MS_ENOMEM, "out of memory");
            goto done;
        }
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            /* Another pull of the same blob finished first and removed the parts. */
            if (errno == ENOENT && blob_exists(j->home, b->digest, NULL))
                goto done;
            rc = ms_err_os("%s: open", path);
            goto done;
        }
        for (;;) {
            ssize_t n = read(fd, buf, COPY_CHUNK);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                rc = ms_err_os("%s: read", path);
                goto done;
            }
            if (n == 0)
                break;
            if ((rc = blob_writer_write(w, buf, (size_t)n)) < 0)
                goto done;
        }
        close(fd);
        fd = -1;
        if (b->size == 0)
            break;
    }
    if (blob_writer_size(w) != b->size) {
        rc = ms_err(MS_EMISMATCH, "blob %s: got %" PRIu64 " bytes, the manifest says %" PRIu64, b->digest,
                    blob_writer_size(w), b->size);
        goto bad;
    }
    rc = blob_writer_commit(digest, w, b->digest);
    w = NULL;
    if (rc == MS_EMISMATCH)
        goto bad;
    if (rc < 0)
        goto done;
    goto drop_parts;
bad:
    ms_err_ctx("blob %s", b->digest);
drop_parts:
    /* After a mismatch the parts are worthless (a rerun must not resume from them); after a
     * commit they are redundant. Either way they go. */
    for (uint64_t off = 0; off < b->size || off == 0; off += PART_BYTES) {
        char *p = part_path(j->home, b->digest, off);
        if (p)
            unlink(p);
        free(p);
        if (b->size == 0)
            break;
    }
done:
    if (fd >= 0)
        close(fd);
    blob_writer_abort(w);
    free(path);
    free(buf);
    return rc;
}

static void *worker(void *arg)
{
    pull_job *j = arg;
    CURL *h = reg_easy_new();

    if (!h)
        job_fail(j, ms_err(MS_ENOMEM, "curl: out of memory"));
    while (h && !job_failed(j)) {
        pull_part *pt;
        int rc;

        pthread_mutex_lock(&j->mu);
        pt = j->next < j->n_parts ? &j->parts[j->next++] : NULL;
        pthread_mutex_unlock(&j->mu);
        if (!pt)
            break;
        rc = part_fetch(j, h, pt);
        if (rc == 0 && __atomic_sub_fetch(&pt->blob->parts_left, 1, __ATOMIC_ACQ_REL) == 0)
            rc = blob_assemble(j, pt->blob);
        if (rc < 0 && rc != MS_EINTR)
            job_fail(j, rc);
    }
    if (h)
        curl_easy_cleanup(h);
    __atomic_sub_fetch(&j->running, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Fetch the missing blobs of `m`. */
static int blobs_fetch(reg_client *c, const char *home, const manifest *m, const registry_opts *o,
                       const char *label)
{
    pull_blob *blobs = calloc(m->n_layers + 1, sizeof *blobs);
    pull_part *parts = NULL;
    pthread_t threads[64];
    size_t n_blobs = 0, n_parts = 0, n_threads;
    uint64_t total = 0;
    ms_progress *prog = NULL;
    char *dir = NULL;
    pull_job j;
    int rc = 0;

    memset(&j, 0, sizeof j);
    if (!blobs)
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i <= m->n_layers; i++) {
        const manifest_layer *l = i == 0 ? &m->config : &m->layers[i - 1];
        int dup = 0;

        for (size_t k = 0; k < n_blobs && !dup; k++)
            dup = !strcmp(blobs[k].digest, l->digest);
        if (dup || blob_exists(home, l->digest, NULL))
            continue;   /* stored bytes are never fetched again */
        blobs[n_blobs].digest = l->digest;
        blobs[n_blobs].size = l->size;
        blobs[n_blobs].n_parts = l->size ? (int)((l->size + PART_BYTES - 1) / PART_BYTES) : 1;
        blobs[n_blobs].parts_left = blobs[n_blobs].n_parts;
        n_parts += (size_t)blobs[n_blobs].n_parts;
        total += l->size;
        n_blobs++;
    }
    if (n_blobs == 0)
        goto done;
    if (!(dir = ms_strdup_printf("%s/tmp/pull", home)) || !(parts = calloc(n_parts, sizeof *parts))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = ms_mkdir_p(dir, 0755)) < 0)
        goto done;
    n_parts = 0;
    /* Parts in blob order: a blob's parts run side by side, so it completes (and its parts are
     * dropped) early instead of every blob being half done at once. */
    for (size_t b = 0; b < n_blobs; b++)
        for (int p = 0; p < blobs[b].n_parts; p++) {
            uint64_t off = (uint64_t)p * PART_BYTES;
            parts[n_parts].blob = &blobs[b];
            parts[n_parts].off = off;
            parts[n_parts].len = blobs[b].size - off < PART_BYTES ? blobs[b].size - off : PART_BYTES;
            n_parts++;
        }
    j.c = c;
    j.home = home;
    j.parts = parts;
    j.n_parts = n_parts;
    pthread_mutex_init(&j.mu, NULL);
    n_threads = o->parallel < 1 ? 1 : o->parallel > 64 ? 64 : (size_t)o->parallel;
    if (n_threads > n_parts)
        n_threads = n_parts;
    if (!o->quiet)
        prog = ms_progress_new(label, total, 0);
    for (size_t t = 0; t < n_threads; t++) {
        __atomic_add_fetch(&j.running, 1, __ATOMIC_ACQ_REL);
        if (pthread_create(&threads[t], NULL, worker, &j) != 0) {
            __atomic_sub_fetch(&j.running, 1, __ATOMIC_ACQ_REL);
            job_fail(&j, ms_err(MS_ENOMEM, "cannot start a download thread"));
            n_threads = t;
            break;
        }
    }
    while (__atomic_load_n(&j.running, __ATOMIC_ACQUIRE) > 0) {
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep(&ts, NULL);
        ms_progress_update(prog, __atomic_load_n(&j.done_bytes, __ATOMIC_RELAXED));
    }
    for (size_t t = 0; t < n_threads; t++)
        pthread_join(threads[t], NULL);
    pthread_mutex_destroy(&j.mu);
    if (j.failed)
        rc = ms_err(j.err_code, "%s", j.err_msg);
    else
        rmdir(dir);   /* only when empty: another pull's parts keep it */
done:
    ms_progress_free(prog);
    free(parts);
    free(blobs);
    free(dir);
    return rc;
}

static int manifest_fetch(reg_client *c, CURL *h, const char *tag, char **out, size_t *len_out)
{
    const char *hdrs[] = { REG_ACCEPT_MANIFEST, NULL };
    char url[600], digest[BLOB_DIGEST_LEN + 1];
    reg_resp r = { 0 };
    int rc;

    *out = NULL;
    snprintf(url, sizeof url, "/v2/%s/manifests/%s", c->repo, tag);
    r.body_max = MANIFEST_MAX_BYTES;
    if ((rc = reg_request_retry(c, h, "GET", url, hdrs, NULL, &r)) < 0)
        goto done;
    if (r.status != 200) {
        rc = reg_http_err(r.status == 404 ? MS_ENOTFOUND : MS_EIO, "manifest", &r);
        ms_err_ctx("%s%s", c->base, url);
        goto done;
    }
    blob_digest_buf(digest, r.body ? r.body : "", r.body_len);
    if (r.digest[0] && strcmp(r.digest, digest) != 0) {
        rc = ms_err(MS_EMISMATCH, "manifest %s%s: the registry says %.80s but its bytes hash to %s", c->base, url,
                    r.digest, digest);
        goto done;
    }
    *out = r.body ? r.body : strdup("");
    *len_out = r.body_len;
    r.body = NULL;
    rc = *out ? 0 : ms_err(MS_ENOMEM, "out of memory");
done:
    reg_resp_reset(&r);
    return rc;
}

int registry_pull(store *s, const model_name *name, const registry_opts *o, char digest_out[72])
{
    char host[NAME_HOST_MAX], label[600], *bytes = NULL;
    const char *home = store_home(s);
    reg_client c;
    CURL *h = NULL;
    manifest *m = NULL;
    size_t len = 0;
    int rc, inited = 0, locked = 0;

    digest_out[0] = '\0';
    name_display(label, sizeof label, name);
    if ((rc = registry_host(host, name)) < 0)
        goto done;
    if ((rc = reg_client_init(&c, home, host, name, o, 0)) < 0)
        goto done;
    inited = 1;
    if (!(h = reg_easy_new())) {
        rc = ms_err(MS_ENOMEM, "curl: out of memory");
        goto done;
    }
    if ((rc = manifest_fetch(&c, h, name->tag, &bytes, &len)) < 0)
        goto done;
    if ((rc = manifest_parse(&m, bytes, len, "manifest")) < 0)
        goto done;
    if (strcmp(m->media_type, MT_OCI_MANIFEST) != 0 && strcmp(m->media_type, MT_DOCKER_MANIFEST) != 0) {
        rc = ms_err(MS_EUNSUPPORTED, "manifest media type '%s' is not an image manifest (%s or %s)", m->media_type,
                    MT_OCI_MANIFEST, MT_DOCKER_MANIFEST);
        goto done;
    }
    /* From the first blob to the commit, gc must not remove what this pull is about to name. */
    if ((rc = store_write_begin(s)) < 0)
        goto done;
    locked = 1;
    if ((rc = blobs_fetch(&c, home, m, o, label)) < 0)
        goto done;
    if ((rc = store_model_commit(s, name, bytes, len, digest_out)) < 0)
        goto done;
    reg_seen_record(s, host, c.repo, m->config.digest);
    for (size_t i = 0; i < m->n_layers; i++)
        reg_seen_record(s, host, c.repo, m->layers[i].digest);
done:
    if (locked)
        store_write_end(s);
    if (rc < 0)
        ms_err_ctx("pull %s from %s", label, host[0] ? host : "?");
    if (h)
        curl_easy_cleanup(h);
    if (inited)
        reg_client_fini(&c);
    manifest_free(m);
    free(bytes);
    return rc;
}
