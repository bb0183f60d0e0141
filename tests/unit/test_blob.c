/* test_blob.c: the blob store's write, dedup, read, verify and temp-file rules. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blob/blob.h"
#include "helpers/fixture.h"

static char *home;

static void setup(void)
{
    home = fixture_tmpdir();
    ck_assert_ptr_nonnull(home);
    ck_assert_int_eq(blob_dirs_make(home), 0);
}

static void teardown(void) { fixture_rmrf(home); }

static char *sub(const char *name) { return ms_path_join(home, name); }

START_TEST(digest_of_known_bytes)
{
    ms_digest d;

    blob_digest_buf(d, "abc", 3);
    ck_assert_str_eq(d, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    blob_digest_buf(d, "", 0);
    ck_assert_str_eq(d, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
END_TEST

/* The sha256 implementations a blob_hash can run on: OpenSSL (the reference here, through
 * blob_digest_buf), SHA-NI where this CPU has it, and the same code with the instructions
 * emulated in C, which runs everywhere. */
static const char *const sha_impls[] = { "openssl", "sha-ni", "sha-ni-emulated" };

static blob_hash *hash_on(const char *impl)
{
    blob_hash *h = blob_hash_new_impl(impl);

    if (!h && strcmp(impl, "sha-ni") == 0)
        fprintf(stderr, "sha-ni: this CPU lacks the SHA extensions; that code runs here as sha-ni-emulated\n");
    else
        ck_assert_msg(h != NULL, "%s: %s", impl, ms_err_msg());
    return h;
}

static void fill_random(uint8_t *p, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(rand_r(seed) >> 7);
}

START_TEST(every_sha256_implementation_matches_the_reference)
{
    static const struct {
        const char *text;
        const char *digest;
    } known[] = {
        { "", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
        { "abc", "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
        { "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
          "sha256:248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
    };
    const char *impl = sha_impls[_i];
    size_t cap = 70000;
    uint8_t *buf = malloc(cap);
    unsigned seed = 7;
    blob_hash *h;
    ms_digest got, want;

    ck_assert_ptr_nonnull(buf);
    if (!(h = hash_on(impl))) {
        free(buf);
        return;
    }
    blob_hash_free(h);
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        h = hash_on(impl);
        blob_hash_update(h, known[k].text, strlen(known[k].text));
        blob_hash_final(got, h);
        ck_assert_str_eq(got, known[k].digest);
    }
    /* A million 'a' (FIPS 180-2's third vector), fed in uneven pieces. */
    memset(buf, 'a', cap);
    h = hash_on(impl);
    for (size_t done = 0, piece = 1; done < 1000000; done += piece, piece = piece * 7 % 65521 + 1)
        blob_hash_update(h, buf, piece < 1000000 - done ? piece : 1000000 - done);
    blob_hash_final(got, h);
    ck_assert_str_eq(got, "sha256:cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* Every length across the padding's two cases, then long random buffers cut at random. */
    for (size_t len = 0; len < 300 || len < cap; len = len < 300 ? len + 1 : len * 3 + 17) {
        size_t n = len < cap ? len : cap;
        fill_random(buf, n, &seed);
        blob_digest_buf(want, buf, n);
        h = hash_on(impl);
        for (size_t at = 0; at < n;) {
            size_t piece = (size_t)rand_r(&seed) % (n - at < 5000 ? n - at : 5000) + 1;
            blob_hash_update(h, buf + at, piece);
            at += piece;
        }
        blob_hash_final(got, h);
        ck_assert_msg(strcmp(got, want) == 0, "%s, %zu bytes: %s, OpenSSL says %s", impl, n, got, want);
    }
    free(buf);
}
END_TEST

/* Two hashes, each already partway into a block by a different amount, then fed the same
 * chunks with blob_hash_update2: each ends where blob_hash_update alone would have. Pairs of
 * the same implementation take the fused path; mixed pairs fall back. */
START_TEST(update2_equals_two_updates_at_any_offsets)
{
    const char *impl = sha_impls[_i];
    size_t cap = 9000;
    uint8_t *pa = malloc(cap), *pb = malloc(cap), *data = malloc(cap);
    unsigned seed = 11;
    ms_digest got_a, got_b, want_a, want_b;
    blob_hash *probe = hash_on(impl);

    ck_assert(pa && pb && data);
    if (!probe) {
        free(pa), free(pb), free(data);
        return;
    }
    blob_hash_free(probe);
    for (int trial = 0; trial < 400; trial++) {
        size_t la = (size_t)rand_r(&seed) % 140, lb = (size_t)rand_r(&seed) % 140;
        size_t len = (size_t)rand_r(&seed) % (cap - la - lb);
        const char *other = trial % 4 == 3 ? "openssl" : impl;
        blob_hash *a = hash_on(impl), *b = hash_on(other);
        fill_random(data, len, &seed);
        fill_random(pa, la, &seed);
        fill_random(pb, lb, &seed);
        blob_hash_update(a, pa, la);
        blob_hash_update(b, pb, lb);
        for (size_t at = 0; at < len;) {
            size_t piece = (size_t)rand_r(&seed) % (len - at) + 1;
            blob_hash_update2(a, b, data + at, piece);
            at += piece;
        }
        blob_hash_final(got_a, a);
        blob_hash_final(got_b, b);
        memmove(pa + la, data, len);   /* pa and pb have room: la + len < cap */
        memmove(pb + lb, data, len);
        blob_digest_buf(want_a, pa, la + len);
        blob_digest_buf(want_b, pb, lb + len);
        ck_assert_msg(strcmp(got_a, want_a) == 0 && strcmp(got_b, want_b) == 0,
                      "%s + %s, prefixes %zu and %zu, %zu bytes: %s %s", impl, other, la, lb, len, got_a, got_b);
    }
    free(pa), free(pb), free(data);
}
END_TEST

START_TEST(unknown_sha256_implementation_is_refused_by_name)
{
    ck_assert_ptr_null(blob_hash_new_impl("sha-3000"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "'sha-3000'"));
}
END_TEST

START_TEST(digest_validation)
{
    ck_assert(blob_digest_valid("sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    ck_assert(!blob_digest_valid("sha256:BA7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    ck_assert(!blob_digest_valid("sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a"));
    ck_assert(!blob_digest_valid("sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    ck_assert(!blob_digest_valid("sha256:../../../../etc/passwd00000000000000000000000000000000000000000"));
    ck_assert(!blob_digest_valid(NULL));
}
END_TEST

START_TEST(writer_streams_hashes_and_lands_under_digest)
{
    char *p, *tmp = sub("tmp"), *blobs = sub("blobs");
    ms_digest d;
    blob_writer *w;
    blob_view v;
    struct stat st;

    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(fixture_count_files(tmp), 1);   /* partial bytes live in tmp/ only */
    ck_assert_int_eq(fixture_count_files(blobs), 0);
    ck_assert_int_eq(blob_writer_write(w, "a", 1), 0);
    ck_assert_int_eq(blob_writer_write(w, "bc", 2), 0);
    ck_assert_uint_eq(blob_writer_size(w), 3);
    ck_assert_int_eq(blob_writer_commit(d, w, NULL), 0);
    ck_assert_str_eq(d, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    ck_assert_int_eq(blob_path(&p, home, d), 0);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0444);   /* blobs are immutable */
    ck_assert_int_eq(blob_open(&v, home, d), 0);
    ck_assert_uint_eq(v.size, 3);
    ck_assert_int_eq(memcmp(v.data, "abc", 3), 0);
    blob_close(&v);
    ck_assert_int_eq(blob_verify(home, d), 0);
    free(p);
    free(tmp);
    free(blobs);
}
END_TEST

START_TEST(commit_with_wrong_expected_digest_leaves_nothing)
{
    char *tmp = sub("tmp"), *blobs = sub("blobs");
    ms_digest d;
    const char *want = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    blob_writer *w;

    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(blob_writer_write(w, "abc", 3), 0);
    ck_assert_int_eq(blob_writer_commit(d, w, want), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), want));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "sha256:ba7816bf"));
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    ck_assert_int_eq(fixture_count_files(blobs), 0);
    free(tmp);
    free(blobs);
}
END_TEST

START_TEST(same_bytes_are_stored_once)
{
    char *blobs = sub("blobs"), *tmp = sub("tmp");
    ms_digest d1, d2;
    char *f = fixture_write(home, "in.bin", "hello", 5);

    ck_assert_int_eq(blob_put_buf(d1, home, "hello", 5), 0);
    ck_assert_int_eq(blob_put_file(d2, home, f), 0);
    ck_assert_str_eq(d1, d2);
    ck_assert_int_eq(fixture_count_files(blobs), 1);
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    free(f);
    free(blobs);
    free(tmp);
}
END_TEST

START_TEST(verify_names_a_corrupt_blob)
{
    char *p;
    ms_digest d;
    int fd;

    ck_assert_int_eq(blob_put_buf(d, home, "payload", 7), 0);
    ck_assert_int_eq(blob_path(&p, home, d), 0);
    chmod(p, 0644);
    fd = open(p, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "X", 1, 2), 1);
    close(fd);
    ck_assert_int_eq(blob_verify(home, d), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), d));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "corrupt"));
    unlink(p);
    ck_assert_int_eq(blob_verify(home, d), MS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "missing"));
    free(p);
}
END_TEST

START_TEST(bad_digest_never_becomes_a_path)
{
    blob_view v;
    char *p = NULL;

    ck_assert_int_eq(blob_path(&p, home, "sha256:../../x"), MS_EINVALID);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(blob_open(&v, home, "../index.db"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "../index.db"));
}
END_TEST

START_TEST(full_disk_leaves_no_blob)
{
    /* RLIMIT_FSIZE stands in for a full disk: the write fails with EFBIG. Run it in a child so
     * the limit (and SIGXFSZ) stays there. */
    pid_t pid = fork();
    int status;

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rlimit rl = { 1000, 1000 };
        char buf[4096] = { 0 };
        ms_digest d;
        blob_writer *w;
        int rc;

        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &rl);
        if (blob_writer_open(&w, home) < 0)
            _exit(3);
        rc = blob_writer_write(w, buf, sizeof buf);
        if (rc != MS_EIO || !strstr(ms_err_msg(), "write"))
            _exit(4);
        blob_writer_abort(w);
        (void)d;
        _exit(0);
    }
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    {
        char *tmp = sub("tmp"), *blobs = sub("blobs");
        ck_assert_int_eq(fixture_count_files(tmp), 0);
        ck_assert_int_eq(fixture_count_files(blobs), 0);
        free(tmp);
        free(blobs);
    }
}
END_TEST

START_TEST(tmp_clean_keeps_live_writers_and_drops_dead_ones)
{
    char *tmp = sub("tmp"), *dead;
    blob_writer *w;
    int removed = -1;

    /* pid 2^22+1 is above the default pid_max, so no process has it. */
    dead = fixture_write(tmp, "4194305-0-1.partial", "x", 1);
    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(fixture_count_files(tmp), 2);
    ck_assert_int_eq(blob_tmp_clean(home, &removed), 0);
    ck_assert_int_eq(removed, 1);
    ck_assert_int_eq(fixture_count_files(tmp), 1);
    blob_writer_abort(w);
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    free(dead);
    free(tmp);
}
END_TEST

START_TEST(map_of_empty_and_missing_files)
{
    ms_map m;
    char *e = fixture_write(home, "empty", "", 0), *missing = sub("nope");

    ck_assert_int_eq(ms_map_open(&m, e), 0);
    ck_assert_ptr_null(m.data);
    ck_assert_uint_eq(m.size, 0);
    ms_map_close(&m);
    ck_assert_int_eq(ms_map_open(&m, missing), MS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), missing));
    free(e);
    free(missing);
}
END_TEST

START_TEST(error_context_prepends)
{
    ck_assert_int_eq(ms_err(MS_EINVALID, "field '%s' is bad", "x"), MS_EINVALID);
    ck_assert_int_eq(ms_err_ctx("model.gguf"), MS_EINVALID);
    ck_assert_str_eq(ms_err_msg(), "model.gguf: field 'x' is bad");
}
END_TEST

/* ---------------------------------------------------------------- blob_adopt */

/* A file under tmp/pull/ as a download leaves it; returns the malloc'd path. */
static char *download_file(const char *name, const void *buf, size_t len)
{
    char *dir = sub("tmp/pull"), *p;

    ck_assert_int_eq(ms_mkdir_p(dir, 0755), 0);
    p = fixture_write(dir, name, buf, len);
    free(dir);
    return p;
}

START_TEST(adopt_renames_a_matching_file_into_blobs_read_only)
{
    static const char bytes[] = "weights, downloaded in ranged parts";
    char *path = download_file("x.partial", bytes, sizeof bytes);
    ms_digest want, got;
    char *final, *blobs = sub("blobs");
    struct stat st;
    blob_view v;

    blob_digest_buf(want, bytes, sizeof bytes);
    ck_assert_int_eq(blob_adopt(got, home, path, want), 0);
    ck_assert_str_eq(got, want);
    ck_assert_int_eq(access(path, F_OK), -1);   /* moved, not copied */
    ck_assert_int_eq(blob_path(&final, home, want), 0);
    ck_assert_int_eq(stat(final, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0444);
    ck_assert_int_eq(fixture_count_files(blobs), 1);
    ck_assert_int_eq(blob_open(&v, home, want), 0);
    ck_assert_uint_eq(v.size, sizeof bytes);
    ck_assert_int_eq(memcmp(v.data, bytes, sizeof bytes), 0);
    blob_close(&v);
    ck_assert_int_eq(blob_verify(home, want), 0);
    free(final);
    free(blobs);
    free(path);
}
END_TEST

START_TEST(adopt_without_expect_names_the_blob_by_its_bytes)
{
    char *path = download_file("y.partial", "abc", 3);
    ms_digest got;

    ck_assert_int_eq(blob_adopt(got, home, path, NULL), 0);
    ck_assert_str_eq(got, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert(blob_exists(home, got, NULL));
    free(path);
}
END_TEST

START_TEST(adopt_mismatch_removes_the_file_and_names_nothing)
{
    char *blobs = sub("blobs");
    ms_digest want, got;
    char *path = download_file("z.partial", "abX", 3);

    blob_digest_buf(want, "abc", 3);
    ck_assert_int_eq(blob_adopt(got, home, path, want), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "digest mismatch"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), want));
    ck_assert_str_eq(got, "");
    ck_assert_int_eq(fixture_count_files(blobs), 0);
    ck_assert_int_eq(access(path, F_OK), -1);   /* nobody may resume from bad bytes */
    free(blobs);
    free(path);
}
END_TEST

START_TEST(adopt_hashed_trusts_the_callers_digest_and_still_checks_expect)
{
    ms_digest want, other, got;
    char *blobs = sub("blobs"), *path = download_file("h.partial", "abc", 3);

    blob_digest_buf(want, "abc", 3);
    blob_digest_buf(other, "abd", 3);
    /* The caller's hash disagrees with the manifest: refused without reading the file. */
    ck_assert_int_eq(blob_adopt_hashed(got, home, path, want, other), MS_EMISMATCH);
    ck_assert_int_eq(fixture_count_files(blobs), 0);
    ck_assert_int_eq(access(path, F_OK), -1);
    free(path);
    path = download_file("h.partial", "abc", 3);
    ck_assert_int_eq(blob_adopt_hashed(got, home, path, want, want), 0);
    ck_assert_str_eq(got, want);
    ck_assert_int_eq(blob_verify(home, want), 0);
    ck_assert_int_eq(access(path, F_OK), -1);
    free(blobs);
    free(path);
}
END_TEST

START_TEST(adopt_of_stored_bytes_drops_the_file_and_keeps_the_blob)
{
    char *final, *path;
    ms_digest d, got;
    struct stat before, after;

    ck_assert_int_eq(blob_put_buf(d, home, "same", 4), 0);
    ck_assert_int_eq(blob_path(&final, home, d), 0);
    ck_assert_int_eq(stat(final, &before), 0);
    path = download_file("dup.partial", "same", 4);
    ck_assert_int_eq(blob_adopt(got, home, path, d), 0);
    ck_assert_str_eq(got, d);
    ck_assert_int_eq(access(path, F_OK), -1);
    ck_assert_int_eq(stat(final, &after), 0);
    ck_assert_uint_eq(before.st_ino, after.st_ino);   /* the stored file, untouched */
    free(final);
    free(path);
}
END_TEST

START_TEST(adopt_refuses_files_outside_tmp_and_non_files)
{
    char *outside = fixture_write(home, "elsewhere", "abc", 3), *blobs = sub("blobs");
    ms_digest d;
    char *tricky = ms_strdup_printf("%s/tmp/../elsewhere", home), *tmpdir = sub("tmp/pull"), *link;

    ck_assert_int_eq(blob_adopt(d, home, outside, NULL), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "not a file under"));
    ck_assert_int_eq(blob_adopt(d, home, tricky, NULL), MS_EINVALID);
    ck_assert_int_eq(access(outside, F_OK), 0);   /* refused: left alone */
    ck_assert_int_eq(ms_mkdir_p(tmpdir, 0755), 0);
    ck_assert_int_eq(blob_adopt(d, home, tmpdir, NULL), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "not a regular file"));
    link = ms_strdup_printf("%s/link.partial", tmpdir);
    ck_assert_int_eq(symlink(outside, link), 0);
    ck_assert_int_ne(blob_adopt(d, home, link, NULL), 0);   /* a link is never renamed into blobs/ */
    free(link);
    link = ms_strdup_printf("%s/missing.partial", tmpdir);
    ck_assert_int_eq(blob_adopt(d, home, link, NULL), MS_ENOTFOUND);
    ck_assert_int_eq(blob_adopt(d, home, outside, "sha256:nope"), MS_EINVALID);
    ck_assert_int_eq(fixture_count_files(blobs), 0);
    free(link);
    free(tmpdir);
    free(tricky);
    free(blobs);
    free(outside);
}
END_TEST

START_TEST(batch_names_nothing_before_commit)
{
    char *tmp = sub("tmp"), *blobs = sub("blobs");
    ms_digest d1, d2, d3;
    blob_batch *b;
    blob_writer *w;

    ck_assert_int_eq(blob_batch_new(&b, home), 0);
    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(blob_writer_write(w, "abc", 3), 0);
    ck_assert_int_eq(blob_batch_add(b, d1, w, NULL), 0);
    ck_assert_str_eq(d1, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(blob_writer_write(w, "abc", 3), 0);   /* the same bytes again: dropped */
    ck_assert_int_eq(blob_batch_add(b, d2, w, NULL), 0);
    ck_assert_str_eq(d1, d2);
    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(blob_writer_write(w, "xyz", 3), 0);
    ck_assert_int_eq(blob_batch_add(b, d3, w, NULL), 0);
    ck_assert_int_eq(fixture_count_files(tmp), 2);
    ck_assert_int_eq(fixture_count_files(blobs), 0);   /* invariant 4: nothing named yet */
    ck_assert_int_eq(blob_batch_commit(b), 0);
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    ck_assert_int_eq(fixture_count_files(blobs), 2);
    ck_assert_int_eq(blob_verify(home, d1), 0);
    ck_assert_int_eq(blob_verify(home, d3), 0);
    blob_batch_free(b);
    ck_assert_int_eq(fixture_count_files(blobs), 2);
    free(tmp);
    free(blobs);
}
END_TEST

START_TEST(batch_freed_without_commit_leaves_nothing)
{
    char *tmp = sub("tmp"), *blobs = sub("blobs");
    ms_digest d;
    const char *want = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    blob_batch *b;
    blob_writer *w;

    ck_assert_int_eq(blob_batch_new(&b, home), 0);
    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(blob_writer_write(w, "abc", 3), 0);
    ck_assert_int_eq(blob_batch_add(b, d, w, want), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), want));
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(blob_writer_write(w, "def", 3), 0);
    ck_assert_int_eq(blob_batch_add(b, d, w, NULL), 0);
    ck_assert_int_eq(fixture_count_files(tmp), 1);
    blob_batch_free(b);   /* an import that failed after writing blobs */
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    ck_assert_int_eq(fixture_count_files(blobs), 0);
    free(tmp);
    free(blobs);
}
END_TEST

START_TEST(batch_keeps_a_stored_blob_untouched)
{
    char *p;
    ms_digest d, d2;
    struct stat before, after;
    blob_batch *b;
    blob_writer *w;

    ck_assert_int_eq(blob_put_buf(d, home, "abc", 3), 0);
    ck_assert_int_eq(blob_path(&p, home, d), 0);
    ck_assert_int_eq(stat(p, &before), 0);
    ck_assert_int_eq(blob_batch_new(&b, home), 0);
    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(blob_writer_write(w, "abc", 3), 0);
    ck_assert_int_eq(blob_batch_add(b, d2, w, NULL), 0);
    ck_assert_int_eq(blob_batch_commit(b), 0);
    ck_assert_int_eq(stat(p, &after), 0);
    ck_assert_uint_eq(before.st_ino, after.st_ino);   /* invariant 3 */
    blob_batch_free(b);
    free(p);
}
END_TEST

/* Invariant 3: a stored file whose bytes do not hash to its name is not "already stored".
 * _i / 2 picks the write path (writer, put_buf, adopt, batch), _i % 2 the damage: a flipped
 * byte (same size, found only by re-hashing) or a truncation (found by the size). */
static void damage(const char *digest, int truncate_it)
{
    char *p = NULL;
    int fd;

    ck_assert_int_eq(blob_path(&p, home, digest), 0);
    ck_assert_int_eq(chmod(p, 0644), 0);
    ck_assert_int_ge(fd = open(p, O_RDWR), 0);
    if (truncate_it)
        ck_assert_int_eq(ftruncate(fd, 5), 0);
    else
        ck_assert_int_eq(pwrite(fd, "X", 1, 7), 1);
    close(fd);
    free(p);
}

/* blob_intact_each gives blob_intact's answer for every entry, on any number of threads: intact
 * blobs, one damaged in place, one truncated, one asked with the wrong size, one missing, and a
 * NULL (skipped). */
START_TEST(intact_each_is_blob_intact_for_every_entry)
{
    enum { N = 12 };
    ms_digest d[N];
    const char *digests[N];
    uint64_t sizes[N];
    unsigned char ok[N], want[N];
    char buf[64];

    for (int i = 0; i < N; i++) {
        int len = snprintf(buf, sizeof buf, "blob number %d of the set", i);
        ck_assert_int_eq(blob_put_buf(d[i], home, buf, (size_t)len), 0);
        digests[i] = d[i];
        sizes[i] = (uint64_t)len;
    }
    damage(d[2], 0);
    damage(d[5], 1);
    sizes[7]++;
    digests[9] = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    digests[11] = NULL;
    for (int i = 0; i < N; i++)
        want[i] = digests[i] && blob_intact(home, digests[i], sizes[i]);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(want[i], i != 2 && i != 5 && i != 7 && i != 9 && i != 11);
    for (int threads = 0; threads <= 9; threads += 3) {
        memset(ok, 0xaa, sizeof ok);
        blob_intact_each(home, digests, sizes, N, ok, threads);
        for (int i = 0; i < N; i++)
            ck_assert_msg(ok[i] == want[i], "%d threads, blob %d: %d, want %d", threads, i, ok[i], want[i]);
    }
    blob_intact_each(home, digests, sizes, 0, ok, 4); /* nothing to do, nothing touched */
}
END_TEST

START_TEST(every_writer_replaces_a_damaged_blob)
{
    static const char bytes[] = "the same bytes, written again over a damaged copy";
    const size_t len = sizeof bytes - 1;
    ms_digest d2 = "";
    char *p = NULL, *tmp = sub("tmp"), *file = NULL;
    ms_digest d;
    blob_writer *w = NULL;
    blob_batch *b = NULL;
    struct stat st;

    ck_assert_int_eq(blob_put_buf(d, home, bytes, len), 0);
    ck_assert(blob_intact(home, d, len));
    ck_assert(blob_intact(home, d, BLOB_SIZE_ANY));
    ck_assert(!blob_intact(home, d, len + 1));
    damage(d, _i % 2);
    ck_assert(blob_exists(home, d, NULL));
    ck_assert(!blob_intact(home, d, len));
    ck_assert(!blob_intact(home, d, BLOB_SIZE_ANY));
    ck_assert_int_eq(blob_verify(home, d), MS_EMISMATCH);
    switch (_i / 2) {
    case 0:
        ck_assert_int_eq(blob_writer_open(&w, home), 0);
        ck_assert_int_eq(blob_writer_write(w, bytes, len), 0);
        ck_assert_int_eq(blob_writer_commit(d2, w, d), 0);
        break;
    case 1:
        ck_assert_int_eq(blob_put_buf(d2, home, bytes, len), 0);
        break;
    case 2:
        ck_assert_ptr_nonnull(file = fixture_write(tmp, "in", bytes, len));
        ck_assert_int_eq(blob_adopt(d2, home, file, d), 0);
        break;
    default:
        ck_assert_int_eq(blob_batch_new(&b, home), 0);
        ck_assert_int_eq(blob_writer_open(&w, home), 0);
        ck_assert_int_eq(blob_writer_write(w, bytes, len), 0);
        ck_assert_int_eq(blob_batch_add(b, d2, w, d), 0);
        ck_assert_int_eq(blob_batch_commit(b), 0);
        blob_batch_free(b);
        break;
    }
    ck_assert_str_eq(d2, d);
    ck_assert_int_eq(blob_verify(home, d), 0);
    ck_assert(blob_intact(home, d, len));
    ck_assert_int_eq(blob_path(&p, home, d), 0);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0444);
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    free(p);
    free(tmp);
    free(file);
}
END_TEST

START_TEST(intact_is_false_for_missing_and_non_files)
{
    char *p = NULL;
    ms_digest d;

    blob_digest_buf(d, "x", 1);
    ck_assert(!blob_intact(home, d, 1));
    ck_assert(!blob_intact(home, "sha256:nope", 1));
    ck_assert_int_eq(blob_path(&p, home, d), 0);
    ck_assert_int_eq(mkdir(p, 0755), 0);   /* a directory under a blob's name is not the blob */
    ck_assert(!blob_intact(home, d, BLOB_SIZE_ANY));
    free(p);
}
END_TEST

START_TEST(write_fd_stops_at_the_bound)
{
    char *f = fixture_write(home, "ten.bin", "0123456789", 10);
    ms_digest d;
    blob_writer *w;
    int fd = open(f, O_RDONLY);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(blob_writer_write_fd(w, fd, f, 5), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "ten.bin has more than 5 bytes"));
    blob_writer_abort(w);
    lseek(fd, 0, SEEK_SET);
    ck_assert_int_eq(blob_writer_open(&w, home), 0);
    ck_assert_int_eq(blob_writer_write_fd(w, fd, f, 10), 0);
    ck_assert_int_eq(blob_writer_commit(d, w, NULL), 0);
    ck_assert_int_eq(blob_verify(home, d), 0);
    close(fd);
    free(f);
}
END_TEST

/* A partial blob resumes from what is on disk: the sidecar's counts (bounded by the file's
 * length), kept by _close, dropped by _done; _abandon removes both files; a stored blob needs
 * no partial and its leftovers go. */
START_TEST(partial_resumes_then_adopts_or_abandons)
{
    static const char bytes[10] = "0123456789";
    char *rpath;
    ms_digest d, got;
    uint64_t done[3] = { 9, 9, 9 }, size = 0;
    blob_partial *p = NULL;
    struct stat st;

    blob_digest_buf(d, bytes, sizeof bytes);
    rpath = ms_strdup_printf("%s/tmp/pull/%s.ranges", home, d + 7);
    ck_assert_int_eq(blob_partial_open(&p, home, d, 10, 4, 3, done), 0);
    ck_assert_ptr_nonnull(p);
    ck_assert(done[0] == 0 && done[1] == 0 && done[2] == 0);
    ck_assert_int_eq(blob_partial_write(p, 4, bytes + 4, 4), 0);   /* part 1 whole */
    ck_assert_int_eq(blob_partial_save(p, 1, 4), 0);
    ck_assert_int_eq(blob_partial_write(p, 0, bytes, 2), 0);       /* part 0 half */
    ck_assert_int_eq(blob_partial_save(p, 0, 2), 0);
    blob_partial_close(p);                                          /* a kill: both files stay */
    ck_assert_int_eq(blob_partial_open(&p, home, d, 10, 4, 3, done), 0);
    ck_assert(done[0] == 2 && done[1] == 4 && done[2] == 0);
    ck_assert_int_eq(blob_partial_write(p, 2, bytes + 2, 2), 0);
    ck_assert_int_eq(blob_partial_write(p, 8, bytes + 8, 2), 0);
    ck_assert_int_eq(blob_partial_size(p, &size), 0);
    ck_assert_uint_eq(size, 10);
    ck_assert_int_eq(blob_adopt(got, home, blob_partial_path(p), d), 0);
    blob_partial_done(p);
    ck_assert_int_eq(stat(rpath, &st), -1);
    ck_assert(blob_intact(home, d, 10));
    /* Stored: there is nothing to download. */
    ck_assert_int_eq(blob_partial_open(&p, home, d, 10, 4, 3, done), 0);
    ck_assert_ptr_null(p);

    blob_digest_buf(d, "other", 5);
    free(rpath);
    rpath = ms_strdup_printf("%s/tmp/pull/%s.ranges", home, d + 7);
    ck_assert_int_eq(blob_partial_open(&p, home, d, 5, 2, 3, done), 0);
    ck_assert_int_eq(stat(rpath, &st), 0);
    ck_assert_int_eq(stat(blob_partial_path(p), &st), 0);
    blob_partial_abandon(p);   /* a digest mismatch */
    ck_assert_int_eq(stat(rpath, &st), -1);
    ck_assert_int_eq(blob_partial_clean(home, 0), 0);
    free(rpath);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("blob");
    TCase *tc = tcase_create("blob");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, digest_of_known_bytes);
    tcase_add_test(tc, digest_validation);
    tcase_add_loop_test(tc, every_sha256_implementation_matches_the_reference, 0, 3);
    tcase_add_loop_test(tc, update2_equals_two_updates_at_any_offsets, 0, 3);
    tcase_add_test(tc, unknown_sha256_implementation_is_refused_by_name);
    tcase_add_test(tc, writer_streams_hashes_and_lands_under_digest);
    tcase_add_test(tc, commit_with_wrong_expected_digest_leaves_nothing);
    tcase_add_test(tc, same_bytes_are_stored_once);
    tcase_add_test(tc, verify_names_a_corrupt_blob);
    tcase_add_test(tc, bad_digest_never_becomes_a_path);
    tcase_add_test(tc, full_disk_leaves_no_blob);
    tcase_add_test(tc, tmp_clean_keeps_live_writers_and_drops_dead_ones);
    tcase_add_test(tc, map_of_empty_and_missing_files);
    tcase_add_test(tc, error_context_prepends);
    tcase_add_test(tc, batch_names_nothing_before_commit);
    tcase_add_test(tc, batch_freed_without_commit_leaves_nothing);
    tcase_add_test(tc, batch_keeps_a_stored_blob_untouched);
    tcase_add_test(tc, write_fd_stops_at_the_bound);
    tcase_add_loop_test(tc, every_writer_replaces_a_damaged_blob, 0, 8);
    tcase_add_test(tc, intact_is_false_for_missing_and_non_files);
    tcase_add_test(tc, adopt_renames_a_matching_file_into_blobs_read_only);
    tcase_add_test(tc, adopt_without_expect_names_the_blob_by_its_bytes);
    tcase_add_test(tc, adopt_mismatch_removes_the_file_and_names_nothing);
    tcase_add_test(tc, adopt_hashed_trusts_the_callers_digest_and_still_checks_expect);
    tcase_add_test(tc, adopt_of_stored_bytes_drops_the_file_and_keeps_the_blob);
    tcase_add_test(tc, adopt_refuses_files_outside_tmp_and_non_files);
    tcase_add_test(tc, partial_resumes_then_adopts_or_abandons);
    tcase_add_test(tc, intact_each_is_blob_intact_for_every_entry);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
