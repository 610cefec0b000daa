/* The version the headers and the library say is the project's (argv[1]:
 * meson.project_version()), and they agree with each other. */
#include <stdio.h>
#include <string.h>

#include "prefixcl/prefixcl.h"

int main(int argc, char **argv)
{
    char headers[64];
    snprintf(headers, sizeof(headers), "%d.%d.%d", PFX_VERSION_MAJOR, PFX_VERSION_MINOR,
             PFX_VERSION_PATCH);
    if (argc < 2 || strcmp(pfx_version(), argv[1]) != 0 || strcmp(headers, argv[1]) != 0) {
        fprintf(stderr, "library %s, headers %s, project %s\n", pfx_version(), headers,
                argc > 1 ? argv[1] : "?");
        return 1;
    }
    printf("prefixcl %s\n", pfx_version());
    return 0;
}
