/* kernels_avxvnni8.c: the avxvnni-int8 path, kernels_vnni8.h with vpdpbusd (VEX encoded, for CPUs
 * with AVX-VNNI and no AVX-512) on two 256-bit halves of its 512-bit vectors, over the avx2 table.
 * Built with -mavxvnni and the AVX2 path's flags on x86-64 only; cpu.c calls it only after
 * checking the CPU. (The 16-bit avxvnni path is kernels_avxvnni.c.) */
#include "cpu/kernels.h"

#if defined(__AVXVNNI__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define VNNI_BASE_PATH cpu_path_avx2
#define VNNI8_NAME     "avxvnni-int8"
#define VNNI8_PATH     cpu_path_avxvnni8
#include "cpu/kernels_vnni.h"
#else
CPU_PATH_ABSENT(cpu_path_avxvnni8, "avxvnni-int8");
#endif
