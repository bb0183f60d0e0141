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

/* Checked arithmetic: return 0 on success, -1 (no message) on overflow. */
static inline int ms_add(size_t *out, size_t a, size_t b) { return __builtin_add_overflow(a, b, out) ? -1 : 0; }
static inline int ms_mul(size_t *out, size_t a, size_t b) { return __builtin_mul_overflow(a, b, out) ? -1 : 0; }
static inline int ms_add64(uint64_t *out, uint64_t a, uint64_t b) { return __builtin_add_overflow(a, b, out) ? -1 : 0; }
static inline int ms_mul64(uint64_t *out, uint64_t a, uint64_t b) { return __builtin_mul_overflow(a, b, out) ? -1 : 0; }
static inline uint64_t ms_align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

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
/* Write `len` bytes to `path` atomically (temp file beside it, fsync, rename). */
int ms_file_write_atomic(const char *path, const void *buf, size_t len);
int ms_mkdir_p(const char *path, int mode);
int ms_fsync_dir(const char *dir);
int ms_write_all(int fd, const void *buf, size_t len);   /* retries EINTR and short writes */
/* malloc'd "a/b"; NULL on out of memory (no message). */
char *ms_path_join(const char *a, const char *b);
/* malloc'd printf; NULL on out of memory. */
char *ms_strdup_printf(const char *fmt, ...) MS_PRINTF(1, 2);
int ms_is_dir(const char *path);
int ms_is_file(const char *path);

/* `s` made safe to print on a terminal: control characters (C0, DEL, C1) and bytes that are
 * not well-formed UTF-8 become "\xNN"; cut (whole characters) to fit `len`. Returns `buf`. For
 * every string that comes from a file, a blob or the network. */
const char *ms_str_safe(char *buf, size_t len, const char *s);

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
