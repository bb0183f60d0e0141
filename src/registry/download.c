/* download.c: fetch the missing blobs of a manifest, each into ONE partial blob (blob.h:
 * <home>/tmp/pull/<hex>.partial, its sidecar and locks), in ranged parts on several threads,
 * hashing the bytes as they arrive, then adopt the file into blobs/ through the pull's
 * transaction (a rename, not a copy). This file is the network side only. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "registry/registry_int.h"

/* Bytes hashed per read when the hash catches up on parts that other threads wrote. */
#define HASH_READ ((size_t)1 << 20)
/* A part's progress is written to the sidecar at least this often: a killed pull refetches at
 * most this much (plus one write) of each part. One 8-byte pwrite per 256 KB costs nothing. */
#define RANGES_EVERY ((uint64_t)256 << 10)

typedef struct dl_part {
    uint64_t off, len;
    uint64_t done;    /* atomic: bytes on disk from `off` on, contiguous */
    uint64_t saved;   /* what the sidecar says; touched by the part's thread only */
} dl_part;

typedef struct dl_blob {
    const char *digest;
    uint64_t size, part_bytes;
    dl_part *parts;
    int n_parts;
    int next_part, active;   /* under the job's mutex: first part not taken; threads on it */
    int parts_left;          /* atomic: the thread that finishes the last part adopts the blob */
    pthread_mutex_t mu;      /* opening the files */
    int opened, skip;        /* files open and locked; or stored by another pull meanwhile */
    blob_partial *file;      /* the download and its sidecar (blob.h), held from blob_begin */
    pthread_mutex_t hash_mu; /* the hash, `hashed` and `hbuf` */
    blob_hash *hash;
    uint64_t hashed;         /* the first `hashed` bytes went through `hash`, in order */
    uint8_t *hbuf;
} dl_blob;

typedef struct dl_job {
    reg_client *c;
    store_txn *t;          /* finished blobs are adopted through it */
    const char *home;
    dl_blob *blobs;
    size_t n_blobs;
    pthread_mutex_t mu;
    int failed, err_code;
    char err_msg[2048];
    uint64_t done_bytes;   /* atomic, for the progress display */
    int running;           /* atomic */
} dl_job;

static int job_failed(dl_job *j) { return __atomic_load_n(&j->failed, __ATOMIC_RELAXED); }

/* Keep the first error: the others are usually its consequences. */
static void job_fail(dl_job *j, int code)
{
    pthread_mutex_lock(&j->mu);
    if (!j->failed) {
        j->failed = 1;
        j->err_code = code;
        snprintf(j->err_msg, sizeof j->err_msg, "%s", ms_err_msg());
    }
    pthread_mutex_unlock(&j->mu);
}

/* First thread on a blob: lock its files and find what is already on disk. */
static int blob_begin(dl_job *j, dl_blob *b)
{
    uint64_t *done = NULL;
    int rc = 0;

    pthread_mutex_lock(&b->mu);
    if (b->opened || b->skip)
        goto done;
    if (!(done = calloc((size_t)b->n_parts, sizeof *done))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = blob_partial_open(&b->file, j->home, b->digest, b->size, b->part_bytes, (size_t)b->n_parts, done)) < 0)
        goto done;
    if (!b->file) {
        b->skip = 1;   /* another pull into this store finished the blob meanwhile */
        goto done;
    }
    for (int k = 0; k < b->n_parts; k++)
        b->parts[k].done = b->parts[k].saved = done[k];
    if (!(b->hash = blob_hash_new()) || !(b->hbuf = malloc(HASH_READ))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < b->n_parts; k++)
        __atomic_add_fetch(&j->done_bytes, b->parts[k].done, __ATOMIC_RELAXED);
    b->opened = 1;
done:
    pthread_mutex_unlock(&b->mu);
    free(done);
    return rc;
}

/* Release a blob's files, kept for a rerun: closing them drops the locks. */
static void blob_end(dl_blob *b)
{
    blob_partial_close(b->file);
    b->file = NULL;
    blob_hash_free(b->hash);
    b->hash = NULL;
    free(b->hbuf);
    b->hbuf = NULL;
}

/* ------------------------------------------------------------------ hashing */

/* Move the hash forward over every byte on disk that follows the bytes already hashed.
 * `mem` holds [mem_off, mem_off + mem_len) just written by the caller: the part at the hash's
 * front is hashed from memory as it arrives; bytes that other threads wrote ahead of the front
 * are read back (from the page cache) when the front reaches them. With `wait` 0 the call does
 * nothing if another thread is hashing this blob: that thread will see our bytes. */
static int hash_advance(dl_blob *b, const uint8_t *mem, uint64_t mem_off, size_t mem_len, int wait)
{
    int rc = 0;

    if (wait)
        pthread_mutex_lock(&b->hash_mu);
    else if (pthread_mutex_trylock(&b->hash_mu) != 0)
        return 0;
    while (b->hashed < b->size) {
        dl_part *p = &b->parts[b->hashed / b->part_bytes];
        uint64_t end = p->off + __atomic_load_n(&p->done, __ATOMIC_ACQUIRE), n;

        if (end <= b->hashed)
            break;   /* the next byte is not on disk yet */
        if (mem && b->hashed >= mem_off && b->hashed < mem_off + mem_len) {
            n = (end < mem_off + mem_len ? end : mem_off + mem_len) - b->hashed;
            blob_hash_update(b->hash, mem + (b->hashed - mem_off), (size_t)n);
        } else {
            int64_t got;

            n = end - b->hashed;
            if (mem && b->hashed < mem_off && n > mem_off - b->hashed)
                n = mem_off - b->hashed;
            if (n > HASH_READ)
                n = HASH_READ;
            got = blob_partial_read(b->file, b->hashed, b->hbuf, (size_t)n);
            if (got <= 0) {
                rc = got < 0 ? (int)got
                             : ms_err(MS_EIO, "%s: ends at %" PRIu64 ", before bytes written",
                                      blob_partial_path(b->file), b->hashed);
                break;
            }
            n = (uint64_t)got;
            blob_hash_update(b->hash, b->hbuf, (size_t)n);
        }
        b->hashed += n;
    }
    pthread_mutex_unlock(&b->hash_mu);
    return rc;
}

/* ------------------------------------------------------------------ one part */

typedef struct part_sink {
    dl_job *job;
    dl_blob *b;
    int k;
    reg_resp *r;
    uint64_t skip;   /* bytes of a 200 answer before the ones we want */
    int started;
} part_sink;

static int part_write(void *ctx, const void *buf, size_t n)
{
    part_sink *ps = ctx;
    dl_blob *b = ps->b;
    dl_part *p = &b->parts[ps->k];
    const uint8_t *src = buf;
    int rc;

    if (!ps->started) {
        /* 200 instead of 206: the server ignored Range and sends the whole blob from byte 0. */
        ps->started = 1;
        ps->skip = ps->r->status == 200 ? p->off + p->done : 0;
    }
    if (ps->skip) {
        size_t k = n < ps->skip ? n : (size_t)ps->skip;
        src += k;
        n -= k;
        ps->skip -= k;
    }
    if (n > p->len - p->done)
        n = (size_t)(p->len - p->done);
    if (n > 0) {
        uint64_t at = p->off + p->done;

        if ((rc = blob_partial_write(b->file, at, src, n)) < 0)
            return rc;
        /* Release: a thread that sees `done` and reads the file finds these bytes there. */
        __atomic_store_n(&p->done, p->done + (uint64_t)n, __ATOMIC_RELEASE);
        __atomic_add_fetch(&ps->job->done_bytes, (uint64_t)n, __ATOMIC_RELAXED);
        if (p->done - p->saved >= RANGES_EVERY || p->done == p->len) {
            if ((rc = blob_partial_save(b->file, (size_t)ps->k, p->done)) < 0)
                return rc;
            p->saved = p->done;
        }
        if ((rc = hash_advance(b, src, at, n, 0)) < 0)
            return rc;
    }
    if (p->done == p->len)
        return 1;
    return job_failed(ps->job) ? MS_EINTR : 0;
}

/* Bring part k of `b` to its full length, resuming from the bytes it already has. */
static int part_fetch(dl_job *j, CURL *h, dl_blob *b, int k)
{
    dl_part *p = &b->parts[k];
    char url[400], range[96];
    const char *hdrs[] = { range, NULL };
    reg_resp r = { 0 };
    part_sink ps = { 0 };
    int rc = 0, attempt = 0, transient;

    ps.job = j;
    ps.b = b;
    ps.k = k;
    ps.r = &r;
    r.sink = part_write;
    r.sink_ctx = &ps;
    snprintf(url, sizeof url, "/v2/%s/blobs/%s", j->c->repo, b->digest);
    while (p->done < p->len) {
        uint64_t before = p->done;

        if (job_failed(j)) {
            rc = MS_EINTR;
            goto done;
        }
        snprintf(range, sizeof range, "Range: bytes=%" PRIu64 "-%" PRIu64, p->off + p->done, p->off + p->len - 1);
        ps.started = 0;
        rc = reg_request(j->c, h, "GET", url, hdrs, NULL, &r, &transient);
        if (rc == 0 && (r.status == 200 || r.status == 206) && p->done == p->len)
            break;
        if (rc == 0 && r.status == 416) {
            rc = ms_err(MS_EMISMATCH, "blob %s: the registry has fewer bytes than the manifest's size %" PRIu64,
                        b->digest, b->size);
            goto done;
        }
        if (rc == 0 && r.status >= 400 && r.status < 500 && r.status != 429) {
            rc = reg_http_err(r.status == 404 ? MS_ENOTFOUND : MS_EIO, "blob", &r);
            ms_err_ctx("%s %s", url, b->digest);
            goto done;
        }
        if (rc < 0 && !transient)
            goto done;   /* disk error, stop requested, or a failure that retrying cannot fix */
        /* Transport error, 5xx, a body that ended early or fell below the throughput floor:
         * retry from where the bytes stop. Real progress (a MiB, or the part's end) resets the
         * count, so a slow but moving download goes on; a byte now and then does not, or a
         * registry that trickles would keep the pull busy for weeks. */
        if (p->done - before >= REG_PROGRESS_BYTES)
            attempt = 0;
        if (++attempt >= REG_MAX_ATTEMPTS) {
            if (rc == 0)
                rc = reg_http_err(MS_EIO, "blob", &r);
            ms_err_ctx("%s: giving up after %d attempts", b->digest, attempt);
            goto done;
        }
        reg_backoff(attempt);
    }
    rc = 0;
    /* Start writing the finished part to disk now, so the fsync before the adopt finds little
     * left to do. A hint only: its failure changes nothing. */
    blob_partial_hint(b->file, p->off, p->len);
done:
    reg_resp_reset(&r);
    return rc;
}

/* Every part is on disk: finish the hash and adopt the file under the manifest's digest. The
 * adopt trusts our hash: every byte of the file went through it, written by us (this pull holds
 * the file's lock) or read back from the file. */
static int blob_finish(dl_job *j, dl_blob *b)
{
    ms_digest digest, got;
    uint64_t size = 0;
    int rc;

    if ((rc = hash_advance(b, NULL, 0, 0, 1)) < 0 || (rc = blob_partial_size(b->file, &size)) < 0)
        goto done;
    if (b->hashed != b->size || size != b->size) {
        rc = ms_err(MS_EMISMATCH, "blob %s: %s has %" PRIu64 " bytes (%" PRIu64 " hashed), the manifest says %" PRIu64,
                    b->digest, blob_partial_path(b->file), size, b->hashed, b->size);
        goto done;
    }
    blob_hash_final(got, b->hash);
    b->hash = NULL;
    rc = store_txn_blob_adopt(j->t, digest, blob_partial_path(b->file), b->digest, got);
done:
    /* After a mismatch the bytes are gone (a rerun must not resume from them); after an adopt
     * the progress is stale. I/O errors keep both files for a rerun. */
    if (rc == 0)
        blob_partial_done(b->file);
    else if (rc == MS_EMISMATCH)
        blob_partial_abandon(b->file);
    if (rc == 0 || rc == MS_EMISMATCH)
        b->file = NULL;
    if (rc == MS_EMISMATCH)
        ms_err_ctx("blob %s", b->digest);
    blob_end(b);
    return rc;
}

/* ------------------------------------------------------------------ threads */

/* Next part for a thread that just worked on `prev`: the next part of the same blob keeps its
 * hash streaming from memory; else a blob nobody works on (its own stream); else help the blob
 * with the most parts left. */
static dl_blob *part_pick(dl_job *j, dl_blob *prev, int *k_out)
{
    dl_blob *best = NULL;

    pthread_mutex_lock(&j->mu);
    if (prev)
        prev->active--;
    if (prev && prev->next_part < prev->n_parts)
        best = prev;
    for (size_t i = 0; !best && i < j->n_blobs; i++)
        if (j->blobs[i].active == 0 && j->blobs[i].next_part < j->blobs[i].n_parts)
            best = &j->blobs[i];
    for (size_t i = 0; !best && i < j->n_blobs; i++)
        if (j->blobs[i].next_part < j->blobs[i].n_parts)
            best = &j->blobs[i];
    for (size_t i = 0; best && best->active > 0 && i < j->n_blobs; i++) {
        dl_blob *b = &j->blobs[i];
        if (b->n_parts - b->next_part > best->n_parts - best->next_part)
            best = b;
    }
    if (best) {
        *k_out = best->next_part++;
        best->active++;
    }
    pthread_mutex_unlock(&j->mu);
    return best;
}

static void *worker(void *arg)
{
    dl_job *j = arg;
    CURL *h = reg_easy_new();
    dl_blob *b = NULL;
    int k;

    if (!h)
        job_fail(j, ms_err(MS_ENOMEM, "curl: out of memory"));
    while (h && !job_failed(j) && (b = part_pick(j, b, &k)) != NULL) {
        int rc = blob_begin(j, b);

        if (rc == 0 && !b->skip)
            rc = part_fetch(j, h, b, k);
        if (rc == 0 && __atomic_sub_fetch(&b->parts_left, 1, __ATOMIC_ACQ_REL) == 0 && !b->skip)
            rc = blob_finish(j, b);
        if (rc < 0 && rc != MS_EINTR)
            job_fail(j, rc);
    }
    if (h)
        curl_easy_cleanup(h);
    __atomic_sub_fetch(&j->running, 1, __ATOMIC_RELEASE);
    return NULL;
}

int reg_manifest_intact(unsigned char **ok_out, store *s, const manifest *m,
                        int (*skip)(const manifest_layer *l))
{
    size_t n = m->n_layers + 1;
    const char **digests = calloc(n, sizeof *digests);
    uint64_t *sizes = calloc(n, sizeof *sizes);
    unsigned char *ok = calloc(n, 1);
    int rc = 0;

    *ok_out = NULL;
    if (!digests || !sizes || !ok) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const manifest_layer *l = i == 0 ? &m->config : &m->layers[i - 1];
        int again = i > 0 && skip && skip(l);

        for (size_t k = 0; k < i && !again; k++)
            again = digests[k] && !strcmp(digests[k], l->digest);
        digests[i] = again ? NULL : l->digest;
        sizes[i] = l->size;
    }
    store_blobs_intact(s, digests, sizes, n, ok, 0);
    for (size_t i = 0; i < n; i++)
        if (!digests[i])
            ok[i] = REG_INTACT_SKIPPED;
    *ok_out = ok;
    ok = NULL;
done:
    MS_FREE_ALL(digests, sizes, ok);
    return rc;
}

/* The blobs of `m` whose ok[] entry is 0, with their parts. */
static int blobs_plan(dl_job *j, const manifest *m, const unsigned char *ok)
{
    int rc = 0;

    if (!(j->blobs = calloc(m->n_layers + 1, sizeof *j->blobs)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i <= m->n_layers; i++) {
        const manifest_layer *l = i == 0 ? &m->config : &m->layers[i - 1];
        dl_blob *b = &j->blobs[j->n_blobs];

        if (ok[i]) /* intact, or a digest met before */
            continue;
        if (l->size > REG_BLOB_MAX) { /* keeps the part count and every offset far from overflow */
            rc = ms_err(MS_EINVALID, "blob %s: size %" PRIu64 " is over the bound %" PRIu64, l->digest, l->size,
                        (uint64_t)REG_BLOB_MAX);
            goto done;
        }
        b->digest = l->digest;
        b->size = l->size;
        /* The size is the manifest's claim, not bytes that arrived: the bookkeeping it buys
         * (parts here, 8 bytes each in the sidecar) is capped at REG_MAX_PARTS per blob by
         * growing the part instead, so a 2 KB manifest declaring 2^48-byte layers costs
         * kilobytes, not gigabytes. Blobs up to REG_MAX_PARTS * 64 MiB keep 64 MiB parts. */
        b->part_bytes = REG_PART_BYTES;
        if (l->size / REG_PART_BYTES >= REG_MAX_PARTS)
            b->part_bytes = (l->size / REG_MAX_PARTS / REG_PART_BYTES + 1) * REG_PART_BYTES;
        b->n_parts = l->size ? (int)((l->size + b->part_bytes - 1) / b->part_bytes) : 1;
        b->parts_left = b->n_parts;
        pthread_mutex_init(&b->mu, NULL);
        pthread_mutex_init(&b->hash_mu, NULL);
        j->n_blobs++;
        if (!(b->parts = calloc((size_t)b->n_parts, sizeof *b->parts))) {
            rc = ms_err(MS_ENOMEM, "out of memory");
            goto done;
        }
        for (int k = 0; k < b->n_parts; k++) {
            b->parts[k].off = (uint64_t)k * b->part_bytes;
            b->parts[k].len = l->size - b->parts[k].off < b->part_bytes ? l->size - b->parts[k].off : b->part_bytes;
        }
    }
done:
    return rc;
}

static void blobs_free(dl_job *j)
{
    for (size_t i = 0; i < j->n_blobs; i++) {
        dl_blob *b = &j->blobs[i];

        blob_end(b);   /* a failed pull: files stay for a rerun, their locks go */
        pthread_mutex_destroy(&b->mu);
        pthread_mutex_destroy(&b->hash_mu);
        free(b->parts);
    }
    free(j->blobs);
}

int reg_blobs_fetch(reg_client *c, store_txn *t, const manifest *m, const unsigned char *ok, const registry_opts *o,
                    const char *label)
{
    const char *home = store_home(store_txn_store(t));
    pthread_t threads[64];
    size_t n_threads = 0, n_parts = 0;
    uint64_t total = 0;
    ms_progress *prog = NULL;
    char *dir = NULL;
    dl_job j;
    int rc;

    memset(&j, 0, sizeof j);
    j.c = c;
    j.t = t;
    j.home = home;
    pthread_mutex_init(&j.mu, NULL);
    if ((rc = blobs_plan(&j, m, ok)) < 0 || j.n_blobs == 0)
        goto done;
    if (!(dir = ms_strdup_printf("%s/tmp/pull", home))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = ms_mkdir_p(dir, 0755)) < 0)
        goto done;
    for (size_t i = 0; i < j.n_blobs; i++) {
        n_parts += (size_t)j.blobs[i].n_parts;
        total += j.blobs[i].size;
    }
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
        if (o->progress)
            o->progress(o->progress_ctx, __atomic_load_n(&j.done_bytes, __ATOMIC_RELAXED), total);
    }
    for (size_t t = 0; t < n_threads; t++)
        pthread_join(threads[t], NULL);
    if (j.failed) {
        rc = ms_err(j.err_code, "%s", j.err_msg);
    } else {
        if (o->progress)
            o->progress(o->progress_ctx, total, total);
        rmdir(dir);
    }   /* only when empty: another pull's downloads keep it */
done:
    ms_progress_free(prog);
    blobs_free(&j);
    pthread_mutex_destroy(&j.mu);
    free(dir);
    return rc;
}
