/* kernels_avx2_vnni.c: the VNNI arithmetic on AVX2 alone, for the CPUs most people have (Intel
 * before Alder Lake, AMD Zen 1-3): kernels_vnni.h with vpdpwssd made of vpmaddwd and vpaddd
 * (avx2-vnni, the same bits as avx512vnni and vnni-emul), and kernels_vnni8.h with vpdpbusd made
 * of vpmaddubsw, vpmaddwd and vpaddd (avx2-int8: 8-bit activations, what llama.cpp does on
 * AVX2; the same bits as the other -int8 paths). Both by name only, as the other VNNI-arithmetic
 * paths where the instruction is missing. Built with the AVX2 path's flags on x86-64 only; cpu.c
 * calls it only after checking the CPU. */
#include "cpu/kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(__AVXVNNI__) && !defined(__AVX512F__)
#define VNNI_NAME      "avx2-vnni"
#define VNNI_PATH      cpu_path_avx2_vnni
#define VNNI_BASE_PATH cpu_path_avx2
#define VNNI8_NAME     "avx2-int8"
#define VNNI8_PATH     cpu_path_avx2_int8
#include "cpu/kernels_vnni.h"
#else
CPU_PATH_ABSENT(cpu_path_avx2_vnni, "avx2-vnni");
CPU_PATH_ABSENT(cpu_path_avx2_int8, "avx2-int8");
#endif
