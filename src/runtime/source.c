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

/* Appends text to *buf (length *len); false when out of memory. */
static bool append(char **buf, size_t *len, const char *text)
{
    size_t n = strlen(text);
    char *grown = realloc(*buf, *len + n + 2);
    if (!grown)
        return false;
    memcpy(grown + *len, text, n);
    grown[*len + n] = '\n';
    grown[*len + n + 1] = '\0';
    *buf = grown;
    *len += n + 1;
    return true;
}

/* cl/common.cl, cl/<name>.cl, then every part cl/<name>.<part>.cl in name
 * order (a program split by purpose, such as attention_bwd's CPU and GPU
 * paths). The parts are those embedded, read from $PREFIXCL_KERNEL_DIR when
 * it is set. */
char *pfx_kernel_source(const char *name)
{
    char *joined = NULL;
    size_t len = 0, n = strlen(name);
    char *common = lookup("common"), *body = lookup(name);
    bool ok = common && body && append(&joined, &len, common) && append(&joined, &len, body);
    free(common);
    free(body);
    for (size_t i = 0; ok && i < pfx_embedded_source_count; i++) {
        const char *part = pfx_embedded_sources[i].name;
        if (strncmp(part, name, n) || part[n] != '.')
            continue;
        char *text = lookup(part);
        ok = text && append(&joined, &len, text);
        free(text);
    }
    if (!ok) {
        free(joined);
        return NULL;
    }
    return joined;
}
