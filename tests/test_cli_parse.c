/*
 * The option parser every prefixcl command uses (tools/common/cli.h): each
 * kind of value taken, repeatable options in order, and each refusal with
 * its message on stderr and exit status 2 (an unknown option, a stray
 * argument, a missing or empty value, "5x" and " 5" as numbers, a value out
 * of range or not a choice, a single option given twice, a list full); the
 * help generated from the table, and a table without help refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cli.h"

static const cli_doc doc = { "prefixcl test [options]", NULL, NULL };

/* The help of the table below (cli_help), as the refusals print it. */
static const char help[] =
    "usage: prefixcl test [options]\n"
    "  --flag       a switch\n"
    "  --size N     a count (default 2)\n"
    "  --u64 N      a large count\n"
    "  --number X   a number (default: half of --size)\n"
    "  --text FILE  a file\n"
    "  --choice M   a mode (off, linear or tanh; default linear)\n"
    "  --texts T    a repeatable name: words enough to run past the eightieth column\n"
    "               so that the line wraps under its column as it ought to\n"
    "               (default 3: a number kept with the word default)\n"
    "  --numbers N  repeatable numbers\n";
/* The parser's targets, reset before each parse. */
static bool flag;
static size_t size;
static uint64_t u64;
static float number;
static const char *text;
static int choice;
static const char *texts[3], *number_texts[2];
static uint64_t numbers[2];
static cli_list text_list, number_list;
static const char *const choices[] = { "off", "linear", "tanh", NULL };

static const cli_option opts[] = {
    { "--flag", CLI_FLAG, &flag, 0, 0, NULL, NULL, NULL, "a switch", NULL },
    { "--size", CLI_SIZE, &size, 2, 100, NULL, NULL, "N", "a count", "2" },
    { "--u64", CLI_U64, &u64, 0, 1.9e19, NULL, NULL, "N", "a large count", NULL },
    { "--number", CLI_FLOAT, &number, -1, 1, NULL, NULL, "X", "a number", "half of --size" },
    { "--text", CLI_TEXT, &text, 0, 0, NULL, "a file name", "FILE", "a file", NULL },
    { "--choice", CLI_CHOICE, &choice, 0, 0, choices, NULL, "M", "a mode", "linear" },
    { "--texts", CLI_TEXTS, &text_list, 0, 0, NULL, NULL, "T",
      "a repeatable name: words enough to run past the eightieth column so that the line wraps "
      "under its column as it ought to",
      "3: a number kept with the word default" },
    { "--numbers", CLI_U64S, &number_list, 5, 9, NULL, NULL, "N", "repeatable numbers", NULL },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* What stdout had during the last parse. */
static char out_text[2048];

/* fd's text written by what runs between capture_start and capture_end. */
static FILE *capture_start(int fd, int *saved)
{
    FILE *capture = tmpfile();
    assert_non_null(capture);
    *saved = dup(fd);
    dup2(fileno(capture), fd);
    return capture;
}

static void capture_end(FILE *capture, int fd, int saved, char *text, size_t cap)
{
    dup2(saved, fd);
    close(saved);
    rewind(capture);
    const size_t n = fread(text, 1, cap - 1, capture);
    text[n] = '\0';
    fclose(capture);
}

/* argv through cli_parse with table t: stderr's text in err, stdout's in
 * out_text. */
static int parse_table(char *err, size_t cap, bool *given, const cli_option *t, size_t n, int argc,
                       char **argv)
{
    int saved_err, saved_out;
    fflush(stdout);
    fflush(stderr);
    FILE *ce = capture_start(STDERR_FILENO, &saved_err);
    FILE *co = capture_start(STDOUT_FILENO, &saved_out);
    const int r = cli_parse("test", argc, argv, t, n, given, &doc);
    fflush(stdout);
    fflush(stderr);
    capture_end(co, STDOUT_FILENO, saved_out, out_text, sizeof(out_text));
    capture_end(ce, STDERR_FILENO, saved_err, err, cap);
    return r;
}

/* argv (NULL-terminated, "test" first) through cli_parse; stderr's text in
 * err; given per option in given. */
static int parse(char *err, size_t cap, bool *given, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, given);
    for (const char *a = "test"; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    flag = false;
    size = 0;
    u64 = 0;
    number = 0;
    text = NULL;
    choice = -1;
    text_list = (cli_list){ texts, NULL, 3, 0, NULL };
    number_list = (cli_list){ number_texts, numbers, 2, 0, "more: ask" };
    out_text[0] = '\0';
    return parse_table(err, cap, given, opts, NOPTS, argc, argv);
}

static void test_every_kind(void **state)
{
    (void)state;
    char err[1024];
    bool given[NOPTS];
    assert_int_equal(parse(err, sizeof(err), given, "--texts", "a", "--size", "100", "--u64",
                           "18446744073709551615", "--number", "-0.25", "--text", "x y", "--choice",
                           "tanh", "--numbers", "7", "--texts", "b", "--flag", "--numbers", "5",
                           NULL),
                     0);
    assert_string_equal(err, "");
    assert_string_equal(out_text, "");
    assert_true(flag);
    assert_int_equal(size, 100);
    assert_true(u64 == UINT64_MAX);
    assert_float_equal(number, -0.25f, 0.0f);
    assert_string_equal(text, "x y");
    assert_int_equal(choice, 2);
    assert_int_equal(text_list.count, 2);
    assert_string_equal(texts[0], "a");
    assert_string_equal(texts[1], "b");
    assert_int_equal(number_list.count, 2);
    assert_int_equal(numbers[0], 7);
    assert_int_equal(numbers[1], 5);
    assert_string_equal(number_texts[1], "5");
    for (size_t k = 0; k < NOPTS; k++)
        assert_true(given[k]);

    /* given says which appeared; the targets of the others keep their values */
    assert_int_equal(parse(err, sizeof(err), given, "--size", "2", NULL), 0);
    assert_int_equal(size, 2);
    assert_false(flag);
    assert_null(text);
    assert_int_equal(choice, -1);
    for (size_t k = 0; k < NOPTS; k++)
        assert_int_equal(given[k], k == 1);
}

static void test_help(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(parse(err, sizeof(err), NULL, "--size", "3", "--help", "--bogus", NULL), 1);
    assert_string_equal(out_text, help);
    assert_string_equal(err, "");
    assert_int_equal(parse(err, sizeof(err), NULL, "-h", NULL), 1);
    assert_string_equal(out_text, help);
}

/* cli_help's status: 0 on stdout (asked for), 2 elsewhere (a refusal). */
static void test_help_status(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(cli_help(f, &doc, opts, NOPTS), 2);
    fclose(f);
    fflush(stdout);
    int saved;
    FILE *co = capture_start(STDOUT_FILENO, &saved);
    const int r = cli_help(stdout, &doc, opts, NOPTS);
    fflush(stdout);
    capture_end(co, STDOUT_FILENO, saved, out_text, sizeof(out_text));
    assert_int_equal(r, 0);
    assert_string_equal(out_text, help);
}

/* A table whose entry lacks its help, or has the wrong placeholder, is
 * refused whatever the arguments, --help included: a help cannot leave an
 * option out, nor name a default the parser refuses. */
static void test_table_refused(void **state)
{
    (void)state;
    static const struct {
        cli_option o;
        const char *why;
    } cases[] = {
        { { "--bare", CLI_SIZE, &size, 0, 9, NULL, NULL, "N", NULL, NULL },
          "prefixcl test: the option table: --bare has no help text\n" },
        { { "--bare", CLI_SIZE, &size, 0, 9, NULL, NULL, "N", "", "1" },
          "prefixcl test: the option table: --bare has no help text\n" },
        { { "--bare", CLI_TEXT, &text, 0, 0, NULL, NULL, NULL, "a name", NULL },
          "prefixcl test: the option table: --bare has no placeholder for its value\n" },
        { { "--bare", CLI_FLAG, &flag, 0, 0, NULL, NULL, "X", "a switch", NULL },
          "prefixcl test: the option table: --bare is a flag with a value's placeholder\n" },
        { { "--bare", CLI_CHOICE, &choice, 0, 0, choices, NULL, "M", "a mode", "dim" },
          "prefixcl test: the option table: --bare's default dim is not a choice\n" },
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        cli_option t[NOPTS + 1];
        memcpy(t, opts, sizeof(opts));
        t[NOPTS] = cases[c].o;
        for (int with_help = 0; with_help < 2; with_help++) {
            char *argv[] = { "test", with_help ? "--help" : "--flag", NULL };
            char err[512];
            const int r = parse_table(err, sizeof(err), NULL, t, NOPTS + 1, 2, argv);
            if (r != 2 || strcmp(err, cases[c].why) || out_text[0])
                fail_msg("case %zu: status %d, stderr '%s', stdout '%s'", c, r, err, out_text);
        }
    }
}

/* Each refusal: status 2, "prefixcl test: why", then the usage on stderr. */
static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *args[8];
        const char *why;
    } cases[] = {
        { { "--bogus" }, "unknown option '--bogus'" },
        { { "stray" }, "unexpected argument 'stray'" },
        { { "--size" }, "--size needs a value" },
        { { "--text" }, "--text needs a file name" },
        { { "--text", "" }, "--text is empty" },
        { { "--texts", "" }, "--texts is empty" },
        { { "--size", "5x" }, "bad --size '5x' (an integer in 2..100)" },
        { { "--size", " 5" }, "bad --size ' 5' (an integer in 2..100)" },
        { { "--size", "1" }, "bad --size '1' (an integer in 2..100)" },
        { { "--size", "101" }, "bad --size '101' (an integer in 2..100)" },
        { { "--u64", "-1" }, "bad --u64 '-1' (an integer in 0..18446744073709551615)" },
        { { "--number", "nan" }, "bad --number 'nan' (a number in [-1, 1])" },
        { { "--number", "1.5" }, "bad --number '1.5' (a number in [-1, 1])" },
        { { "--choice", "dim" }, "bad --choice 'dim' (off, linear or tanh)" },
        { { "--numbers", "4" }, "bad --numbers '4' (an integer in 5..9)" },
        { { "--flag", "--flag" }, "--flag given twice" },
        { { "--size", "3", "--size", "3" }, "--size given twice" },
        { { "--numbers", "5", "--numbers", "6", "--numbers", "7" },
          "at most 2 --numbers options (more: ask)" },
        { { "--texts", "a", "--texts", "b", "--texts", "c", "--texts" },
          "at most 3 --texts options" },
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const char *const *a = cases[c].args;
        char err[2048], want[2048];
        const int r =
            parse(err, sizeof(err), NULL, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL);
        snprintf(want, sizeof(want), "prefixcl test: %s\n\n%s", cases[c].why, help);
        if (r != 2 || strcmp(err, want) || out_text[0])
            fail_msg("case %zu: status %d, stderr '%s', expected '%s'", c, r, err, want);
    }
}

static void test_gain_modes(void **state)
{
    (void)state;
    /* the names in pfx_gain_mode's order, as --gain and --gain-mode take them */
    assert_string_equal(cli_gain_modes[0], "off");
    assert_string_equal(cli_gain_modes[1], "linear");
    assert_string_equal(cli_gain_modes[2], "tanh");
    assert_null(cli_gain_modes[3]);
    /* --gain-init: zero or uniform:A, A in (0, 10] */
    float a = -1.0f;
    char why[128];
    assert_true(cli_gain_init("zero", &a, why, sizeof(why)) && a == 0.0f);
    assert_true(cli_gain_init("uniform:0.05", &a, why, sizeof(why)) && a == 0.05f);
    const char *bad[] = { "uniform:0",   "uniform:-1", "uniform:", "uniform:11",
                          "uniform:nan", "normal:1",   "Zero",     "" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_false(cli_gain_init(bad[i], &a, why, sizeof(why)));
        assert_non_null(strstr(why, "uniform:A"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind),  cmocka_unit_test(test_help),
        cmocka_unit_test(test_help_status), cmocka_unit_test(test_table_refused),
        cmocka_unit_test(test_refusals),    cmocka_unit_test(test_gain_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
