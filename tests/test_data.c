/* Data sets: text and JSONL files tokenized as the tokenizer does it alone,
 * labels -100 on prompts and padding, truncation, batches that cover every
 * example once per epoch in a seeded order, resume from a saved position,
 * a held-out slice, and every bad input named with its file and line.
 * No OpenCL.
 *
 * argv[1]: tests/fixtures/tokenizers. */
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pfx_test.h"
#include "prefixcl/data.h"

static const char *fixture_dir;
static char tmp_dir[] = "/tmp/pfx-test-data-XXXXXX";
static pfx_tokenizer *llama3, *gpt2; /* BOS template / none, EOS <|endoftext|> */

static const char *write_tmp(const char *name, const char *content, size_t n)
{
    static char path[4][512];
    static int slot;
    char *p = path[slot++ % 4];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    FILE *fp = fopen(p, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(content, 1, n, fp), n);
    fclose(fp);
    return p;
}

static pfx_dataset *load(const char *name, const char *content, const pfx_tokenizer *tok,
                         const pfx_dataset_options *opt)
{
    pfx_dataset *ds = NULL;
    pfx_status st = pfx_dataset_load(write_tmp(name, content, strlen(content)), tok, opt, &ds);
    if (st != PFX_SUCCESS)
        fail_msg("%s: %s", name, pfx_last_error(NULL));
    return ds;
}

static void expect_encoding(const pfx_tokenizer *tok, const char *text, bool special,
                            const int32_t *ids, size_t len)
{
    int32_t *want;
    size_t n;
    assert_int_equal(pfx_tokenizer_encode(tok, text, strlen(text),
                                          special ? PFX_ENCODE_ADD_SPECIAL : 0, &want, &n),
                     PFX_SUCCESS);
    assert_int_equal(len, n);
    assert_memory_equal(ids, want, n * sizeof(int32_t));
    free(want);
}

static void test_text_file(void **state)
{
    (void)state;
    static const char *lines[] = { "The baker found a wooden box.", "Hello  world 1234!", "x y" };
    pfx_dataset *ds =
        load("a.txt", "The baker found a wooden box.\n\nHello  world 1234!\r\nx y", llama3, NULL);
    pfx_dataset_info info;
    assert_int_equal(pfx_dataset_get_info(ds, &info), PFX_SUCCESS);
    assert_int_equal(info.examples, 3);
    assert_int_equal(info.truncated, 0);
    int32_t bos = pfx_tokenizer_special_id(llama3, PFX_TOKEN_BOS);
    size_t tokens = 0, counted = 0;
    for (size_t i = 0; i < 3; i++) {
        const int32_t *ids, *labels;
        size_t len;
        assert_int_equal(pfx_dataset_example(ds, i, &ids, &labels, &len), PFX_SUCCESS);
        expect_encoding(llama3, lines[i], true, ids, len);
        assert_int_equal(ids[0], bos);
        assert_int_equal(labels[0], PFX_LABEL_IGNORE); /* BOS is not learned */
        for (size_t t = 1; t < len; t++)
            assert_int_equal(labels[t], ids[t]);
        tokens += len;
        counted += len - 1;
    }
    assert_int_equal(info.tokens, tokens);
    assert_int_equal(info.counted, counted);
    const int32_t *ids, *labels;
    size_t len;
    assert_int_equal(pfx_dataset_example(ds, 3, &ids, &labels, &len), PFX_ERROR_OUT_OF_RANGE);
    pfx_dataset_free(&ds);
    assert_null(ds);
    pfx_dataset_free(&ds);
}

static void test_truncation_and_skips(void **state)
{
    (void)state;
    pfx_dataset_options opt;
    pfx_dataset_default_options(&opt);
    opt.max_length = 5;
    /* "a" alone is BOS + one token: one label at t = 1, kept; with no
     * special tokens it has none and is skipped. */
    pfx_dataset *ds = load("t.txt", "one two three four five six seven\na\n", llama3, &opt);
    pfx_dataset_info info;
    pfx_dataset_get_info(ds, &info);
    assert_int_equal(info.examples, 2);
    assert_int_equal(info.truncated, 1);
    assert_int_equal(info.longest, 5);
    const int32_t *ids, *labels;
    size_t len;
    pfx_dataset_example(ds, 0, &ids, &labels, &len);
    assert_int_equal(len, 5);
    int32_t *full;
    size_t n;
    assert_int_equal(pfx_tokenizer_encode(llama3, "one two three four five six seven", 33,
                                          PFX_ENCODE_ADD_SPECIAL, &full, &n),
                     PFX_SUCCESS);
    assert_true(n > 5);
    assert_memory_equal(ids, full, 5 * sizeof(int32_t)); /* the first tokens are kept */
    free(full);
    pfx_dataset_free(&ds);

    opt.add_special = false;
    ds = load("t.txt", "one two three\na\n", llama3, &opt);
    pfx_dataset_get_info(ds, &info);
    assert_int_equal(info.examples, 1);
    assert_int_equal(info.skipped, 1);
    pfx_dataset_free(&ds);
}

/* A single JSONL line of 64 MB with max_length 64: only what the cut keeps
 * is tokenized. The whole line took about 17 bytes per byte of text (1.74 GB
 * for 100 MB); the load runs in a child allowed 512 MB more than it holds,
 * and its 64 ids are the first of the text's encoding. */
static void test_huge_line_cut(void **state)
{
    (void)state;
    const size_t n = (size_t)64 << 20;
    static const char words[] = "the quick brown fox jumps over the lazy dog, 1234 times! ";
    char *line = malloc(n + 16);
    assert_non_null(line);
    size_t at = (size_t)snprintf(line, 16, "{\"text\": \"");
    while (at + sizeof(words) < n)
        at += (size_t)snprintf(line + at, sizeof(words), "%s", words);
    at += (size_t)snprintf(line + at, 8, "\"}\n");
    const char *path = write_tmp("huge.jsonl", line, at);
    int32_t *want;
    size_t count;
    assert_int_equal(
        pfx_tokenizer_encode(gpt2, line + 10, 40 * (sizeof(words) - 1), 0, &want, &count),
        PFX_SUCCESS);
    assert_true(count > 64);
    free(line);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit lim = { pfx_test_address_space() + ((size_t)512 << 20), RLIM_INFINITY };
        lim.rlim_max = lim.rlim_cur;
        if (!PFX_TEST_ASAN && setrlimit(RLIMIT_AS, &lim) != 0)
            _exit(3);
        pfx_dataset_options opt;
        pfx_dataset_default_options(&opt);
        opt.max_length = 64;
        opt.append_eos = false;
        pfx_dataset *ds = NULL;
        if (pfx_dataset_load(path, gpt2, &opt, &ds) != PFX_SUCCESS) {
            fprintf(stderr, "huge line: %s\n", pfx_last_error(NULL));
            _exit(1);
        }
        const int32_t *ids, *labels;
        size_t len;
        pfx_dataset_example(ds, 0, &ids, &labels, &len);
        pfx_dataset_info info;
        pfx_dataset_get_info(ds, &info);
        _exit(len == 64 && info.truncated == 1 && memcmp(ids, want, 64 * sizeof(int32_t)) == 0 ? 0
                                                                                               : 2);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    free(want);
    unlink(path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("loading a 64 MB line cut to 64 tokens within 512 MB more: exit %d (1: refused, "
                 "2: other ids, "
                 "3: no limit)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void test_jsonl(void **state)
{
    (void)state;
    pfx_dataset_options opt;
    pfx_dataset_default_options(&opt);
    opt.append_eos = true;
    const char *content =
        "{\"text\": \"plain text here\", \"id\": 7}\n"
        "   \n"
        "{\"prompt\": \"Q: where is the map?\\nA:\", \"completion\": \" under the bridge\"}\n"
        "{\"completion\": \" caf\\u00e9 \\ud83d\\ude00\", \"prompt\": \"emoji\"}\r\n";
    pfx_dataset *ds = load("d.jsonl", content, gpt2, &opt);
    pfx_dataset_info info;
    pfx_dataset_get_info(ds, &info);
    assert_int_equal(info.examples, 3);
    int32_t eos = pfx_tokenizer_special_id(gpt2, PFX_TOKEN_EOS);
    assert_true(eos >= 0);
    const int32_t *ids, *labels;
    size_t len;
    pfx_dataset_example(ds, 0, &ids, &labels, &len);
    expect_encoding(gpt2, "plain text here", false, ids, len - 1);
    assert_int_equal(ids[len - 1], eos);
    assert_memory_equal(labels, ids, len * sizeof(int32_t));

    static const char *prompts[] = { "Q: where is the map?\nA:", "emoji" };
    static const char *completions[] = { " under the bridge", " caf\xc3\xa9 \xf0\x9f\x98\x80" };
    for (int k = 0; k < 2; k++) {
        pfx_dataset_example(ds, (size_t)k + 1, &ids, &labels, &len);
        int32_t *p, *c;
        size_t pn, cn;
        pfx_tokenizer_encode(gpt2, prompts[k], strlen(prompts[k]), 0, &p, &pn);
        pfx_tokenizer_encode(gpt2, completions[k], strlen(completions[k]), 0, &c, &cn);
        assert_int_equal(len, pn + cn + 1);
        assert_memory_equal(ids, p, pn * sizeof(int32_t));
        assert_memory_equal(ids + pn, c, cn * sizeof(int32_t));
        for (size_t t = 0; t < pn; t++)
            assert_int_equal(labels[t], PFX_LABEL_IGNORE);
        for (size_t t = pn; t < len; t++)
            assert_int_equal(labels[t], ids[t]);
        assert_int_equal(labels[len - 1], eos);
        free(p);
        free(c);
    }
    pfx_dataset_free(&ds);

    /* An escaped backslash before "u0000" is text, not a NUL. */
    ds = load("n.jsonl", "{\"text\": \"a\\\\u0000 b\"}\n", gpt2, &opt);
    pfx_dataset_example(ds, 0, &ids, &labels, &len);
    expect_encoding(gpt2, "a\\u0000 b", false, ids, len - 1);
    pfx_dataset_free(&ds);

    /* format TEXT reads a .jsonl name as text: one example, the raw line. */
    opt.append_eos = false;
    opt.format = PFX_DATA_TEXT;
    ds = load("e.jsonl", "{\"text\": \"a b\"}\n", gpt2, &opt);
    pfx_dataset_example(ds, 0, &ids, &labels, &len);
    expect_encoding(gpt2, "{\"text\": \"a b\"}", false, ids, len);
    pfx_dataset_free(&ds);
}

/* A post-processor with tokens on both sides (RobertaProcessing: <s> A
 * </s>): the leading one and the prompt are not counted, the trailing one is. */
static void test_special_tokens(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/roberta", fixture_dir);
    pfx_tokenizer *tok = NULL;
    assert_int_equal(pfx_tokenizer_load(dir, &tok), PFX_SUCCESS);
    pfx_dataset *ds = load(
        "r.jsonl", "{\"prompt\": \"Q: 12 apples?\", \"completion\": \" yes 345\"}\n", tok, NULL);
    const int32_t *ids, *labels;
    size_t len;
    pfx_dataset_example(ds, 0, &ids, &labels, &len);
    int32_t *p, *c;
    size_t pn, cn;
    pfx_tokenizer_encode(tok, "Q: 12 apples?", 13, 0, &p, &pn);
    pfx_tokenizer_encode(tok, " yes 345", 8, 0, &c, &cn);
    assert_int_equal(len, 1 + pn + cn + 1);
    assert_int_equal(ids[0], pfx_tokenizer_token_to_id(tok, "<s>"));
    assert_int_equal(ids[len - 1], pfx_tokenizer_token_to_id(tok, "</s>"));
    assert_memory_equal(ids + 1, p, pn * sizeof(int32_t));
    assert_memory_equal(ids + 1 + pn, c, cn * sizeof(int32_t));
    for (size_t t = 0; t < len; t++)
        assert_int_equal(labels[t], t < 1 + pn ? PFX_LABEL_IGNORE : ids[t]);
    pfx_dataset_info info;
    pfx_dataset_get_info(ds, &info);
    assert_int_equal(info.counted, cn + 1);
    free(p);
    free(c);
    pfx_dataset_free(&ds);
    pfx_tokenizer_free(&tok);
}

/* 7 examples of distinct lengths: the i-th has i + 2 words, i + 3 tokens. */
static pfx_dataset *seven(uint64_t seed, bool shuffle)
{
    pfx_dataset_options opt;
    pfx_dataset_default_options(&opt);
    opt.seed = seed;
    opt.shuffle = shuffle;
    opt.add_special = false;
    char text[1024] = "";
    for (int i = 0; i < 7; i++) {
        for (int w = 0; w < i + 2; w++)
            strcat(text, w ? " baker" : "the");
        strcat(text, "\n");
    }
    return load("seven.txt", text, gpt2, &opt);
}

/* Which example a batch row is: its length identifies it. */
static void run_epoch(pfx_dataset *ds, pfx_data_position *pos, size_t batch, int *order)
{
    pfx_dataset_info info;
    pfx_dataset_get_info(ds, &info);
    int32_t ids[3 * 64], labels[3 * 64], lengths[3];
    size_t rows, width, seen = 0;
    uint64_t epoch = pos->epoch;
    assert_int_equal(pfx_dataset_batches_per_epoch(ds, batch), (7 + batch - 1) / batch);
    while (pos->epoch == epoch) {
        assert_int_equal(
            pfx_dataset_next_batch(ds, pos, batch, ids, lengths, labels, &rows, &width),
            PFX_SUCCESS);
        assert_true(rows == batch || (rows == 7 % batch && pos->epoch == epoch + 1));
        size_t longest = 0;
        for (size_t r = 0; r < batch; r++) {
            size_t len = (size_t)lengths[r];
            if (r >= rows) {
                assert_int_equal(len, 0);
            } else {
                const int32_t *eids, *elabels;
                size_t elen;
                order[seen++] = (int)len - 3; /* "the" (2 tokens) + " baker" (1) a word */
                assert_int_equal(pfx_dataset_example(ds, len - 3, &eids, &elabels, &elen),
                                 PFX_SUCCESS);
                assert_int_equal(elen, len);
                assert_memory_equal(ids + r * width, eids, len * sizeof(int32_t));
                assert_memory_equal(labels + r * width, elabels, len * sizeof(int32_t));
            }
            for (size_t t = len; t < width; t++) {
                assert_int_equal(ids[r * width + t], info.pad_id);
                assert_int_equal(labels[r * width + t], PFX_LABEL_IGNORE);
            }
            if (len > longest)
                longest = len;
        }
        assert_int_equal(width, longest);
    }
    assert_int_equal(seen, 7);
    for (int k = 0; k < 7; k++) { /* a permutation */
        int hits = 0;
        for (int j = 0; j < 7; j++)
            hits += order[j] == k;
        assert_int_equal(hits, 1);
    }
}

static void test_batches(void **state)
{
    (void)state;
    pfx_dataset *ds = seven(5, true);
    const int32_t *ids, *labels;
    size_t len;
    for (size_t i = 0; i < 7; i++) { /* the identification run_epoch relies on */
        pfx_dataset_example(ds, i, &ids, &labels, &len);
        assert_int_equal(len, i + 3);
    }
    pfx_dataset_info info;
    pfx_dataset_get_info(ds, &info);
    assert_int_equal(info.pad_id, pfx_tokenizer_special_id(gpt2, PFX_TOKEN_EOS)); /* no pad: EOS */
    pfx_data_position pos = { 0, 0 };
    int e0[7], e1[7], again[7], other[7], plain[7];
    run_epoch(ds, &pos, 3, e0);
    assert_int_equal(pos.epoch, 1);
    assert_int_equal(pos.index, 0);
    run_epoch(ds, &pos, 3, e1);
    assert_memory_not_equal(e0, e1, sizeof(e0)); /* a new order each epoch */
    pfx_data_position p0 = { 0, 0 };
    run_epoch(ds, &p0, 2, again);
    assert_memory_equal(e0, again, sizeof(e0)); /* the order does not depend on the batch */
    pfx_dataset_free(&ds);

    ds = seven(6, true);
    p0 = (pfx_data_position){ 0, 0 };
    run_epoch(ds, &p0, 3, other);
    assert_memory_not_equal(e0, other, sizeof(e0));
    pfx_dataset_free(&ds);

    ds = seven(5, false);
    p0 = (pfx_data_position){ 4, 0 };
    run_epoch(ds, &p0, 3, plain);
    for (int k = 0; k < 7; k++)
        assert_int_equal(plain[k], k);

    int32_t b[3 * 64], l[3 * 64], lens[3];
    size_t rows, width;
    pfx_data_position bad = { 0, 7 };
    assert_status_names(NULL, pfx_dataset_next_batch(ds, &bad, 3, b, lens, l, &rows, &width),
                        PFX_ERROR_OUT_OF_RANGE, "pos.index 7");
    assert_status_names(NULL, pfx_dataset_next_batch(ds, &p0, 0, b, lens, l, &rows, &width),
                        PFX_ERROR_INVALID_ARGUMENT, "batch");
    assert_status_names(NULL, pfx_dataset_next_batch(ds, &p0, 3, b, NULL, l, &rows, &width),
                        PFX_ERROR_NULL_ARGUMENT, "lengths");
    pfx_dataset_free(&ds);
}

/* Stopping after k batches and going on from the saved position with a
 * freshly loaded set serves the same batches as one uninterrupted run. */
static void test_resume(void **state)
{
    (void)state;
    int32_t ids_a[3 * 64], ids_b[3 * 64], lab[3 * 64], lens[3];
    size_t rows, width_a, width_b;
    pfx_dataset *ds = seven(99, true);
    pfx_data_position pos = { 0, 0 };
    for (int k = 0; k < 4; k++)
        pfx_dataset_next_batch(ds, &pos, 3, ids_a, lens, lab, &rows, &width_a);
    pfx_data_position saved = pos;
    assert_int_equal(saved.epoch, 1);
    assert_int_equal(saved.index, 3);
    pfx_dataset *fresh = seven(99, true);
    for (int k = 0; k < 6; k++) {
        pfx_dataset_next_batch(ds, &pos, 3, ids_a, lens, lab, &rows, &width_a);
        pfx_dataset_next_batch(fresh, &saved, 3, ids_b, lens, lab, &rows, &width_b);
        assert_int_equal(width_a, width_b);
        assert_memory_equal(ids_a, ids_b, 3 * width_a * sizeof(int32_t));
        assert_memory_equal(&pos, &saved, sizeof(pos));
    }
    pfx_dataset_free(&ds);
    pfx_dataset_free(&fresh);
}

static void test_hold_out(void **state)
{
    (void)state;
    pfx_dataset *ds = seven(3, true), *ev = NULL;
    assert_int_equal(pfx_dataset_hold_out(ds, 2, &ev), PFX_SUCCESS);
    pfx_dataset_info a, b;
    pfx_dataset_get_info(ds, &a);
    pfx_dataset_get_info(ev, &b);
    assert_int_equal(a.examples, 5);
    assert_int_equal(b.examples, 2);
    assert_int_equal(a.tokens + b.tokens, 3 + 4 + 5 + 6 + 7 + 8 + 9);
    int seen[7] = { 0 };
    size_t prev = 0;
    for (int set = 0; set < 2; set++) {
        pfx_dataset *d = set ? ev : ds;
        pfx_dataset_info in;
        pfx_dataset_get_info(d, &in);
        prev = 0;
        for (size_t i = 0; i < in.examples; i++) {
            const int32_t *ids, *labels;
            size_t len;
            pfx_dataset_example(d, i, &ids, &labels, &len);
            assert_true(len > prev); /* file order kept */
            prev = len;
            seen[len - 3]++;
        }
    }
    for (int k = 0; k < 7; k++)
        assert_int_equal(seen[k], 1);
    /* The held-out set is served in order. */
    int32_t ids[2 * 64], lab[2 * 64], lens[2];
    size_t rows, width;
    pfx_data_position pos = { 0, 0 };
    assert_int_equal(pfx_dataset_next_batch(ev, &pos, 2, ids, lens, lab, &rows, &width),
                     PFX_SUCCESS);
    assert_int_equal(rows, 2);
    assert_true(lens[0] < lens[1]);
    /* The same seed holds out the same examples. */
    pfx_dataset *ds2 = seven(3, true), *ev2 = NULL;
    assert_int_equal(pfx_dataset_hold_out(ds2, 2, &ev2), PFX_SUCCESS);
    const int32_t *x, *y, *lx;
    size_t nx, ny;
    pfx_dataset_example(ev, 0, &x, &lx, &nx);
    pfx_dataset_example(ev2, 0, &y, &lx, &ny);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx * sizeof(int32_t));
    pfx_dataset *none = (pfx_dataset *)1;
    assert_status_names(NULL, pfx_dataset_hold_out(ds2, 5, &none), PFX_ERROR_OUT_OF_RANGE,
                        "count 5");
    assert_null(none);
    assert_status_names(NULL, pfx_dataset_hold_out(ds2, 0, &none), PFX_ERROR_OUT_OF_RANGE,
                        "count 0");
    pfx_dataset_free(&ds);
    pfx_dataset_free(&ev);
    pfx_dataset_free(&ds2);
    pfx_dataset_free(&ev2);
}

static void test_bad_input(void **state)
{
    (void)state;
    pfx_dataset *ds = (pfx_dataset *)1;
    const pfx_dataset_options *def = NULL;
    char missing[600];
    snprintf(missing, sizeof(missing), "%s/none.txt", tmp_dir);
    assert_status_names(NULL, pfx_dataset_load(missing, gpt2, def, &ds), PFX_ERROR_IO, "none.txt");
    assert_null(ds);
    struct {
        const char *name, *content, *needle;
    } cases[] = {
        { "b1.jsonl", "{\"text\":\"a\"}\n\n[1, 2]\n", "b1.jsonl:3: not a JSON object" },
        { "b2.jsonl", "{\"text\":\"a\"}\n{\"txt\":\"a\"}\n", "b2.jsonl:2: no field 'text'" },
        { "b3.jsonl", "{\"text\": 5}\n", "b3.jsonl:1: field 'text' is not a string" },
        { "b4.jsonl", "{\"prompt\": \"a\"}\n", "b4.jsonl:1: 'prompt' and 'completion'" },
        { "b5.jsonl", "{\"text\":\"a\"}\n{\"text\":\"\xff\"}\n", "b5.jsonl:2: not UTF-8" },
        /* The rule of every JSON reader: no \u0000 (cJSON would cut the text
         * there), no key twice at any depth (Python keeps the last, cJSON the
         * first). */
        { "b11.jsonl", "{\"text\":\"a\"}\n{\"text\":\"abc\\u0000def ghi\"}\n",
          "b11.jsonl:2: a string holds the escape \\u0000" },
        { "b12.jsonl", "{\"text\":\"first\",\"text\":\"second\"}\n",
          "b12.jsonl:1: the field 'text' appears twice" },
        { "b13.jsonl", "{\"prompt\":\"a\",\"completion\":\"b\",\"prompt\":\"c\"}\n",
          "b13.jsonl:1: the field 'prompt' appears twice" },
        { "b14.jsonl", "{\"text\":\"a\",\"meta\":[{\"k\":1,\"k\":2}]}\n",
          "b14.jsonl:1: the field 'k' appears twice" },
        { "b6.jsonl", "{\"text\":\"a\"} x\n", "b6.jsonl:1: bytes after the JSON object" },
        { "b7.jsonl", "{\"text\":\"a\"\n", "b7.jsonl:1: not valid JSON" },
        { "b8.jsonl", "\n  \n", "b8.jsonl: no examples" },
        { "b9.txt", "", "b9.txt: no examples" },
        { "b10.json", "{\"text\": \"\"}\n", "b10.json: no examples" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *p = write_tmp(cases[i].name, cases[i].content, strlen(cases[i].content));
        assert_int_equal(pfx_dataset_load(p, gpt2, def, &ds), PFX_ERROR_FORMAT);
        if (!strstr(pfx_last_error(NULL), cases[i].needle))
            fail_msg("%s: message \"%s\" lacks \"%s\"", cases[i].name, pfx_last_error(NULL),
                     cases[i].needle);
        assert_null(ds);
    }
    pfx_dataset_options opt;
    pfx_dataset_default_options(&opt);
    opt.max_length = 1;
    assert_status_names(NULL, pfx_dataset_load_memory("a b\n", 4, "m.txt", gpt2, &opt, &ds),
                        PFX_ERROR_INVALID_ARGUMENT, "max_length");
    pfx_dataset_default_options(&opt);
    opt.format = (pfx_data_format)7;
    assert_status_names(NULL, pfx_dataset_load_memory("a b\n", 4, "m.txt", gpt2, &opt, &ds),
                        PFX_ERROR_INVALID_ARGUMENT, "format");
    pfx_dataset_default_options(&opt);
    opt.append_eos = true;
    assert_status_names(NULL, pfx_dataset_load_memory("a b\n", 4, "m.txt", llama3, &opt, &ds),
                        PFX_ERROR_INVALID_ARGUMENT, "append_eos");
    assert_status_names(NULL, pfx_dataset_load_memory("a b\n", 4, "m.txt", NULL, def, &ds),
                        PFX_ERROR_NULL_ARGUMENT, "tok");
    assert_status_names(NULL, pfx_dataset_load_memory(NULL, 4, "m.txt", gpt2, def, &ds),
                        PFX_ERROR_NULL_ARGUMENT, "data");
    assert_status_names(NULL, pfx_dataset_load(NULL, gpt2, def, &ds), PFX_ERROR_NULL_ARGUMENT,
                        "path");
    assert_status_names(NULL, pfx_dataset_get_info(NULL, NULL), PFX_ERROR_NULL_ARGUMENT, "ds");
    /* A plain text file may hold any bytes: the byte-level tokenizer takes them. */
    assert_int_equal(pfx_dataset_load_memory("a \xff\xfe b\n", 7, "m.txt", gpt2, def, &ds),
                     PFX_SUCCESS);
    pfx_dataset_free(&ds);
}

/* The corpus and tokenizer shipped for the demonstration load as a data set
 * and decode back to the file's lines. */
static void test_demo_corpus(void **state)
{
    (void)state;
    char dir[1024], path[1100];
    snprintf(dir, sizeof(dir), "%s/../../../data/demo", fixture_dir);
    pfx_tokenizer *tok = NULL;
    assert_int_equal(pfx_tokenizer_load(dir, &tok), PFX_SUCCESS);
    assert_true(pfx_tokenizer_vocab_size(tok) >= 2000);
    static const char *files[] = { "train.txt", "eval.txt" };
    for (int f = 0; f < 2; f++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[f]);
        pfx_dataset *ds = NULL;
        assert_int_equal(pfx_dataset_load(path, tok, NULL, &ds), PFX_SUCCESS);
        pfx_dataset_info info;
        pfx_dataset_get_info(ds, &info);
        assert_int_equal(info.examples, f ? 40 : 600);
        assert_int_equal(info.truncated, 0);
        const int32_t *ids, *labels;
        size_t len, dl;
        char *dec;
        assert_int_equal(pfx_dataset_example(ds, 0, &ids, &labels, &len), PFX_SUCCESS);
        assert_int_equal(pfx_tokenizer_decode(tok, ids, len, 0, &dec, &dl), PFX_SUCCESS);
        FILE *fp = fopen(path, "r");
        char line[4096];
        assert_non_null(fgets(line, sizeof(line), fp));
        fclose(fp);
        line[strcspn(line, "\n")] = 0;
        assert_string_equal(dec, line);
        free(dec);
        pfx_dataset_free(&ds);
    }
    pfx_tokenizer_free(&tok);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmp_dir))
        return 1;
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/llama3", fixture_dir);
    if (pfx_tokenizer_load(dir, &llama3) != PFX_SUCCESS)
        return 1;
    snprintf(dir, sizeof(dir), "%s/gpt2-files", fixture_dir);
    return pfx_tokenizer_load(dir, &gpt2) != PFX_SUCCESS;
}

static int teardown(void **state)
{
    (void)state;
    pfx_tokenizer_free(&llama3);
    pfx_tokenizer_free(&gpt2);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    return system(cmd) != 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_file),      cmocka_unit_test(test_truncation_and_skips),
        cmocka_unit_test(test_huge_line_cut),  cmocka_unit_test(test_jsonl),
        cmocka_unit_test(test_special_tokens), cmocka_unit_test(test_batches),
        cmocka_unit_test(test_resume),         cmocka_unit_test(test_hold_out),
        cmocka_unit_test(test_bad_input),      cmocka_unit_test(test_demo_corpus),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
