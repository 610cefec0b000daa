/* Shared by every prefixcl command (tools/cli.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "prefixcl/prefixcl.h"

bool cli_uint(const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;
    if (!text || pfx_parse_uint(text, hi, &v) != PFX_SUCCESS || v < lo)
        return false;
    *out = v;
    return true;
}

bool cli_float(const char *text, double lo, double hi, float *out)
{
    if (!text || !*text || strchr(" \t\n\v\f\r", *text))
        return false;
    char *end = NULL;
    double x = strtod(text, &end);
    if (!end || *end || !isfinite(x) || x < lo || x > hi || !isfinite((float)x))
        return false;
    *out = (float)x;
    return true;
}

bool cli_ids(const char *text, size_t vocab, int32_t **ids, size_t *count)
{
    if (!text || vocab == 0)
        return false;
    size_t cap = 1;
    for (const char *c = text; *c; c++)
        cap += *c == ',' || *c == ' ';
    int32_t *v = malloc(cap * sizeof(*v));
    size_t n = 0;
    const char *p = text;
    bool ok = v != NULL;
    while (ok) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ,");
        char item[24];
        uint64_t id;
        ok = len > 0 && len < sizeof(item);
        if (ok) {
            memcpy(item, p, len);
            item[len] = '\0';
            ok = cli_uint(item, 0, vocab - 1 < INT32_MAX ? vocab - 1 : INT32_MAX, &id);
        }
        if (!ok)
            break;
        v[n++] = (int32_t)id;
        p += len;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++; /* an id must follow */
        else if (!*p)
            break;
    }
    if (!ok || n == 0) {
        free(v);
        return false;
    }
    *ids = v;
    *count = n;
    return true;
}

/* "prefixcl CMD: OPTION SHOWN: " then PATH when it is not SHOWN itself. */
static void say(const char *cmd, const char *option, const char *shown, const char *path)
{
    fprintf(stderr, "prefixcl %s: %s %s: ", cmd, option, shown);
    if (path != shown)
        fprintf(stderr, "%s ", path);
}

static bool check_file(const char *cmd, const char *option, const char *shown, const char *path)
{
    struct stat st;
    if (!path[0]) {
        fprintf(stderr, "prefixcl %s: %s: empty file name\n", cmd, option);
        return false;
    }
    bool exists = stat(path, &st) == 0;
    pfx_output_file *out = NULL;
    if (exists && S_ISDIR(st.st_mode)) {
        say(cmd, option, shown, path);
        fprintf(stderr, "is a folder\n");
    } else if (exists && access(path, W_OK) != 0) {
        say(cmd, option, shown, path);
        fprintf(stderr, "not writable: %s\n", strerror(errno));
    } else if (pfx_output_open(path, &out) != PFX_SUCCESS) {
        say(cmd, option, shown, path);
        fprintf(stderr, "cannot write there: %s\n", pfx_last_error(NULL));
    } else {
        pfx_output_discard(&out);
        return true;
    }
    return false;
}

bool cli_check_output(const char *cmd, const char *option, const char *path)
{
    return check_file(cmd, option, path, path);
}

static bool make_dir(const char *cmd, const char *option, const char *shown, const char *dir)
{
    struct stat st;
    if (!dir[0]) {
        fprintf(stderr, "prefixcl %s: %s: empty folder name\n", cmd, option);
        return false;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        say(cmd, option, shown, dir);
        fprintf(stderr, "cannot create the folder: %s\n", strerror(errno));
        return false;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        say(cmd, option, shown, dir);
        fprintf(stderr, "exists and is not a folder\n");
        return false;
    }
    return true;
}

bool cli_check_output_dir(const char *cmd, const char *option, const char *dir, const char *const *names,
                          size_t n)
{
    if (!make_dir(cmd, option, dir, dir))
        return false;
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(len);
        if (!path) {
            fprintf(stderr, "prefixcl %s: out of host memory\n", cmd);
            return false;
        }
        snprintf(path, len, "%s/%s", dir, names[i]);
        size_t plen = strlen(path);
        if (path[plen - 1] == '/') {
            path[plen - 1] = '\0';
            ok = make_dir(cmd, option, dir, path);
        } else {
            ok = check_file(cmd, option, dir, path);
        }
        free(path);
    }
    return ok;
}

volatile sig_atomic_t cli_stop;
static struct sigaction old_int, old_term;
static bool catching;

static void on_stop_signal(int sig)
{
    cli_stop = sig;
}

void cli_stop_catch(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    cli_stop = 0;
    if (catching)
        return;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    catching = true;
}

void cli_stop_release(void)
{
    if (!catching)
        return;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    catching = false;
}

int cli_stop_status(void)
{
    return 128 + (cli_stop ? (int)cli_stop : SIGINT);
}

int cli_finish_stdout(int status)
{
    /* Output is the command's result: losing it silently is a failure. */
    errno = 0;
    bool bad = fflush(stdout) != 0 || ferror(stdout);
    int err = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = true;
        err = errno;
    }
    if (bad) {
        fprintf(stderr, "prefixcl: writing standard output: %s\n", err ? strerror(err) : "write error");
        return status ? status : 1;
    }
    return status;
}
