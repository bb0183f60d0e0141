/* devices.c: mstore devices - the devices a model can run on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cli.h"

static const char help[] = "usage: mstore devices\n\n"
                           "List the devices this mstore can run models on: the CPU, then every Vulkan device the\n"
                           "loader finds (a software one, such as lavapipe, included). Columns: the device, its kind\n"
                           "(cpu, discrete, integrated, virtual, software), its API, its memory (device-local; the\n"
                           "CPU's: physical memory), and whether it can use the store's mmapped weights in place\n"
                           "(host import) instead of copying them. Choose one with --device on run and bench, or\n"
                           "$MSTORE_DEVICE; 'auto' takes a hardware GPU when there is one, else the CPU, and never\n"
                           "a software implementation unless it is named.\n";

int cmd_devices(int argc, char **argv)
{
    backend_device_info *d = NULL;
    size_t n = 0;
    char why[256] = "";

    int rc;

    if ((rc = cli_args_parse(argc, argv, help, NULL, NULL, 0, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    if (backend_devices(&d, &n, why, sizeof why) < 0)
        return cli_fail();
    printf("%-48s %-11s %-7s %10s  %s\n", "NAME", "KIND", "API", "MEMORY", "HOST IMPORT");
    for (size_t i = 0; i < n; i++)
        printf("%-48s %-11s %-7s %7.1f GiB  %s\n", d[i].name, d[i].kind, d[i].api,
               (double)d[i].memory / (1024.0 * 1024.0 * 1024.0), d[i].host_import ? "yes" : "no");
    if (why[0])
        printf("(%s)\n", why);
    free(d);
    return 0;
}
