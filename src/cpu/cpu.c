/* cpu.c: the CPU backend: path selection, and the backend operations built on the row kernels.
 * Matmuls split the weight rows across the pool's threads; attention splits (token, head)
 * pairs. Everything else is cheap next to the matmuls and runs on the calling thread. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif
#if defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "cpu/kernels.h"
#include "cpu/kquant_int.h"   /* MLX: its own matmul, hooked below */

/* ---------------------------------------------------------------- the CPU's features */

/* What the paths' code may use, read from cpuid / the kernel's hwcaps only: nothing compiled
 * for an instruction set runs before these say the CPU has it. */
enum {
    F_AVX2 = 1 << 0,          /* AVX2, FMA and F16C, with the OS saving the ymm state */
    F_AVX512 = 1 << 1,        /* AVX-512 F, BW, DQ, VL, with the OS saving the zmm state */
    F_AVX512VNNI = 1 << 2,
    F_AVXVNNI = 1 << 3,       /* the VEX encoding */
    F_AMX = 1 << 4,           /* AMX-TILE and AMX-INT8 (Linux's leave to use them: amx_granted) */
    F_NEON = 1 << 5,          /* AArch64's Advanced SIMD: part of the architecture */
    F_DOTPROD = 1 << 6,       /* SDOT */
    F_I8MM = 1 << 7,          /* USDOT, SMMLA */
};

static unsigned features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4])
{
    __asm__("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
#endif

/* __builtin_cpu_supports checks the OS's xsave state for AVX and AVX-512 as well as the cpuid
 * bits. AVX-VNNI (leaf 7 subleaf 1, eax bit 4) is a feature gcc 12 does not know; AMX-TILE and
 * AMX-INT8 are leaf 7 edx bits 24 and 25, and without arch_prctl(ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA) (Linux 5.16 on; numbers from its uapi headers, spelled out for older ones)
 * the first tile instruction would kill the process: amx_ask below asks for it, once, for every
 * thread of the process. AArch64: SDOT and USDOT are optional, and the kernel says
 * which the CPU has (HWCAP_ASIMDDP bit 20, HWCAP2_I8MM bit 13). */
static void features_read(void)
{
    unsigned f = 0;
#if defined(__x86_64__) || defined(__i386__)
    unsigned r[4];

    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        f |= F_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        f |= F_AVX512;
    if (__builtin_cpu_supports("avx512vnni"))
        f |= F_AVX512VNNI;
    cpuid(0, 0, r);
    if (r[0] >= 7) {
        cpuid(7, 1, r);
        if ((f & F_AVX2) && ((r[0] >> 4) & 1))
            f |= F_AVXVNNI;
        cpuid(7, 0, r);
#if defined(__x86_64__)
        if (((r[3] >> 24) & 1) && ((r[3] >> 25) & 1))
            f |= F_AMX;
#endif
    }
#elif defined(__aarch64__)
    f |= F_NEON;
    if (getauxval(AT_HWCAP) & (1ul << 20))
        f |= F_DOTPROD;
    if ((f & F_DOTPROD) && (getauxval(AT_HWCAP2) & (1ul << 13)))
        f |= F_I8MM;
#endif
    features = f;
}

/* ---------------------------------------------------------------- paths */

/* The paths, best first, with the features each one's code needs (its own and its bases'). "auto"
 * takes the first this CPU and build can run, so the paths after "scalar" are only ever taken by
 * name. avx512vnni comes first: on a quiet AMD EPYC with AVX512-VNNI it beat avx512 in every
 * prefill and decode of the 1.1B Q4_0, Q8_0 and Q4_K_M models (BENCHMARKS.md, issue 15), at the
 * scalar path's 16-bit accuracy. avxvnni is avx2 with vpdpwssd doing the work of vpmaddwd +
 * vpaddd (the same bits, fewer instructions), so a CPU with AVX-VNNI and no AVX-512 (Intel Core
 * since Alder Lake) takes it before avx2; vnni-emul and avxvnni-evex (avxvnni's code on
 * AVX512-VNNI, which the test machines have and AVX-VNNI they lack) exist for tests. The -int8
 * paths round activations
 * to 8 bits (what llama.cpp does): faster, about 1e-2 from the float64 logits where the others stay
 * near 1e-5, so only by name. amx-int8 and amx are the arithmetic of avx512vnni-int8 and avx512vnni
 * with the prefill on AMX tiles, the -emul ones their tests; by name, since on a Sapphire
 * Rapids-class Xeon their first version was slower than the VNNI paths and the rebuilt loops are
 * not yet timed there (BENCHMARKS.md). */
#define F_X512 (F_AVX2 | F_AVX512)
static const struct {
    const cpu_path *path;
    unsigned need;
} paths[] = {
    { &cpu_path_avx512vnni, F_X512 | F_AVX512VNNI },
    { &cpu_path_avx512, F_X512 },
    { &cpu_path_avxvnni, F_AVX2 | F_AVXVNNI },
    { &cpu_path_avx2, F_AVX2 },
    { &cpu_path_neon_i8mm, F_NEON | F_DOTPROD | F_I8MM },
    { &cpu_path_neon_dotprod, F_NEON | F_DOTPROD },
    { &cpu_path_neon, F_NEON },
    { &cpu_path_scalar, 0 },
    { &cpu_path_vnni_emul, 0 },
    { &cpu_path_avxvnni_evex, F_X512 | F_AVX512VNNI },
    { &cpu_path_avx512vnni8, F_X512 | F_AVX512VNNI },
    { &cpu_path_avxvnni8, F_AVX2 | F_AVXVNNI },
    { &cpu_path_vnni8_emul, 0 },
    { &cpu_path_amx8, F_X512 | F_AVX512VNNI | F_AMX },
    { &cpu_path_amx8_emul, 0 },
    { &cpu_path_amx16, F_X512 | F_AVX512VNNI | F_AMX },
    { &cpu_path_amx16_emul, 0 },
};
#define N_PATHS (sizeof paths / sizeof paths[0])

static cpu_path resolved[N_PATHS];   /* each path with its bases' entries filled in */
static const cpu_path *selected;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT, select_once = PTHREAD_ONCE_INIT;

static size_t path_index(const cpu_path *p)
{
    size_t i = 0;

    while (i < N_PATHS && paths[i].path != p)
        i++;
    return i;
}

/* Linux's leave to use the tile data, asked only when an AMX path is (as before the table: the
 * grant enlarges every signal frame of the process, which no other path needs). */
static int amx_granted;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_ask(void)
{
#if defined(__x86_64__)
    amx_granted = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#endif
}

/* 1 when this build has the path's code and this CPU everything it and its bases need. Reads
 * only the constant tables and the features: safe on any CPU. */
static int runnable(size_t i)
{
    pthread_once(&features_once, features_read);
    for (const cpu_path *p = paths[i].path; p; p = p->base) {
        size_t k = path_index(p);
        if (k == N_PATHS || !p->built || (features & paths[k].need) != paths[k].need)
            return 0;
    }
    if (paths[i].need & F_AMX) {
        pthread_once(&amx_once, amx_ask);
        return amx_granted;
    }
    return 1;
}

/* The entries a path leaves NULL, from its bases (cpu_int.h): data only, no kernel runs. */
static void resolve(cpu_path *out, const cpu_path *p)
{
    if (p->base)
        resolve(out, p->base);
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (p->type[t].dot)
            out->type[t] = p->type[t];
#define TAKE(f) out->f = p->f ? p->f : out->f
    TAKE(dot_f32), TAKE(dot_f32_f16), TAKE(axpy_f32), TAKE(axpy_f16), TAKE(dots_f32), TAKE(axpys_f32);
    TAKE(f32_to_f16), TAKE(mlx_block4), TAKE(mlx_block8), TAKE(act_bytes), TAKE(act_quantize);
#undef TAKE
    out->name = p->name;
    out->base = p->base;
    out->built = p->built;
}

static void resolve_all(void)
{
    for (size_t i = 0; i < N_PATHS; i++)
        if (paths[i].path->built)
            resolve(&resolved[i], paths[i].path);
}

static void use(size_t i)
{
    pthread_once(&resolve_once, resolve_all);
    selected = &resolved[i];
}

/* "auto, avx512vnni, ..., vnni-emul": every name, for messages. */
static const char *path_names(void)
{
    static char names[256];

    if (!names[0]) {
        size_t o = (size_t)snprintf(names, sizeof names, "auto");
        for (size_t i = 0; i < N_PATHS && o < sizeof names; i++)
            o += (size_t)snprintf(names + o, sizeof names - o, ", %s", paths[i].path->name);
    }
    return names;
}

/* The path named, or MS_EINVALID / MS_EUNSUPPORTED; `what` names where the name came from. */
static int find_named(const char *path, const char *what, size_t *out)
{
    for (size_t i = 0; i < N_PATHS; i++) {
        if (strcasecmp(path, paths[i].path->name) != 0)
            continue;
        if (!runnable(i))
            return ms_err(MS_EUNSUPPORTED, "%s '%s': not supported by this cpu or build", what, path);
        *out = i;
        return 0;
    }
    return ms_err(MS_EINVALID, "%s '%s': unknown; expected %s", what, path, path_names());
}

int cpu_path_check_env(void)
{
    const char *env = getenv("MSTORE_CPU");
    size_t i;

    if (!env || !*env || strcasecmp(env, "auto") == 0)
        return 0;
    return find_named(env, "MSTORE_CPU", &i);
}

/* "auto" (or NULL): the path $MSTORE_CPU names (so that a test run under MSTORE_CPU=avx2 stays on
 * that path; a name that is unknown or that this CPU lacks is an error, never a silent fallback),
 * else the best path. */
int cpu_path_select(const char *path)
{
    const char *env = getenv("MSTORE_CPU");
    size_t i;
    int rc;

    if (!(path && *path && strcasecmp(path, "auto") != 0) && env && *env && strcasecmp(env, "auto") != 0)
        path = env;
    if (path && *path && strcasecmp(path, "auto") != 0) {
        if ((rc = find_named(path, path == env ? "MSTORE_CPU" : "cpu path", &i)) < 0)
            return rc;
        use(i);
        return 0;
    }
    for (i = 0; i < N_PATHS && !runnable(i); i++)
        ;
    use(i < N_PATHS ? i : path_index(&cpu_path_scalar));
    return 0;
}

/* A bad $MSTORE_CPU was refused where it could be reported (cpu_backend_new); here the best path. */
static void select_default(void)
{
    if (!selected && cpu_path_select(NULL) < 0)
        cpu_path_select("scalar");
}

const cpu_path *cpu_path_get(void)
{
    pthread_once(&select_once, select_default);
    return selected;
}

const char *cpu_path_name(void) { return cpu_path_get()->name; }

int cpu_type_supported(int type)
{
    return type == BACKEND_TYPE_MLX || (type >= 0 && type < GGML_TYPE_COUNT && cpu_path_scalar.type[type].dot);
}

/* Scratch of a matmul: the 16-bit activation blocks. */
size_t cpu_matmul_scratch(int n_tok, int cols)
{
    return (size_t)n_tok * (size_t)(cols / QK + 16) * sizeof(cpu_q16);   /* cpu_path.act_bytes' bound */
}

size_t cpu_attention_scratch(int n_ctx, int n_threads)
{
    return (size_t)n_ctx * (size_t)n_threads * sizeof(float);
}

/* ---------------------------------------------------------------- matmul */

/* Bytes per token of the activations an entry takes. */
static size_t act_stride(const cpu_path *k, const cpu_type_traits *tt, int n_tok, int cols)
{
    switch (tt->act) {
    case CPU_ACT_F32: return (size_t)cols * sizeof(float);
    case CPU_ACT_PATH: return k->act_bytes(n_tok, cols);
    default: return (size_t)(cols / QK) * sizeof(cpu_q16);
    }
}

/* One token's activations as the entry takes them (not for CPU_ACT_F32: those are x itself). */
static void act_fill(const cpu_path *k, const cpu_type_traits *tt, uint8_t *dst, const float *x, int type, int n_tok,
                     int cols)
{
    if (tt->act == CPU_ACT_PATH)
        k->act_quantize(dst, x, type, n_tok, cols);
    else
        cpu_quantize_q16((cpu_q16 *)(void *)dst, x, cols);
}

/* One matrix of a matmul job: its rows, and where their outputs go (ldy = rows). */
typedef struct mm_part {
    float *y;
    const uint8_t *w;
    int rows;
    int tile0;                   /* tiles of the parts before it */
} mm_part;

#define MM_PARTS 4

typedef struct mm_job {
    const float *x_in;           /* f32 activations as given */
    cpu_act a;                    /* as the kernels take them */
    size_t w_stride;             /* bytes per weight row */
    int type, n_tok, cols;
    const cpu_path *path;
    const cpu_type_traits *tt;
    mm_part part[MM_PARTS];      /* matrices of one type and width that take the same x */
    int n_parts, tiles;          /* tiles: of all parts */
    int per_chunk;               /* tiles a thread takes at a time */
    atomic_int next;             /* the next chunk to take */
} mm_job;

#define ROW_TILE 16

/* Rows [r0, r1) of one part. With a gemm kernel it blocks rows and tokens itself; else a tile
 * of weight rows stays in cache while every token passes over it. */
static void mm_rows(const mm_job *j, const mm_part *pt, int r0, int r1)
{
    if (j->tt->gemm) {
        j->tt->gemm(pt->y + r0, (size_t)pt->rows, &j->a, j->n_tok, pt->w + (size_t)r0 * j->w_stride, j->w_stride,
                    r1 - r0, j->cols);
        return;
    }
    for (int rt = r0; rt < r1; rt += ROW_TILE) {
        int re = rt + ROW_TILE < r1 ? rt + ROW_TILE : r1;
        for (int t = 0; t < j->n_tok; t++) {
            const uint8_t *x = j->a.x + (size_t)t * j->a.stride;
            float *y = pt->y + (size_t)t * (size_t)pt->rows;
            for (int r = rt; r < re; r++)
                y[r] = j->tt->dot(x, pt->w + (size_t)r * j->w_stride, j->cols);
        }
    }
}

/* Tiles [t0, t1) of the parts' rows, end to end. */
static void mm_tiles(const mm_job *j, int t0, int t1)
{
    for (int i = 0; i < j->n_parts && t0 < t1; i++) {
        const mm_part *pt = &j->part[i];
        int end = pt->tile0 + (pt->rows + ROW_TILE - 1) / ROW_TILE;
        if (t0 >= end)
            continue;
        /* a split inside the part falls on a tile boundary, below its last row */
        mm_rows(j, pt, (t0 - pt->tile0) * ROW_TILE, t1 < end ? (t1 - pt->tile0) * ROW_TILE : pt->rows);
        t0 = end;
    }
}

/* The parts' rows in tiles of ROW_TILE, one pool job for Q, K and V (or gate and up), so one wait
 * for the slowest thread instead of three. Each thread takes MM_CHUNKS-th shares of its even part
 * in turn from a counter as it finishes the one before, rather than its part whole: a core that
 * runs slower (an efficiency core of a hybrid Intel CPU, a vCPU another tenant holds) takes fewer,
 * and the others do not wait on it at the end. Which thread computes a row changes nothing in it:
 * the kernels sum a row alike in any range of rows. */
#define MM_CHUNKS 4
static void mm_task(void *ctx, int ith, int nth)
{
    mm_job *j = ctx;

    (void)ith, (void)nth;
    for (;;) {
        int t0 = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed) * j->per_chunk;
        if (t0 >= j->tiles)
            break;
        mm_tiles(j, t0, t0 + j->per_chunk < j->tiles ? t0 + j->per_chunk : j->tiles);
    }
}

/* Tokens split evenly: their activations as the kernels take them. */
static void quantize_task(void *ctx, int ith, int nth)
{
    const mm_job *j = ctx;
    int chunk = (j->n_tok + nth - 1) / nth, t0 = ith * chunk, t1 = t0 + chunk < j->n_tok ? t0 + chunk : j->n_tok;

    for (int t = t0; t < t1; t++)
        act_fill(j->path, j->tt, (uint8_t *)(uintptr_t)(j->a.x + (size_t)t * j->a.stride),
                 j->x_in + (size_t)t * j->cols, j->type, j->n_tok, j->cols);
}

/* The same type and width, on a kernel of the path table (MLX weights take one matrix at a time). */
int cpu_matmul_fusable(const backend_tensor *a, const backend_tensor *b)
{
    return a->type == b->type && a->shape[a->n_dims - 1] == b->shape[b->n_dims - 1] && a->type != BACKEND_TYPE_MLX;
}

void cpu_matmul_n(cpu_pool *p, int n, float *const *ys, const float *x, int n_tok, const backend_tensor *const *ws,
                  void *scratch)
{
    const backend_tensor *w = ws[0];

    if (w->type == BACKEND_TYPE_MLX) {   /* mlx_matmul.c */
        for (int i = 0; i < n; i++)
            cpu_mlx_matmul(p, ys[i], x, n_tok, ws[i], scratch);
        return;
    }
    if (n > MM_PARTS) {
        cpu_matmul_n(p, MM_PARTS, ys, x, n_tok, ws, scratch);
        cpu_matmul_n(p, n - MM_PARTS, ys + MM_PARTS, x, n_tok, ws + MM_PARTS, scratch);
        return;
    }
    const cpu_path *k = cpu_path_get();
    mm_job j = { .x_in = x, .type = w->type, .n_tok = n_tok, .cols = (int)w->shape[w->n_dims - 1], .path = k,
                 .tt = &k->type[w->type], .n_parts = n };
    uint64_t row_bytes = 0;

    for (int i = 0; i < n; i++) {
        j.part[i] = (mm_part){ .y = ys[i], .w = ws[i]->data, .rows = (int)ws[i]->shape[0], .tile0 = j.tiles };
        j.tiles += (j.part[i].rows + ROW_TILE - 1) / ROW_TILE;
    }
    ggml_row_nbytes(&row_bytes, w->type, (uint64_t)j.cols);
    j.w_stride = (size_t)row_bytes;
    if (j.tt->act == CPU_ACT_F32) {
        j.a = (cpu_act){ .x = (const uint8_t *)x, .stride = (size_t)j.cols * sizeof(float) };
    } else {
        j.a = (cpu_act){ .x = scratch, .stride = act_stride(k, j.tt, n_tok, j.cols) };
        if (n_tok == 1)
            quantize_task(&j, 0, 1);
        else
            cpu_pool_run(p, quantize_task, &j);
    }
    int nth = cpu_pool_threads(p);
    j.per_chunk = (j.tiles + nth * MM_CHUNKS - 1) / (nth * MM_CHUNKS);
    atomic_init(&j.next, 0);
    cpu_pool_run(p, mm_task, &j);
}

void cpu_matmul(cpu_pool *p, float *y, const float *x, int n_tok, const backend_tensor *w, void *scratch)
{
    cpu_matmul_n(p, 1, &y, x, n_tok, &w, scratch);
}

typedef struct heads_job {
    float *y;
    const float *x;
    const backend_tensor *ws;
    int n_tok, heads, rows, cols;
    uint8_t *scratch;
    size_t per_thread;   /* bytes of scratch each thread owns */
} heads_job;

/* Heads ith, ith + nth, ...: each gathered, multiplied on this thread alone, scattered. */
static void heads_task(void *ctx, int ith, int nth)
{
    const heads_job *j = ctx;
    size_t cols = (size_t)j->cols, rows = (size_t)j->rows, H = (size_t)j->heads;
    float *in = (float *)(void *)(j->scratch + (size_t)ith * j->per_thread), *out = in + (size_t)j->n_tok * cols;
    void *act = out + (size_t)j->n_tok * rows;

    for (int h = ith; h < j->heads; h += nth) {
        for (int t = 0; t < j->n_tok; t++)
            memcpy(in + (size_t)t * cols, j->x + ((size_t)t * H + (size_t)h) * cols, cols * sizeof *in);
        cpu_matmul(NULL, out, in, j->n_tok, &j->ws[h], act);
        for (int t = 0; t < j->n_tok; t++)
            memcpy(j->y + ((size_t)t * H + (size_t)h) * rows, out + (size_t)t * rows, rows * sizeof *out);
    }
}

size_t cpu_matmul_heads_scratch(int n_tok, int rows, int cols, int n_threads)
{
    size_t f = (size_t)n_tok * ((size_t)rows + (size_t)cols) * sizeof(float);
    size_t per = (f + cpu_matmul_scratch(n_tok, cols) + 63) & ~(size_t)63;

    return per * (size_t)(n_threads > 0 ? n_threads : 1);
}

void cpu_matmul_heads(cpu_pool *p, float *y, const float *x, int n_tok, int heads, const backend_tensor *ws,
                      void *scratch)
{
    int cols = (int)ws[0].shape[1], rows = (int)ws[0].shape[0];
    heads_job j = { .y = y, .x = x, .ws = ws, .n_tok = n_tok, .heads = heads, .rows = rows, .cols = cols,
                    .scratch = scratch, .per_thread = cpu_matmul_heads_scratch(n_tok, rows, cols, 1) };

    cpu_pool_run(p, heads_task, &j);
}

float cpu_dot_row(const backend_tensor *w, uint64_t row, const float *x)
{
    if (w->type == BACKEND_TYPE_MLX)
        return cpu_mlx_dot_row(w, row, x);
    const cpu_path *k = cpu_path_get();
    const cpu_type_traits *tt = &k->type[w->type];
    int cols = (int)w->shape[w->n_dims - 1];
    uint64_t row_bytes = 0;
    const uint8_t *wr;
    float r;

    ggml_row_nbytes(&row_bytes, w->type, (uint64_t)cols);
    wr = (const uint8_t *)w->data + row * row_bytes;
    if (tt->act == CPU_ACT_F32)
        return tt->dot(x, wr, cols);
    void *xq = malloc(act_stride(k, tt, 1, cols));   /* tests only */
    if (!xq)
        return NAN;
    act_fill(k, tt, xq, x, w->type, 1, cols);
    r = tt->dot(xq, wr, cols);
    free(xq);
    return r;
}

/* ---------------------------------------------------------------- elementwise */

void cpu_rms_norm(float *y, const float *x, const float *w, int n_tok, int dim, float eps, float w_offset)
{
    for (int t = 0; t < n_tok; t++) {
        const float *xt = x + (size_t)t * dim;
        float *yt = y + (size_t)t * dim;
        double ss = 0.0;
        float sc;

        for (int i = 0; i < dim; i++)
            ss += (double)xt[i] * xt[i];
        sc = (float)(1.0 / sqrt(ss / dim + eps));
        for (int i = 0; i < dim; i++)
            yt[i] = xt[i] * sc * (w[i] + w_offset);
    }
}

void cpu_layer_norm(float *y, const float *x, const float *w, const float *b, int n_tok, int dim, float eps)
{
    for (int t = 0; t < n_tok; t++) {
        const float *xt = x + (size_t)t * dim;
        float *yt = y + (size_t)t * dim;
        double m = 0.0, ss = 0.0;
        float mean, sc;

        for (int i = 0; i < dim; i++)
            m += xt[i];
        m /= dim;
        for (int i = 0; i < dim; i++)
            ss += (xt[i] - m) * (xt[i] - m);
        mean = (float)m;
        sc = (float)(1.0 / sqrt(ss / dim + eps));
        for (int i = 0; i < dim; i++)
            yt[i] = (xt[i] - mean) * sc * w[i] + (b ? b[i] : 0.0f);
    }
}

void cpu_gelu(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

void cpu_rope(float *x, int n_tok, int n_heads, int head_dim, int n_rot, int pos0,
                     const double *freqs, int interleaved)
{
    float cs[512], sn[512];
    int half = n_rot / 2;

    for (int t = 0; t < n_tok; t++) {
        for (int i = 0; i < half && i < 512; i++) {
            double a = (double)(pos0 + t) * freqs[i];
            cs[i] = (float)cos(a);
            sn[i] = (float)sin(a);
        }
        for (int h = 0; h < n_heads; h++) {
            float *v = x + ((size_t)t * n_heads + h) * head_dim;
            for (int i = 0; i < half && i < 512; i++) {
                int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * cs[i] - x1 * sn[i];
                v[b] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}

/* A softmax over x[0..n) and, when `sink` is not NULL, one more logit *sink that takes part in
 * the max and the sum and is then dropped (gpt-oss's attention sinks: the row sums to less than 1). */
static void softmax_sink(float *x, int n, const float *sink)
{
    float mx = sink ? *sink : -INFINITY, sum = 0.0f;

    for (int i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;   /* fmaxf's result (NaNs skipped), without its call */
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    if (sink)
        sum += expf(*sink - mx);
    for (int i = 0; i < n; i++)
        x[i] /= sum;
}

void cpu_softmax(float *x, int n) { softmax_sink(x, n, NULL); }

/* SwiGLU, and gpt-oss's clamped form when `oai` (backend.h's SWIGLU_OAI: alpha, limit). */
typedef struct swiglu_job {
    float *g;
    const float *u;
    size_t n;
    int oai;
    float alpha, limit;
} swiglu_job;

static void swiglu_task(void *ctx, int ith, int nth)
{
    const swiglu_job *j = ctx;
    size_t chunk = (j->n + (size_t)nth - 1) / (size_t)nth, i0 = (size_t)ith * chunk;
    size_t i1 = i0 + chunk < j->n ? i0 + chunk : j->n;

    if (!j->oai) {
        for (size_t i = i0; i < i1; i++)
            j->g[i] = j->g[i] / (1.0f + expf(-j->g[i])) * j->u[i];
        return;
    }
    for (size_t i = i0; i < i1; i++) {
        float x = fminf(j->g[i], j->limit), y = fminf(fmaxf(j->u[i], -j->limit), j->limit);
        j->g[i] = x / (1.0f + expf(-j->alpha * x)) * (y + 1.0f);
    }
}

/* Split over the pool: one expf per element was 6% of a single-threaded prefill (6-9% of a
 * gpt-oss one). Elementwise, so the result does not depend on the split. */
void cpu_swiglu(cpu_pool *p, float *g, const float *u, size_t n)
{
    swiglu_job j = { g, u, n, 0, 0.0f, 0.0f };

    cpu_pool_run(p, swiglu_task, &j);
}

void cpu_swiglu_oai(cpu_pool *p, float *g, const float *u, size_t n, float alpha, float limit)
{
    swiglu_job j = { g, u, n, 1, alpha, limit };

    cpu_pool_run(p, swiglu_task, &j);
}

void cpu_add(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

/* ---------------------------------------------------------------- attention */

typedef struct att_job {
    float *out;
    const float *q;
    const void *k, *v;
    int kv_f16, n_tok, pos0, n_heads, n_kv_heads, head_dim, n_ctx;
    float *scratch;
    int window, ring;
    float scale;
    int bidir;            /* every token sees positions 0 .. pos0 + n_tok - 1 */
    const float *sinks;   /* NULL, or one extra softmax logit per head */
} att_job;

/* Positions p .. n_pos - 1 of a cache that is a ring of `ring` slots (0: none): the first run
 * of them in consecutive slots starts at *slot; returns its length. */
static int ring_run(int ring, int p, int n_pos, int *slot)
{
    *slot = ring ? p % ring : p;
    return ring && n_pos - p > ring - *slot ? ring - *slot : n_pos - p;
}

static void att_task(void *ctx, int ith, int nth)
{
    const att_job *j = ctx;
    const cpu_path *k = cpu_path_get();
    int n_items = j->n_tok * j->n_heads;
    int hd = j->head_dim, kv_dim = j->n_kv_heads * hd, group = j->n_heads / j->n_kv_heads;
    float *sc = j->scratch + (size_t)ith * j->n_ctx, scale = j->scale != 0 ? j->scale : 1.0f / sqrtf((float)hd);

    /* (token, head) items dealt round, not in contiguous ranges: a causal token's keys grow with
     * its position, so the thread with the last tokens of a long prefill had three times the
     * work of the one with the first (pp512 +7-10%: BENCHMARKS.md, issue 15 session 5) */
    for (int it = ith; it < n_items; it += nth) {
        int t = it / j->n_heads, h = it % j->n_heads, kvo = (h / group) * hd;
        int n_pos = j->bidir ? j->pos0 + j->n_tok : j->pos0 + t + 1;
        int p0 = j->window > 0 && n_pos > j->window ? n_pos - j->window : 0;   /* the window's first position */
        const float *q = j->q + (size_t)t * j->n_heads * hd + (size_t)h * hd;
        const float *sink = j->sinks ? j->sinks + h : NULL;
        float *o = j->out + (size_t)t * j->n_heads * hd + (size_t)h * hd;

        if (!j->kv_f16 && k->dots_f32 && k->axpys_f32) {
            /* runs of positions contiguous in the cache: one, or two where the ring wraps */
            for (int p = p0, slot, m; p < n_pos; p += m) {
                m = ring_run(j->ring, p, n_pos, &slot);
                k->dots_f32(sc + (p - p0), q, (const float *)j->k + (size_t)slot * kv_dim + kvo, (size_t)kv_dim, m, hd);
            }
            for (int p = p0; p < n_pos; p++)
                sc[p - p0] *= scale;
            softmax_sink(sc, n_pos - p0, sink);
            memset(o, 0, (size_t)hd * sizeof *o);
            for (int p = p0, slot, m; p < n_pos; p += m) {
                m = ring_run(j->ring, p, n_pos, &slot);
                k->axpys_f32(o, sc + (p - p0), (const float *)j->v + (size_t)slot * kv_dim + kvo, (size_t)kv_dim, m,
                             hd);
            }
            continue;
        }
        for (int p = p0; p < n_pos; p++) {
            size_t off = (size_t)(j->ring ? p % j->ring : p) * kv_dim + kvo;
            sc[p - p0] = scale * (j->kv_f16 ? k->dot_f32_f16(q, (const uint16_t *)j->k + off, hd)
                                            : k->dot_f32(q, (const float *)j->k + off, hd));
        }
        softmax_sink(sc, n_pos - p0, sink);
        memset(o, 0, (size_t)hd * sizeof *o);
        for (int p = p0; p < n_pos; p++) {
            size_t off = (size_t)(j->ring ? p % j->ring : p) * kv_dim + kvo;
            if (j->kv_f16)
                k->axpy_f16(o, sc[p - p0], (const uint16_t *)j->v + off, hd);
            else
                k->axpy_f32(o, sc[p - p0], (const float *)j->v + off, hd);
        }
    }
}

void cpu_attention(cpu_pool *p, float *out, const float *q, const void *k, const void *v,
                          int kv_f16, int n_tok, int pos0, int n_heads, int n_kv_heads, int head_dim,
                          float *scratch, int n_ctx)
{
    cpu_attention_window(p, out, q, k, v, kv_f16, n_tok, pos0, n_heads, n_kv_heads, head_dim, scratch, n_ctx, 0, 0, 0);
}

void cpu_attention_window(cpu_pool *p, float *out, const float *q, const void *k, const void *v, int kv_f16,
                          int n_tok, int pos0, int n_heads, int n_kv_heads, int head_dim, float *scratch, int n_ctx,
                          int window, float scale, int ring)
{
    cpu_attention_sinks(p, out, q, k, v, kv_f16, n_tok, pos0, n_heads, n_kv_heads, head_dim, scratch, n_ctx, window,
                        scale, ring, NULL);
}

void cpu_attention_sinks(cpu_pool *p, float *out, const float *q, const void *k, const void *v, int kv_f16, int n_tok,
                         int pos0, int n_heads, int n_kv_heads, int head_dim, float *scratch, int n_ctx, int window,
                         float scale, int ring, const float *sinks)
{
    att_job j = { out, q, k, v, kv_f16, n_tok, pos0, n_heads, n_kv_heads, head_dim, n_ctx, scratch, window, ring,
                  scale, 0, sinks };

    cpu_pool_run(p, att_task, &j);
}

void cpu_attention_bidir(cpu_pool *p, float *out, const float *q, const void *k, const void *v, int kv_f16, int n_tok,
                         int n_heads, int n_kv_heads, int head_dim, float *scratch, int n_ctx, float scale)
{
    att_job j = { out, q, k, v, kv_f16, n_tok, 0, n_heads, n_kv_heads, head_dim, n_ctx, scratch, 0, 0, scale, 1, NULL };

    cpu_pool_run(p, att_task, &j);
}

