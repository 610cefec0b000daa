/* Shared by every prefixcl command (tools/common/cli.h). */
#include <ctype.h>
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

const char *const cli_gain_modes[] = { "off", "linear", "tanh", NULL };

bool cli_gain_init(const char *text, float *range, char *why, size_t cap)
{
    if (text && !strcmp(text, "zero")) {
        *range = 0.0f;
        return true;
    }
    if (text && !strncmp(text, "uniform:", 8) && cli_float(text + 8, 0, 10, range) && *range > 0.0f)
        return true;
    snprintf(why, cap, "'%s' is neither zero nor uniform:A with A in (0, 10]", text ? text : "");
    return false;
}

static int option_error(const char *cmd, const cli_doc *doc, const cli_option *opts, size_t n,
                        const char *msg)
{
    fprintf(stderr, "prefixcl %s: %s\n\n", cmd, msg);
    return cli_help(stderr, doc, opts, n);
}

/* The help's width, and the widest "--name META" that sets the column of
 * the descriptions (a wider one runs past it, its text two spaces after). */
#define HELP_WIDTH    80
#define HELP_NAME_MAX 20

/* Prints text from column `at` (where the cursor is) wrapped at HELP_WIDTH,
 * each further line indented to `indent`. */
static void help_wrap(FILE *out, const char *text, size_t at, size_t indent)
{
    bool first = true;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        const size_t len = strcspn(p, " ");
        char word[256];
        /* '\1' glues "(default" to its value's first word */
        snprintf(word, sizeof(word), "%.*s", (int)len, p);
        for (char *g = strchr(word, '\1'); g; g = strchr(g, '\1'))
            *g = ' ';
        if (!len)
            break;
        if (!first && at + 1 + len > HELP_WIDTH) {
            fprintf(out, "\n%*s", (int)indent, "");
            at = indent;
        } else if (!first) {
            fputc(' ', out);
            at++;
        }
        fputs(word, out);
        at += len;
        p += len;
        first = false;
    }
    fputc('\n', out);
}

/* Appends to text (of cap bytes) as snprintf would. */
static void append(char *text, size_t cap, const char *format, const char *arg)
{
    const size_t len = strlen(text);
    if (len + 1 < cap)
        snprintf(text + len, cap - len, format, arg);
}

/* o's description: its help, then a choice's values and the default, as
 * "(off, linear or tanh; default off)", or the default alone, as "(default
 * 8)" or "(default: the model's)". '\1' glues "default" to the value's
 * first word. */
static void help_text(const cli_option *o, char *text, size_t cap)
{
    snprintf(text, cap, "%s", o->help ? o->help : "");
    const bool word = o->def && (!strchr(o->def, ' ') || isdigit((unsigned char)o->def[0]));
    if (o->kind == CLI_CHOICE) {
        for (int i = 0; o->choices[i]; i++) {
            append(text, cap, "%s", !i ? " (" : o->choices[i + 1] ? ", " : " or ");
            append(text, cap, "%s", o->choices[i]);
        }
        append(text, cap, "%s", o->def ? "; default\1" : "");
    } else if (o->def) {
        append(text, cap, "%s", word ? " (default\1" : " (default:\1");
    }
    if (o->def || o->kind == CLI_CHOICE)
        append(text, cap, "%s)", o->def ? o->def : "");
}

static size_t help_name_len(const cli_option *o)
{
    return strlen(o->name) + (o->meta ? 1 + strlen(o->meta) : 0);
}

int cli_help(FILE *out, const cli_doc *doc, const cli_option *opts, size_t n)
{
    /* the synopsis: further lines indented past "usage: " */
    fprintf(out, "usage: ");
    for (const char *p = doc->usage; *p;) {
        const size_t len = strcspn(p, "\n");
        fprintf(out, "%s%.*s\n", p == doc->usage ? "" : "       ", (int)len, p);
        p += len + (p[len] == '\n');
    }
    if (doc->intro)
        fputs(doc->intro, out);
    size_t wide = 0;
    for (size_t k = 0; k < n; k++) {
        const size_t len = help_name_len(&opts[k]);
        if (len <= HELP_NAME_MAX && len > wide)
            wide = len;
    }
    const size_t column = 2 + wide + 2;
    for (size_t k = 0; k < n; k++) {
        const cli_option *o = &opts[k];
        char text[1024];
        help_text(o, text, sizeof(text));
        const size_t len = help_name_len(o);
        fprintf(out, "  %s%s%s", o->name, o->meta ? " " : "", o->meta ? o->meta : "");
        if (!text[0]) {
            fputc('\n', out);
            continue;
        }
        const size_t at = 2 + len + 2 <= column ? column : 2 + len + 2;
        fprintf(out, "%*s", (int)(at - 2 - len), "");
        help_wrap(out, text, at, column);
    }
    if (doc->outro)
        fputs(doc->outro, out);
    return out == stdout ? 0 : 2;
}

/* 1 + the index of value v among o's choices; 0 when it is none of them. */
static int choice_index(const cli_option *o, const char *v)
{
    for (int i = 0; o->choices[i]; i++)
        if (!strcmp(v, o->choices[i]))
            return i + 1;
    return 0;
}

/* Why the table cannot be parsed or shown (empty when it can). */
static void table_check(const cli_option *opts, size_t n, char *msg, size_t cap)
{
    msg[0] = '\0';
    if (n > CLI_MAX_OPTIONS)
        snprintf(msg, cap, "more options than CLI_MAX_OPTIONS in the table");
    for (size_t k = 0; !msg[0] && k < n; k++) {
        const cli_option *o = &opts[k];
        if (!o->help || !o->help[0])
            snprintf(msg, cap, "the option table: %s has no help text", o->name);
        else if (o->kind == CLI_CHOICE && o->def && !choice_index(o, o->def))
            snprintf(msg, cap, "the option table: %s's default %s is not a choice", o->name,
                     o->def);
        else if ((o->kind == CLI_FLAG) != (!o->meta || !o->meta[0]))
            snprintf(msg, cap, "the option table: %s %s", o->name,
                     o->kind == CLI_FLAG ? "is a flag with a value's placeholder"
                                         : "has no placeholder for its value");
    }
}

/* An integer option's bounds: hi from 1.8e19 up (a double cannot hold
 * UINT64_MAX) is UINT64_MAX. */
static uint64_t int_lo(const cli_option *o)
{
    return (uint64_t)o->lo;
}

static uint64_t int_hi(const cli_option *o)
{
    return o->hi >= 1.8e19 ? UINT64_MAX : (uint64_t)o->hi;
}

/* Sets o's target from v; false when v is not a value of o's kind. */
static bool option_value(const cli_option *o, const char *v)
{
    uint64_t u;
    cli_list *list = o->target;
    switch (o->kind) {
    case CLI_SIZE:
        if (!cli_uint(v, int_lo(o), int_hi(o), &u) || u > SIZE_MAX)
            return false;
        *(size_t *)o->target = (size_t)u;
        return true;
    case CLI_U64:
    case CLI_U64S:
        if (!cli_uint(v, int_lo(o), int_hi(o), &u))
            return false;
        if (o->kind == CLI_U64S) {
            list->number[list->count] = u;
            list->text[list->count++] = v;
        } else {
            *(uint64_t *)o->target = u;
        }
        return true;
    case CLI_FLOAT: return cli_float(v, o->lo, o->hi, (float *)o->target);
    case CLI_TEXT: *(const char **)o->target = v; return true;
    case CLI_TEXTS: list->text[list->count++] = v; return true;
    case CLI_CHOICE:
        if (!choice_index(o, v))
            return false;
        *(int *)o->target = choice_index(o, v) - 1;
        return true;
    default: return false;
    }
}

/* What o accepts, for a message. */
static void option_expect(const cli_option *o, char *out, size_t cap)
{
    switch (o->kind) {
    case CLI_SIZE:
    case CLI_U64:
    case CLI_U64S:
        snprintf(out, cap, "an integer in %llu..%llu", (unsigned long long)int_lo(o),
                 (unsigned long long)int_hi(o));
        break;
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

/* Why argument a (an option of the table or not, its value v) is refused;
 * empty when it is taken. */
static void option_take(const cli_option *o, bool *seen, const char *a, const char *v, char *msg,
                        size_t cap)
{
    const bool repeatable = o && (o->kind == CLI_TEXTS || o->kind == CLI_U64S);
    const cli_list *list = o ? o->target : NULL;
    msg[0] = '\0';
    if (!o) {
        snprintf(msg, cap, "%s '%s'",
                 strncmp(a, "--", 2) ? "unexpected argument" : "unknown option", a);
    } else if (*seen && !repeatable) {
        snprintf(msg, cap, "%s given twice", a);
    } else if (repeatable && list->count == list->max) {
        snprintf(msg, cap, "at most %zu %s options%s%s%s", list->max, a, list->full ? " (" : "",
                 list->full ? list->full : "", list->full ? ")" : "");
    } else if (o->kind == CLI_FLAG) {
        *(bool *)o->target = true;
    } else if (!v) {
        snprintf(msg, cap, "%s needs %s", a, o->value ? o->value : "a value");
    } else if ((o->kind == CLI_TEXT || o->kind == CLI_TEXTS) && !*v) {
        snprintf(msg, cap, "%s is empty", a);
    } else if (!option_value(o, v)) {
        char expect[256];
        option_expect(o, expect, sizeof(expect));
        snprintf(msg, cap, "bad %s '%.200s' (%s)", a, v, expect);
    }
    if (o)
        *seen = true;
}

int cli_parse(const char *cmd, int argc, char **argv, const cli_option *opts, size_t n, bool *given,
              const cli_doc *doc)
{
    bool seen[CLI_MAX_OPTIONS] = { false };
    char bad[256];
    table_check(opts, n, bad, sizeof(bad));
    if (bad[0]) {
        /* a fault of the command, whatever the arguments: no help can be trusted */
        fprintf(stderr, "prefixcl %s: %s\n", cmd, bad);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_help(stdout, doc, opts, n);
            return 1;
        }
        size_t k = 0;
        while (k < n && strcmp(a, opts[k].name))
            k++;
        const cli_option *o = k < n ? &opts[k] : NULL;
        const char *v = o && o->kind != CLI_FLAG && i + 1 < argc ? argv[++i] : NULL;
        char msg[600];
        option_take(o, o ? &seen[k] : NULL, a, v, msg, sizeof(msg));
        if (msg[0])
            return option_error(cmd, doc, opts, n, msg);
    }
    for (size_t k = 0; given && k < n; k++)
        given[k] = seen[k];
    return 0;
}

bool cli_has(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name))
            return true;
    return false;
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

bool cli_heads(const char *text, pfx_layer_head **list, size_t *count, char *why, size_t cap)
{
    size_t n = 1;
    for (const char *c = text ? text : ""; *c; c++)
        n += *c == ',';
    pfx_layer_head *out = text ? calloc(n, sizeof(*out)) : NULL;
    if (!out) {
        snprintf(why, cap, "%s", text ? "host memory" : "no list");
        return false;
    }
    size_t k = 0;
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
        if (!cli_uint(item, 0, 1 << 20, &l) || !cli_uint(dot + 1, 0, 1 << 20, &h)) {
            snprintf(why, cap, "'%s.%s' is not LAYER.HEAD (numbers from 0)", item, dot + 1);
            break;
        }
        out[k++] = (pfx_layer_head){ .layer = (size_t)l, .head = (size_t)h };
        p += len;
        while (*p == ' ')
            p++;
        if (!*p) {
            *list = out;
            *count = k;
            return true;
        }
        if (*p != ',') {
            snprintf(why, cap, "items are separated by commas (at '%.20s')", p);
            break;
        }
        p++; /* an item must follow */
    }
    free(out);
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

void cli_job_error(const char *cmd, pfx_status st, const char *msg, const cli_field_option *map,
                   size_t n)
{
    fprintf(stderr, "prefixcl %s: %s (", cmd, pfx_status_string(st));
    for (const char *p = msg; *p;) {
        size_t used = 0;
        const char *option = NULL;
        for (size_t i = 0; !option && i < n && !strncmp(p, "config.", 7); i++) {
            const size_t len = strlen(map[i].field);
            const char after = p[7 + len];
            if (!strncmp(p + 7, map[i].field, len) && after != '_' && after != '.' &&
                !(after >= 'a' && after <= 'z')) {
                option = map[i].option;
                used = 7 + len;
            }
        }
        if (option) {
            fputs(option, stderr);
            p += used;
        } else {
            fputc(*p++, stderr);
        }
    }
    fputs(")\n", stderr);
}
