/* The chat-template renderer of `prefixcl serve` (tools/serve/jinja/):
 * the published templates of tests/fixtures/chat/ (made by
 * make_chat_fixture.py with transformers' jinja2 environment) render byte
 * for byte as jinja2 rendered them, raise_exception's message included;
 * strftime_now's dates included (the fixtures' clock, in UTC);
 * what the subset lacks, bad syntax and runaway templates end in errors
 * that name the construct and its place, within the limits (string scans
 * paid by their bytes, in bounded CPU time).
 *
 * usage: test_chat_template FIXTURE_DIR */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/io_internal.h"
#include "jinja/jinja.h"

static const char *fixture_dir;

static void check_family(void **state)
{
    const char *family = *state;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.json", fixture_dir, family);
    unsigned char *text = NULL;
    size_t size = 0;
    assert_int_equal(pfx_read_file(NULL, path, 1u << 20, &text, &size), PFX_SUCCESS);
    cJSON *fx = cJSON_ParseWithLength((const char *)text, size);
    free(text);
    assert_non_null(fx);
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(fx, "template");
    assert_true(cJSON_IsString(src));
    char why[512] = "";
    jinja_template *t = jinja_parse(src->valuestring, strlen(src->valuestring), why, sizeof(why));
    if (!t)
        fail_msg("%s: %s", family, why);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(fx, "cases"), *c;
    size_t count = 0, raised = 0;
    cJSON_ArrayForEach(c, cases)
    {
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "output"),
                    *msg = cJSON_GetObjectItemCaseSensitive(c, "raised");
        char *out = NULL;
        size_t len = 0;
        const cJSON *now = cJSON_GetObjectItemCaseSensitive(c, "now");
        assert_true(cJSON_IsNumber(now)); /* strftime_now's clock, as jinja2 had it */
        const jinja_status st =
            jinja_render_at(t, cJSON_GetObjectItemCaseSensitive(c, "names"),
                            (int64_t)now->valuedouble, &out, &len, why, sizeof(why));
        if (msg) {
            if (st != JINJA_ERROR_RAISED || strcmp(why, msg->valuestring))
                fail_msg("%s case %zu: status %d \"%s\", raise_exception(\"%s\") expected", family,
                         count, (int)st, why, msg->valuestring);
            raised++;
        } else {
            if (st != JINJA_OK)
                fail_msg("%s case %zu: %s", family, count, why);
            assert_int_equal(len, strlen(out));
            if (strcmp(out, want->valuestring))
                fail_msg("%s case %zu:\n--- rendered\n%s\n--- jinja2\n%s\n---", family, count, out,
                         want->valuestring);
        }
        free(out);
        count++;
    }
    assert_true(count >= 4);
    if (!strcmp(family, "llama2") || !strcmp(family, "mistral"))
        assert_true(raised >= 2);
    jinja_free(t);
    cJSON_Delete(fx);
}

/* src fails to parse (status JINJA_ERROR_SYNTAX or _LIMIT), or renders
 * with status st; why holds each of the words. */
static void expect_error(const char *src, jinja_status st, const char *word1, const char *word2)
{
    char why[512] = "", *out = (char *)"unchanged";
    size_t len = 1;
    jinja_template *t = jinja_parse(src, strlen(src), why, sizeof(why));
    jinja_status got = st == JINJA_ERROR_SYNTAX ? JINJA_ERROR_SYNTAX : JINJA_ERROR_LIMIT;
    if (t) {
        cJSON *names = cJSON_Parse("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}");
        got = jinja_render(t, names, &out, &len, why, sizeof(why));
        cJSON_Delete(names);
        assert_null(out);
        assert_int_equal(len, 0);
        jinja_free(t);
    }
    if (got != st || !strstr(why, word1) || (word2 && !strstr(why, word2)))
        fail_msg("%s: status %d \"%s\"; %d naming \"%s\" expected", src, (int)got, why, (int)st,
                 word1);
}

static void errors_name_the_construct(void **state)
{
    (void)state;
    expect_error("ab\n  {% include 'x' %}", JINJA_ERROR_SYNTAX, "line 2:6", "include");
    expect_error("ab\n  {% call m() %}{% endcall %}", JINJA_ERROR_RENDER, "line 2:6",
                 "{% call %} of what is not a macro");
    expect_error("{{ messages | batch(2) }}", JINJA_ERROR_RENDER, "line 1:13", "|batch");
    expect_error("{{ '%s' % 1 }}", JINJA_ERROR_RENDER, "'%' of string and int", NULL);
    expect_error("{{ 1.5e }}", JINJA_ERROR_SYNTAX, "line 1:7", NULL);
    expect_error("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", JINJA_ERROR_RENDER,
                 "line 1:42", "macro 'm' takes not more than 1");
    expect_error("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", JINJA_ERROR_RENDER, "line 1:38",
                 "no argument named 'b'");
    expect_error("{% macro m(a=1, b) %}{% endmacro %}", JINJA_ERROR_SYNTAX, "line 1:17",
                 "without a default");
    expect_error("{% set x %}unclosed", JINJA_ERROR_SYNTAX, "endset", NULL);
    expect_error("{{ messages | map }}", JINJA_ERROR_RENDER, "|map", "a filter's name");
    expect_error("{{ [1, 'a'] | sort }}", JINJA_ERROR_RENDER, "'<' of int and string", NULL);
    expect_error("{{ 2 ** 64 }}", JINJA_ERROR_RENDER, "integer overflow", NULL);
    expect_error("{{ 1.0 // 0 }}", JINJA_ERROR_RENDER, "division by zero", NULL);
    expect_error("{{ x is divisibleby 0 }}", JINJA_ERROR_RENDER, "divisibleby", NULL);
    expect_error("{{ 'a' + }}", JINJA_ERROR_SYNTAX, "line 1:10", "expression expected");
    expect_error("{% if true %}open", JINJA_ERROR_SYNTAX, "endif", NULL);
    expect_error("{% for x in y %}", JINJA_ERROR_SYNTAX, "endfor", NULL);
    expect_error("{{ 'unterminated }}", JINJA_ERROR_SYNTAX, "unterminated string", NULL);
    expect_error("{{ x", JINJA_ERROR_SYNTAX, "}}", NULL);
    expect_error("{# never closed", JINJA_ERROR_SYNTAX, "comment", NULL);
    expect_error("{{ nothing.attr }}", JINJA_ERROR_RENDER, "'attr' of an undefined", NULL);
    expect_error("{{ 1 + 'a' }}", JINJA_ERROR_RENDER, "'+' of int and string", NULL);
    expect_error("{{ 7 / 0 }}", JINJA_ERROR_RENDER, "division by zero", NULL);
    expect_error("{{ 1 // 0 }}", JINJA_ERROR_RENDER, "division by zero", NULL);
    expect_error("{{ strftime_now(3) }}", JINJA_ERROR_RENDER, "strftime_now()", NULL);
    expect_error("{{ messages() }}", JINJA_ERROR_RENDER, "a list is not callable", NULL);
    expect_error("{{ messages[0].content.zfill(3) }}", JINJA_ERROR_RENDER, ".zfill()", NULL);
    expect_error("{{ raise_exception('Only ' ~ messages[0].role ~ ' here') }}", JINJA_ERROR_RAISED,
                 "Only user here", NULL);
}

static void limits_end_runaway_templates(void **state)
{
    (void)state;
    expect_error(
        "{% set r = range(1100) %}{% for a in r %}{% for b in r %}{% endfor %}{% endfor %}",
        JINJA_ERROR_LIMIT, "work", NULL);
    expect_error("{% for a in range(1000) %}{{ 'x' * 2000 }}{% endfor %}", JINJA_ERROR_LIMIT,
                 "output", NULL);
    expect_error("{% set ns = namespace(s='0123456789') %}{% for i in range(40) %}"
                 "{% set ns.s = ns.s + ns.s %}{% endfor %}",
                 JINJA_ERROR_LIMIT, "memory", NULL);
    char deep[1024] = "{{ ";
    for (int i = 0; i < 200; i++)
        strcat(deep, "(");
    strcat(deep, "1");
    for (int i = 0; i < 200; i++)
        strcat(deep, ")");
    strcat(deep, " }}");
    expect_error(deep, JINJA_ERROR_LIMIT, "nested deeper", NULL);
    /* a macro calling itself for ever ends at a bound, not at the end of the stack */
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", JINJA_ERROR_LIMIT,
                 "nested deeper", NULL);
    expect_error("{% macro f(n) %}{% for i in range(2) %}{{ f(n) }}{% endfor %}{% endmacro %}"
                 "{{ f(0) }}",
                 JINJA_ERROR_LIMIT, "nested deeper", NULL);
    /* lists nested without end are neither written nor compared through the stack */
    expect_error("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                 "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x == ns.x }}{{ ns.x }}",
                 JINJA_ERROR_LIMIT, "a value nested deeper than 1024", NULL);
    expect_error("{% macro f() %}{% set x %}{{ f() }}{% endset %}{% endmacro %}{{ f() }}",
                 JINJA_ERROR_LIMIT, "nested deeper", NULL);
    char blocks[8192] = "";
    for (int i = 0; i < 100; i++)
        strcat(blocks, "{% if true %}");
    expect_error(blocks, JINJA_ERROR_LIMIT, "nested deeper", NULL);
}

/* The CPU seconds of this process. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* {"messages": [{"role": "user", "content": n bytes of 'a'}]}; with
 * answered, a user's "hi" first and the long message the assistant's. */
static cJSON *long_message(size_t n, bool answered)
{
    char *text = malloc(n + 1);
    assert_non_null(text);
    memset(text, 'a', n);
    text[n] = 0;
    cJSON *names = cJSON_CreateObject(), *messages = cJSON_AddArrayToObject(names, "messages"),
          *m = cJSON_CreateObject();
    if (answered) {
        cJSON *q = cJSON_CreateObject();
        cJSON_AddStringToObject(q, "role", "user");
        cJSON_AddStringToObject(q, "content", "hi");
        cJSON_AddItemToArray(messages, q);
    }
    cJSON_AddStringToObject(m, "role", answered ? "assistant" : "user");
    cJSON_AddStringToObject(m, "content", text);
    cJSON_AddItemToArray(messages, m);
    free(text);
    return names;
}

/* Scans and comparisons pay their bytes: over a 1 MB message, templates
 * that would scan for seconds end within a fraction of one, naming the
 * line; a published template renders the same message. */
static void work_bounds_string_scans(void **state)
{
    (void)state;
    cJSON *names = long_message(1u << 20, false);
    static const char *const runaway[] = {
        "{% set s = messages[0].content %}\n{% for i in range(5000) %}"
        "{% if 'aaaaaaaaaaaaaaaaaaaaaaaab' in s %}x{% endif %}{% endfor %}",
        "{% set s = messages[0].content %}{% set t = s ~ '' %}\n{% for i in range(5000) %}"
        "{% if s == t %}x{% endif %}{% endfor %}",
        "{% set s = messages[0].content %}\n{% for i in range(5000) %}"
        "{{ s is lower }}{% endfor %}",
        "{% set ns = namespace(l=[]) %}{% for i in range(2000) %}"
        "{% set ns.l = ns.l + [messages[0].content] %}{% endfor %}\n{{ ns.l == ns.l }}",
        "{% set s = messages[0].content %}\n{% for i in range(5000) %}"
        "{{ s.startswith(s) }}{{ s < s }}{% endfor %}",
        "{% set x = '' %}\n{{ x * 1000000000000 }}",
    };
    for (size_t i = 0; i < sizeof(runaway) / sizeof(runaway[0]); i++) {
        char why[512] = "", *out = NULL;
        size_t len;
        jinja_template *t = jinja_parse(runaway[i], strlen(runaway[i]), why, sizeof(why));
        assert_non_null(t);
        const double t0 = cpu_seconds();
        const jinja_status st = jinja_render(t, names, &out, &len, why, sizeof(why));
        const double spent = cpu_seconds() - t0;
        jinja_free(t);
        free(out);
        if (st != JINJA_ERROR_LIMIT || !strstr(why, "line 2:") || !strstr(why, "work") ||
            spent > 1.0)
            fail_msg("%s: status %d \"%s\" after %.2f s; the work limit on line 2 within 1 s "
                     "expected",
                     runaway[i], (int)st, why, spent);
    }
    cJSON_Delete(names);
    /* Qwen3's template (an answer's content scanned for </think>, split,
     * stripped) over an answer of half the output's bound */
    names = long_message(JINJA_MAX_OUTPUT / 2, true);
    char path[4096], why[512];
    snprintf(path, sizeof(path), "%s/qwen3.json", fixture_dir);
    unsigned char *text = NULL;
    size_t size = 0, len = 0;
    assert_int_equal(pfx_read_file(NULL, path, 1u << 20, &text, &size), PFX_SUCCESS);
    cJSON *fx = cJSON_ParseWithLength((const char *)text, size);
    free(text);
    const char *src = cJSON_GetObjectItemCaseSensitive(fx, "template")->valuestring;
    jinja_template *t = jinja_parse(src, strlen(src), why, sizeof(why));
    assert_non_null(t);
    char *out = NULL;
    if (jinja_render(t, names, &out, &len, why, sizeof(why)) != JINJA_OK)
        fail_msg("qwen3 over a 1 MB message: %s", why);
    assert_true(len > JINJA_MAX_OUTPUT / 2);
    free(out);
    jinja_free(t);
    cJSON_Delete(fx);
    cJSON_Delete(names);
}

/* the whitespace rules of transformers' environment, in small */
static void whitespace_control(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        { "a\n  {% if true %}\nb\n  {% endif %}\nc", "a\nb\nc" },
        { "a  {%- if true -%}  b  {%- endif %}", "ab" },
        { "x {{- ' y ' -}} z", "x y z" },
        { "  {%+ if true %}k{% endif +%}\n\n", "  k\n" }, /* one last newline dropped */
        { "a {# note #}\nb\n  {# own line #}\nc", "a b\nc" },
        { "{{ 'kept' }}\n{{ 'too' }}", "kept\ntoo" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[256], *out;
        size_t len;
        jinja_template *t = jinja_parse(cases[i][0], strlen(cases[i][0]), why, sizeof(why));
        assert_non_null(t);
        assert_int_equal(jinja_render(t, NULL, &out, &len, why, sizeof(why)), JINJA_OK);
        if (strcmp(out, cases[i][1]))
            fail_msg("%s: \"%s\", \"%s\" expected", cases[i][0], out, cases[i][1]);
        free(out);
        jinja_free(t);
    }
}

/* a "{" before a NUL byte is text, not a tag */
static void text_with_nul(void **state)
{
    (void)state;
    static const char src[] = "a{\0b{{ 1 }}";
    char why[256], *out;
    size_t len;
    jinja_template *t = jinja_parse(src, sizeof(src) - 1, why, sizeof(why));
    assert_non_null(t);
    assert_int_equal(jinja_render(t, NULL, &out, &len, why, sizeof(why)), JINJA_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(out, "a{\0b1", 5);
    free(out);
    jinja_free(t);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_chat_template FIXTURE_DIR\n");
        return 2;
    }
    fixture_dir = argv[1];
    setenv("TZ", "UTC", 1); /* the fixtures' strftime_now shows UTC */
    tzset();
    static char *families[] = {
        "llama2",
        "llama3",
        "llama3_1",
        "qwen2",
        "qwen2_5",
        "chatml",
        "zephyr",
        "mistral",
        "features",
        "features_2",
        "hermes2_pro",
        "command_r_tools",
        "mistral_v3_tools",
        "mistral_nemo",
        "functionary_v2",
        "deepseek_r1",
        "qwen3",
        "llama3_2_vision",
        "smollm3",
        "minicpm3",
        "jamba_1_6",
        "kimi_k2",
        "command_a",
        "glm_5_1",
        "gemma3",
        "phi3",
        "phi4",
        "gpt_oss",
        "granite3",
    };
    struct CMUnitTest tests[sizeof(families) / sizeof(families[0]) + 5];
    size_t n = 0;
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        tests[n++] = (struct CMUnitTest){ families[i], check_family, NULL, NULL, families[i] };
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(errors_name_the_construct);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(limits_end_runaway_templates);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(work_bounds_string_scans);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(whitespace_control);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(text_with_nul);
    return _cmocka_run_group_tests("chat_template", tests, n, NULL, NULL);
}
