/* pool.c: persistent worker threads. A decode step runs some hundred small jobs (one per
 * matmul), so workers are created once and woken per job; they spin briefly before sleeping
 * because the next job usually follows within microseconds. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "cpu/cpu_int.h"

#define SPIN 2000

typedef struct worker {
    cpu_pool *p;
    int ith;
} worker;

struct cpu_pool {
    int n;
    int n_started;
    pthread_t *th;
    worker *w;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    cpu_task_fn fn;
    void *ctx;
    atomic_uint_fast64_t gen;   /* bumped once per job */
    atomic_int pending;         /* workers still inside the current job */
    atomic_int stop;
};

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    cpu_pool *p = w->p;
    uint64_t seen = 0, g = 0;

    for (;;) {
        for (int i = 0; i < SPIN; i++) {
            g = atomic_load(&p->gen);
            if (g != seen || atomic_load(&p->stop))
                break;
            relax();
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = g;
        p->fn(p->ctx, w->ith, p->n);
        if (atomic_fetch_sub(&p->pending, 1) == 1) {
            /* under the lock, so that run() cannot miss it between its check and its wait */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

int cpu_pool_new(cpu_pool **out, int n_threads)
{
    cpu_pool *p;

    *out = NULL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 512)
        return ms_err(MS_EINVALID, "threads: %d is more than 512", n_threads);
    p = calloc(1, sizeof *p);
    if (!p)
        return ms_err(MS_ENOMEM, "thread pool: out of memory");
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    p->th = calloc((size_t)n_threads, sizeof *p->th);
    p->w = calloc((size_t)n_threads, sizeof *p->w);
    if (!p->th || !p->w) {
        cpu_pool_free(p);
        return ms_err(MS_ENOMEM, "thread pool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        p->w[i].p = p;
        p->w[i].ith = i;
        if (pthread_create(&p->th[i], NULL, worker_main, &p->w[i]) != 0) {
            cpu_pool_free(p);
            return ms_err(MS_EIO, "thread pool: cannot start thread %d of %d", i + 1, n_threads);
        }
        p->n_started = i;
    }
    *out = p;
    return 0;
}

int cpu_pool_threads(const cpu_pool *p) { return p ? p->n : 1; }

void cpu_pool_run(cpu_pool *p, cpu_task_fn fn, void *ctx)
{
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    for (int i = 0; i < SPIN && atomic_load(&p->pending); i++)
        relax();
    if (atomic_load(&p->pending)) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->pending))
            pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

void cpu_pool_free(cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i <= p->n_started; i++)
        pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    MS_FREE_ALL(p->th, p->w, p);
}
