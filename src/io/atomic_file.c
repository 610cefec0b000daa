/* Atomic replacement of output files (include/prefixcl/io.h, "Output files"):
 * "<path>.tmp-<pid>-XXXXXX" beside the destination, created with mode 0666 so
 * that the umask applies, then flushed, synced and renamed over it. A process
 * killed mid-save leaves its temporary file; the next save to the same path
 * removes those whose process is gone (no signal handler is installed). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io_internal.h"

#define TMP_TAG    ".tmp-"
#define TMP_RANDOM 6

/* The folder part of path ("." when there is none) and where the name starts. */
static char *split_dir(const char *path, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    size_t n = slash ? (size_t)(slash - path) : 1;
    char *dir = malloc(n + 2);
    if (dir) {
        memcpy(dir, slash ? path : ".", n);
        dir[n] = 0;
        if (slash && n == 0) /* "/name" */
            dir[0] = '/', dir[1] = 0;
    }
    return dir;
}

/* Removes "<base>.tmp-<pid>-XXXXXX" files of processes that no longer exist. */
static void remove_stale(const char *path)
{
    const char *base;
    char *dir = split_dir(path, &base);
    DIR *d = dir ? opendir(dir) : NULL;
    size_t blen = strlen(base), tlen = strlen(TMP_TAG);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, TMP_TAG, tlen) != 0)
            continue;
        const char *p = n + blen + tlen, *digits = p;
        long pid = 0;
        while (*p >= '0' && *p <= '9' && pid < 1L << 30)
            pid = pid * 10 + (*p++ - '0');
        if (p == digits || *p != '-' || strlen(p + 1) != TMP_RANDOM || pid <= 0 ||
            pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            (void)unlinkat(dirfd(d), n, 0);
    }
    if (d)
        closedir(d);
    free(dir);
}

static int create_temp(char *tmp, size_t cap, const char *path)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    static _Atomic unsigned counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 17);
    for (int attempt = 0; attempt < 100; attempt++) {
        x += 0x9e3779b97f4a7c15ull * (1 + counter++);
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        char rnd[TMP_RANDOM + 1];
        for (int i = 0; i < TMP_RANDOM; i++, z /= 36)
            rnd[i] = alphabet[z % 36];
        rnd[TMP_RANDOM] = 0;
        snprintf(tmp, cap, "%s" TMP_TAG "%ld-%s", path, (long)getpid(), rnd);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

pfx_status pfx_atomic_begin(pfx_runtime *rt, const char *path, pfx_atomic_file *af)
{
    memset(af, 0, sizeof(*af));
    if (!path[0])
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "an empty file name");
    /* rename() would replace a device node or FIFO with a regular file. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return pfx_error(rt, PFX_ERROR_IO,
                         "'%s' exists and is not a regular file (%s); it is not replaced", path,
                         S_ISDIR(sb.st_mode)                          ? "a folder"
                         : S_ISFIFO(sb.st_mode)                       ? "a FIFO"
                         : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                      : "not a file");
    size_t len = strlen(path), cap = len + sizeof(TMP_TAG) + 32 + TMP_RANDOM;
    af->path = malloc(len + 1);
    af->tmp_path = malloc(cap);
    if (!af->path || !af->tmp_path) {
        pfx_atomic_abort(af);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "writing '%s': host memory", path);
    }
    memcpy(af->path, path, len + 1);
    remove_stale(path);
    int fd = create_temp(af->tmp_path, cap, path);
    if (fd < 0) {
        pfx_status st = pfx_error(rt, PFX_ERROR_IO, "cannot create a temporary file for '%s': %s",
                                  path, strerror(errno));
        free(af->tmp_path);
        af->tmp_path = NULL;
        pfx_atomic_abort(af);
        return st;
    }
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        close(fd);
        pfx_atomic_abort(af);
        return pfx_error(rt, PFX_ERROR_IO, "cannot open a temporary file for '%s'", path);
    }
    return PFX_SUCCESS;
}

pfx_status pfx_atomic_write(pfx_runtime *rt, pfx_atomic_file *af, const void *data, size_t n)
{
    if (n && fwrite(data, 1, n, af->fp) != n)
        return pfx_error(rt, PFX_ERROR_IO, "writing '%s': %s", af->path, strerror(errno));
    return PFX_SUCCESS;
}

pfx_status pfx_atomic_commit(pfx_runtime *rt, pfx_atomic_file *af)
{
    pfx_status st = PFX_SUCCESS;
    if (ferror(af->fp))
        st = pfx_error(rt, PFX_ERROR_IO, "writing '%s': a write failed", af->path);
    else if (fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0)
        st = pfx_error(rt, PFX_ERROR_IO, "writing '%s': %s", af->path, strerror(errno));
    if (fclose(af->fp) != 0 && st == PFX_SUCCESS)
        st = pfx_error(rt, PFX_ERROR_IO, "closing '%s': %s", af->path, strerror(errno));
    af->fp = NULL;
    if (st == PFX_SUCCESS && rename(af->tmp_path, af->path) != 0)
        st = pfx_error(rt, PFX_ERROR_IO, "cannot rename '%s' to '%s': %s", af->tmp_path, af->path,
                       strerror(errno));
    if (st == PFX_SUCCESS) {
        free(af->tmp_path);
        af->tmp_path = NULL;
    }
    pfx_atomic_abort(af);
    return st;
}

void pfx_atomic_abort(pfx_atomic_file *af)
{
    if (af->fp)
        fclose(af->fp);
    if (af->tmp_path)
        unlink(af->tmp_path);
    free(af->tmp_path);
    free(af->path);
    memset(af, 0, sizeof(*af));
}

/* ---------------------------------------------------------------- public face */

struct pfx_output_file {
    pfx_atomic_file af;
};

pfx_status pfx_output_open(const char *path, pfx_output_file **out)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_output_open: out is NULL");
    *out = NULL;
    if (!path)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_output_open: path is NULL");
    pfx_output_file *f = calloc(1, sizeof(*f));
    if (!f)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_output_open: host memory");
    pfx_status st = pfx_atomic_begin(NULL, path, &f->af);
    if (st != PFX_SUCCESS) {
        free(f);
        return st;
    }
    *out = f;
    return PFX_SUCCESS;
}

FILE *pfx_output_stream(pfx_output_file *file)
{
    return file ? file->af.fp : NULL;
}

pfx_status pfx_output_commit(pfx_output_file **file)
{
    if (!file || !*file)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_output_commit: file is NULL");
    pfx_status st = pfx_atomic_commit(NULL, &(*file)->af);
    free(*file);
    *file = NULL;
    return st;
}

void pfx_output_discard(pfx_output_file **file)
{
    if (!file || !*file)
        return;
    pfx_atomic_abort(&(*file)->af);
    free(*file);
    *file = NULL;
}

pfx_status pfx_remove_stale(pfx_runtime *rt, const char *who, const char *dir, const char *name)
{
    char *path = pfx_join_path(dir, name);
    if (!path)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", who);
    pfx_status st = PFX_SUCCESS;
    if (unlink(path) != 0 && errno != ENOENT)
        st = pfx_error(rt, PFX_ERROR_IO, "%s: cannot remove the stale '%s': %s", who, path,
                       strerror(errno));
    free(path);
    return st;
}

pfx_status pfx_write_file(pfx_runtime *rt, const char *path, const void *data, size_t size)
{
    pfx_output_file *f = NULL;
    pfx_status st = pfx_output_open(path, &f);
    if (st != PFX_SUCCESS)
        return pfx_error(rt, st, "%s", pfx_last_error(NULL));
    fwrite(data, 1, size, pfx_output_stream(f));
    st = pfx_output_commit(&f);
    return st == PFX_SUCCESS ? st : pfx_error(rt, st, "%s", pfx_last_error(NULL));
}
