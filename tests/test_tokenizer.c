/* The tokenizer against HF tokenizers: for each fixture folder written by
 * tests/fixtures/make_tokenizer_fixture.py, every string of cases.jsonl must
 * give exactly HF's ids (with and without the post-processor's tokens) and
 * HF's decoded text; byte-level tokenizers must give back any byte string
 * (random, invalid UTF-8 included). Then the refusals: unsupported kinds,
 * malformed files, bad arguments. No OpenCL.
 *
 * argv[1]: tests/fixtures/tokenizers. */
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "pfx_test.h"
#include "prefixcl/tokenizer.h"

static const char *fixture_dir;

static char *path_of(const char *dir, const char *file)
{
    static char buf[4][1024];
    static int slot;
    char *p = buf[slot++ % 4];
    snprintf(p, 1024, "%s/%s/%s", fixture_dir, dir, file);
    return p;
}

static char *read_all(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, fp), (size_t)size);
    buf[size] = 0;
    fclose(fp);
    *n = (size_t)size;
    return buf;
}

static pfx_tokenizer *load_dir(const char *dir)
{
    char full[1024];
    snprintf(full, sizeof(full), "%s/%s", fixture_dir, dir);
    pfx_tokenizer *tok = NULL;
    pfx_status st = pfx_tokenizer_load(full, &tok);
    if (st != PFX_SUCCESS)
        fail_msg("%s: %s", dir, pfx_last_error(NULL));
    return tok;
}

static void compare_ids(const char *dir, int line, const char *what, const cJSON *want,
                        const int32_t *got, size_t n, const char *text)
{
    bool same = (size_t)cJSON_GetArraySize(want) == n;
    size_t i = 0;
    for (const cJSON *w = want->child; same && w; w = w->next, i++)
        same = (int32_t)w->valuedouble == got[i];
    if (same)
        return;
    fprintf(stderr, "%s line %d (%s) text \"%s\"\n  want:", dir, line, what, text);
    for (const cJSON *w = want->child; w; w = w->next)
        fprintf(stderr, " %d", (int)w->valuedouble);
    fprintf(stderr, "\n  got: ");
    for (size_t k = 0; k < n; k++)
        fprintf(stderr, " %d", (int)got[k]);
    fprintf(stderr, "\n");
    fail_msg("%s: ids differ from HF tokenizers", dir);
}

/* Every case of dir/cases.jsonl; returns how many. With round_trip,
 * decode(encode(text)) must be text unless text holds `stripping` (an added
 * token with lstrip / rstrip eats the spaces beside it, as in HF). */
static int check_cases(const pfx_tokenizer *tok, const char *dir, bool round_trip,
                       const char *const *stripping)
{
    size_t n;
    char *data = read_all(path_of(dir, "cases.jsonl"), &n);
    int line = 0;
    for (char *s = data, *nl; *s; s = nl + 1) {
        nl = strchr(s, '\n');
        assert_non_null(nl);
        *nl = 0;
        line++;
        cJSON *c = cJSON_Parse(s);
        assert_non_null(c);
        const cJSON *text = cJSON_GetObjectItem(c, "text");
        const char *t = text->valuestring;
        size_t tl = strlen(t);
        int32_t *ids;
        size_t count;
        assert_int_equal(pfx_tokenizer_encode(tok, t, tl, 0, &ids, &count), PFX_SUCCESS);
        compare_ids(dir, line, "ids", cJSON_GetObjectItem(c, "ids"), ids, count, t);
        char *dec;
        size_t dl;
        assert_int_equal(pfx_tokenizer_decode(tok, ids, count, 0, &dec, &dl), PFX_SUCCESS);
        bool strips = false;
        for (const char *const *sp = stripping; sp && *sp; sp++)
            strips = strips || strstr(t, *sp);
        if (round_trip && !strips && (dl != tl || memcmp(dec, t, tl) != 0))
            fail_msg("%s line %d: decode(encode(\"%s\")) = \"%s\"", dir, line, t, dec);
        free(dec);
        free(ids);

        assert_int_equal(pfx_tokenizer_encode(tok, t, tl, PFX_ENCODE_ADD_SPECIAL, &ids, &count),
                         PFX_SUCCESS);
        compare_ids(dir, line, "ids_special", cJSON_GetObjectItem(c, "ids_special"), ids, count, t);
        assert_int_equal(pfx_tokenizer_decode(tok, ids, count, 0, &dec, &dl), PFX_SUCCESS);
        const char *want = cJSON_GetObjectItem(c, "decoded")->valuestring;
        if (dl != strlen(want) || memcmp(dec, want, dl) != 0)
            fail_msg("%s line %d: decode gives \"%s\", HF \"%s\"", dir, line, dec, want);
        free(dec);
        free(ids);
        cJSON_Delete(c);
    }
    free(data);
    assert_true(line >= 300);
    return line;
}

static void test_gpt2_json(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("gpt2");
    static const char *const stripping[] = { "<mask>", "<sep>", NULL };
    check_cases(tok, "gpt2", true, stripping);
    pfx_tokenizer_free(&tok);
    assert_null(tok);
}

static void test_gpt2_vocab_merges(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("gpt2-files"); /* no tokenizer.json there */
    check_cases(tok, "gpt2-files", true, NULL);
    pfx_tokenizer_free(&tok);
}

static void test_llama3(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("llama3");
    check_cases(tok, "llama3", true, NULL);
    pfx_tokenizer_free(&tok);
}

static void test_metaspace(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("metaspace");
    check_cases(tok, "metaspace", false, NULL); /* the decoder drops the leading space */
    pfx_tokenizer_free(&tok);
}

static void test_metaspace_split(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("metaspace-split");
    check_cases(tok, "metaspace-split", false, NULL); /* unknown characters become <unk> */
    pfx_tokenizer_free(&tok);
}

static void test_llama2(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("llama2");
    check_cases(tok, "llama2", false, NULL);
    pfx_tokenizer_free(&tok);
}

static void test_qwen2(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("qwen2");
    check_cases(tok, "qwen2", false, NULL); /* NFC rewrites decomposed text */
    pfx_tokenizer_free(&tok);
}

static void test_roberta(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("roberta");
    check_cases(tok, "roberta", false, NULL); /* no decoder: HF joins the tokens with spaces */
    pfx_tokenizer_free(&tok);
}

static void test_empty_matches(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("empty-matches");
    check_cases(tok, "empty-matches", true, NULL);
    pfx_tokenizer_free(&tok);
}

static void test_whitespace(void **state)
{
    (void)state;
    const char *dirs[] = { "whitespace", "punctuation" };
    for (int d = 0; d < 2; d++) {
        pfx_tokenizer *tok = load_dir(dirs[d]);
        check_cases(tok, dirs[d], false, NULL); /* spaces removed, unknown characters [UNK] */
        pfx_tokenizer_free(&tok);
    }
}

static void test_splits(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("splits");
    check_cases(tok, "splits", false, NULL); /* "-" is removed, tabs normalized */
    pfx_tokenizer_free(&tok);
}

/* Random byte strings (mostly invalid UTF-8, NULs, specials' pieces)
 * through the byte-level tokenizers come back byte for byte. */
static void test_round_trip_random(void **state)
{
    (void)state;
    const char *dirs[] = { "gpt2", "gpt2-files", "llama3" };
    static const char alphabet[] = " \n\t<|>'sSlL0123456789aé日😀\xff\xc3\x80";
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int d = 0; d < 3; d++) {
        pfx_tokenizer *tok = load_dir(dirs[d]);
        for (int iter = 0; iter < 400; iter++) {
            char text[97];
            size_t len = (size_t)(iter % 97);
            for (size_t i = 0; i < len; i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                unsigned r = (unsigned)(rng >> 33);
                text[i] = (r & 1) ? (char)(r >> 8) : alphabet[(r >> 8) % (sizeof(alphabet) - 1)];
            }
            int32_t *ids;
            size_t count;
            char *dec;
            size_t dl;
            assert_int_equal(
                pfx_tokenizer_encode(tok, text, len, PFX_ENCODE_ADD_SPECIAL, &ids, &count),
                PFX_SUCCESS);
            assert_int_equal(
                pfx_tokenizer_decode(tok, ids, count, PFX_DECODE_SKIP_SPECIAL, &dec, &dl),
                PFX_SUCCESS);
            assert_int_equal(dl, len);
            assert_memory_equal(dec, text, len);
            assert_int_equal(dec[dl], 0);
            free(ids);
            free(dec);
        }
        pfx_tokenizer_free(&tok);
    }
}

static void test_accessors(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("llama3");
    int32_t bos = pfx_tokenizer_token_to_id(tok, "<|begin_of_text|>");
    assert_true(bos > 0);
    assert_int_equal(pfx_tokenizer_special_id(tok, PFX_TOKEN_BOS), bos);
    assert_true(pfx_tokenizer_is_special(tok, bos));
    assert_int_equal(pfx_tokenizer_vocab_size(tok),
                     (size_t)pfx_tokenizer_token_to_id(tok, "<|eot_id|>") + 1);
    size_t len;
    assert_string_equal(pfx_tokenizer_id_to_token(tok, bos, &len), "<|begin_of_text|>");
    assert_int_equal(len, 17);
    assert_int_equal(pfx_tokenizer_token_to_id(tok, "Ġthe"),
                     pfx_tokenizer_token_to_id(tok, "Ġthe"));
    assert_true(pfx_tokenizer_token_to_id(tok, "Ġthe") >= 0);
    assert_false(pfx_tokenizer_is_special(tok, pfx_tokenizer_token_to_id(tok, "Ġthe")));
    assert_null(pfx_tokenizer_id_to_token(tok, -1, NULL));
    assert_null(pfx_tokenizer_id_to_token(tok, (int32_t)pfx_tokenizer_vocab_size(tok), NULL));
    assert_int_equal(pfx_tokenizer_token_to_id(tok, "no such token"), -1);
    assert_int_equal(pfx_tokenizer_special_id(tok, PFX_TOKEN_UNK), -1);
    assert_int_equal(pfx_tokenizer_special_id(tok, (pfx_special_token)9), -1);

    /* Skipping special tokens in decode. */
    int32_t *ids;
    size_t count;
    char *dec;
    assert_int_equal(
        pfx_tokenizer_encode(tok, "hi<|eot_id|>", 12, PFX_ENCODE_ADD_SPECIAL, &ids, &count),
        PFX_SUCCESS);
    assert_int_equal(ids[0], bos);
    assert_int_equal(pfx_tokenizer_decode(tok, ids, count, PFX_DECODE_SKIP_SPECIAL, &dec, &len),
                     PFX_SUCCESS);
    assert_string_equal(dec, "hi");
    free(dec);
    /* Empty input: a valid, empty array. */
    free(ids);
    assert_int_equal(pfx_tokenizer_encode(tok, NULL, 0, 0, &ids, &count), PFX_SUCCESS);
    assert_non_null(ids);
    assert_int_equal(count, 0);
    free(ids);
    pfx_tokenizer_free(&tok);

    /* A normalized added token: found by its content, named by its normalized form. */
    tok = load_dir("llama2");
    int32_t hw = pfx_tokenizer_token_to_id(tok, "hello world");
    assert_true(hw > 0);
    assert_false(pfx_tokenizer_is_special(tok, hw));
    assert_string_equal(pfx_tokenizer_id_to_token(tok, hw, NULL),
                        "\xe2\x96\x81hello\xe2\x96\x81world");
    assert_int_equal(pfx_tokenizer_special_id(tok, PFX_TOKEN_UNK),
                     pfx_tokenizer_token_to_id(tok, "<unk>"));
    assert_int_equal(pfx_tokenizer_special_id(tok, PFX_TOKEN_BOS),
                     pfx_tokenizer_token_to_id(tok, "<s>"));
    pfx_tokenizer_free(&tok);

    /* tokenizer_config.json beside vocab.json + merges.txt names the specials. */
    tok = load_dir("gpt2-files");
    int32_t eot = pfx_tokenizer_token_to_id(tok, "<|endoftext|>");
    assert_true(eot >= 0);
    assert_int_equal(pfx_tokenizer_special_id(tok, PFX_TOKEN_EOS), eot);
    assert_int_equal(pfx_tokenizer_special_id(tok, PFX_TOKEN_BOS), -1);
    pfx_tokenizer_free(&tok);
    pfx_tokenizer_free(&tok); /* NULL-safe */
    pfx_tokenizer_free(NULL);
}

/* Decoder chains on hand-made tokens; the expected strings are HF's. */
static void test_decoders(void **state)
{
    (void)state;
    static const char *json[] = {
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"_a\":0,\"<0x+A>\":1,\"<0x4a>\":2,\"<0x-1>\":3,"
        "\"b_\":4,\"__a_\":5,\"_b__\":6},\"merges\":[]},\"decoder\":{\"type\":\"Sequence\","
        "\"decoders\":["
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\"_\"},\"content\":\" "
        "\"},{\"type\":\"ByteFallback\"},"
        "{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":1}]}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"__a_\":0,\"_b__\":1},\"merges\":[]},\"decoder\":"
        "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"_\"},"
        "\"content\":\" \"},{\"type\":\"Strip\",\"content\":\" \",\"start\":2,\"stop\":1}]}}",
    };
    static const int32_t ids0[] = { 0, 1, 2, 3, 4 }, ids1[] = { 0, 1 };
    static const char *want[] = { "a\nJ<0x-1>b", "ab " };
    for (int k = 0; k < 2; k++) {
        pfx_tokenizer *tok = NULL;
        assert_int_equal(pfx_tokenizer_load_json_memory(json[k], strlen(json[k]), "dec", &tok),
                         PFX_SUCCESS);
        char *dec;
        size_t dl;
        assert_int_equal(pfx_tokenizer_decode(tok, k ? ids1 : ids0, k ? 2 : 5, 0, &dec, &dl),
                         PFX_SUCCESS);
        assert_string_equal(dec, want[k]);
        free(dec);
        pfx_tokenizer_free(&tok);
    }
}

#define assert_refused(call, status, needle)                                                       \
    do {                                                                                           \
        pfx_tokenizer *t_ = (pfx_tokenizer *)1;                                                    \
        pfx_tokenizer **out_ = &t_;                                                                \
        (void)out_;                                                                                \
        assert_int_equal((call), (status));                                                        \
        if (!strstr(pfx_last_error(NULL), (needle)))                                               \
            fail_msg("message \"%s\" does not name \"%s\"", pfx_last_error(NULL), (needle));       \
    } while (0)

static pfx_status load_mem(const char *json)
{
    pfx_tokenizer *tok = (pfx_tokenizer *)1;
    pfx_status st = pfx_tokenizer_load_json_memory(json, strlen(json), "mem.json", &tok);
    if (st == PFX_SUCCESS)
        pfx_tokenizer_free(&tok);
    else
        assert_null(tok);
    return st;
}

#define MODEL(extra)                                                                               \
    "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]" extra \
    "}"

static void test_refusals(void **state)
{
    (void)state;
    assert_int_equal(load_mem(MODEL("}")), PFX_SUCCESS);
    assert_refused(load_mem("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}"),
                   PFX_ERROR_UNSUPPORTED, "WordPiece");
    assert_refused(load_mem("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}"),
                   PFX_ERROR_UNSUPPORTED, "Unigram");
    assert_refused(load_mem(MODEL("},\"normalizer\":{\"type\":\"Precompiled\"}")),
                   PFX_ERROR_UNSUPPORTED, "Precompiled");
    assert_refused(load_mem(MODEL("},\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"}")),
                   PFX_ERROR_UNSUPPORTED, "BertPreTokenizer");
    assert_refused(load_mem(MODEL("},\"decoder\":{\"type\":\"WordPiece\"}")), PFX_ERROR_UNSUPPORTED,
                   "decoder 'WordPiece'");
    assert_refused(load_mem(MODEL(",\"dropout\":0.1}")), PFX_ERROR_UNSUPPORTED, "dropout");
    assert_refused(load_mem(MODEL(",\"continuing_subword_prefix\":\"##\"}")), PFX_ERROR_UNSUPPORTED,
                   "continuing_subword_prefix");
    assert_refused(load_mem(MODEL("},\"post_processor\":{\"type\":\"Mystery\"}")),
                   PFX_ERROR_UNSUPPORTED, "Mystery");
    /* Malformed. */
    /* The rule of every JSON reader: no \u0000 (it would cut a token short),
     * no key twice at any depth (HF keeps the last, cJSON the first). */
    assert_refused(
        load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\\u0000b\":0},\"merges\":[]}}"),
        PFX_ERROR_FORMAT, "mem.json: a string holds the escape \\u0000");
    assert_refused(
        load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"a\":1},\"merges\":[]}}"),
        PFX_ERROR_FORMAT, "mem.json: the field 'a' appears twice");
    assert_refused(load_mem(MODEL(",\"type\":\"BPE\"}")), PFX_ERROR_FORMAT,
                   "the field 'type' appears twice");
    assert_refused(load_mem("{\"model\":"), PFX_ERROR_FORMAT, "mem.json: not valid JSON");
    assert_refused(load_mem("[1]"), PFX_ERROR_FORMAT, "not a JSON object");
    assert_refused(load_mem("{}"), PFX_ERROR_FORMAT, "no object 'model'");
    assert_refused(load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}"),
                   PFX_ERROR_FORMAT, "vocab['a']");
    assert_refused(load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1.5},\"merges\":[]}}"),
                   PFX_ERROR_FORMAT, "is not an id");
    assert_refused(
        load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a c\"]}}"),
        PFX_ERROR_FORMAT, "'c' is not in the vocabulary");
    assert_refused(
        load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a a\"]}}"),
        PFX_ERROR_FORMAT, "'aa' (the merged token)");
    assert_refused(
        load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"aa\"]}}"),
        PFX_ERROR_FORMAT, "merges[0]");
    assert_refused(
        load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\"]]}}"),
        PFX_ERROR_FORMAT, "merges[0]");
    assert_refused(
        load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}"),
        PFX_ERROR_FORMAT, "id 0 to both 'a' and 'b'");
    assert_refused(load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}"),
                   PFX_ERROR_FORMAT, "vocabulary is empty");
    assert_refused(
        load_mem("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":2000000000},\"merges\":[]}}"),
        PFX_ERROR_FORMAT, "far beyond");
    assert_refused(load_mem(MODEL(",\"unk_token\":\"<unk>\"}")), PFX_ERROR_FORMAT,
                   "unk_token '<unk>'");
    assert_refused(load_mem(MODEL(",\"byte_fallback\":1}")), PFX_ERROR_FORMAT,
                   "model.byte_fallback");
    assert_refused(
        load_mem(MODEL("},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
                       "\"behavior\":\"Isolated\"}")),
        PFX_ERROR_FORMAT, "regex error");
    assert_refused(
        load_mem(MODEL("},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},"
                       "\"behavior\":\"Sideways\"}")),
        PFX_ERROR_FORMAT, "Sideways");
    assert_refused(load_mem(MODEL("},\"added_tokens\":[{\"id\":5}]")), PFX_ERROR_FORMAT,
                   "added_tokens[0] has no string 'content'");
    assert_refused(load_mem(MODEL("},\"added_tokens\":[7]")), PFX_ERROR_FORMAT, "added_tokens[0]");
    assert_refused(
        load_mem(MODEL("},\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":"
                       "[{\"SpecialToken\":{\"id\":\"<s>\"}}],\"special_tokens\":{}}")),
        PFX_ERROR_FORMAT, "no ids for '<s>'");
    assert_refused(
        load_mem(MODEL(
            "},\"added_tokens\":[{\"id\":5,\"content\":\"<s>\"}],\"post_processor\":"
            "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},"
            "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<s>\":{\"ids\":[4]}}}")),
        PFX_ERROR_FORMAT, "post_processor id 4 is not a token");
    assert_refused(
        load_mem(MODEL("},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"ab\"}")),
        PFX_ERROR_FORMAT, "replacement is not one character");
    assert_refused(pfx_tokenizer_load_json_memory("{\"a\xff\":1}", 8, "x.json", out_),
                   PFX_ERROR_FORMAT, "x.json: not UTF-8");
    assert_refused(pfx_tokenizer_load_json_memory(NULL, 3, "x", out_), PFX_ERROR_NULL_ARGUMENT,
                   "data");
    assert_refused(pfx_tokenizer_load_json_memory("{}", 2, "x", NULL), PFX_ERROR_NULL_ARGUMENT,
                   "out");

    /* vocab.json + merges.txt. */
    const char *v = "{\"a\":0,\"b\":1,\"ab\":2}";
    assert_refused(pfx_tokenizer_load_vocab_merges_memory(v, strlen(v), "#version: 0.2\na b\nb\n",
                                                          19, "m", out_),
                   PFX_ERROR_FORMAT, "m (merges.txt): line 3");
    assert_refused(pfx_tokenizer_load_vocab_merges_memory(v, strlen(v), "a b c\n", 6, "m", out_),
                   PFX_ERROR_FORMAT, "line 1");
    assert_refused(pfx_tokenizer_load_vocab_merges_memory("[]", 2, "a b\n", 4, "m", out_),
                   PFX_ERROR_FORMAT, "m (vocab.json)");
    pfx_tokenizer *tok = NULL;
    assert_int_equal(
        pfx_tokenizer_load_vocab_merges_memory(v, strlen(v), "#version: 0.2\na b\n", 18, "m", &tok),
        PFX_SUCCESS);
    int32_t *ids;
    size_t count;
    assert_int_equal(pfx_tokenizer_encode(tok, "ab", 2, 0, &ids, &count), PFX_SUCCESS);
    assert_int_equal(count, 1);
    assert_int_equal(ids[0], 2);
    free(ids);
    char *dec;
    size_t dl;
    int32_t bad = 3;
    assert_refused(pfx_tokenizer_decode(tok, &bad, 1, 0, &dec, &dl), PFX_ERROR_OUT_OF_RANGE,
                   "ids[0] = 3");
    assert_refused(pfx_tokenizer_decode(tok, NULL, 1, 0, &dec, &dl), PFX_ERROR_NULL_ARGUMENT,
                   "ids");
    assert_refused(pfx_tokenizer_decode(tok, &bad, 0, 4, &dec, &dl), PFX_ERROR_INVALID_ARGUMENT,
                   "flags");
    assert_refused(pfx_tokenizer_encode(tok, NULL, 1, 0, &ids, &count), PFX_ERROR_NULL_ARGUMENT,
                   "text");
    assert_refused(pfx_tokenizer_encode(NULL, "a", 1, 0, &ids, &count), PFX_ERROR_NULL_ARGUMENT,
                   "tok");
    assert_refused(pfx_tokenizer_encode(tok, "a", 1, 8, &ids, &count), PFX_ERROR_INVALID_ARGUMENT,
                   "flags");
    assert_null(ids);
    pfx_tokenizer_free(&tok);

    /* Files and folders. */
    assert_refused(pfx_tokenizer_load("/nonexistent-dir", out_), PFX_ERROR_IO,
                   "neither tokenizer.json");
    assert_refused(pfx_tokenizer_load_json("/nonexistent.json", out_), PFX_ERROR_IO,
                   "/nonexistent.json");
    assert_refused(pfx_tokenizer_load(NULL, out_), PFX_ERROR_NULL_ARGUMENT, "dir");
    assert_refused(pfx_tokenizer_load_vocab_merges("/x", NULL, out_), PFX_ERROR_NULL_ARGUMENT,
                   "merges_path");
}

/* One tokenizer, four threads encoding and decoding the same text at once:
 * every thread gets the single-threaded ids. */
typedef struct thread_job {
    const pfx_tokenizer *tok;
    const char *text;
    size_t len;
    const int32_t *want;
    size_t want_count;
    int failures;
} thread_job;

static void *encode_many(void *arg)
{
    thread_job *job = arg;
    for (int rep = 0; rep < 8; rep++) {
        int32_t *ids;
        size_t count;
        char *dec;
        size_t dl;
        if (pfx_tokenizer_encode(job->tok, job->text, job->len, 0, &ids, &count) != PFX_SUCCESS) {
            job->failures++;
            continue;
        }
        if (count != job->want_count || memcmp(ids, job->want, count * sizeof(int32_t)) != 0)
            job->failures++;
        if (pfx_tokenizer_decode(job->tok, ids, count, 0, &dec, &dl) != PFX_SUCCESS)
            job->failures++;
        else if (dl != job->len || memcmp(dec, job->text, dl) != 0)
            job->failures++;
        free(dec); /* NULL after a failed decode */
        free(ids);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    size_t n;
    char *text = read_all(path_of("llama3", "cases.jsonl"), &n); /* any bytes will do */
    pfx_tokenizer *tok = load_dir("llama3");
    int32_t *want;
    size_t count;
    assert_int_equal(pfx_tokenizer_encode(tok, text, n, 0, &want, &count), PFX_SUCCESS);
    thread_job jobs[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (thread_job){ tok, text, n, want, count, 0 };
        assert_int_equal(pthread_create(&th[t], NULL, encode_many, &jobs[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(jobs[t].failures, 0);
    }
    free(want);
    free(text);
    pfx_tokenizer_free(&tok);
}

/* The fixture's single_word added token "hello world" over 512 KiB of
 * "hello world ": the word-boundary test was handed the rest of the text
 * each time (quadratic: 7 s on the test machine); it looks at one character. */
static void test_single_word_linear(void **state)
{
    (void)state;
    pfx_tokenizer *tok = load_dir("gpt2");
    int32_t hw = pfx_tokenizer_token_to_id(tok, "hello world");
    assert_true(hw >= 0);
    const char unit[] = "hello world ";
    const size_t reps = ((size_t)512 << 10) / (sizeof(unit) - 1), n = reps * (sizeof(unit) - 1);
    char *text = malloc(n + 1);
    assert_non_null(text);
    for (size_t i = 0; i < reps; i++)
        memcpy(text + i * (sizeof(unit) - 1), unit, sizeof(unit) - 1);
    text[n] = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t *ids;
    size_t count;
    assert_int_equal(pfx_tokenizer_encode(tok, text, n, 0, &ids, &count), PFX_SUCCESS);
    double s = pfx_test_seconds_since(&t0);
    size_t found = 0;
    for (size_t i = 0; i < count; i++)
        found += ids[i] == hw;
    assert_int_equal(found, reps); /* every one is a whole word */
    /* inside a word it is not the token */
    free(ids);
    assert_int_equal(pfx_tokenizer_encode(tok, "xhello world", 12, 0, &ids, &count), PFX_SUCCESS);
    for (size_t i = 0; i < count; i++)
        assert_int_not_equal(ids[i], hw);
    free(ids);
    free(text);
    pfx_tokenizer_free(&tok);
    if (s > 2.0)
        fail_msg("encoding %zu bytes with a single_word token took %.2f s", n, s);
}

/* A backtracking Split regex, (a|a)*b|. over runs of 21 'a': PCRE2's match
 * limit held per call, and every position spent up to it anew (4.6 KB:
 * 6-26 s, 46 KB: minutes). One budget per encode, grown with the text: refused at
 * once, naming the regex; ordinary text of the same regex still encodes. */
static void test_backtracking_regex_budget(void **state)
{
    (void)state;
    static const char json[] =
        MODEL("},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a|a)*b|.\"},"
              "\"behavior\":\"Isolated\",\"invert\":false}");
    pfx_tokenizer *tok = NULL;
    assert_int_equal(pfx_tokenizer_load_json_memory(json, strlen(json), "mem.json", &tok),
                     PFX_SUCCESS);
    const size_t sizes[] = { 4600, 46000 };
    for (size_t k = 0; k < 2; k++) {
        size_t n = sizes[k];
        char *text = malloc(n);
        assert_non_null(text);
        for (size_t i = 0; i < n; i++) /* runs of 21: each call stays under PCRE2's own limit */
            text[i] = i % 22 == 21 ? ' ' : 'a';
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int32_t *ids = NULL;
        size_t count;
        pfx_status st = pfx_tokenizer_encode(tok, text, n, 0, &ids, &count);
        double s = pfx_test_seconds_since(&t0);
        assert_int_equal(st, PFX_ERROR_UNSUPPORTED);
        assert_null(ids);
        if (!strstr(pfx_last_error(NULL), "(a|a)*b|.") ||
            !strstr(pfx_last_error(NULL), "backtracks beyond"))
            fail_msg("message \"%s\" does not name the regex and what it ran into",
                     pfx_last_error(NULL));
        free(text);
        if (s > 2.0)
            fail_msg("%zu bytes against a backtracking regex took %.2f s", n, s);
    }
    /* short runs backtrack little: encoded */
    int32_t *ids;
    size_t count;
    assert_int_equal(pfx_tokenizer_encode(tok, "aab ab b", 8, 0, &ids, &count), PFX_SUCCESS);
    assert_true(count > 0);
    free(ids);
    pfx_tokenizer_free(&tok);
}

/* The child of test_load_memory, a fresh process (`test_tokenizer
 * --load-within FACTOR FILE`): loads FILE with FACTOR times its size of
 * address space beyond what the process holds. 0: loaded, 1: refused. */
static int load_within(double factor, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return 3;
    struct rlimit lim = { pfx_test_address_space() + (size_t)(factor * (double)sb.st_size), 0 };
    lim.rlim_max = lim.rlim_cur;
    if (!PFX_TEST_ASAN && setrlimit(RLIMIT_AS, &lim) != 0)
        return 3;
    pfx_tokenizer *tok = NULL;
    if (pfx_tokenizer_load_json(path, &tok) != PFX_SUCCESS) {
        fprintf(stderr, "%s: %s\n", path, pfx_last_error(NULL));
        return 1;
    }
    bool ok = pfx_tokenizer_token_to_id(tok, "x7x9") == 1200 + 7 * 1200 + 9 &&
              pfx_tokenizer_vocab_size(tok) == 1200 + 300000;
    pfx_tokenizer_free(&tok);
    return ok ? 0 : 2;
}

/* A tokenizer.json of about 9 MB (1,200 base tokens, 300,000 merges): a
 * cJSON tree of its vocabulary and merges took about 11 times the file. A
 * fresh process loads it within 7 times the file (the file read included)
 * and finds the file's tokens. */
static void test_load_memory(void **state)
{
    (void)state;
    const size_t base = 1200, merges = 300000;
    char path[] = "/tmp/pfx-test-tokenizer-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    assert_non_null(fp);
    fprintf(fp, "{\"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (size_t i = 0; i < base; i++)
        fprintf(fp, "%s\"x%zu\": %zu", i ? ", " : "", i, i);
    for (size_t k = 0; k < merges; k++)
        fprintf(fp, ", \"x%zux%zu\": %zu", k / base, k % base, base + k);
    fprintf(fp, "}, \"merges\": [");
    for (size_t k = 0; k < merges; k++)
        fprintf(fp, "%s\"x%zu x%zu\"", k ? ", " : "", k / base, k % base);
    fprintf(fp, "]}, \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"}}");
    assert_int_equal(fclose(fp), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_tokenizer", "--load-within", "7", path, (char *)NULL);
        _exit(4);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    unlink(path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg(
            "loading a 9 MB tokenizer.json within 7 times its size: exit %d (1: refused, 2: other "
            "tokens)",
            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Informational: encode speed on the demo corpus (no threshold). */
static void test_speed(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof(path), "%s/../../../data/demo/train.txt", fixture_dir);
    size_t n;
    char *text = read_all(path, &n);
    pfx_tokenizer *tok = load_dir("llama3");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t *ids;
    size_t count;
    assert_int_equal(pfx_tokenizer_encode(tok, text, n, 0, &ids, &count), PFX_SUCCESS);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("encoded %zu bytes into %zu ids in %.3f s (%.1f MB/s, measured under load)\n", n, count,
           s, (double)n / s / 1e6);
    char *dec;
    size_t dl;
    assert_int_equal(pfx_tokenizer_decode(tok, ids, count, 0, &dec, &dl), PFX_SUCCESS);
    assert_int_equal(dl, n);
    assert_memory_equal(dec, text, n);
    free(dec);
    free(ids);
    free(text);
    pfx_tokenizer_free(&tok);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--load-within") == 0)
        return load_within(atof(argv[2]), argv[3]);
    if (argc < 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_json),
        cmocka_unit_test(test_gpt2_vocab_merges),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_metaspace),
        cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_metaspace_split),
        cmocka_unit_test(test_splits),
        cmocka_unit_test(test_whitespace),
        cmocka_unit_test(test_empty_matches),
        cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_roberta),
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_accessors),
        cmocka_unit_test(test_decoders),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_single_word_linear),
        cmocka_unit_test(test_backtracking_regex_budget),
        cmocka_unit_test(test_load_memory),
        cmocka_unit_test(test_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
