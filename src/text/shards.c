/* Token shards (data.h): llm.c's header or nanoGPT's headerless uint16,
 * checked field by field, the files memory-mapped and read as one stream of
 * ids. A read gives the pages around it back (MADV_DONTNEED on a read-only
 * private mapping drops them from the process; the page cache keeps what
 * the kernel chooses), so the resident memory does not grow with the
 * corpus. */
#define _DEFAULT_SOURCE /* madvise */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text_internal.h"

typedef struct shard {
    char *path;
    const uint8_t *map; /* NULL for an empty file */
    size_t size;
    pfx_shard_layout lay;
} shard;

struct pfx_shard_set {
    shard *s;
    size_t n;
    size_t *start; /* [n + 1]: the stream position of each shard's first token */
};

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

pfx_status pfx_shard_layout_parse(const uint8_t *data, size_t size, pfx_shard_format format,
                                  const char *name, pfx_shard_layout *out)
{
    if (format == PFX_SHARD_RAW_U16) {
        if (size % 2)
            return pfx_error(NULL, PFX_ERROR_FORMAT,
                             "shard %s: %zu bytes, an odd size for uint16 tokens (truncated at "
                             "offset %zu)",
                             name, size, size - 1);
        *out = (pfx_shard_layout){ 0, size / 2, 2 };
        return PFX_SUCCESS;
    }
    if (format != PFX_SHARD_LLMC)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "shard %s: format %d is unknown", name,
                         (int)format);
    const size_t head = PFX_SHARD_HEADER_BYTES;
    if (size < head)
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "shard %s: %zu bytes, shorter than llm.c's %zu-byte header (truncated)",
                         name, size, head);
    const int32_t magic = le32(data), version = le32(data + 4), count = le32(data + 8);
    unsigned width;
    int32_t want;
    if (magic == PFX_SHARD_MAGIC) {
        width = 2;
        want = 1;
    } else if (magic == PFX_SHARD_MAGIC_U32) {
        width = 4;
        want = 7;
    } else {
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "shard %s: magic %d at offset 0 is not llm.c's %d (uint16) or %d "
                         "(uint32) (nanoGPT's headerless uint16 files: format raw-u16)",
                         name, (int)magic, PFX_SHARD_MAGIC, PFX_SHARD_MAGIC_U32);
    }
    if (version != want)
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "shard %s: version %d at offset 4; magic %d goes with version %d", name,
                         (int)version, (int)magic, (int)want);
    if (count < 0)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "shard %s: token count %d at offset 8 is negative",
                         name, (int)count);
    const size_t body = size - head, need = (size_t)count * width;
    if (body != need)
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "shard %s: the count %d at offset 8 needs %zu bytes of tokens after the "
                         "header; the file holds %zu (%s at offset %zu)",
                         name, (int)count, need, body, body < need ? "truncated" : "trailing bytes",
                         head + (body < need ? body - body % width : need));
    *out = (pfx_shard_layout){ head, (size_t)count, width };
    return PFX_SUCCESS;
}

pfx_status pfx_shard_convert(const uint8_t *data, unsigned width, size_t n, size_t vocab,
                             const char *name, size_t offset, int32_t *out)
{
    const uint32_t limit = vocab && vocab < (size_t)INT32_MAX ? (uint32_t)vocab : INT32_MAX;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = data + i * width;
        const uint32_t v = width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : (uint32_t)le32(p);
        out[i] = (int32_t)v;
        bad |= v >= limit;
    }
    for (size_t i = 0; bad && i < n; i++) /* the first one, named */
        if ((uint32_t)out[i] >= limit)
            return pfx_error(NULL, PFX_ERROR_FORMAT,
                             "shard %s: token id %u at offset %zu is past the vocabulary (%s %zu)",
                             name, (unsigned)out[i], offset + i * width,
                             vocab ? "vocab_size" : "ids below", vocab ? vocab : (size_t)limit);
    return PFX_SUCCESS;
}

void pfx_shard_set_free(pfx_shard_set **set)
{
    if (!set || !*set)
        return;
    pfx_shard_set *s = *set;
    for (size_t i = 0; i < s->n; i++) {
        if (s->s[i].map)
            munmap((void *)s->s[i].map, s->s[i].size);
        free(s->s[i].path);
    }
    free(s->s);
    free(s->start);
    free(s);
    *set = NULL;
}

/* The pages around bytes [off, off + len) of a mapping given back: a fault
 * maps a whole large folio of the page cache (up to a PMD, 2 MiB), far more
 * than the block read, so whole 2 MiB windows of the address space go. */
static void release(const shard *sh, size_t off, size_t len)
{
    const uintptr_t window = (uintptr_t)2 << 20, base = (uintptr_t)sh->map;
    uintptr_t lo = (base + off) & ~(window - 1),
              hi = (base + off + len + window - 1) & ~(window - 1);
    if (lo < base)
        lo = base;
    if (hi > base + sh->size)
        hi = base + sh->size;
    madvise((void *)lo, (size_t)(hi - lo), MADV_DONTNEED);
}

/* Maps one file (regular files only) and checks its header. */
static pfx_status map_shard(shard *sh, pfx_shard_format format)
{
    /* O_NONBLOCK: a FIFO opens at once and is then refused */
    const int fd = open(sh->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return pfx_error(NULL, PFX_ERROR_IO, "shard %s: cannot open it: %s", sh->path,
                         strerror(errno));
    struct stat sb;
    pfx_status st = PFX_SUCCESS;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = pfx_error(NULL, PFX_ERROR_IO, "shard %s: not a regular file", sh->path);
    else if ((uint64_t)sb.st_size > SIZE_MAX)
        st = pfx_error(NULL, PFX_ERROR_SIZE_OVERFLOW, "shard %s: too large for this process",
                       sh->path);
    if (st == PFX_SUCCESS && (sh->size = (size_t)sb.st_size) > 0) {
        void *m = mmap(NULL, sh->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            st = pfx_error(NULL, PFX_ERROR_IO, "shard %s: cannot map it: %s", sh->path,
                           strerror(errno));
        else
            sh->map = m;
    }
    close(fd);
    if (st == PFX_SUCCESS) {
        uint8_t none[1] = { 0 };
        st = pfx_shard_layout_parse(sh->map ? sh->map : none, sh->size, format, sh->path, &sh->lay);
    }
    if (st == PFX_SUCCESS && sh->map)
        madvise((void *)sh->map, sh->size, MADV_RANDOM); /* blocks come in shuffled order */
    if (st == PFX_SUCCESS && sh->map)                    /* the header, read once */
        release(sh, 0, sh->size < PFX_SHARD_HEADER_BYTES ? sh->size : PFX_SHARD_HEADER_BYTES);
    return st;
}

pfx_status pfx_shard_set_open(const char *pattern, pfx_shard_format format, pfx_shard_set **out)
{
    *out = NULL;
    glob_t g;
    memset(&g, 0, sizeof(g));
    const int rc = glob(pattern, GLOB_ERR, NULL, &g);
    if (rc != 0) {
        globfree(&g);
        return pfx_error(NULL, PFX_ERROR_IO, "shards %s: %s", pattern,
                         rc == GLOB_NOMATCH   ? "no file matches"
                         : rc == GLOB_NOSPACE ? "out of host memory"
                                              : "a folder of the pattern cannot be read");
    }
    pfx_shard_set *s = calloc(1, sizeof(*s));
    if (s) {
        s->s = calloc(g.gl_pathc, sizeof(*s->s));
        s->start = calloc(g.gl_pathc + 1, sizeof(size_t));
    }
    pfx_status st = s && s->s && s->start ? PFX_SUCCESS
                                          : pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY,
                                                      "shards %s: host memory", pattern);
    for (size_t i = 0; st == PFX_SUCCESS && i < g.gl_pathc; i++) {
        shard *sh = &s->s[s->n];
        if (!(sh->path = strdup(g.gl_pathv[i]))) {
            st = pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "shards %s: host memory", pattern);
            break;
        }
        s->n++;
        if ((st = map_shard(sh, format)))
            break;
        s->start[s->n] = s->start[s->n - 1] + sh->lay.tokens;
    }
    globfree(&g);
    if (st != PFX_SUCCESS) {
        pfx_shard_set_free(&s);
        return st;
    }
    *out = s;
    return PFX_SUCCESS;
}

size_t pfx_shard_set_tokens(const pfx_shard_set *s)
{
    return s->start[s->n];
}

/* The shard that holds stream position t (< the tokens): the last whose
 * start is at most t and that is not empty. */
static size_t shard_of(const pfx_shard_set *s, size_t t)
{
    size_t lo = 0, hi = s->n; /* start[lo] <= t < start[hi] */
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (s->start[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

pfx_status pfx_shard_set_read(const pfx_shard_set *s, size_t first, size_t n, size_t vocab,
                              int32_t *out)
{
    if (first > pfx_shard_set_tokens(s) || n > pfx_shard_set_tokens(s) - first)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "shards: tokens [%zu, %zu) past the %zu of the set", first, first + n,
                         pfx_shard_set_tokens(s));
    size_t i = n ? shard_of(s, first) : s->n;
    while (n > 0) {
        const shard *sh = &s->s[i++];
        if (sh->lay.tokens == 0)
            continue;
        const size_t at = first - s->start[i - 1],
                     take = sh->lay.tokens - at < n ? sh->lay.tokens - at : n;
        const size_t off = sh->lay.offset + at * sh->lay.width;
        pfx_status st =
            pfx_shard_convert(sh->map + off, sh->lay.width, take, vocab, sh->path, off, out);
        release(sh, off, take * sh->lay.width);
        if (st != PFX_SUCCESS)
            return st;
        out += take;
        first += take;
        n -= take;
    }
    return PFX_SUCCESS;
}
