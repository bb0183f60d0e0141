/* test_util.c: util's byte helpers (little-endian, half floats), the grow-array helper and the
 * atomic file replacement. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/fixture.h"
#include "util/util.h"

START_TEST(le_round_trips_at_unaligned_offsets)
{
    uint8_t buf[32];

    for (size_t off = 0; off < 8; off++) {
        memset(buf, 0xee, sizeof buf);
        ms_put_le16(buf + off, 0xa1b2);
        ck_assert_uint_eq(buf[off], 0xb2);
        ck_assert_uint_eq(buf[off + 1], 0xa1);
        ck_assert_uint_eq(ms_le16(buf + off), 0xa1b2);
        ms_put_le32(buf + off, 0x01020304u);
        ck_assert_uint_eq(buf[off], 0x04);
        ck_assert_uint_eq(buf[off + 3], 0x01);
        ck_assert_uint_eq(ms_le32(buf + off), 0x01020304u);
        ms_put_le64(buf + off, 0x8877665544332211ull);
        ck_assert_uint_eq(buf[off], 0x11);
        ck_assert_uint_eq(buf[off + 7], 0x88);
        ck_assert(ms_le64(buf + off) == 0x8877665544332211ull);
        ck_assert_uint_eq(buf[off + 8], 0xee);   /* nothing written past the value */
        if (off)
            ck_assert_uint_eq(buf[off - 1], 0xee);
    }
}
END_TEST

START_TEST(f16_specials)
{
    /* +-inf, NaN, the smallest subnormal, the largest subnormal, -0 */
    ck_assert(isinf(ms_f16_to_f32(0x7c00)) && ms_f16_to_f32(0x7c00) > 0);
    ck_assert(isinf(ms_f16_to_f32(0xfc00)) && ms_f16_to_f32(0xfc00) < 0);
    ck_assert(isnan(ms_f16_to_f32(0x7e00)));
    ck_assert(ms_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    ck_assert(ms_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    ck_assert(ms_f16_to_f32(0x8000) == 0.0f && signbit(ms_f16_to_f32(0x8000)));
    ck_assert(ms_f16_to_f32(0x3c00) == 1.0f);
    ck_assert(ms_f16_to_f32(0x7bff) == 65504.0f);

    ck_assert_uint_eq(ms_f32_to_f16(INFINITY), 0x7c00);
    ck_assert_uint_eq(ms_f32_to_f16(-INFINITY), 0xfc00);
    ck_assert_uint_eq(ms_f32_to_f16(NAN) & 0x7c00, 0x7c00);
    ck_assert_uint_ne(ms_f32_to_f16(NAN) & 0x03ff, 0);   /* still a NaN, not inf */
    ck_assert_uint_eq(ms_f32_to_f16(-0.0f), 0x8000);
    ck_assert_uint_eq(ms_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    ck_assert_uint_eq(ms_f32_to_f16(ldexpf(1.0f, -26)), 0x0000);   /* below half the smallest: 0 */
    ck_assert_uint_eq(ms_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(ms_f32_to_f16(65520.0f), 0x7c00);            /* rounds past the largest */
    ck_assert_uint_eq(ms_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);   /* a tie: to even */
    /* every half that is not a NaN survives the round trip, subnormals and -0 included */
    for (uint32_t h = 0; h < 0x10000; h++)
        if ((h & 0x7c00) != 0x7c00 || (h & 0x3ff) == 0)
            ck_assert_uint_eq(ms_f32_to_f16(ms_f16_to_f32((uint16_t)h)), h);

    ck_assert(ms_bf16_to_f32(0x3f80) == 1.0f);
    ck_assert(isinf(ms_bf16_to_f32(0xff80)) && ms_bf16_to_f32(0xff80) < 0);
    ck_assert(isnan(ms_bf16_to_f32(ms_f32_to_bf16(NAN))));
    ck_assert_uint_eq(ms_f32_to_bf16(-0.0f), 0x8000);
    ck_assert_uint_eq(ms_f32_to_bf16(INFINITY), 0x7f80);
    ck_assert_uint_eq(ms_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);   /* a tie: to even */
}
END_TEST

START_TEST(grow_keeps_contents_and_fails_cleanly)
{
    int *a = NULL;
    size_t cap = 0;

    for (int i = 0; i < 1000; i++) {
        ck_assert_int_eq(ms_grow(&a, &cap, (size_t)i + 1, sizeof *a), 0);
        ck_assert_uint_ge(cap, (size_t)i + 1);
        a[i] = i * 7;
    }
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(a[i], i * 7);
    {
        size_t before = cap;
        int *p = a;
        ck_assert_int_eq(ms_grow(&a, &cap, 10, sizeof *a), 0);   /* room already: nothing moves */
        ck_assert_ptr_eq(a, p);
        ck_assert_uint_eq(cap, before);
        /* element count times size past SIZE_MAX: refused, the array and capacity untouched */
        ck_assert_int_eq(ms_grow(&a, &cap, SIZE_MAX / 2, sizeof *a), MS_ENOMEM);
        ck_assert_ptr_eq(a, p);
        ck_assert_uint_eq(cap, before);
        ck_assert_int_eq(ms_grow(&a, &cap, SIZE_MAX, 1), MS_ENOMEM);   /* doubling overflows */
        ck_assert_ptr_eq(a, p);
        ck_assert_uint_eq(cap, before);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "out of memory"));
    }
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(a[i], i * 7);
    free(a);
}
END_TEST

static char *dir;

static void setup(void) { ck_assert_ptr_nonnull(dir = fixture_tmpdir()); }
static void teardown(void) { fixture_rmrf(dir); }

static char *read_all(const char *path)
{
    char *buf = NULL;
    size_t len;

    return ms_file_read(&buf, &len, path, 1 << 20) == 0 ? buf : NULL;
}

START_TEST(atomic_commit_leaves_the_whole_file_and_no_temp)
{
    char *path = fixture_write(dir, "f", "old", 3), *got;
    ms_atomic a;

    ck_assert_int_eq(ms_atomic_open(&a, path, NULL, 0644), 0);
    ck_assert_int_eq(fixture_count_files(dir), 2);   /* the old file and the temp beside it */
    ck_assert_str_eq(got = read_all(path), "old");   /* readers see the old file meanwhile */
    free(got);
    ck_assert_int_eq(ms_write_all(a.fd, "new con", 7), 0);
    ck_assert_int_eq(ms_write_all(a.fd, "tents", 5), 0);
    ck_assert_int_eq(ms_atomic_commit(&a), 0);
    ck_assert_str_eq(got = read_all(path), "new contents");
    free(got);
    ck_assert_int_eq(fixture_count_files(dir), 1);
    ck_assert_int_eq(a.fd, -1);
    ms_atomic_abort(&a);   /* harmless after commit: the new file stays */
    ck_assert_int_eq(fixture_count_files(dir), 1);

    /* the thin wrapper, onto a name that does not exist yet */
    free(path);
    path = ms_path_join(dir, "g");
    ck_assert_int_eq(ms_file_write_atomic(path, "gg", 2), 0);
    ck_assert_str_eq(got = read_all(path), "gg");
    free(got);
    ck_assert_int_eq(fixture_count_files(dir), 2);
    free(path);
}
END_TEST

START_TEST(atomic_abort_leaves_the_old_file_and_no_temp)
{
    char *path = fixture_write(dir, "f", "old", 3), *tmp = ms_path_join(dir, "f.mine.tmp"), *got;
    ms_atomic a;

    ck_assert_int_eq(ms_atomic_open(&a, path, NULL, 0644), 0);
    ck_assert_int_eq(ms_write_all(a.fd, "half", 4), 0);
    ms_atomic_abort(&a);
    ck_assert_str_eq(got = read_all(path), "old");
    free(got);
    ck_assert_int_eq(fixture_count_files(dir), 1);

    /* a caller's own temp name; a leftover under it is replaced, and abort removes it */
    free(fixture_write(dir, "f.mine.tmp", "stale", 5));
    ck_assert_int_eq(ms_atomic_open(&a, path, tmp, 0600), 0);
    ck_assert_int_eq(ms_write_all(a.fd, "x", 1), 0);
    ms_atomic_abort(&a);
    ck_assert_int_eq(access(tmp, F_OK), -1);
    ck_assert_str_eq(got = read_all(path), "old");
    free(got);
    ck_assert_int_eq(fixture_count_files(dir), 1);

    /* a temp that cannot be created: an error naming it, nothing left behind */
    {
        char *bad = ms_path_join(dir, "no/such/dir/f");
        ck_assert_int_lt(ms_atomic_open(&a, bad, NULL, 0644), 0);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "no/such/dir/f.tmp."));
        ms_atomic_abort(&a);
        free(bad);
    }
    ck_assert_int_eq(fixture_count_files(dir), 1);
    free(tmp);
    free(path);
}
END_TEST

/* The one UTF-8 definition: jansson's (no overlongs, surrogates or code points past U+10FFFF),
 * which the server's JSON, GGUF metadata, manifests and the terminal filter all use. */
START_TEST(utf8_is_one_definition)
{
    char *r;
    size_t n;

    ck_assert_int_eq(ms_utf8_valid("abc", 3), 1);
    ck_assert_int_eq(ms_utf8_valid("\xc3\xa9", 2), 1);
    ck_assert_int_eq(ms_utf8_valid("\xc3", 1), 0); /* cut short */
    ck_assert_int_eq(ms_utf8_valid("\xe2\x82\xac", 3), 1); /* euro sign */
    ck_assert_int_eq(ms_utf8_valid("\xe2\x82", 2), 0);
    ck_assert_int_eq(ms_utf8_valid("\xff", 1), 0);
    ck_assert_int_eq(ms_utf8_valid("\xc0\xaf", 2), 0);         /* overlong, 2 bytes */
    ck_assert_int_eq(ms_utf8_valid("\xe0\x80\xaf", 3), 0);     /* overlong, 3 bytes */
    ck_assert_int_eq(ms_utf8_valid("\xed\xa0\x80", 3), 0);     /* a surrogate */
    ck_assert_int_eq(ms_utf8_valid("\xf4\x90\x80\x80", 4), 0); /* past U+10FFFF */
    ck_assert_int_eq(ms_utf8_valid("\xf0\x9f\x98\x80", 4), 1);
    ck_assert_int_eq(ms_utf8_valid("a\0" "b", 3), 1); /* a NUL is a character like any other */
    ck_assert_uint_eq(ms_utf8_seq("\xf0\x9f\x98\x80", 3), 0); /* within `left` only */

    /* streaming: a last character cut short waits; a bad byte does not */
    ck_assert_uint_eq(ms_utf8_complete("ab\xe2\x82", 4), 2);
    ck_assert_uint_eq(ms_utf8_complete("ab\xe2\x82\xac", 5), 5);
    ck_assert_uint_eq(ms_utf8_complete("ab\xff", 3), 3);

    /* repair: each byte that starts nothing well-formed becomes U+FFFD */
    ck_assert_ptr_nonnull(r = ms_utf8_repair("a\xed\xa0\x80" "b\xc3\xa9", 7, &n));
    ck_assert_uint_eq(n, strlen("a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "b\xc3\xa9"));
    ck_assert_str_eq(r, "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "b\xc3\xa9");
    ck_assert_int_eq(ms_utf8_valid(r, n), 1);
    free(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("bytes");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, le_round_trips_at_unaligned_offsets);
    tcase_add_test(tc, f16_specials);
    tcase_add_test(tc, utf8_is_one_definition);
    tcase_add_test(tc, grow_keeps_contents_and_fails_cleanly);
    suite_add_tcase(s, tc);
    tc = tcase_create("atomic");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, atomic_commit_leaves_the_whole_file_and_no_temp);
    tcase_add_test(tc, atomic_abort_leaves_the_old_file_and_no_temp);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
