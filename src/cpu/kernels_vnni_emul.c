/* kernels_vnni_emul.c: the vnni-emul path, kernels_vnni.h built without any SIMD flag, so that
 * vpdpwssd is its exact C emulation: it runs on every CPU (never chosen by "auto") and gives the
 * VNNI paths' results bit for bit, so their logic is tested where the instruction is missing.
 * vnni-int8-emul does the same for vpdpbusd and the int8 paths (kernels_vnni8.h), amx-int8-emul and
 * amx-emul for the AMX tiles (kernels_amx.h). All four build on the scalar path, so nothing they
 * reach needs an instruction the CPU may lack. */
#include "cpu/kernels.h"

#if defined(MSTORE_NO_EMUL_PATHS)   /* cmake -DMSTORE_EMUL_PATHS=OFF: a build without them */
CPU_PATH_ABSENT(cpu_path_vnni_emul, "vnni-emul");
CPU_PATH_ABSENT(cpu_path_vnni8_emul, "vnni-int8-emul");
CPU_PATH_ABSENT(cpu_path_amx8_emul, "amx-int8-emul");
CPU_PATH_ABSENT(cpu_path_amx16_emul, "amx-emul");
#else
#define VNNI_NAME      "vnni-emul"
#define VNNI_PATH      cpu_path_vnni_emul
#define VNNI_BASE_PATH cpu_path_scalar
#define VNNI8_NAME     "vnni-int8-emul"
#define VNNI8_PATH     cpu_path_vnni8_emul
#define AMX8_NAME      "amx-int8-emul"
#define AMX8_PATH      cpu_path_amx8_emul
#define AMX16_NAME     "amx-emul"
#define AMX16_PATH     cpu_path_amx16_emul
#include "cpu/kernels_vnni.h"
#endif
