/* kernels_vnni_emul.c: the vnni-emul path, kernels_vnni.h built without any SIMD flag, so that
 * vpdpwssd is its exact C emulation: it runs on every CPU (never chosen by "auto") and gives the
 * VNNI paths' results bit for bit, so their logic is tested where the instruction is missing.
 * vnni-int8-emul does the same for vpdpbusd and the int8 paths (kernels_vnni8.h), amx-int8-emul and
 * amx-emul for the AMX tiles (kernels_amx.h). */
#include "cpu/kernels.h"

static const cpu_fast *no_fast(void)
{
    return NULL;
}
#define VNNI_NAME        "vnni-emul"
#define VNNI_BASE        cpu_kernels_scalar
#define VNNI_BASE_FAST   no_fast
#define VNNI_GETTER      cpu_kernels_vnni_emul
#define VNNI_FAST_GETTER cpu_fast_vnni_emul
#define VNNI8_NAME        "vnni-int8-emul"
#define VNNI8_GETTER      cpu_kernels_vnni8_emul
#define VNNI8_FAST_GETTER cpu_fast_vnni8_emul
#define AMX8_NAME         "amx-int8-emul"
#define AMX8_GETTER       cpu_kernels_amx8_emul
#define AMX8_FAST_GETTER  cpu_fast_amx8_emul
#define AMX16_NAME        "amx-emul"
#define AMX16_GETTER      cpu_kernels_amx16_emul
#define AMX16_FAST_GETTER cpu_fast_amx16_emul
#include "cpu/kernels_vnni.h"
