/* Shared by every prefixcl command (tools/common/cli.h). */
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

static int option_error(const char *cmd, int (*usage)(FILE *out), const char *msg)
{
    fprintf(stderr, "prefixcl %s: %s\n\n", cmd, msg);
    usage(stderr);
    return 2;
}

/* Sets o's target from v; false when v is not a value of o's kind. */
static bool option_value(const cli_option *o, const char *v)
{
    uint64_t u;
    switch (o->kind) {
    case CLI_SIZE:
        if (!cli_uint(v, (uint64_t)o->lo, (uint64_t)o->hi, &u) || u > SIZE_MAX)
            return false;
        *(size_t *)o->target = (size_t)u;
        return true;
    case CLI_U64:
        if (!cli_uint(v, (uint64_t)o->lo, o->hi >= 1.8e19 ? UINT64_MAX : (uint64_t)o->hi, &u))
            return false;
        *(uint64_t *)o->target = u;
        return true;
    case CLI_FLOAT: return cli_float(v, o->lo, o->hi, (float *)o->target);
    case CLI_TEXT:
        if (!*v)
            return false;
        *(const char **)o->target = v;
        return true;
    case CLI_CHOICE:
        for (int i = 0; o->choices[i]; i++)
            if (!strcmp(v, o->choices[i])) {
                *(int *)o->target = i;
                return true;
            }
        return false;
    default: return false;
    }
}

/* What o accepts, for a message. */
static void option_expect(const cli_option *o, char *out, size_t cap)
{
    switch (o->kind) {
    case CLI_SIZE:
    case CLI_U64: snprintf(out, cap, "an integer in %.0f..%.0f", o->lo, o->hi); break;
    case CLI_FLOAT: snprintf(out, cap, "a number in [%g, %g]", o->lo, o->hi); break;
    case CLI_CHOICE: {
        size_t at = 0;
        for (int i = 0; o->choices[i] && at < cap; i++)
            at += (size_t)snprintf(out + at, cap - at, "%s%s",
                                   !i                  ? ""
                                   : o->choices[i + 1] ? ", "
                                                       : " or ",
                                   o->choices[i]);
        break;
    }
    default: snprintf(out, cap, "a name"); break;
    }
}

int cli_parse(const char *cmd, int argc, char **argv, const cli_option *opts, size_t n, bool *given,
              int (*usage)(FILE *out))
{
    for (size_t k = 0; given && k < n; k++)
        given[k] = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        const cli_option *o = NULL;
        for (size_t k = 0; k < n && !o; k++)
            if (!strcmp(a, opts[k].name)) {
                o = &opts[k];
                if (given)
                    given[k] = true;
            }
        char msg[600];
        if (!o) {
            snprintf(msg, sizeof(msg), "%s '%s'",
                     strncmp(a, "--", 2) ? "unexpected argument" : "unknown option", a);
            return option_error(cmd, usage, msg);
        }
        if (o->kind == CLI_FLAG) {
            *(bool *)o->target = true;
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(msg, sizeof(msg), "%s needs a value", a);
            return option_error(cmd, usage, msg);
        }
        const char *v = argv[++i];
        if (o->kind == CLI_TEXT && !*v) {
            snprintf(msg, sizeof(msg), "%s is empty", a);
            return option_error(cmd, usage, msg);
        }
        if (!option_value(o, v)) {
            char expect[256];
            option_expect(o, expect, sizeof(expect));
            snprintf(msg, sizeof(msg), "bad %s '%.200s' (%s)", a, v, expect);
            return option_error(cmd, usage, msg);
        }
    }
    return 0;
}

const char *cli_bar(char buf[CLI_BAR_MAX + 1], double fraction, int width)
{
    width = width < 0 ? 0 : width > CLI_BAR_MAX ? CLI_BAR_MAX : width;
    const int filled = fraction <= 0.0 ? 0 : fraction >= 1.0 ? width : (int)(fraction * width);
    for (int i = 0; i < width; i++)
        buf[i] = i < filled ? '#' : '-';
    buf[width] = '\0';
    return buf;
}

bool cli_heads(const char *text, size_t layers, size_t heads, uint8_t **mask, char *why, size_t cap)
{
    uint8_t *m = text && layers && heads ? calloc(layers * heads, 1) : NULL;
    if (!m) {
        snprintf(why, cap, "%s", text ? "no heads to select" : "no list");
        return false;
    }
    for (const char *p = text;;) {
        while (*p == ' ')
            p++;
        const size_t len = strcspn(p, " ,");
        char item[48], *dot;
        uint64_t l = 0, h = 0;
        if (len == 0 || len >= sizeof(item)) {
            snprintf(why, cap, "an empty or overlong item at '%.20s'", p);
            break;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (!(dot = strchr(item, '.'))) {
            snprintf(why, cap, "'%s' is not LAYER.HEAD", item);
            break;
        }
        *dot = '\0';
        if (!cli_uint(item, 0, layers - 1, &l) || !cli_uint(dot + 1, 0, heads - 1, &h)) {
            snprintf(why, cap,
                     "'%s.%s' is not LAYER.HEAD with a layer below %zu and a head below %zu", item,
                     dot + 1, layers, heads);
            break;
        }
        if (m[l * heads + h]) {
            snprintf(why, cap, "head %llu.%llu is given twice", (unsigned long long)l,
                     (unsigned long long)h);
            break;
        }
        m[l * heads + h] = 1;
        p += len;
        while (*p == ' ')
            p++;
        if (!*p) {
            *mask = m;
            return true;
        }
        if (*p != ',') {
            snprintf(why, cap, "items are separated by commas (at '%.20s')", p);
            break;
        }
        p++; /* an item must follow */
    }
    free(m);
    return false;
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

bool cli_check_output_dir(const char *cmd, const char *option, const char *dir,
                          const char *const *names, size_t n)
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
        fprintf(stderr, "prefixcl: writing standard output: %s\n",
                err ? strerror(err) : "write error");
        return status ? status : 1;
    }
    return status;
}
