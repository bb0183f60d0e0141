/* kernels_vnni512.c: the avx512vnni path, kernels_vnni.h with vpdpwssd on 512-bit registers,
 * avx512vnni-int8, kernels_vnni8.h with vpdpbusd, and amx-int8 and amx, kernels_amx.h on AMX
 * tiles. Built with -mavx512vnni, -mamx-tile, -mamx-int8 and the AVX-512 path's flags on x86-64
 * only (no AMX instruction is emitted but the tiles' intrinsics); cpu.c calls it only after
 * checking the CPU. */
#include "cpu/kernels.h"

#if defined(__AVX512VNNI__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__FMA__) && defined(__F16C__)
#define VNNI_NAME        "avx512vnni"
#define VNNI_BASE        cpu_kernels_avx512
#define VNNI_BASE_FAST   cpu_fast_avx512
#define VNNI_GETTER      cpu_kernels_avx512vnni
#define VNNI_FAST_GETTER cpu_fast_avx512vnni
#define VNNI8_NAME        "avx512vnni-int8"
#define VNNI8_GETTER      cpu_kernels_avx512vnni8
#define VNNI8_FAST_GETTER cpu_fast_avx512vnni8
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define AMX8_NAME        "amx-int8"
#define AMX8_GETTER      cpu_kernels_amx8
#define AMX8_FAST_GETTER cpu_fast_amx8
#define AMX16_NAME        "amx"
#define AMX16_GETTER      cpu_kernels_amx16
#define AMX16_FAST_GETTER cpu_fast_amx16
#endif
#include "cpu/kernels_vnni.h"
#else
#define NO_VNNI512
#endif

#if defined(NO_VNNI512) || !defined(AMX8_NAME)
const cpu_kernels *cpu_kernels_amx8(void)
{
    return NULL;
}
const cpu_fast *cpu_fast_amx8(void)
{
    return NULL;
}
const cpu_kernels *cpu_kernels_amx16(void)
{
    return NULL;
}
const cpu_fast *cpu_fast_amx16(void)
{
    return NULL;
}
#endif

#if defined(NO_VNNI512)
const cpu_kernels *cpu_kernels_avx512vnni(void)
{
    return NULL;
}
const cpu_fast *cpu_fast_avx512vnni(void)
{
    return NULL;
}
const cpu_kernels *cpu_kernels_avx512vnni8(void)
{
    return NULL;
}
const cpu_fast *cpu_fast_avx512vnni8(void)
{
    return NULL;
}
#endif
