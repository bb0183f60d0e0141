/* kernels_avxvnni.c: the avxvnni path, for CPUs with AVX-VNNI and no AVX-512 (Intel Core since
 * Alder Lake, which "auto" gives it): kernels_avx2_gemm.c's block types built again with each
 * vpmaddwd + vpaddd of their 16-bit products as one vpdpwssd (VEX encoded). The integers are the
 * same, so are the results: bit for bit the avx2 path's (test_kernels), with fewer instructions in
 * the prefill tiles' inner loop (one where there were two) and in decode's block sums. The float
 * types and the other block types are avx2's (the base). Built with -mavxvnni and the AVX2 path's
 * flags on x86-64 only; cpu.c calls it only after checking the CPU.
 *
 * cpu_path_avxvnni_evex, in the test builds only (MSTORE_EMUL_PATHS), is the same source with the
 * EVEX encoding of the instruction (AVX512-VNNI with VL), built by kernels_avxvnni_evex.c: neither
 * this machine's CPUs nor QEMU 7.2 run AVX-VNNI, so that is how the code runs in the tests. */
#include "cpu/kernels.h"

#if !defined(AVXVNNI_NAME)
#define AVXVNNI_NAME "avxvnni"
#define AVXVNNI_PATH cpu_path_avxvnni
#if defined(__AVXVNNI__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define AVXVNNI_OK 1
#endif
#endif

#if defined(AVXVNNI_OK)
#define A2_VNNI 1
#include "cpu/kernels_avx2_gemm.c"

const cpu_path AVXVNNI_PATH = {
    .name = AVXVNNI_NAME,
    .base = &cpu_path_avx2,
    .built = 1,
    .type = {
        [GGML_TYPE_Q8_0] = CPU_OWN(vnni_dot_q8_0, vnni_gemm_q8_0),
        [GGML_TYPE_Q4_0] = CPU_OWN(vnni_dot_q4_0, vnni_gemm_q4_0),
        [GGML_TYPE_Q4_K] = CPU_OWN(vnni_dot_q4_k, vnni_gemm_q4_k),
        [GGML_TYPE_Q6_K] = CPU_OWN(vnni_dot_q6_k, vnni_gemm_q6_k),
        [GGML_TYPE_MXFP4] = CPU_OWN(vnni_dot_mxfp4, vnni_gemm_mxfp4),
    },
    .act_bytes = vnni_act_bytes,
    .act_quantize = vnni_act_quantize,
};
#else
CPU_PATH_ABSENT(AVXVNNI_PATH, AVXVNNI_NAME);
#endif
