/* kernels_avxvnni_evex.c: avxvnni-evex, the avxvnni path's code (kernels_avxvnni.c) with
 * vpdpwssd's EVEX encoding (AVX512-VNNI with VL) instead of the VEX one, so that hosts with
 * AVX512-VNNI run that code in the tests: no CPU the tests run on, nor QEMU 7.2, has AVX-VNNI.
 * The same bits as avx2 and avxvnni. Test builds only (MSTORE_EMUL_PATHS, like the -emul paths);
 * built with -mavx512vnni -mavx512vl and the AVX2 path's flags. */
#include "cpu/kernels.h"

#define AVXVNNI_NAME "avxvnni-evex"
#define AVXVNNI_PATH cpu_path_avxvnni_evex
#if !defined(MSTORE_NO_EMUL_PATHS) && defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX2__) &&       \
    defined(__FMA__) && defined(__F16C__)
#define AVXVNNI_OK 1
#endif
#include "cpu/kernels_avxvnni.c"
