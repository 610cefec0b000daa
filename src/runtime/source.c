/* Kernel sources: embedded at build time; $PREFIXCL_KERNEL_DIR overrides them
 * with a folder of .cl files for kernel development. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static char *read_file(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s.cl", dir, name);
    bool not_regular;
    FILE *f = pfx_fopen_regular(path, &not_regular);
    if (!f)
        return NULL;
    char *text = NULL;
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (text = malloc((size_t)len + 1)) && fread(text, 1, (size_t)len, f) == (size_t)len) {
        text[len] = '\0';
    } else {
        free(text);
        text = NULL;
    }
    fclose(f);
    return text;
}

static char *embedded(const char *name)
{
    for (size_t i = 0; i < pfx_embedded_source_count; i++)
        if (!strcmp(pfx_embedded_sources[i].name, name))
            return strdup(pfx_embedded_sources[i].source);
    return NULL;
}

static char *lookup(const char *name)
{
    const char *dir = getenv("PREFIXCL_KERNEL_DIR");
    return dir && *dir ? read_file(dir, name) : embedded(name);
}

char *pfx_kernel_source(const char *name)
{
    char *common = lookup("common");
    char *body = lookup(name);
    char *joined = NULL;
    if (common && body) {
        size_t a = strlen(common), b = strlen(body);
        joined = malloc(a + b + 2);
        if (joined) {
            memcpy(joined, common, a);
            joined[a] = '\n';
            memcpy(joined + a + 1, body, b + 1);
        }
    }
    free(common);
    free(body);
    return joined;
}
