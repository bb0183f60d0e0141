/* download.c: fetch the missing blobs of a manifest, each into ONE file in <home>/tmp/pull/,
 * in ranged parts on several threads, hashing the bytes as they arrive, then adopt the file
 * into blobs/ (a rename, not a copy). See registry_int.h for the files and their rules. */
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
    int fd, rfd;             /* the download (O_RDWR) and its sidecar (-1 for one part) */
    char *path, *rpath;
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

/* ------------------------------------------------------------------ sidecar */

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int reg_ranges_parse(uint64_t *done_out, const uint8_t *buf, size_t len, uint64_t size, uint64_t part_bytes,
                     size_t n_parts)
{
    uint64_t got;

    if (len < REG_RANGES_HEADER || memcmp(buf, REG_RANGES_MAGIC, 8) != 0)
        return ms_err(MS_EINVALID, "no '%.7s' magic in %zu bytes", REG_RANGES_MAGIC, len);
    if ((got = get_le64(buf + 8)) != size)
        return ms_err(MS_EINVALID, "blob size %" PRIu64 ", expected %" PRIu64, got, size);
    if ((got = get_le64(buf + 16)) != part_bytes)
        return ms_err(MS_EINVALID, "part size %" PRIu64 ", expected %" PRIu64, got, part_bytes);
    if ((got = get_le64(buf + 24)) != n_parts)
        return ms_err(MS_EINVALID, "%" PRIu64 " parts, expected %zu", got, n_parts);
    /* n_parts is ours (from the manifest's size), so this cannot overflow; the length must
     * match it exactly, which also bounds every read below. */
    if (len != REG_RANGES_HEADER + 8 * n_parts)
        return ms_err(MS_EINVALID, "%zu bytes, expected %zu for %zu parts", len, REG_RANGES_HEADER + 8 * n_parts,
                      n_parts);
    for (size_t k = 0; k < n_parts; k++) {
        uint64_t off = k * part_bytes, plen = size - off < part_bytes ? size - off : part_bytes;

        if ((done_out[k] = get_le64(buf + REG_RANGES_HEADER + 8 * k)) > plen)
            return ms_err(MS_EINVALID, "part %zu: %" PRIu64 " bytes done, more than its %" PRIu64, k, done_out[k], plen);
    }
    return 0;
}

static int ranges_slot_write(dl_blob *b, int k, uint64_t done)
{
    uint8_t v[8];

    put_le64(v, done);
    if (pwrite(b->rfd, v, 8, (off_t)(REG_RANGES_HEADER + 8 * (size_t)k)) != 8)
        return ms_err_os("%s: write", b->rpath);
    b->parts[k].saved = done;
    return 0;
}

/* The sidecar's progress, each part bounded by the bytes the download really has. Anything
 * unreadable or inconsistent means "nothing done": refetching is always safe, trusting is not. */
static int ranges_load(dl_blob *b, uint64_t file_size)
{
    size_t len = REG_RANGES_HEADER + 8 * (size_t)b->n_parts;
    uint8_t *buf = malloc(len);
    uint64_t *done = calloc((size_t)b->n_parts, sizeof *done);
    struct stat st;
    ssize_t n = -1;
    int rc = 0;

    if (!buf || !done) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if (fstat(b->rfd, &st) == 0 && (uint64_t)st.st_size == len)
        n = pread(b->rfd, buf, len, 0);
    if (n != (ssize_t)len || reg_ranges_parse(done, buf, len, b->size, b->part_bytes, (size_t)b->n_parts) < 0) {
        memset(done, 0, (size_t)b->n_parts * sizeof *done);
        memcpy(buf, REG_RANGES_MAGIC, 8);
        put_le64(buf + 8, b->size);
        put_le64(buf + 16, b->part_bytes);
        put_le64(buf + 24, (uint64_t)b->n_parts);
        memset(buf + REG_RANGES_HEADER, 0, len - REG_RANGES_HEADER);
        if (ftruncate(b->rfd, 0) < 0 || pwrite(b->rfd, buf, len, 0) != (ssize_t)len) {
            rc = ms_err_os("%s: write", b->rpath);
            goto done;
        }
    }
    for (int k = 0; k < b->n_parts; k++) {
        dl_part *p = &b->parts[k];

        /* The sidecar is written after the bytes, but a lost or replaced download file
         * would make it lie: never claim bytes past the file's end. */
        if (p->off + done[k] > file_size)
            done[k] = file_size > p->off ? file_size - p->off : 0;
        p->done = p->saved = done[k];
    }
done:
    free(buf);
    free(done);
    return rc;
}

/* ------------------------------------------------------------------ files */

/* Open `path` (created if missing) and hold an exclusive flock on it. Another pull of the same
 * blob holds it while it downloads: wait for it. When we get the lock, the name may meanwhile
 * have been adopted into blobs/, removed after a mismatch, or removed by gc: then the inode we
 * locked is no longer the one at `path`, and we start again. */
static int open_locked(int *fd_out, const char *home, const char *path)
{
    struct stat a, b;
    int fd = -1;

    *fd_out = -1;
    for (int tries = 0;; tries++) {
        if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
            char *dir;
            /* Another pull that finished removes tmp/pull/ when it looks empty: make it again. */
            if (errno != ENOENT || tries >= 3)
                return ms_err_os("%s: open", path);
            if (!(dir = ms_strdup_printf("%s/tmp/pull", home)))
                return ms_err(MS_ENOMEM, "out of memory");
            ms_mkdir_p(dir, 0755);
            free(dir);
            continue;
        }
        while (flock(fd, LOCK_EX) < 0)
            if (errno != EINTR) {
                close(fd);
                return ms_err_os("%s: lock", path);
            }
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            *fd_out = fd;
            return 0;
        }
        close(fd);
        if (tries >= 1000)
            return ms_err(MS_EIO, "%s: replaced by another process again and again", path);
    }
}

/* First thread on a blob: lock its files and find what is already on disk. */
static int blob_begin(dl_job *j, dl_blob *b)
{
    struct stat st;
    int rc = 0;

    pthread_mutex_lock(&b->mu);
    if (b->opened || b->skip)
        goto done;
    if (blob_intact(j->home, b->digest, b->size)) {
        b->skip = 1;   /* another pull into this store finished the blob meanwhile */
        goto done;
    }
    if ((rc = open_locked(&b->fd, j->home, b->path)) < 0)
        goto done;
    if (blob_intact(j->home, b->digest, b->size)) {
        /* Stored while we waited for the lock: what is left here (or what open just created)
         * is redundant, and only lock holders touch these names. */
        unlink(b->path);
        if (b->rpath)
            unlink(b->rpath);
        close(b->fd);
        b->fd = -1;
        b->skip = 1;
        goto done;
    }
    if (fstat(b->fd, &st) < 0) {
        rc = ms_err_os("%s: stat", b->path);
        goto done;
    }
    if (b->n_parts == 1) {
        /* One part is written in order from byte 0, so the file's length is its progress. */
        if ((uint64_t)st.st_size > b->size && ftruncate(b->fd, 0) < 0) {
            rc = ms_err_os("%s: truncate", b->path);
            goto done;
        }
        b->parts[0].done = (uint64_t)st.st_size > b->size ? 0 : (uint64_t)st.st_size;
    } else if ((rc = open_locked(&b->rfd, j->home, b->rpath)) < 0 || (rc = ranges_load(b, (uint64_t)st.st_size)) < 0) {
        goto done;
    }
    if (!(b->hash = blob_hash_new()) || !(b->hbuf = malloc(HASH_READ))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < b->n_parts; k++)
        __atomic_add_fetch(&j->done_bytes, b->parts[k].done, __ATOMIC_RELAXED);
    b->opened = 1;
done:
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* Release a blob's files: closing them drops the locks. */
static void blob_end(dl_blob *b)
{
    if (b->rfd >= 0)
        close(b->rfd);
    if (b->fd >= 0)
        close(b->fd);
    b->fd = b->rfd = -1;
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
            ssize_t got;

            n = end - b->hashed;
            if (mem && b->hashed < mem_off && n > mem_off - b->hashed)
                n = mem_off - b->hashed;
            if (n > HASH_READ)
                n = HASH_READ;
            got = pread(b->fd, b->hbuf, (size_t)n, (off_t)b->hashed);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                rc = got < 0 ? ms_err_os("%s: read", b->path)
                             : ms_err(MS_EIO, "%s: ends at %" PRIu64 ", before bytes written", b->path, b->hashed);
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
    while (n > 0) {
        uint64_t at = p->off + p->done;
        ssize_t w = pwrite(b->fd, src, n, (off_t)at);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return ms_err_os("%s: write", b->path);
        /* Release: a thread that sees `done` and reads the file finds these bytes there. */
        __atomic_store_n(&p->done, p->done + (uint64_t)w, __ATOMIC_RELEASE);
        __atomic_add_fetch(&ps->job->done_bytes, (uint64_t)w, __ATOMIC_RELAXED);
        if (b->rfd >= 0 && (p->done - p->saved >= RANGES_EVERY || p->done == p->len) &&
            (rc = ranges_slot_write(b, ps->k, p->done)) < 0)
            return rc;
        if ((rc = hash_advance(b, src, at, (size_t)w, 0)) < 0)
            return rc;
        src += w;
        n -= (size_t)w;
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
#ifdef SYNC_FILE_RANGE_WRITE
    /* Start writing the finished part to disk now, so the fsync before the adopt finds little
     * left to do. A hint only: its failure changes nothing. */
    if (p->len)
        sync_file_range(b->fd, (off_t)p->off, (off_t)p->len, SYNC_FILE_RANGE_WRITE);
#endif
done:
    reg_resp_reset(&r);
    return rc;
}

/* Every part is on disk: finish the hash and adopt the file under the manifest's digest. The
 * adopt trusts our hash: every byte of the file went through it, written by us (this pull holds
 * the file's lock) or read back from the file. */
static int blob_finish(dl_job *j, dl_blob *b)
{
    char digest[BLOB_DIGEST_LEN + 1], got[BLOB_DIGEST_LEN + 1];
    struct stat st;
    int rc;

    if ((rc = hash_advance(b, NULL, 0, 0, 1)) < 0)
        goto done;
    if (fstat(b->fd, &st) < 0) {
        rc = ms_err_os("%s: stat", b->path);
        goto done;
    }
    if (b->hashed != b->size || (uint64_t)st.st_size != b->size) {
        rc = ms_err(MS_EMISMATCH, "blob %s: %s has %" PRIu64 " bytes (%" PRIu64 " hashed), the manifest says %" PRIu64,
                    b->digest, b->path, (uint64_t)st.st_size, b->hashed, b->size);
        unlink(b->path);
        goto done;
    }
    blob_hash_final(got, b->hash);
    b->hash = NULL;
    if ((rc = store_txn_blob_adopt(j->t, digest, b->path, b->digest, got)) < 0)
        goto done;
done:
    /* After a mismatch the bytes are gone (a rerun must not resume from them); after an adopt
     * the progress is stale. I/O errors keep both files for a rerun. */
    if (b->rpath && (rc == 0 || rc == MS_EMISMATCH))
        unlink(b->rpath);
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

/* The blobs of `m` not yet stored, once each, with their parts. */
static int blobs_plan(dl_job *j, const manifest *m)
{
    if (!(j->blobs = calloc(m->n_layers + 1, sizeof *j->blobs)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i <= m->n_layers; i++) {
        const manifest_layer *l = i == 0 ? &m->config : &m->layers[i - 1];
        dl_blob *b = &j->blobs[j->n_blobs];
        int dup = 0;

        for (size_t k = 0; k < j->n_blobs && !dup; k++)
            dup = !strcmp(j->blobs[k].digest, l->digest);
        /* Stored bytes are not fetched again, but only intact ones count as stored: pulling a
         * model again is how a user repairs what `verify` found damaged. That re-reads each blob
         * this pull would skip, once, at disk speed: a pull of a model already stored costs a
         * `verify` of it instead of nothing, and still far less than the download it checks
         * against. A size that differs from the manifest's is found by stat alone. */
        if (dup || blob_intact(j->home, l->digest, l->size))
            continue;
        if (l->size > REG_BLOB_MAX)   /* keeps the part count and every offset far from overflow */
            return ms_err(MS_EINVALID, "blob %s: size %" PRIu64 " is over the bound %" PRIu64, l->digest, l->size,
                          (uint64_t)REG_BLOB_MAX);
        b->digest = l->digest;
        b->size = l->size;
        b->fd = b->rfd = -1;
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
        if (!(b->parts = calloc((size_t)b->n_parts, sizeof *b->parts)) ||
            !(b->path = ms_strdup_printf("%s/tmp/pull/%s.partial", j->home, l->digest + 7)) ||
            (b->n_parts > 1 && !(b->rpath = ms_strdup_printf("%s/tmp/pull/%s.ranges", j->home, l->digest + 7))))
            return ms_err(MS_ENOMEM, "out of memory");
        for (int k = 0; k < b->n_parts; k++) {
            b->parts[k].off = (uint64_t)k * b->part_bytes;
            b->parts[k].len = l->size - b->parts[k].off < b->part_bytes ? l->size - b->parts[k].off : b->part_bytes;
        }
    }
    return 0;
}

static void blobs_free(dl_job *j)
{
    for (size_t i = 0; i < j->n_blobs; i++) {
        dl_blob *b = &j->blobs[i];

        blob_end(b);   /* a failed pull: files stay for a rerun, their locks go */
        pthread_mutex_destroy(&b->mu);
        pthread_mutex_destroy(&b->hash_mu);
        free(b->parts);
        free(b->path);
        free(b->rpath);
    }
    free(j->blobs);
}

int reg_blobs_fetch(reg_client *c, store_txn *t, const manifest *m, const registry_opts *o, const char *label)
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
    if ((rc = blobs_plan(&j, m)) < 0 || j.n_blobs == 0)
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
    if (o->report) {   /* counted from the plan: each blob was checked once, above */
        o->report->blobs_downloaded += j.n_blobs;
        o->report->bytes_downloaded += total;
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
