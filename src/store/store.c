/* store.c: opening the index (schema, migrations), the store lock, and the name table. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "store/store_int.h"

/* Schema migrations: entry i takes user_version i to i + 1. Never edit an entry that has
 * shipped; append a new one. Foreign keys make invariant 2 hold row by row: a layer row cannot
 * outlive its manifest row, and a tensor row cannot outlive its blob row. */
static const char *const migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE blobs("
    "  digest TEXT PRIMARY KEY NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  media_type TEXT,"
    "  verified_at INTEGER);"
    "CREATE TABLE manifests("
    "  digest TEXT PRIMARY KEY NOT NULL REFERENCES blobs(digest),"
    "  config_digest TEXT NOT NULL REFERENCES blobs(digest),"
    "  media_type TEXT NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL);"
    "CREATE TABLE layers("
    "  manifest_digest TEXT NOT NULL REFERENCES manifests(digest) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL,"
    "  digest TEXT NOT NULL REFERENCES blobs(digest),"
    "  media_type TEXT NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  name TEXT,"
    "  PRIMARY KEY(manifest_digest, idx));"
    "CREATE INDEX layers_digest ON layers(digest);"
    "CREATE TABLE tensors("
    "  blob_digest TEXT NOT NULL REFERENCES blobs(digest) ON DELETE CASCADE,"
    "  name TEXT NOT NULL,"
    "  dtype TEXT NOT NULL,"
    "  shape TEXT NOT NULL,"
    "  quant_type TEXT,"
    "  group_size INTEGER NOT NULL DEFAULT 0,"
    "  offset INTEGER NOT NULL,"
    "  nbytes INTEGER NOT NULL,"
    "  PRIMARY KEY(blob_digest, name));"
    "CREATE TABLE names("
    "  host TEXT NOT NULL,"
    "  namespace TEXT NOT NULL,"
    "  model TEXT NOT NULL,"
    "  tag TEXT NOT NULL,"
    "  manifest_digest TEXT NOT NULL REFERENCES manifests(digest),"
    "  modified_at INTEGER NOT NULL,"
    "  PRIMARY KEY(host, namespace, model, tag));"
    "CREATE INDEX names_manifest ON names(manifest_digest);",
    /* 1 -> 2: registry_blobs, which src/registry used to create itself through the raw handle;
     * IF NOT EXISTS keeps that table, same shape, and its rows. */
    "CREATE TABLE IF NOT EXISTS registry_blobs(host TEXT NOT NULL, repo TEXT NOT NULL,"
    " digest TEXT NOT NULL, PRIMARY KEY(host, repo, digest)) WITHOUT ROWID;",
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))
/* The oldest schema a read-only handle reads without migrating: 1 -> 2 only added a table
 * that reads do without (store_registry_blob_find finds nothing in it). Raise it when a
 * migration changes what reading needs. */
#define SCHEMA_READABLE 1

int store__db_err(store *s, const char *what)
{
    int e = sqlite3_errcode(s->db) & 0xff, os = sqlite3_system_errno(s->db);
    int code = MS_ERROR;

    /* SQLite reports a -shm it cannot size as SQLITE_IOERR; the OS error says why. */
    s->full = e == SQLITE_FULL || ((e == SQLITE_IOERR || e == SQLITE_CANTOPEN) && (os == ENOSPC || os == EDQUOT));
    if (e == SQLITE_BUSY || e == SQLITE_LOCKED)
        code = MS_EBUSY;
    else if (e == SQLITE_IOERR || e == SQLITE_FULL || e == SQLITE_CANTOPEN || e == SQLITE_READONLY ||
             e == SQLITE_PERM)
        code = MS_EIO;
    else if (e == SQLITE_NOMEM)
        code = MS_ENOMEM;
    return ms_err(code, "%s: %s: %s", s->db_path, what, sqlite3_errmsg(s->db));
}

int store__exec(store *s, const char *sql)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store__db_err(s, sql);
    return 0;
}

int store__prepare(store *s, sqlite3_stmt **out, const char *sql)
{
    *out = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, out, NULL) != SQLITE_OK)
        return store__db_err(s, "prepare");
    return 0;
}

int store__rows(store *s, sqlite3_stmt *st, void *rows, size_t *n_rows, size_t size, store_row_fn fill, void *arg,
                const char *what)
{
    char **v = rows;   /* the caller's array pointer, of any element type */
    size_t cap = 0;
    int rc = 0, step;

    *v = NULL;
    *n_rows = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        char *row;

        if ((rc = ms_grow(v, &cap, *n_rows + 1, size)) < 0)
            break;
        row = *v + *n_rows * size;
        memset(row, 0, size);
        if ((rc = fill(row, st, arg)) < 0)
            break;
        if (rc == 0)
            ++*n_rows;
        rc = 0;
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = store__db_err(s, what);
    sqlite3_finalize(st);
    return rc;
}

int store__row_digest(void *row, sqlite3_stmt *st, void *arg)
{
    const char *d = (const char *)sqlite3_column_text(st, 0);

    if (!arg && (!d || strlen(d) >= sizeof(ms_digest)))
        return 1;   /* cannot name a file in blobs/ */
    snprintf(row, sizeof(ms_digest), "%s", d ? d : "");
    return 0;
}

/* IMMEDIATE takes the write lock up front, so two writers queue on the busy timeout instead of
 * one failing with SQLITE_BUSY when it upgrades a read transaction. */
int store__begin(store *s, int immediate)
{
    int rc;

    /* IMMEDIATE is asked for by every writing transaction, so this one check refuses them all. */
    if (immediate && (rc = store__writable(s, "write the index")) < 0)
        return rc;
    return store__exec(s, immediate ? "BEGIN IMMEDIATE" : "BEGIN");
}

int store__commit(store *s)
{
    return store__exec(s, "COMMIT");
}

void store__rollback(store *s)
{
    if (s && s->db && !sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

void store__name_bind(sqlite3_stmt *st, int first, const model_name *n)
{
    sqlite3_bind_text(st, first, n->host, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 1, n->namespace_, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 2, n->model, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 3, n->tag, -1, SQLITE_STATIC);
}

int store__digest_cmp(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

int store__blobs_scan(store *s, ms_digest **out, size_t *n_out)
{
    char *dir = ms_path_join(s->home, "blobs");
    ms_digest *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    DIR *d = NULL;
    int rc = 0;

    *out = NULL;
    *n_out = 0;
    if (!dir)
        return ms_err(MS_ENOMEM, "out of memory");
    d = opendir(dir);
    if (!d) {
        rc = ms_err_os("%s: open directory", dir);
        goto done;
    }
    while ((e = readdir(d)) != NULL) {
        ms_digest digest;

        if (strncmp(e->d_name, "sha256-", 7) != 0 || strlen(e->d_name) != 7 + 64)
            continue;
        snprintf(digest, sizeof digest, "sha256:%s", e->d_name + 7);
        if (!blob_digest_valid(digest))
            continue;
        if ((rc = ms_grow(&v, &cap, n + 1, sizeof *v)) < 0)
            goto done;
        memcpy(v[n++], digest, sizeof digest);
    }
    if (n)
        qsort(v, n, sizeof *v, store__digest_cmp);
done:
    if (d)
        closedir(d);
    free(dir);
    if (rc < 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n_out = n;
    return 0;
}

/* ---------------------------------------------------------------- open, schema */

static int pragma_int(store *s, const char *sql, int *out)
{
    sqlite3_stmt *st = NULL;
    int rc = store__prepare(s, &st, sql);

    if (rc < 0)
        return rc;
    if (sqlite3_step(st) != SQLITE_ROW)
        rc = store__db_err(s, sql);
    else
        *out = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc;
}

static int schema_too_new(store *s, int version)
{
    return ms_err(MS_EINVALID, "%s: index schema version %d is newer than this mstore knows (%d); "
                  "use a newer mstore", s->db_path, version, SCHEMA_VERSION);
}

/* Reads user_version outside a transaction first so that the usual case (up to date) takes no
 * write lock; when a migration is due, reads it again under BEGIN IMMEDIATE because another
 * process opening the same store may have migrated in between. */
static int schema_migrate(store *s)
{
    int version = 0, from = 0, rc;

    if ((rc = pragma_int(s, "PRAGMA user_version", &version)) < 0)
        return rc;
    if (version == SCHEMA_VERSION)
        return 0;
    if (version < 0)
        return ms_err(MS_EINVALID, "%s: index schema version %d is not valid", s->db_path, version);
    if (version > SCHEMA_VERSION)
        return schema_too_new(s, version);
    if ((rc = store__begin(s, 1)) < 0)
        return rc;
    if ((rc = pragma_int(s, "PRAGMA user_version", &version)) < 0)
        goto fail;
    if (version > SCHEMA_VERSION) {
        store__rollback(s);
        return schema_too_new(s, version);
    }
    from = version;
    for (; version < SCHEMA_VERSION; version++) {
        char sql[64];

        if ((rc = store__exec(s, migrations[version])) < 0)
            goto fail;
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", version + 1);
        if ((rc = store__exec(s, sql)) < 0)
            goto fail;
    }
    if ((rc = store__commit(s)) < 0)
        goto fail;
    return 0;
fail:
    store__rollback(s);
    return ms_err_ctx("schema migration from version %d to %d", from, SCHEMA_VERSION);
}

/* synchronous=FULL rather than NORMAL: in WAL mode NORMAL may lose the last commits on power
 * loss. The index changes once per import, pull, cp or rm, so one more fsync per change costs
 * nothing next to the blobs written, and a model that `import` reported must still be there. */
static int db_configure(store *s)
{
    sqlite3_stmt *st = NULL;
    int rc, step;

    sqlite3_busy_timeout(s->db, 10000);
    if ((rc = store__exec(s, "PRAGMA foreign_keys = ON")) < 0)
        return rc;
    if ((rc = store__prepare(s, &st, "PRAGMA journal_mode = WAL")) < 0)
        return rc;
    /* Switching a new database to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY
     * there without calling the busy handler: two processes opening a fresh store at once (two
     * pulls into a new home) would fail. So wait here, as the busy timeout would. */
    for (int waited = 0; (step = sqlite3_step(st)) == SQLITE_BUSY && waited < 10000; waited += 10) {
        sqlite3_reset(st);
        usleep(10000);
    }
    if (step != SQLITE_ROW) {
        rc = store__db_err(s, "PRAGMA journal_mode = WAL");
    } else if (strcmp((const char *)sqlite3_column_text(st, 0), "wal") != 0) {
        rc = ms_err(MS_EIO, "%s: cannot use WAL journal mode (got '%s')", s->db_path,
                    (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    return store__exec(s, "PRAGMA synchronous = FULL");
}

static int home_prepare(const char *home)
{
    int rc;

    if ((rc = ms_mkdir_p(home, 0755)) < 0)
        return ms_err_ctx("store home");
    /* Checked here so that the message names the home, not whichever file fails first. */
    if (access(home, W_OK | X_OK) < 0)
        return ms_err_os("%s: store home is not writable", home);
    if ((rc = blob_dirs_make(home)) < 0)
        return rc;
    return 0;
}

/* A store to open read-only: its index exists and its home cannot be written (read-only file
 * system, a shared directory, another user's store). Root passes access() on a 0555 home, and
 * is then simply a writer. */
static int home_readonly(const char *home, const char *db_path)
{
    if (!ms_is_file(db_path) || access(home, W_OK | X_OK) == 0)
        return 0;
    return errno == EACCES || errno == EROFS || errno == EPERM;
}

/* "file:" URI of `path` for sqlite3_open_v2: '%', '?' and '#' would end or change the path. */
static char *uri_of(const char *path, const char *query)
{
    size_t n = strlen(path), k = 0;
    char *u = malloc(5 + 3 * n + strlen(query) + 1);

    if (!u)
        return NULL;
    k += (size_t)sprintf(u, "file:");
    for (size_t i = 0; i < n; i++)
        k += strchr("%?#", path[i]) ? (size_t)sprintf(u + k, "%%%02X", (unsigned char)path[i])
                                    : (size_t)sprintf(u + k, "%c", path[i]);
    strcpy(u + k, query);
    return u;
}

/* Read-only: first as an ordinary reader (mode=ro), which sees a WAL that a writer of the
 * store keeps, when its -shm exists. Without -wal and -shm, and no right to create them in
 * the home, SQLite refuses to read a WAL database that way (SQLITE_READONLY); nothing can be
 * writing it then, so it opens immutable: no locks, no side files, the main file as it is. */
static int db_open_readonly(store *s)
{
    static const char *const queries[] = { "?mode=ro", "?immutable=1" };
    int rc = 0;

    for (int i = 0; i < 2; i++) {
        char *uri = uri_of(s->db_path, queries[i]);
        int version = 0;

        if (!uri)
            return ms_err(MS_ENOMEM, "%s: out of memory", s->db_path);
        if (s->db)
            sqlite3_close_v2(s->db);
        s->db = NULL;
        rc = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
        free(uri);
        if (rc != SQLITE_OK) {
            rc = s->db ? store__db_err(s, "open read-only") : ms_err(MS_ENOMEM, "%s: out of memory", s->db_path);
            continue;
        }
        sqlite3_busy_timeout(s->db, 10000);
        if ((rc = pragma_int(s, "PRAGMA user_version", &version)) == 0)
            return 0;
    }
    return rc;
}

/* No migration without write access: say what would make the store usable. */
static int schema_check_readonly(store *s)
{
    int version = 0, rc;

    if ((rc = pragma_int(s, "PRAGMA user_version", &version)) < 0)
        return rc;
    if (version > SCHEMA_VERSION)
        return schema_too_new(s, version);
    s->schema = version;
    if (version < SCHEMA_READABLE)
        return ms_err(MS_EINVALID, "%s: index schema version %d is older than this mstore's (%d) and the store "
                      "is read-only: run any mstore command once with write access to %s to migrate it",
                      s->db_path, version, SCHEMA_VERSION, s->home);
    return 0;
}

/* One attempt; *full_out says whether it failed for a full disk. `ro`: open read-only
 * whatever the home allows (store_open on a full disk). */
static int open_once(store **out, const char *home, int ro, int *full_out)
{
    store *s = calloc(1, sizeof *s);
    char *lock_path = NULL;
    int rc;

    *out = NULL;
    *full_out = 0;
    if (!s)
        return ms_err(MS_ENOMEM, "%s: out of memory", home);
    s->lock_fd = -1;
    s->home = strdup(home);
    s->db_path = ms_path_join(home, "index.db");
    lock_path = ms_path_join(home, "lock");
    if (!s->home || !s->db_path || !lock_path) {
        rc = ms_err(MS_ENOMEM, "%s: out of memory", home);
        goto fail;
    }
    if (ro || home_readonly(home, s->db_path)) {
        s->readonly = ro ? 2 : 1;
        if ((rc = db_open_readonly(s)) < 0 || (rc = schema_check_readonly(s)) < 0)
            goto fail;
        free(lock_path);
        *out = s;
        return 0;
    }
    if ((rc = home_prepare(home)) < 0)
        goto fail_os;
    s->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        rc = ms_err_os("%s: open", lock_path);
        goto fail_os;
    }
    if (sqlite3_open_v2(s->db_path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        rc = s->db ? store__db_err(s, "open") : ms_err(MS_ENOMEM, "%s: out of memory", s->db_path);
        goto fail;
    }
    if ((rc = db_configure(s)) < 0 || (rc = schema_migrate(s)) < 0)
        goto fail;
    free(lock_path);
    *out = s;
    return 0;
fail_os:
    s->full = errno == ENOSPC || errno == EDQUOT;
fail:
    *full_out = s->full;
    free(lock_path);
    store_close(s);
    return rc;
}

/* 1 when index.db-wal is absent or empty: the index file alone holds every commit. */
static int wal_empty(const char *home)
{
    char *p = ms_strdup_printf("%s/index.db-wal", home);
    struct stat st;
    int empty = p && (stat(p, &st) < 0 ? errno == ENOENT : st.st_size == 0);

    free(p);
    return empty;
}

int store_open(store **out, const char *home)
{
    char msg[2048];
    int full, rc = open_once(out, home, 0, &full);

    /* Here, not in store_open_to_free: rm and gc must not take back what they were given. */
    if (rc == 0 && !(*out)->readonly)
        store__reserve_make(home);
    /* On a full disk SQLite cannot size index.db-shm, so not even `list` could open the store,
     * and the user needs it to choose what to rm. Read-only needs no -shm; when the WAL is
     * empty (every commit is in index.db) nothing is missed. Writes then say the disk is full. */
    if (rc < 0 && full && wal_empty(home)) {
        snprintf(msg, sizeof msg, "%s", ms_err_msg());
        if (open_once(out, home, 1, &full) == 0)
            return 0;
        ms_err(rc, "%s", msg);
    }
    return rc;
}

int store_open_to_free(store **out, const char *home)
{
    int full, rc = open_once(out, home, 0, &full);
    store tmp = { .home = (char *)home };

    /* Opening can already need space: SQLite sizes index.db-shm when it opens the index. */
    if (rc < 0 && full && store__reserve_release(&tmp))
        rc = open_once(out, home, 0, &full);
    if (rc == 0)
        (*out)->to_free = 1;
    return rc;
}

int store__retry_full(store *s, int rc)
{
    if (rc < 0 && s->to_free && s->full && store__reserve_release(s)) {
        s->full = 0;
        return 1;
    }
    return 0;
}

int store_readonly(const store *s)
{
    return s->readonly;
}

int store__writable(store *s, const char *what)
{
    if (!s->readonly)
        return 0;
    if (s->readonly == 2)
        return ms_err(MS_EIO, "%s: %s: the disk is full (the store opened read-only); 'mstore rm' and 'mstore gc' "
                      "can still free space", s->home, what);
    return ms_err(MS_EIO, "%s: %s: the store is read-only (no write access to %s)", s->home, what, s->home);
}

void store_close(store *s)
{
    if (!s)
        return;
    if (s->db)
        sqlite3_close_v2(s->db);
    if (s->lock_fd >= 0)
        close(s->lock_fd);   /* releases any flock this handle still holds */
    MS_FREE_ALL(s->home, s->db_path, s);
}

const char *store_home(const store *s)
{
    return s->home;
}

struct sqlite3 *store_db(store *s)
{
    return s->db;
}

char *store_home_default(const char *flag)
{
    const char *env = getenv("MSTORE_HOME");
    const char *home = getenv("HOME");

    if (flag && *flag)
        return strdup(flag);
    if (env && *env)
        return strdup(env);
    if (!home || !*home) {
        struct passwd *pw = getpwuid(getuid());
        home = pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : "/";
    }
    return ms_path_join(home, ".mstore");
}

/* ---------------------------------------------------------------- lock */

static int lock_take(store *s, int op, const char *what)
{
    while (flock(s->lock_fd, op) < 0) {
        if (errno != EINTR)
            return ms_err_os("%s/lock: %s", s->home, what);
    }
    return 0;
}

void store_lock_wait_notify(store *s, store_wait_fn fn, void *ctx)
{
    s->wait_fn = fn;
    s->wait_ctx = ctx;
}

/* A holder's command line, NULs as spaces, made printable, cut at `len`. */
static void holder_cmdline(char *buf, size_t len, long pid)
{
    char path[64], raw[160], safe[480];
    ssize_t n;
    int fd;

    buf[0] = '\0';
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    n = read(fd, raw, sizeof raw - 1);
    close(fd);
    if (n <= 0)
        return;
    while (n > 0 && raw[n - 1] == '\0')
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (raw[i] == '\0')
            raw[i] = ' ';
    raw[n] = '\0';
    snprintf(buf, len, " (%s%s)", ms_str_safe(safe, sizeof safe, raw), (size_t)n == sizeof raw - 1 ? "..." : "");
}

/* "pid 123 (mstore import ...), pid 456 (...)": the processes holding <home>/lock, as Linux lists
 * them in /proc/locks ("1: FLOCK  ADVISORY  READ 123 08:01:4242 0 EOF"; lines with "->" are
 * waiters). Empty where the system does not say. flock records the process that took the lock,
 * which is the one holding it for every writer of this store. */
static void lock_holders(store *s, char *buf, size_t len)
{
    struct stat st;
    char line[256], cmd[200];
    size_t at = 0;
    FILE *f;

    buf[0] = '\0';
    if (fstat(s->lock_fd, &st) < 0 || !(f = fopen("/proc/locks", "re")))
        return;
    while (fgets(line, sizeof line, f) && at + 1 < len) {
        char kind[16], mode[16];
        unsigned maj, min;
        unsigned long long ino;
        long pid;
        if (strstr(line, "->") ||
            sscanf(line, "%*[^:]: %15s %*s %15s %ld %x:%x:%llu", kind, mode, &pid, &maj, &min, &ino) != 6 ||
            strcmp(kind, "FLOCK") != 0 || ino != (unsigned long long)st.st_ino || maj != major(st.st_dev) ||
            min != minor(st.st_dev) || pid == (long)getpid())
            continue;
        holder_cmdline(cmd, sizeof cmd, pid);
        at += (size_t)snprintf(buf + at, len - at, "%spid %ld%s", at ? ", " : "", pid, cmd);
    }
    fclose(f);
}

int store__lock_exclusive(store *s)
{
    char who[1024], safe[1024];

    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    if (errno != EWOULDBLOCK && errno != EINTR)
        return ms_err_os("%s/lock: take exclusive lock", s->home);
    /* Work in progress holds it shared (imports, pulls, creates): say whose it is, since the
     * wait may be long and was silent. */
    if (s->wait_fn) {
        char msg[2600];
        lock_holders(s, who, sizeof who);
        snprintf(msg, sizeof msg, "waiting for the store's lock at %s/lock, held by %s",
                 ms_str_safe(safe, sizeof safe, s->home),
                 who[0] ? who : "another process (an import, pull or create in progress)");
        s->wait_fn(s->wait_ctx, msg);
    }
    return lock_take(s, LOCK_EX, "take exclusive lock");
}

int store_write_begin(store *s)
{
    int rc;

    if ((rc = store__writable(s, "write")) < 0)
        return rc;
    if (s->n_write == 0 && (rc = lock_take(s, LOCK_SH, "take shared lock")) < 0)
        return rc;
    s->n_write++;
    return 0;
}

void store_write_end(store *s)
{
    if (!s || s->n_write == 0)
        return;
    if (--s->n_write == 0)
        flock(s->lock_fd, LOCK_UN);
}

/* ---------------------------------------------------------------- names */

/* Names match whatever their case, as ollama and Docker (which refuses upper case) treat them:
 * "Tiny" and "tiny" are one model. Names are ASCII (name_parse), which NOCASE folds. */
#define NAME_MATCH \
    "host = ?1 COLLATE NOCASE AND namespace = ?2 COLLATE NOCASE AND model = ?3 COLLATE NOCASE AND tag = ?4 COLLATE NOCASE"

/* A reference by digest finds the model stored under its name only when that model is the
 * version the digest names: its manifest, or the manifest it was derived from at pull time
 * (an ollama model, kept as its MT_SOURCE_MANIFEST layer). */
static int version_check(store *s, const model_name *name, const char *digest)
{
    char disp[NAME_HOST_MAX + 3 * NAME_PART_MAX];
    const manifest_layer *src;
    manifest *m = NULL;
    int rc, same;

    if (!name->digest[0] || strcmp(name->digest, digest) == 0)
        return 0;
    if ((rc = store_manifest_load(s, digest, &m)) < 0)
        return rc;
    src = manifest_layer_find(m, MT_SOURCE_MANIFEST, NULL);
    same = src && strcmp(src->digest, name->digest) == 0;
    manifest_free(m);
    if (same)
        return 0;
    name_display(disp, sizeof disp, name);
    return ms_err(MS_ENOTFOUND, "model '%s' is version %s, not %s", disp, digest, name->digest);
}

int store_name_resolve(store *s, const model_name *name, ms_digest digest_out)
{
    sqlite3_stmt *st = NULL;
    int rc, step;

    digest_out[0] = '\0';
    rc = store__prepare(s, &st, "SELECT manifest_digest FROM names WHERE " NAME_MATCH);
    if (rc < 0)
        return rc;
    store__name_bind(st, 1, name);
    step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const char *d = (const char *)sqlite3_column_text(st, 0);
        if (d && blob_digest_valid(d))
            snprintf(digest_out, sizeof(ms_digest), "%s", d);
        else
            rc = ms_err(MS_EINVALID, "%s: names: malformed manifest digest '%s'", s->db_path, d ? d : "");
    } else if (step == SQLITE_DONE) {
        char disp[NAME_HOST_MAX + 3 * NAME_PART_MAX];
        name_display(disp, sizeof disp, name);
        rc = ms_err(MS_ENOTFOUND, "model '%s' not found", disp);
    } else {
        rc = store__db_err(s, "resolve name");
    }
    sqlite3_finalize(st);
    if (rc == 0 && (rc = version_check(s, name, digest_out)) < 0)
        digest_out[0] = '\0';
    return rc;
}

int store__name_set(store *s, const model_name *name, const char *digest)
{
    sqlite3_stmt *st = NULL;
    int rc = store__prepare(s, &st, "DELETE FROM names WHERE " NAME_MATCH);

    /* The caller's transaction makes the two statements one change: the name's row under any
     * spelling goes, the new spelling comes (Tiny, then tiny: one model, named as last given). */
    if (rc < 0)
        return rc;
    store__name_bind(st, 1, name);
    rc = sqlite3_step(st) == SQLITE_DONE ? 0 : store__db_err(s, "write name");
    sqlite3_finalize(st);
    st = NULL;
    if (rc < 0)
        return rc;
    rc = store__prepare(s, &st,
        "INSERT INTO names(host, namespace, model, tag, manifest_digest, modified_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(host, namespace, model, tag) DO UPDATE SET "
        "manifest_digest = excluded.manifest_digest, modified_at = excluded.modified_at");

    if (rc < 0)
        return rc;
    store__name_bind(st, 1, name);
    sqlite3_bind_text(st, 5, digest, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, (sqlite3_int64)time(NULL));
    if (sqlite3_step(st) != SQLITE_DONE)
        rc = store__db_err(s, "write name");
    sqlite3_finalize(st);
    return rc;
}

int store_name_copy(store *s, const model_name *src, const model_name *dst)
{
    ms_digest digest;
    int rc;

    /* Resolve and write in one transaction, so a concurrent rm of `src` cannot leave `dst`
     * pointing at a manifest that gc has already judged dead. */
    if ((rc = store__begin(s, 1)) < 0)
        return rc;
    if ((rc = store_name_resolve(s, src, digest)) < 0 || (rc = store__name_set(s, dst, digest)) < 0 ||
        (rc = store__commit(s)) < 0) {
        store__rollback(s);
        return rc;
    }
    return 0;
}

int store_name_remove(store *s, const model_name *name)
{
    sqlite3_stmt *st = NULL;
    ms_digest digest;
    int rc;

    /* rm of a reference by digest removes the name only when it is that version */
    if (name->digest[0] && (rc = store_name_resolve(s, name, digest)) < 0)
        return rc;
    if ((rc = store__writable(s, "remove a name")) < 0 ||
        (rc = store__prepare(s, &st, "DELETE FROM names WHERE " NAME_MATCH)) < 0)
        return rc;
    store__name_bind(st, 1, name);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = store__db_err(s, "remove name");
    } else if (sqlite3_changes(s->db) == 0) {
        char disp[NAME_HOST_MAX + 3 * NAME_PART_MAX];
        name_display(disp, sizeof disp, name);
        rc = ms_err(MS_ENOTFOUND, "model '%s' not found", disp);
    }
    sqlite3_finalize(st);
    return rc;
}

static int names_remove_once(store *s, const model_name *names, size_t n)
{
    int rc;

    /* One transaction: `rm a nosuch b` used to delete a, fail, and keep b. */
    s->full = 0;
    if ((rc = store__begin(s, 1)) < 0)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = store_name_remove(s, &names[i]);
    if (rc == 0)
        rc = store__commit(s);
    if (rc < 0)
        store__rollback(s);
    return rc;
}

int store_names_remove(store *s, const model_name *names, size_t n)
{
    int rc = names_remove_once(s, names, n);

    if (store__retry_full(s, rc))   /* a full disk: once more, in the reserve's space */
        rc = names_remove_once(s, names, n);
    return rc;
}
