/* space.c: the space reserve, so that rm and gc can free space on a full disk.
 *
 * Freeing space needs some first: SQLite creates and sizes index.db-shm (32 KiB) when the first
 * connection opens the index, and appends the changed pages to index.db-wal before it deletes a
 * row, and all of that comes before gc may unlink a single blob (the index must say a blob is
 * unreferenced before its file goes; the reverse order could leave rows naming files that are
 * gone). On a full disk every one of those writes fails with ENOSPC or SQLITE_FULL.
 *
 * So the store keeps <home>/reserve, STORE_RESERVE_BYTES allocated (posix_fallocate), made by
 * store_open when missing and space allows. Work that frees space (store_open_to_free, then
 * store_names_remove and store_gc on that handle) deletes it when it hits a full disk and
 * retries once, in the space it gave back; gc makes it again once it has removed blobs. This is
 * the ballast-file practice: switching the index to a rollback journal would not help (the
 * journal needs space too), and gc cannot remove blobs before the index lets it. Other work
 * (import, pull) never touches the reserve, so it cannot use up what rm needs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_int.h"

void store__reserve_make(const char *home)
{
    char *final = ms_path_join(home, "reserve");
    /* Written in tmp/ under the pid, as a blob writer's file is: if this process dies before
     * the rename, blob_tmp_clean (gc) removes it. */
    char *tmp = ms_strdup_printf("%s/tmp/%ld-reserve", home, (long)getpid());
    ms_atomic a = { .fd = -1 };
    struct stat st;

    if (!final || !tmp || stat(final, &st) == 0 || errno != ENOENT)
        goto done;
    if (ms_atomic_open(&a, final, tmp, 0644) < 0)
        goto done;
    /* Allocated, not sparse: a file of holes would give nothing back when deleted. Best effort:
     * on a disk too full for it, there is no reserve until gc frees space. */
    if (posix_fallocate(a.fd, 0, STORE_RESERVE_BYTES) == 0)
        ms_atomic_commit(&a);
    ms_atomic_abort(&a);
done:
    free(final);
    free(tmp);
}

int store__reserve_release(store *s)
{
    char *p = ms_path_join(s->home, "reserve");
    int removed = p && unlink(p) == 0;

    free(p);
    return removed;
}
