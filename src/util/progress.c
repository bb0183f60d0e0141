/* progress.c: a one-line progress display on stderr, only when stderr is a terminal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

struct ms_progress {
    char label[128];
    uint64_t total, done;
    double start, last;
    int shown;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

ms_progress *ms_progress_new(const char *label, uint64_t total, uint64_t threshold)
{
    ms_progress *p;

    if (total < threshold || !isatty(STDERR_FILENO) || getenv("MSTORE_NO_PROGRESS"))
        return NULL;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->label, sizeof p->label, "%s", label);
    p->total = total;
    p->start = p->last = now();
    return p;
}

static void draw(ms_progress *p, double t)
{
    char a[32], b[32], r[32];
    double el = t - p->start;
    double rate = el > 0 ? (double)p->done / el : 0;
    double eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;

    fprintf(stderr, "\r%s: %s / %s  %s/s  %3d%%  eta %.0fs   ", p->label, ms_fmt_bytes(a, sizeof a, p->done),
            ms_fmt_bytes(b, sizeof b, p->total), ms_fmt_bytes(r, sizeof r, (uint64_t)rate),
            p->total ? (int)(100.0 * (double)p->done / (double)p->total) : 100, eta);
    fflush(stderr);
    p->shown = 1;
}

void ms_progress_update(ms_progress *p, uint64_t done)
{
    double t;

    if (!p)
        return;
    p->done = done > p->total ? p->total : done;
    t = now();
    if (t - p->last >= 0.2) {   /* redraw at most 5 times a second: the terminal is slower than the copy */
        p->last = t;
        draw(p, t);
    }
}

void ms_progress_free(ms_progress *p)
{
    if (!p)
        return;
    draw(p, now());
    fputc('\n', stderr);
    free(p);
}
