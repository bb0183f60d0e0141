/* kernels_vnni512.c: the avx512vnni path, kernels_vnni.h with vpdpwssd on 512-bit registers,
 * avx512vnni-int8, kernels_vnni8.h with vpdpbusd, and amx-int8 and amx, kernels_amx.h on AMX
 * tiles. Built with -mavx512vnni, -mamx-tile, -mamx-int8 and the AVX-512 path's flags on x86-64
 * only (no AMX instruction is emitted but the tiles' intrinsics); cpu.c calls it only after
 * checking the CPU. */
#include "cpu/kernels.h"

#if defined(__AVX512VNNI__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__FMA__) && defined(__F16C__)
#define VNNI_NAME      "avx512vnni"
#define VNNI_PATH      cpu_path_avx512vnni
#define VNNI_BASE_PATH cpu_path_avx512
#define VNNI8_NAME     "avx512vnni-int8"
#define VNNI8_PATH     cpu_path_avx512vnni8
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define AMX8_NAME  "amx-int8"
#define AMX8_PATH  cpu_path_amx8
#define AMX16_NAME "amx"
#define AMX16_PATH cpu_path_amx16
#endif
#include "cpu/kernels_vnni.h"
#else
CPU_PATH_ABSENT(cpu_path_avx512vnni, "avx512vnni");
CPU_PATH_ABSENT(cpu_path_avx512vnni8, "avx512vnni-int8");
#endif

#if !defined(AMX8_NAME)
CPU_PATH_ABSENT(cpu_path_amx8, "amx-int8");
CPU_PATH_ABSENT(cpu_path_amx16, "amx");
#endif
