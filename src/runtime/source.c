/* Kernel sources: embedded at build time; $PREFIXCL_KERNEL_DIR overrides them
 * with a folder of .cl (and .h) files for kernel development. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static char *read_file(const char *dir, const char *name)
{
    char path[1024];
    const size_t n = strlen(name);
    const bool header = n > 2 && !strcmp(name + n - 2, ".h");
    snprintf(path, sizeof(path), "%s/%s%s", dir, name, header ? "" : ".cl");
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

/* The embedded source of `name`, or NULL. */
static const char *find_embedded(const char *name)
{
    for (size_t i = 0; i < pfx_embedded_source_count; i++)
        if (!strcmp(pfx_embedded_sources[i].name, name))
            return pfx_embedded_sources[i].source;
    return NULL;
}

static char *embedded(const char *name)
{
    const char *source = find_embedded(name);
    return source ? strdup(source) : NULL;
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

/* cl/common.cl, the header cl/<name>.h when the program has one (what its
 * host code shares with it), cl/<name>.cl, then every part
 * cl/<name>.<part>.cl in name order (a program split by purpose, such as
 * attention_bwd's CPU and GPU paths). Header and parts are those embedded,
 * read from $PREFIXCL_KERNEL_DIR when it is set. */
char *pfx_kernel_source(const char *name)
{
    char *joined = NULL;
    size_t len = 0, n = strlen(name);
    char header_name[256];
    snprintf(header_name, sizeof(header_name), "%s.h", name);
    const bool has_header = n + 2 < sizeof(header_name) && find_embedded(header_name) != NULL;
    char *common = lookup("common"), *header = has_header ? lookup(header_name) : NULL,
         *body = lookup(name);
    bool ok = common && body && (!has_header || header) && append(&joined, &len, common) &&
              (!has_header || append(&joined, &len, header)) && append(&joined, &len, body);
    free(common);
    free(header);
    free(body);
    for (size_t i = 0; ok && i < pfx_embedded_source_count; i++) {
        const char *part = pfx_embedded_sources[i].name;
        const size_t pn = strlen(part);
        if (strncmp(part, name, n) || part[n] != '.' || !strcmp(part + pn - 2, ".h"))
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
