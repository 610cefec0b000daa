/*
 * The option parser every prefixcl command uses (tools/common/cli.h): each
 * kind of value taken, repeatable options in order, and each refusal with
 * its message on stderr and exit status 2 (an unknown option, a stray
 * argument, a missing or empty value, "5x" and " 5" as numbers, a value out
 * of range or not a choice, a single option given twice, a list full).
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

static int usage_calls;
static FILE *usage_out;

static int usage(FILE *out)
{
    usage_calls++;
    usage_out = out;
    fprintf(out, "usage: prefixcl test [options]\n");
    return 2;
}

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
    { "--flag", CLI_FLAG, &flag, 0, 0, NULL, NULL },
    { "--size", CLI_SIZE, &size, 2, 100, NULL, NULL },
    { "--u64", CLI_U64, &u64, 0, 1.9e19, NULL, NULL },
    { "--number", CLI_FLOAT, &number, -1, 1, NULL, NULL },
    { "--text", CLI_TEXT, &text, 0, 0, NULL, "a file name" },
    { "--choice", CLI_CHOICE, &choice, 0, 0, choices, NULL },
    { "--texts", CLI_TEXTS, &text_list, 0, 0, NULL, NULL },
    { "--numbers", CLI_U64S, &number_list, 5, 9, NULL, NULL },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

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
    usage_calls = 0;
    usage_out = NULL;

    fflush(stderr);
    FILE *capture = tmpfile();
    assert_non_null(capture);
    const int saved = dup(STDERR_FILENO);
    dup2(fileno(capture), STDERR_FILENO);
    const int r = cli_parse("test", argc, argv, opts, NOPTS, given, usage);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(capture);
    const size_t n = fread(err, 1, cap - 1, capture);
    err[n] = '\0';
    fclose(capture);
    return r;
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
    assert_int_equal(usage_calls, 0);
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
    assert_int_equal(usage_calls, 1);
    assert_ptr_equal(usage_out, stdout);
    assert_int_equal(parse(err, sizeof(err), NULL, "-h", NULL), 1);
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
        char err[1024], want[512];
        const int r =
            parse(err, sizeof(err), NULL, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL);
        snprintf(want, sizeof(want), "prefixcl test: %s\n\nusage: prefixcl test [options]\n",
                 cases[c].why);
        if (r != 2 || strcmp(err, want))
            fail_msg("case %zu: status %d, stderr '%s', expected '%s'", c, r, err, want);
        assert_int_equal(usage_calls, 1);
        assert_ptr_equal(usage_out, stderr);
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
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_gain_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
