/* Where the tool's data is (data_dir.h). The paths come from the build
 * (tools/meson.build): PFX_DATA_FROM_BIN, share/prefixcl relative to the
 * installed binary's folder ("" when bindir or datadir is absolute);
 * PFX_DATA_SOURCE, the source tree's data/; PFX_DATA_INSTALLED, the
 * configured prefix's share/prefixcl. */
#include "data_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PFX_DATA_FROM_BIN
#define PFX_DATA_FROM_BIN ""
#endif
#ifndef PFX_DATA_SOURCE
#define PFX_DATA_SOURCE "data"
#endif
#ifndef PFX_DATA_INSTALLED
#define PFX_DATA_INSTALLED "/usr/local/share/prefixcl"
#endif

enum { PATH_MAX_LEN = 4096 };

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* share/prefixcl beside the running binary's folder into out; 0 when the
 * build gives no relative path or the binary's path is unknown. */
static int beside_binary(char *out, size_t size)
{
    char self[PATH_MAX_LEN];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (!PFX_DATA_FROM_BIN[0] || n <= 0 || (size_t)n >= sizeof(self) - 1)
        return 0;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    return snprintf(out, size, "%s/%s", self, PFX_DATA_FROM_BIN) < (int)size;
}

char *tool_data_dir(const char *name, char *out, size_t size)
{
    char base[PATH_MAX_LEN];
    const char *roots[3] = { NULL, PFX_DATA_SOURCE, PFX_DATA_INSTALLED };
    if (beside_binary(base, sizeof(base)))
        roots[0] = base;
    for (int i = 0; i < 3; i++)
        if (roots[i] && snprintf(out, size, "%s/%s", roots[i], name) < (int)size && is_dir(out)) {
            char *clean = realpath(out, NULL); /* no "bin/../share" in messages */
            if (clean && strlen(clean) < size)
                memcpy(out, clean, strlen(clean) + 1);
            free(clean);
            return out;
        }
    snprintf(out, size, "%s/%s", PFX_DATA_INSTALLED, name);
    return out;
}
