/* util.h: error reporting, checked size arithmetic and file helpers; the whole surface of src/util.
 *
 * Errors: every fallible function in src/ returns 0 or a negative MS_E* code and leaves a
 * message in a per-thread buffer. The function that knows the field writes the message; each
 * caller that knows more (the file, the tensor) prepends it with ms_err_ctx:
 *   "llama.gguf: tensor 'blk.3.attn_q.weight': data extends past end of file (...)"
 * Messages are lower case, no final period, and name the value found and the bound. */
#ifndef MSTORE_UTIL_H
#define MSTORE_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

enum {
    MS_OK = 0,
    MS_ERROR = -1,
    MS_ENOTFOUND = -2,
    MS_EEXISTS = -3,
    MS_EINVALID = -4,
    MS_EMISMATCH = -5,
    MS_EIO = -6,
    MS_ENOMEM = -7,
    MS_EBUSY = -8,
    MS_EUNSUPPORTED = -9,
    MS_EINTR = -10,
    MS_ETOOBIG = -11, /* input past a size limit that a caller may work around (a prompt longer than
                       * the context: drop old turns, ask for a larger one) */
};

#if defined(__GNUC__)
#define MS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MS_PRINTF(a, b)
#endif

/* Set the message and return `code`. */
int ms_err(int code, const char *fmt, ...) MS_PRINTF(2, 3);
/* Set the message with ": <strerror(errno)>" appended; return MS_EIO (MS_ENOMEM for ENOMEM,
 * MS_ENOTFOUND for ENOENT). */
int ms_err_os(const char *fmt, ...) MS_PRINTF(1, 2);
/* Prepend "<ctx>: " to the current message; return the code of the current error. */
int ms_err_ctx(const char *fmt, ...) MS_PRINTF(1, 2);
const char *ms_err_msg(void);
int ms_err_code(void);
void ms_err_clear(void);

/* A content digest as text, "sha256:" + 64 lowercase hex, and its NUL: the one buffer type in
 * which every module passes, returns and stores digests (src/blob says what one is and checks
 * it: blob_digest_valid). An array type: as a parameter it is a pointer, so take sizeof of
 * the type (sizeof(ms_digest)), not of the parameter. */
#define MS_DIGEST_LEN 71
typedef char ms_digest[MS_DIGEST_LEN + 1];

/* Checked arithmetic: return 0 on success, -1 (no message) on overflow. */
static inline int ms_add(size_t *out, size_t a, size_t b) { return __builtin_add_overflow(a, b, out) ? -1 : 0; }
static inline int ms_mul(size_t *out, size_t a, size_t b) { return __builtin_mul_overflow(a, b, out) ? -1 : 0; }
static inline int ms_add64(uint64_t *out, uint64_t a, uint64_t b) { return __builtin_add_overflow(a, b, out) ? -1 : 0; }
static inline int ms_mul64(uint64_t *out, uint64_t a, uint64_t b) { return __builtin_mul_overflow(a, b, out) ? -1 : 0; }
static inline uint64_t ms_align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Little-endian loads and stores at any alignment: every file format mstore reads is
 * little-endian, and a field inside one need not be aligned (GGUF, safetensors, the registry's
 * download state). Bytes, not casts: correct on any host, and compilers turn them into one move. */
static inline uint16_t ms_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t ms_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ms_le64(const uint8_t *p) { return ms_le32(p) | (uint64_t)ms_le32(p + 4) << 32; }
static inline void ms_put_le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static inline void ms_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}
static inline void ms_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

/* IEEE half (f16) and bfloat16 <-> f32 for code outside the kernels (src/cpu keeps its own
 * inline copies in its hot loops). f16: subnormals, +-0, inf and NaN are kept; f32 -> f16 rounds
 * to nearest even and overflows to inf; f32 -> bf16 rounds to nearest even, a NaN stays a NaN. */
float ms_f16_to_f32(uint16_t h);
uint16_t ms_f32_to_f16(float f);
float ms_bf16_to_f32(uint16_t h);
uint16_t ms_f32_to_bf16(float f);

/* Grow a malloc'd array so it holds at least `need` elements of `elem` bytes: `arr` is the
 * address of the array pointer (T **, passed as void *), *cap its capacity in elements
 * (0 with a NULL array). Doubles from 16, so appending one at a time is amortized O(1).
 * MS_ENOMEM when the size overflows or realloc fails; then *arr and *cap are unchanged. */
int ms_grow(void *arr, size_t *cap, size_t need, size_t elem);

/* A read-only mapping of a whole file. An empty file maps to data == NULL, size == 0. */
typedef struct ms_map {
    const uint8_t *data;
    size_t size;
} ms_map;
int ms_map_open(ms_map *out, const char *path);   /* MS_ENOTFOUND, MS_EIO */
/* open(path, O_RDONLY) of a regular file only; a FIFO, device or directory is MS_EINVALID
 * ("not a regular file") before any read could block on it. Returns the fd, or a negative code. */
int ms_open_regular(const char *path);
void ms_map_close(ms_map *m);                     /* zeroes *m; fine on a zeroed map */

/* Read a whole file into a NUL-terminated malloc'd buffer, refusing files over `max` bytes. */
int ms_file_read(char **out, size_t *size_out, const char *path, size_t max);
/* Read a file descriptor to its end into a NUL-terminated malloc'd buffer, refusing more than
 * `max` bytes (pipes have no size to check first). */
int ms_fd_read_all(char **out, size_t *len_out, int fd, size_t max);
/* Replacing a file whole (as git's lockfile does): the bytes go to a temp
 * file on the same filesystem, and only a complete, fsynced file ever appears under `path`.
 *   1. Until commit, readers of `path` see the old file (or none); the temp name is the only
 *      thing written.
 *   2. Commit fsyncs the file, renames it onto `path` (the commit point) and fsyncs the
 *      directory, so after a crash `path` is the old file or the whole new one.
 *   3. Commit or abort leave no temp file behind, on success and on every error.
 * Usage: ms_atomic_open, write through a.fd, then ms_atomic_commit or ms_atomic_abort. */
typedef struct ms_atomic {
    int fd;       /* the temp file, open for writing; -1 once committed or aborted */
    char *path;   /* the name it takes at commit */
    char *tmp;    /* the temp name */
} ms_atomic;
/* Create the temp file (O_EXCL, `mode` as for open(2), less the umask). `tmp` names it, for a
 * caller whose cleanup of dead writers' leftovers looks for its own pattern; it must be unique
 * to this process (carry the pid) and on path's filesystem. NULL: "<path>.tmp.<pid>.<n>" beside
 * `path`. A leftover under the name is a dead process's and is replaced. On failure *a is
 * reset, so ms_atomic_abort is harmless. MS_EIO, MS_ENOTFOUND (no such directory), MS_ENOMEM. */
int ms_atomic_open(ms_atomic *a, const char *path, const char *tmp, int mode);
/* fsync, rename onto `path`, fsync its directory. Always consumes *a (an error removes the temp
 * file). MS_EIO. */
int ms_atomic_commit(ms_atomic *a);
/* Close and remove the temp file; `path` is untouched. NULL, a failed open, a committed or an
 * aborted ms_atomic are fine. */
void ms_atomic_abort(ms_atomic *a);
/* Write `len` bytes to `path` atomically: ms_atomic_open, one write, ms_atomic_commit. */
int ms_file_write_atomic(const char *path, const void *buf, size_t len);
int ms_mkdir_p(const char *path, int mode);
int ms_fsync_dir(const char *dir);
int ms_write_all(int fd, const void *buf, size_t len);   /* retries EINTR and short writes */
ssize_t ms_read(int fd, void *buf, size_t len);          /* read(2), retrying EINTR */
/* malloc'd "a/b"; NULL on out of memory (no message). */
char *ms_path_join(const char *a, const char *b);
/* free() each of the n pointers: a destructor's list of the buffers its struct owns. */
void ms_free_many(void *const *p, size_t n);
#define MS_FREE_ALL(...) \
    ms_free_many((void *const[]){ __VA_ARGS__ }, sizeof((void *const[]){ __VA_ARGS__ }) / sizeof(void *))
/* malloc'd printf; NULL on out of memory. */
char *ms_strdup_printf(const char *fmt, ...) MS_PRINTF(1, 2);
int ms_is_dir(const char *path);
int ms_is_file(const char *path);

/* `s` made safe to print on a terminal: control characters (C0, DEL, C1) and bytes that are
 * not well-formed UTF-8 become "\xNN"; cut (whole characters) to fit `len`. Returns `buf`. For
 * every string that comes from a file, a blob or the network. */
const char *ms_str_safe(char *buf, size_t len, const char *s);

/* UTF-8 (utf8.c), one definition for every module: well-formed means no overlong forms, no
 * surrogates and nothing past U+10FFFF, as jansson accepts and a terminal decodes it. */
/* Length of the well-formed sequence at s (1..4) within `left` bytes; 0 when it is malformed
 * or cut short. */
size_t ms_utf8_seq(const void *s, size_t left);
/* 1 when all of s[0..len) is well-formed UTF-8. */
int ms_utf8_valid(const char *s, size_t len);
/* For streaming text: the length of s[0..len) without a last character that is cut short
 * (invalid bytes count as whole: they are passed on as they are). */
size_t ms_utf8_complete(const char *s, size_t len);
/* s[0..len) with each byte that begins no well-formed sequence replaced by U+FFFD: malloc'd,
 * NUL-terminated, *out_len bytes long; NULL when out of memory. */
char *ms_utf8_repair(const char *s, size_t len, size_t *out_len);

/* A growable NUL-terminated byte string: {NULL, 0, 0} is empty, free(p) releases it. */
typedef struct ms_text {
    char *p;
    size_t n, cap;
} ms_text;
/* Append s[0..len) and keep p NUL-terminated. MS_ENOMEM (nothing appended). */
int ms_text_put(ms_text *b, const char *s, size_t len);

/* Human-readable byte count into buf ("1.2 GB"). */
const char *ms_fmt_bytes(char *buf, size_t len, uint64_t n);

/* Progress on a terminal (stderr): shown only when stderr is a TTY and total >= threshold. */
typedef struct ms_progress ms_progress;
ms_progress *ms_progress_new(const char *label, uint64_t total, uint64_t threshold);
void ms_progress_update(ms_progress *p, uint64_t done);
void ms_progress_free(ms_progress *p);   /* prints the final line when shown; NULL is fine */

#endif
