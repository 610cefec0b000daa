/* Files: safetensors round trips (F32 and half, awkward shapes, metadata),
 * every malformed header rejected with its status and message, PEFT
 * prefix-tuning folders from the Python fixture generator read back and split
 * [P][L][2][Hkv][D] -> per-layer prefixes, and a PEFT write-then-read round
 * trip. Accounting returns to zero.
 *
 * argv[1]: the folder tests/fixtures/make_peft_fixture.py wrote. */
#include <ftw.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfx_test.h"
#include "prefixcl/io.h"
#include "half.h"

static const char *fixture_dir;
static char tmp_dir[] = "/tmp/pfx-test-io-XXXXXX";

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int slot;
    char *p = buf[slot++ % 4];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    return p;
}

/* Deterministic values, distinct, exact in half: (i % 997 - 498) / 8. */
static float val(size_t i, size_t salt)
{
    return (float)((long)((i * 31 + salt * 17) % 997) - 498) / 8.0f;
}

/* ---------------------------------------------------------------- round trips */

static void test_round_trip_host(void **state)
{
    (void)state;
    float scalar = 2.5f, one = -1.25f;
    float a[3 * 5 * 7], b[2 * 1 * 3 * 1], h[13];
    for (size_t i = 0; i < 105; i++)
        a[i] = val(i, 1) + 0.001f * (float)i; /* not exact in half */
    for (size_t i = 0; i < 6; i++)
        b[i] = val(i, 2);
    for (size_t i = 0; i < 13; i++)
        h[i] = val(i, 3) * 1.001f;
    pfx_named_tensor items[] = {
        { .name = "scalar", .host = &scalar, .ndim = 0, .dtype = PFX_DTYPE_F32 },
        { .name = "one", .host = &one, .ndim = 1, .shape = { 1 }, .dtype = PFX_DTYPE_F32 },
        { .name = "layers.0.a",
          .host = a,
          .ndim = 3,
          .shape = { 3, 5, 7 },
          .dtype = PFX_DTYPE_F32 },
        { .name = "b \"quoted\" \xc3\xa9",
          .host = b,
          .ndim = 4,
          .shape = { 2, 1, 3, 1 },
          .dtype = PFX_DTYPE_F32 },
        { .name = "half", .host = h, .ndim = 1, .shape = { 13 }, .dtype = PFX_DTYPE_F16 },
    };
    pfx_st_metadata meta[] = { { "format", "pt" }, { "note", "line\nbreak \"q\" \xe2\x82\xac" } };
    const char *path = tmp_path("host.safetensors");
    assert_int_equal(pfx_safetensors_save(NULL, path, items, 5, meta, 2), PFX_SUCCESS);

    /* Header length: a multiple of 8, padded with spaces. */
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    unsigned char len8[8];
    assert_int_equal(fread(len8, 1, 8, fp), 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | len8[i];
    assert_int_equal(hlen % 8, 0);
    fclose(fp);

    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_count(f), 5);
    assert_int_equal(pfx_safetensors_metadata_count(f), 2);
    assert_string_equal(pfx_safetensors_metadata_get(f, "format"), "pt");
    assert_string_equal(pfx_safetensors_metadata_get(f, "note"), meta[1].value);
    assert_null(pfx_safetensors_metadata_get(f, "absent"));
    for (size_t i = 0; i < 5; i++) {
        pfx_st_info info;
        assert_int_equal(pfx_safetensors_info(f, i, &info), PFX_SUCCESS);
        assert_string_equal(info.name, items[i].name);
        assert_int_equal(pfx_safetensors_find(f, items[i].name), (long)i);
        assert_int_equal(info.ndim, items[i].ndim);
        size_t numel = 1;
        for (unsigned k = 0; k < info.ndim; k++) {
            assert_int_equal(info.shape[k], items[i].shape[k]);
            numel *= items[i].shape[k];
        }
        assert_int_equal(info.numel, numel);
        assert_int_equal(info.dtype, items[i].dtype == PFX_DTYPE_F16 ? PFX_ST_F16 : PFX_ST_F32);
        float back[128];
        assert_int_equal(pfx_safetensors_read_f32(f, info.name, back, numel), PFX_SUCCESS);
        for (size_t k = 0; k < numel; k++) {
            float want = items[i].host[k];
            if (items[i].dtype == PFX_DTYPE_F16)
                want = pfx_half_to_float(pfx_float_to_half(want));
            assert_memory_equal(&back[k], &want, sizeof(float));
        }
    }
    pfx_st_info info;
    assert_status_names(NULL, pfx_safetensors_info(f, 5, &info), PFX_ERROR_OUT_OF_RANGE, "index 5");
    float small[2];
    assert_status_names(NULL, pfx_safetensors_read_f32(f, "layers.0.a", small, 2),
                        PFX_ERROR_INVALID_SHAPE, "layers.0.a");
    assert_status_names(NULL, pfx_safetensors_read_f32(f, "nope", small, 2),
                        PFX_ERROR_INVALID_ARGUMENT, "nope");
    pfx_safetensors_close(&f);
    assert_null(f);
    pfx_safetensors_close(&f);

    /* Writer refusals leave no file behind. */
    pfx_named_tensor dup[] = { items[1], items[1] };
    const char *bad = tmp_path("refused.safetensors");
    assert_status_names(NULL, pfx_safetensors_save(NULL, bad, dup, 2, NULL, 0),
                        PFX_ERROR_INVALID_ARGUMENT, "appears twice");
    pfx_named_tensor reserved = items[1];
    reserved.name = "__metadata__";
    assert_status_names(NULL, pfx_safetensors_save(NULL, bad, &reserved, 1, NULL, 0),
                        PFX_ERROR_INVALID_ARGUMENT, "__metadata__");
    pfx_st_metadata dmeta[] = { { "k", "1" }, { "k", "2" } };
    assert_status_names(NULL, pfx_safetensors_save(NULL, bad, items, 1, dmeta, 2),
                        PFX_ERROR_INVALID_ARGUMENT, "metadata key 'k'");
    assert_status_names(
        NULL, pfx_safetensors_save(NULL, "/nonexistent-dir/x.safetensors", items, 1, NULL, 0),
        PFX_ERROR_IO, "/nonexistent-dir/x.safetensors");
    assert_int_equal(access(bad, F_OK), -1);

    /* An empty file (no tensors) is valid. */
    const char *empty = tmp_path("empty.safetensors");
    assert_int_equal(pfx_safetensors_save(NULL, empty, NULL, 0, NULL, 0), PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_open(empty, &f), PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_count(f), 0);
    pfx_safetensors_close(&f);
}

static void test_round_trip_device(void **state)
{
    pfx_runtime *rt = *state;
    const size_t s32[3] = { 3, 17, 5 }, s16[2] = { 7, 9 }, n32 = 255, n16 = 63;
    float h32[255], h16[63], back[255];
    for (size_t i = 0; i < n32; i++)
        h32[i] = val(i, 4) + 0.3f;
    for (size_t i = 0; i < n16; i++)
        h16[i] = val(i, 5);
    pfx_tensor *t32 = NULL, *t16 = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, s32, &t32), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 2, s16, &t16), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(t32, 0, n32, h32), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(t16, 0, n16, h16), PFX_SUCCESS);
    pfx_named_tensor items[] = { { .name = "w32", .tensor = t32 },
                                 { .name = "w16", .tensor = t16 } };
    const char *path = tmp_path("device.safetensors");
    assert_int_equal(pfx_safetensors_save(rt, path, items, 2, NULL, 0), PFX_SUCCESS);
    assert_status_names(NULL, pfx_safetensors_save(NULL, path, items, 2, NULL, 0),
                        PFX_ERROR_NULL_ARGUMENT, "rt is NULL");

    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    pfx_st_info info;
    assert_int_equal(pfx_safetensors_info(f, 1, &info), PFX_SUCCESS);
    assert_int_equal(info.dtype, PFX_ST_F16); /* half tensors stay half */

    pfx_tensor *r32 = NULL, *r16 = NULL, *wrong = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, s32, &r32), PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_load_tensor(rt, f, "w32", r32), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(r32, 0, n32, back), PFX_SUCCESS);
    assert_memory_equal(back, h32, n32 * sizeof(float));
    assert_int_equal(pfx_safetensors_create_tensor(rt, f, "w16", PFX_DTYPE_F16, &r16), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_ndim(r16), 2);
    assert_int_equal(pfx_tensor_read(r16, 0, n16, back), PFX_SUCCESS);
    assert_memory_equal(back, h16, n16 * sizeof(float));

    const size_t ws[3] = { 3, 5, 17 };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ws, &wrong), PFX_SUCCESS);
    size_t live = pfx_test_live_bytes(rt);
    assert_status_names(rt, pfx_safetensors_load_tensor(rt, f, "w32", wrong),
                        PFX_ERROR_INVALID_SHAPE, "[3, 17, 5] in the file, dst has [3, 5, 17]");
    assert_status_names(rt, pfx_safetensors_load_tensor(rt, f, "w33", wrong),
                        PFX_ERROR_INVALID_ARGUMENT, "w33");
    pfx_tensor *none = NULL;
    assert_status_names(rt, pfx_safetensors_create_tensor(rt, f, "zz", PFX_DTYPE_F32, &none),
                        PFX_ERROR_INVALID_ARGUMENT, "zz");
    assert_null(none);
    assert_int_equal(pfx_test_live_bytes(rt), live);

    pfx_safetensors_close(&f);
    pfx_tensor_destroy(&t32);
    pfx_tensor_destroy(&t16);
    pfx_tensor_destroy(&r32);
    pfx_tensor_destroy(&r16);
    pfx_tensor_destroy(&wrong);
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

/* ---------------------------------------------------------------- malformed */

/* A file: 8-byte length (hlen_override when nonzero), header text, `data`
 * bytes of filler. Returns a malloc'ed buffer. */
static unsigned char *make_file(const char *header, size_t data, uint64_t hlen_override,
                                size_t *size)
{
    size_t h = strlen(header);
    *size = 8 + h + data;
    unsigned char *buf = malloc(*size);
    assert_non_null(buf);
    uint64_t len = hlen_override ? hlen_override : h;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(len >> (8 * i));
    memcpy(buf + 8, header, h);
    for (size_t i = 0; i < data; i++)
        buf[8 + h + i] = (unsigned char)(i * 7);
    return buf;
}

static void expect_bad(const char *header, size_t data, uint64_t hlen, pfx_status status,
                       const char *needle)
{
    size_t size;
    unsigned char *buf = make_file(header, data, hlen, &size);
    pfx_safetensors *f = (pfx_safetensors *)(uintptr_t)1;
    pfx_status st = pfx_safetensors_open_memory(buf, size, "bad.safetensors", &f);
    if (st != status || !strstr(pfx_last_error(NULL), needle) ||
        !strstr(pfx_last_error(NULL), "bad.safetensors"))
        fail_msg("header %s: got %s '%s', want %s naming '%s'", header, pfx_status_string(st),
                 pfx_last_error(NULL), pfx_status_string(status), needle);
    assert_null(f);
    free(buf);
}

#define T(name, dtype, shape, b, e)                                                                \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_malformed(void **state)
{
    (void)state;
    pfx_safetensors *f = NULL;
    /* Sanity: the builder makes valid files. */
    size_t size;
    unsigned char *ok = make_file(
        "{" T("a", "F32", "[2,2]", 0, 16) "," T("b", "BF16", "[3]", 16, 22) "}  ", 22, 0, &size);
    assert_int_equal(pfx_safetensors_open_memory(ok, size, "ok", &f), PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_count(f), 2);
    pfx_safetensors_close(&f);
    free(ok);

    /* Truncation and the header length. */
    unsigned char tiny[5] = { 1, 0, 0, 0, 0 };
    assert_status_names(NULL, pfx_safetensors_open_memory(tiny, 5, "bad.safetensors", &f),
                        PFX_ERROR_FORMAT, "truncated");
    expect_bad("{}", 0, 64, PFX_ERROR_FORMAT, "runs past the end");
    expect_bad("{}", 0, (uint64_t)1 << 40, PFX_ERROR_OUT_OF_RANGE, "absurd");
    expect_bad("{}", 0, UINT64_MAX, PFX_ERROR_OUT_OF_RANGE, "absurd");
    expect_bad("{" T("a", "F32", "[4]", 0, 16) "}", 8, 0, PFX_ERROR_OUT_OF_RANGE,
               "outside the data section");

    /* Text and JSON. */
    expect_bad("{\"a\xff\":1}", 0, 0, PFX_ERROR_FORMAT, "UTF-8");
    expect_bad("{\"a\xc0\xaf\":1}", 0, 0, PFX_ERROR_FORMAT, "UTF-8"); /* overlong */
    expect_bad("{\"a\":", 0, 0, PFX_ERROR_FORMAT, "not valid JSON");
    expect_bad("[1, 2]", 0, 0, PFX_ERROR_FORMAT, "does not start with '{'");
    expect_bad("", 0, 0, PFX_ERROR_FORMAT, "does not start with '{'");
    expect_bad("{} x", 0, 0, PFX_ERROR_FORMAT, "bytes after the JSON header");
    expect_bad("{\"a\":3}", 0, 0, PFX_ERROR_FORMAT, "tensor 'a' is not a JSON object");

    /* Fields. */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, 0, PFX_ERROR_FORMAT,
               "tensor 'a' lacks the field 'shape'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, 0,
               PFX_ERROR_FORMAT, "unknown field 'x'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
               4, 0, PFX_ERROR_FORMAT, "field 'dtype' twice");
    expect_bad("{" T("a", "Q8", "[1]", 0, 1) "}", 1, 0, PFX_ERROR_DTYPE_MISMATCH,
               "unknown dtype 'Q8'");
    expect_bad("{\"a\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 0, PFX_ERROR_FORMAT,
               "dtype is not a string");
    expect_bad("{" T("a", "F32", "[-1]", 0, 4) "}", 4, 0, PFX_ERROR_FORMAT, "shape[0]");
    expect_bad("{" T("a", "F32", "[1.5]", 0, 4) "}", 4, 0, PFX_ERROR_FORMAT, "shape[0]");
    expect_bad("{" T("a", "F32", "[1,\"2\"]", 0, 4) "}", 4, 0, PFX_ERROR_FORMAT, "shape[1]");
    expect_bad("{" T("a", "F32", "1", 0, 4) "}", 4, 0, PFX_ERROR_FORMAT, "shape is not an array");
    expect_bad("{" T("a", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4, 0, PFX_ERROR_INVALID_SHAPE,
               "9 dimensions");
    expect_bad("{" T("a", "F32", "[4294967296,4294967296,4294967296]", 0, 4) "}", 4, 0,
               PFX_ERROR_SIZE_OVERFLOW, "overflows");
    expect_bad("{" T("a", "F64", "[2147483648,2147483648]", 0, 4) "}", 4, 0,
               PFX_ERROR_SIZE_OVERFLOW, "byte size overflows");
    expect_bad("{" T("a", "F32", "[4611686018427387904]", 0, 4) "}", 4, 0, PFX_ERROR_SIZE_OVERFLOW,
               "absurd");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, 0,
               PFX_ERROR_FORMAT, "data_offsets is not [begin, end]");
    expect_bad("{" T("a", "F32", "[1]", 8, 4) "}", 8, 0, PFX_ERROR_FORMAT, "end before they begin");
    expect_bad("{" T("a", "F32", "[1]", 0, 1e300) "}", 8, 0, PFX_ERROR_OUT_OF_RANGE,
               "outside the data section");
    expect_bad("{" T("a", "F32", "[1]", 0, -4) "}", 8, 0, PFX_ERROR_FORMAT,
               "not non-negative integers");
    expect_bad("{" T("a", "F32", "[1]", 0, 8) "}", 8, 0, PFX_ERROR_INVALID_SHAPE,
               "8 bytes for 1 elements of F32");

    /* Layout of the data section. */
    expect_bad("{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 4, 12) "}", 12, 0,
               PFX_ERROR_FORMAT, "tensors 'a' and 'b' overlap");
    expect_bad("{" T("a", "F32", "[1]", 0, 4) "," T("b", "F32", "[1]", 8, 12) "}", 12, 0,
               PFX_ERROR_FORMAT, "[4, 8) before tensor 'b' belong to no tensor");
    expect_bad("{" T("a", "F32", "[1]", 0, 4) "}", 6, 0, PFX_ERROR_FORMAT, "[4, 6) at the end");
    expect_bad("{" T("a", "F32", "[1]", 4, 8) "}", 8, 0, PFX_ERROR_FORMAT,
               "[0, 4) before tensor 'a'");
    expect_bad("{" T("a", "F32", "[1]", 0, 4) "," T("a", "F32", "[1]", 4, 8) "}", 8, 0,
               PFX_ERROR_FORMAT, "'a' appears twice");
    expect_bad("{" T("a", "F32", "[2]", 0, 8) "," T("z", "F32", "[0]", 4, 4) "}", 8, 0,
               PFX_ERROR_FORMAT, "overlap");
    expect_bad("{}", 4, 0, PFX_ERROR_FORMAT, "4 data bytes but no tensor");

    /* Metadata. */
    expect_bad("{\"__metadata__\":{\"k\":1}}", 0, 0, PFX_ERROR_FORMAT,
               "value of 'k' is not a string");
    expect_bad("{\"__metadata__\":[]}", 0, 0, PFX_ERROR_FORMAT,
               "__metadata__ is not a JSON object");
    expect_bad("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, 0, PFX_ERROR_FORMAT,
               "key 'k' appears twice");
    expect_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0, PFX_ERROR_FORMAT,
               "__metadata__ appears twice");

    /* Zero-size tensors and scalars are fine where they fit. */
    unsigned char *zs =
        make_file("{" T("z", "F32", "[0,3]", 0, 0) "," T("s", "I64", "[]", 0, 8) "}", 8, 0, &size);
    assert_int_equal(pfx_safetensors_open_memory(zs, size, "zs", &f), PFX_SUCCESS);
    float x;
    assert_status_names(NULL, pfx_safetensors_read_f32(f, "s", &x, 1), PFX_ERROR_DTYPE_MISMATCH,
                        "I64");
    assert_int_equal(pfx_safetensors_read_f32(f, "z", NULL, 0), PFX_SUCCESS);
    pfx_safetensors_close(&f);
    free(zs);

    /* Files on disk: missing, truncated after the length. */
    assert_status_names(NULL, pfx_safetensors_open(tmp_path("missing.safetensors"), &f),
                        PFX_ERROR_IO, "missing.safetensors");
    assert_null(f);
    const char *trunc = tmp_path("trunc.safetensors");
    unsigned char *tb = make_file("{" T("a", "F32", "[4]", 0, 16) "}", 16, 0, &size);
    FILE *fp = fopen(trunc, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(tb, 1, size - 3, fp), size - 3);
    fclose(fp);
    free(tb);
    assert_status_names(NULL, pfx_safetensors_open(trunc, &f), PFX_ERROR_OUT_OF_RANGE,
                        "trunc.safetensors");
    assert_null(f);
}

/* Conversions: BF16 and F64 read as float. */
static void test_conversions(void **state)
{
    (void)state;
    size_t size;
    unsigned char *buf =
        make_file("{" T("b", "BF16", "[2]", 0, 4) "," T("d", "F64", "[1]", 4,
                                                        12) "," T("h", "F16", "[1]", 12, 14) "}",
                  14, 0, &size);
    unsigned char *data = buf + size - 14;
    data[0] = 0x80;
    data[1] = 0x3f; /* bf16 1.0 */
    data[2] = 0x40;
    data[3] = 0xc0; /* bf16 -3.0 */
    double dv = -0.375;
    memcpy(data + 4, &dv, 8); /* little-endian host */
    data[12] = 0x00;
    data[13] = 0x3c; /* half 1.0 */
    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open_memory(buf, size, "conv", &f), PFX_SUCCESS);
    free(buf); /* the file holds its own copy */
    float b[2], d, h;
    assert_int_equal(pfx_safetensors_read_f32(f, "b", b, 2), PFX_SUCCESS);
    assert_true(b[0] == 1.0f && b[1] == -3.0f);
    assert_int_equal(pfx_safetensors_read_f32(f, "d", &d, 1), PFX_SUCCESS);
    assert_true(d == -0.375f);
    assert_int_equal(pfx_safetensors_read_f32(f, "h", &h, 1), PFX_SUCCESS);
    assert_true(h == 1.0f);
    assert_non_null(pfx_safetensors_data(f, 0));
    assert_null(pfx_safetensors_data(f, 3));
    pfx_safetensors_close(&f);
}

/* ---------------------------------------------------------------- PEFT */

/* The fixture: P=3, L=2, Hkv=2, D=4, 4 query heads; element i of
 * [P][L][2][Hkv][D] holds (i - N/2) / 4. */
enum { FP = 3, FL = 2, FHKV = 2, FD = 4, FHEADS = 4 };

static float fixture_value(size_t t, size_t l, size_t s, size_t hk, size_t d)
{
    const size_t n = FP * FL * 2 * FHKV * FD;
    size_t i = (((t * FL + l) * 2 + s) * FHKV + hk) * FD + d;
    return (float)((long)i - (long)(n / 2)) / 4.0f;
}

static void check_fixture_prefixes(pfx_tensor **keys, pfx_tensor **values)
{
    float buf[FHKV * FP * FD];
    for (size_t l = 0; l < FL; l++)
        for (size_t s = 0; s < 2; s++) {
            pfx_tensor *t = s ? values[l] : keys[l];
            assert_int_equal(pfx_tensor_ndim(t), 3);
            assert_int_equal(pfx_tensor_dim(t, 0), FHKV);
            assert_int_equal(pfx_tensor_dim(t, 1), FP);
            assert_int_equal(pfx_tensor_dim(t, 2), FD);
            assert_int_equal(pfx_tensor_read(t, 0, FHKV * FP * FD, buf), PFX_SUCCESS);
            for (size_t hk = 0; hk < FHKV; hk++)
                for (size_t tt = 0; tt < FP; tt++)
                    for (size_t d = 0; d < FD; d++) {
                        float want = fixture_value(tt, l, s, hk, d),
                              got = buf[(hk * FP + tt) * FD + d];
                        if (got != want)
                            fail_msg("layer %zu %s [hk %zu][t %zu][d %zu]: %g, want %g", l,
                                     s ? "V" : "K", hk, tt, d, (double)got, (double)want);
                    }
        }
}

static void test_peft_fixture(void **state)
{
    pfx_runtime *rt = *state;
    const char *dtypes[] = { "f32", "f16", "bf16" };
    const pfx_st_dtype kinds[] = { PFX_ST_F32, PFX_ST_F16, PFX_ST_BF16 };
    char dir[1024];
    for (int k = 0; k < 3; k++) {
        snprintf(dir, sizeof(dir), "%s/%s", fixture_dir, dtypes[k]);
        pfx_peft_config cfg;
        assert_int_equal(pfx_peft_read_config(dir, &cfg), PFX_SUCCESS);
        assert_int_equal(cfg.num_virtual_tokens, FP);
        assert_int_equal(cfg.num_layers, FL);
        assert_int_equal(cfg.token_dim, FHKV * FD);
        assert_int_equal(cfg.num_attention_heads, FHEADS);
        assert_int_equal(cfg.num_transformer_submodules, 1);
        assert_int_equal(cfg.encoder_hidden_size, 16);
        assert_false(cfg.prefix_projection);
        assert_true(cfg.inference_mode);
        assert_string_equal(cfg.task_type, "CAUSAL_LM");
        assert_string_equal(cfg.base_model_name_or_path, "fixture/tiny-gqa");

        /* Allocated here. */
        pfx_tensor *keys[FL] = { 0 }, *values[FL] = { 0 };
        memset(&cfg, 0, sizeof(cfg));
        assert_int_equal(pfx_peft_load_prefixes(rt, dir, FHKV, keys, values, FL, &cfg),
                         PFX_SUCCESS);
        assert_int_equal(cfg.dtype, kinds[k]);
        check_fixture_prefixes(keys, values);
        for (size_t l = 0; l < FL; l++) {
            pfx_tensor_destroy(&keys[l]);
            pfx_tensor_destroy(&values[l]);
        }
        /* Into the caller's half tensors (values are exact in half). */
        const size_t shape[3] = { FHKV, FP, FD };
        for (size_t l = 0; l < FL; l++) {
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 3, shape, &keys[l]), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 3, shape, &values[l]),
                             PFX_SUCCESS);
        }
        size_t live = pfx_test_live_bytes(rt);
        assert_int_equal(pfx_peft_load_prefixes(rt, dir, FHKV, keys, values, FL, NULL),
                         PFX_SUCCESS);
        assert_int_equal(pfx_test_live_bytes(rt), live);
        check_fixture_prefixes(keys, values);
        for (size_t l = 0; l < FL; l++) {
            pfx_tensor_destroy(&keys[l]);
            pfx_tensor_destroy(&values[l]);
        }
        /* kv_heads 0 takes num_attention_heads (4): D = 2, a different, valid split. */
        assert_int_equal(pfx_peft_load_prefixes(rt, dir, 0, keys, values, FL, NULL), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_dim(keys[0], 0), 4);
        assert_int_equal(pfx_tensor_dim(keys[0], 2), 2);
        for (size_t l = 0; l < FL; l++) {
            pfx_tensor_destroy(&keys[l]);
            pfx_tensor_destroy(&values[l]);
        }
    }
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

static void test_peft_round_trip(void **state)
{
    pfx_runtime *rt = *state;
    enum { L = 3, HKV = 3, P = 5, D = 7, N = HKV * P * D };
    const size_t shape[3] = { HKV, P, D };
    pfx_tensor *keys[L], *values[L];
    float host[2 * L][N], back[N];
    for (size_t l = 0; l < L; l++) {
        for (size_t i = 0; i < N; i++) {
            host[2 * l][i] = val(i, 10 + l) + 0.01f * (float)i;
            host[2 * l + 1][i] = -val(i, 20 + l) - 0.02f * (float)i;
        }
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &keys[l]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &values[l]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_write(keys[l], 0, N, host[2 * l]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_write(values[l], 0, N, host[2 * l + 1]), PFX_SUCCESS);
    }
    const char *dir = tmp_path("adapter");
    pfx_peft_save_params params;
    pfx_peft_default_save_params(&params);
    params.base_model_name_or_path = "gpt2";
    params.num_attention_heads = 7; /* divides token_dim 21 */
    assert_int_equal(pfx_peft_save_prefixes(rt, dir, keys, values, L, &params), PFX_SUCCESS);

    pfx_peft_config cfg;
    assert_int_equal(pfx_peft_read_config(dir, &cfg), PFX_SUCCESS);
    assert_int_equal(cfg.num_virtual_tokens, P);
    assert_int_equal(cfg.num_layers, L);
    assert_int_equal(cfg.token_dim, HKV * D);
    assert_int_equal(cfg.num_attention_heads, 7);
    assert_int_equal(cfg.encoder_hidden_size, HKV * D);
    assert_int_equal(cfg.num_transformer_submodules, 1);
    assert_false(cfg.prefix_projection);
    assert_true(cfg.inference_mode);
    assert_string_equal(cfg.task_type, "CAUSAL_LM");
    assert_string_equal(cfg.base_model_name_or_path, "gpt2");

    /* The safetensors file as PEFT expects it. */
    char path[600];
    snprintf(path, sizeof(path), "%s/adapter_model.safetensors", dir);
    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_count(f), 1);
    pfx_st_info info;
    assert_int_equal(pfx_safetensors_info(f, 0, &info), PFX_SUCCESS);
    assert_string_equal(info.name, "prompt_embeddings");
    assert_int_equal(info.dtype, PFX_ST_F32);
    assert_int_equal(info.ndim, 2);
    assert_int_equal(info.shape[0], P);
    assert_int_equal(info.shape[1], L * 2 * HKV * D);
    assert_string_equal(pfx_safetensors_metadata_get(f, "format"), "pt");
    /* Y[t][l][s][hk][d] spot checks. */
    float *y = malloc(info.numel * sizeof(float));
    assert_non_null(y);
    assert_int_equal(pfx_safetensors_read_f32(f, "prompt_embeddings", y, info.numel), PFX_SUCCESS);
    for (size_t t = 0; t < P; t++)
        for (size_t l = 0; l < L; l++)
            for (size_t s = 0; s < 2; s++)
                for (size_t hk = 0; hk < HKV; hk++)
                    for (size_t d = 0; d < D; d++) {
                        float want = host[2 * l + s][(hk * P + t) * D + d];
                        float got = y[(((t * L + l) * 2 + s) * HKV + hk) * D + d];
                        assert_memory_equal(&got, &want, sizeof(float));
                    }
    free(y);
    pfx_safetensors_close(&f);

    pfx_tensor *k2[L] = { 0 }, *v2[L] = { 0 };
    assert_int_equal(pfx_peft_load_prefixes(rt, dir, HKV, k2, v2, L, NULL), PFX_SUCCESS);
    for (size_t l = 0; l < L; l++) {
        assert_int_equal(pfx_tensor_read(k2[l], 0, N, back), PFX_SUCCESS);
        assert_memory_equal(back, host[2 * l], sizeof(back));
        assert_int_equal(pfx_tensor_read(v2[l], 0, N, back), PFX_SUCCESS);
        assert_memory_equal(back, host[2 * l + 1], sizeof(back));
        pfx_tensor_destroy(&k2[l]);
        pfx_tensor_destroy(&v2[l]);
    }

    /* Writer refusals. */
    params.num_attention_heads = 4;
    assert_status_names(rt, pfx_peft_save_prefixes(rt, tmp_path("x"), keys, values, L, &params),
                        PFX_ERROR_INVALID_ARGUMENT, "does not divide token_dim 21");
    pfx_tensor *swapped = values[1];
    const size_t other[3] = { HKV, P + 1, D };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, other, &values[1]), PFX_SUCCESS);
    assert_status_names(rt, pfx_peft_save_prefixes(rt, tmp_path("x"), keys, values, L, NULL),
                        PFX_ERROR_INVALID_SHAPE, "values[1]");
    pfx_tensor_destroy(&values[1]);
    values[1] = swapped;
    for (size_t l = 0; l < L; l++) {
        pfx_tensor_destroy(&keys[l]);
        pfx_tensor_destroy(&values[l]);
    }
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* A bad adapter folder: config text and one prompt_embeddings tensor. */
static const char *bad_adapter(const char *name, const char *config, const char *tname, size_t rows,
                               size_t cols, pfx_dtype dtype)
{
    static char dir[600];
    snprintf(dir, sizeof(dir), "%s/%s", tmp_dir, name);
    mkdir(dir, 0755);
    char path[700];
    snprintf(path, sizeof(path), "%s/adapter_config.json", dir);
    write_text(path, config);
    if (tname) {
        float *data = calloc(rows * cols, sizeof(float));
        pfx_named_tensor it = {
            .name = tname, .host = data, .ndim = 2, .shape = { rows, cols }, .dtype = dtype
        };
        snprintf(path, sizeof(path), "%s/adapter_model.safetensors", dir);
        assert_int_equal(pfx_safetensors_save(NULL, path, &it, 1, NULL, 0), PFX_SUCCESS);
        free(data);
    }
    return dir;
}

#define CFG(extra)                                                                                 \
    "{\"peft_type\":\"PREFIX_TUNING\",\"num_virtual_tokens\":3,\"num_layers\":2,\"token_dim\":8,"  \
    "\"num_attention_heads\":2" extra "}"

static void expect_load_fails(pfx_runtime *rt, const char *dir, size_t hkv, size_t layers,
                              pfx_status status, const char *needle)
{
    pfx_tensor *keys[4] = { 0 }, *values[4] = { 0 };
    size_t live = pfx_test_live_bytes(rt);
    pfx_status st = pfx_peft_load_prefixes(rt, dir, hkv, keys, values, layers, NULL);
    if (st != status || !strstr(pfx_last_error(rt), needle))
        fail_msg("%s: got %s '%s', want %s naming '%s'", dir, pfx_status_string(st),
                 pfx_last_error(rt), pfx_status_string(status), needle);
    for (int i = 0; i < 4; i++) {
        assert_null(keys[i]);
        assert_null(values[i]);
    }
    assert_int_equal(pfx_test_live_bytes(rt), live);
}

static void test_peft_malformed(void **state)
{
    pfx_runtime *rt = *state;
    const size_t W = 2 * 2 * 8;
    expect_load_fails(rt, tmp_path("no-such-adapter"), 2, 2, PFX_ERROR_IO, "adapter_config.json");
    expect_load_fails(rt, bad_adapter("lora", "{\"peft_type\":\"LORA\",\"r\":8}", NULL, 0, 0, 0), 2,
                      2, PFX_ERROR_UNSUPPORTED, "only PREFIX_TUNING");
    expect_load_fails(rt, bad_adapter("json", "{\"peft_type\":", NULL, 0, 0, 0), 2, 2,
                      PFX_ERROR_FORMAT, "not valid JSON");
    expect_load_fails(rt,
                      bad_adapter("nolayers",
                                  "{\"peft_type\":\"PREFIX_TUNING\",\"num_virtual_tokens\":3,"
                                  "\"token_dim\":8,\"num_attention_heads\":2}",
                                  NULL, 0, 0, 0),
                      2, 2, PFX_ERROR_FORMAT, "'num_layers' is missing");
    expect_load_fails(rt,
                      bad_adapter("neg",
                                  "{\"peft_type\":\"PREFIX_TUNING\",\"num_virtual_tokens\":3,"
                                  "\"num_layers\":-2,\"token_dim\":8,\"num_attention_heads\":2}",
                                  NULL, 0, 0, 0),
                      2, 2, PFX_ERROR_FORMAT, "'num_layers' is not a positive integer");
    expect_load_fails(rt, bad_adapter("dup", CFG(",\"num_layers\":5"), NULL, 0, 0, 0), 2, 2,
                      PFX_ERROR_FORMAT, "'num_layers' appears twice");
    expect_load_fails(rt, bad_adapter("proj", CFG(",\"prefix_projection\":\"yes\""), NULL, 0, 0, 0),
                      2, 2, PFX_ERROR_FORMAT, "'prefix_projection' is not true or false");
    expect_load_fails(rt, bad_adapter("nomodel", CFG(""), NULL, 0, 0, 0), 2, 2, PFX_ERROR_IO,
                      "adapter_model.safetensors");
    expect_load_fails(rt, bad_adapter("ok", CFG(""), "prompt_embeddings", 3, W, PFX_DTYPE_F32), 2,
                      3, PFX_ERROR_INVALID_ARGUMENT, "num_layers 2, 3 asked for");
    expect_load_fails(rt, bad_adapter("ok", CFG(""), "prompt_embeddings", 3, W, PFX_DTYPE_F32), 3,
                      2, PFX_ERROR_INVALID_ARGUMENT,
                      "token_dim 8 is not a multiple of the 3 kv heads");
    expect_load_fails(
        rt, bad_adapter("name", CFG(""), "prefix_encoder.embedding.weight", 3, W, PFX_DTYPE_F32), 2,
        2, PFX_ERROR_FORMAT, "no tensor 'prompt_embeddings'");
    expect_load_fails(rt,
                      bad_adapter("shape", CFG(""), "prompt_embeddings", 3, W - 1, PFX_DTYPE_F32),
                      2, 2, PFX_ERROR_INVALID_SHAPE, "[3, 31]");
    expect_load_fails(rt,
                      bad_adapter("table", CFG(",\"prefix_projection\":true"), "prompt_embeddings",
                                  3, 8, PFX_DTYPE_F32),
                      2, 2, PFX_ERROR_UNSUPPORTED, "only baked adapters");

    /* A projection adapter saved baked (PEFT's training-mode save) is read. */
    const char *baked =
        bad_adapter("baked", CFG(",\"prefix_projection\":true,\"encoder_hidden_size\":16"),
                    "prompt_embeddings", 3, W, PFX_DTYPE_F16);
    pfx_tensor *keys[2] = { 0 }, *values[2] = { 0 };
    pfx_peft_config cfg;
    assert_int_equal(pfx_peft_load_prefixes(rt, baked, 2, keys, values, 2, &cfg), PFX_SUCCESS);
    assert_true(cfg.prefix_projection);
    assert_int_equal(cfg.dtype, PFX_ST_F16);

    /* A caller tensor of the wrong shape: refused before anything is written or allocated. */
    pfx_tensor *keep = keys[1];
    pfx_tensor_destroy(&values[0]);
    const size_t wrong[3] = { 2, 3, 5 };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, wrong, &keys[1]), PFX_SUCCESS);
    size_t live = pfx_test_live_bytes(rt);
    assert_status_names(rt, pfx_peft_load_prefixes(rt, baked, 2, keys, values, 2, NULL),
                        PFX_ERROR_INVALID_SHAPE, "keys[1] is not [Hkv=2, P=3, D=4]");
    assert_null(values[0]);
    assert_int_equal(pfx_test_live_bytes(rt), live);
    pfx_tensor_destroy(&keys[1]);
    keys[1] = keep;
    for (int i = 0; i < 2; i++) {
        pfx_tensor_destroy(&keys[i]);
        pfx_tensor_destroy(&values[i]);
    }
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR (from tests/fixtures/make_peft_fixture.py)\n",
                argv[0]);
        return 1;
    }
    fixture_dir = argv[1];
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest host_tests[] = {
        cmocka_unit_test(test_round_trip_host),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_conversions),
    };
    const struct CMUnitTest device_tests[] = {
        cmocka_unit_test(test_round_trip_device),
        cmocka_unit_test(test_peft_fixture),
        cmocka_unit_test(test_peft_round_trip),
        cmocka_unit_test(test_peft_malformed),
    };
    int failed = cmocka_run_group_tests_name("io_host", host_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("io_device", device_tests, pfx_test_group_setup,
                                          pfx_test_group_teardown);
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed;
}
