/* kernels_avxvnni.c: the avxvnni path, kernels_vnni.h with vpdpwssd on two 256-bit halves (VEX
 * encoded, for CPUs with AVX-VNNI and no AVX-512), and avxvnni-int8, kernels_vnni8.h with
 * vpdpbusd. Built with -mavxvnni and the AVX2 path's flags on x86-64 only; cpu.c calls it only
 * after checking the CPU. */
#include "cpu/kernels.h"

#if defined(__AVXVNNI__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
/* over the avx2 path's gemms: its F16 and F32 ones stay (the avx2 table's dots for them are the
 * ones they equal); kernels_vnni.h puts its block types and activation layout over the rest */
#define VNNI_NAME        "avxvnni"
#define VNNI_BASE        cpu_kernels_avx2
#define VNNI_BASE_FAST   cpu_fast_avx2
#define VNNI_GETTER      cpu_kernels_avxvnni
#define VNNI_FAST_GETTER cpu_fast_avxvnni
#define VNNI8_NAME        "avxvnni-int8"
#define VNNI8_GETTER      cpu_kernels_avxvnni8
#define VNNI8_FAST_GETTER cpu_fast_avxvnni8
#include "cpu/kernels_vnni.h"
#else
const cpu_kernels *cpu_kernels_avxvnni(void)
{
    return NULL;
}
const cpu_fast *cpu_fast_avxvnni(void)
{
    return NULL;
}
const cpu_kernels *cpu_kernels_avxvnni8(void)
{
    return NULL;
}
const cpu_fast *cpu_fast_avxvnni8(void)
{
    return NULL;
}
#endif
