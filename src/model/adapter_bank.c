/* The adapter bank: baked prefixes of many adapters stored once, read by
 * the attention through a bank index per request. Adapters come from PEFT
 * folders (io/peft.c), from prefixcl's own prefixes files, or from the
 * gains file of pretraining (io/gains_file.c: gains, no prefix). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gains_file.h"
#include "prefixcl/io.h"
#include "serve_internal.h"

#define FN "adapter_bank_add"

pfx_status pfx_adapter_bank_create(pfx_model *model, size_t capacity, pfx_adapter_bank **out)
{
    if (!out)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "adapter_bank_create: out is NULL");
    *out = NULL;
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "adapter_bank_create: model is NULL");
    const pfx_model_shape *s = &model->cfg.shape;
    if (capacity == 0 || capacity > INT32_MAX)
        return pfx_error(model->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "adapter_bank_create: capacity %zu outside 1..%d", capacity, INT32_MAX);
    pfx_adapter_bank *b = calloc(1, sizeof(*b));
    size_t gains = 0, dim = 0;
    if (b && (pfx_mul_overflows(capacity, s->layers * s->heads, &gains) ||
              pfx_mul_overflows(gains, s->head_dim, &dim))) {
        free(b);
        return pfx_error(model->rt, PFX_ERROR_SIZE_OVERFLOW,
                         "adapter_bank_create: capacity %zu is too large", capacity);
    }
    if (b) {
        b->keys = calloc(s->layers, sizeof(*b->keys));
        b->values = calloc(s->layers, sizeof(*b->values));
        b->gain_mode = calloc(capacity, sizeof(*b->gain_mode));
        b->gains = calloc(gains, sizeof(float));
        b->structured = calloc(capacity, sizeof(*b->structured));
        b->dim_gains = calloc(dim, sizeof(float)); /* untouched pages until a structured entry */
    }
    if (!b || !b->keys || !b->values || !b->gain_mode || !b->gains || !b->structured ||
        !b->dim_gains) {
        pfx_adapter_bank_destroy(&b);
        return pfx_error(model->rt, PFX_ERROR_OUT_OF_MEMORY, "adapter_bank_create: host memory");
    }
    b->model = model;
    b->capacity = capacity;
    *out = b;
    return PFX_SUCCESS;
}

void pfx_adapter_bank_destroy(pfx_adapter_bank **bank)
{
    if (!bank || !*bank)
        return;
    pfx_adapter_bank *b = *bank;
    for (size_t l = 0; b->model && l < b->model->cfg.shape.layers; l++) {
        if (b->keys)
            pfx_tensor_destroy(&b->keys[l]);
        if (b->values)
            pfx_tensor_destroy(&b->values[l]);
    }
    free(b->keys);
    free(b->values);
    free(b->gain_mode);
    free(b->gains);
    free(b->structured);
    free(b->dim_gains);
    free(b->first);
    free(b);
    *bank = NULL;
}

size_t pfx_adapter_bank_count(const pfx_adapter_bank *bank)
{
    return bank ? bank->count : 0;
}

size_t pfx_adapter_bank_prefix_len(const pfx_adapter_bank *bank)
{
    return bank ? bank->P : 0;
}

size_t pfx_adapter_bank_bytes(const pfx_adapter_bank *bank)
{
    if (!bank || !bank->P)
        return 0;
    size_t sum = 0;
    for (size_t l = 0; l < bank->model->cfg.shape.layers; l++)
        sum += bank->keys[l]->bytes + bank->values[l]->bytes;
    return sum;
}

pfx_status pfx_adapter_bank_prefix(const pfx_adapter_bank *bank, const int32_t *bank_index,
                                   size_t batch, pfx_model_prefix *prefix)
{
    if (!bank || !bank_index || !prefix)
        return pfx_error(bank ? bank->model->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "adapter_bank_prefix: %s is NULL",
                         !bank         ? "bank"
                         : !bank_index ? "bank_index"
                                       : "prefix");
    pfx_runtime *rt = bank->model->rt;
    if (batch == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "adapter_bank_prefix: batch is 0");
    for (size_t i = 0; i < batch; i++)
        if (bank_index[i] < 0 || (size_t)bank_index[i] >= bank->count)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "adapter_bank_prefix: bank_index[%zu] = %d outside [0, %zu)", i,
                             (int)bank_index[i], bank->count);
    const size_t LH = bank->model->cfg.shape.layers * bank->model->cfg.shape.heads;
    memset(prefix, 0, sizeof(*prefix));
    prefix->prefix_len = bank->P;
    if (bank->P) { /* a bank of gains files has no prefix tensors */
        prefix->keys = bank->keys;
        prefix->values = bank->values;
    }
    prefix->bank_index = bank_index;
    prefix->gain_mode = bank->gain_mode[bank_index[0]];
    prefix->gains = bank->gains + (size_t)bank_index[0] * LH;
    prefix->dim_gains = pfx_bank_dim_gains(bank, bank_index[0]);
    prefix->gain_ramp = 1.0f; /* trained gains are used at full strength */
    return PFX_SUCCESS;
}

/* ---- loading ---- */

/* One adapter in host memory: keys/values [L][Hkv][P][D], gains [L * H],
 * structured gains [L * H * D]. */
typedef struct staged {
    size_t P;
    float *kv; /* [2][L][Hkv * P * D]; NULL when P is 0 */
    pfx_gain_mode gain_mode;
    float *gains;
    bool structured;
    float *dim_gains; /* with structured */
} staged;

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static pfx_status check_fit(pfx_runtime *rt, const char *path, const char *field, size_t got,
                            size_t want)
{
    if (got == want)
        return PFX_SUCCESS;
    return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s: the adapter has %s %zu, the model %zu",
                     FN, path, field, got, want);
}

static pfx_status stage_alloc(pfx_runtime *rt, const pfx_model_shape *s, size_t P, staged *a)
{
    a->P = P;
    a->kv = P ? calloc(2 * s->layers * s->kv_heads * P * s->head_dim, sizeof(float)) : NULL;
    a->gains = calloc(s->layers * s->heads, sizeof(float));
    if ((P && !a->kv) || !a->gains)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", FN);
    return PFX_SUCCESS;
}

static pfx_status stage_peft(pfx_model *m, const char *dir, staged *a)
{
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    pfx_peft_config cfg;
    pfx_status st = pfx_peft_read_config(dir, &cfg);
    if (st != PFX_SUCCESS)
        return pfx_error(rt, st, "%s: %s", FN, pfx_last_error(NULL));
    if (cfg.num_transformer_submodules != 1)
        return pfx_error(
            rt, PFX_ERROR_UNSUPPORTED,
            "%s: %s: num_transformer_submodules %zu (an encoder-decoder adapter) is not supported",
            FN, dir, cfg.num_transformer_submodules);
    if ((st = check_fit(rt, dir, "num_layers", cfg.num_layers, s->layers)) ||
        (st = check_fit(rt, dir, "token_dim (kv heads x head size)", cfg.token_dim,
                        s->kv_heads * s->head_dim)))
        return st;
    if ((st = stage_alloc(rt, s, cfg.num_virtual_tokens, a)))
        return st;
    const size_t L = s->layers, n = s->kv_heads * a->P * s->head_dim;
    pfx_tensor **k = calloc(L, sizeof(*k)), **v = calloc(L, sizeof(*v));
    if (!k || !v)
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", FN);
    if (st == PFX_SUCCESS)
        st = pfx_peft_load_prefixes(rt, dir, s->kv_heads, k, v, L, NULL);
    for (size_t l = 0; st == PFX_SUCCESS && l < L; l++)
        if ((st = pfx_tensor_read(k[l], 0, n, a->kv + l * n)) == PFX_SUCCESS)
            st = pfx_tensor_read(v[l], 0, n, a->kv + (L + l) * n);
    for (size_t l = 0; l < L && k && v; l++) {
        pfx_tensor_destroy(&k[l]);
        pfx_tensor_destroy(&v[l]);
    }
    free(k);
    free(v);
    a->gain_mode = PFX_GAIN_OFF;
    return st;
}

/* A gains file of pretraining: no prefix (P 0), the gains at full strength. */
static pfx_status stage_gains(pfx_model *m, const char *path, const pfx_safetensors *f, staged *a)
{
    const pfx_model_shape *s = &m->cfg.shape;
    pfx_status st = stage_alloc(m->rt, s, 0, a);
    if (st == PFX_SUCCESS &&
        !(a->dim_gains = malloc(s->layers * s->heads * s->head_dim * sizeof(float))))
        st = pfx_error(m->rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", FN);
    pfx_gains_values v = { .gains = a->gains, .dim_gains = a->dim_gains };
    if (st == PFX_SUCCESS &&
        (st = pfx_gains_file_read(f, path, s->layers, s->heads, s->head_dim, &v)) != PFX_SUCCESS)
        st = pfx_error(m->rt, st, "%s: %s", FN, pfx_last_error(NULL));
    a->gain_mode = v.gain_mode;
    a->structured = v.structured;
    return st;
}

/* A prefixcl prefixes file. */
static pfx_status stage_prefixes(pfx_model *m, const char *path, const pfx_safetensors *f,
                                 staged *a)
{
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    pfx_status st = PFX_SUCCESS;
    const char *format = pfx_safetensors_metadata_get(f, "format");
    const char *mode = pfx_safetensors_metadata_get(f, "gain_mode");
    pfx_st_info info;
    long k0 = pfx_safetensors_find(f, "layers.0.prefix_k");
    if (!format || strcmp(format, "prefixcl-prefixes-1") != 0)
        st =
            pfx_error(rt, PFX_ERROR_FORMAT,
                      "%s: %s: metadata format is %s, not prefixcl-prefixes-1 or " PFX_GAINS_FORMAT,
                      FN, path, format ? format : "missing");
    else if (mode && strcmp(mode, "off") && strcmp(mode, "linear") && strcmp(mode, "tanh"))
        st = pfx_error(rt, PFX_ERROR_FORMAT,
                       "%s: %s: gain_mode \"%s\" is none of off, linear, tanh", FN, path, mode);
    else if (k0 < 0)
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: %s: no tensor layers.0.prefix_k", FN, path);
    else if ((st = pfx_safetensors_info(f, (size_t)k0, &info)) == PFX_SUCCESS && info.ndim != 3)
        st = pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                       "%s: %s: layers.0.prefix_k has %u dimensions, not [Hkv, P, D]", FN, path,
                       info.ndim);
    else if (info.shape[1] == 0)
        st = pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                       "%s: %s: layers.0.prefix_k has prefix length P = 0", FN, path);
    if (st == PFX_SUCCESS) {
        /* layers 0, 1, ... as long as they are there */
        size_t layers = 0;
        char name[64];
        do
            snprintf(name, sizeof(name), "layers.%zu.prefix_k", layers);
        while (pfx_safetensors_find(f, name) >= 0 && ++layers);
        st = check_fit(rt, path, "layers", layers, s->layers);
    }
    if (st == PFX_SUCCESS && !((st = check_fit(rt, path, "kv heads", info.shape[0], s->kv_heads)) ||
                               (st = check_fit(rt, path, "head size", info.shape[2], s->head_dim))))
        st = stage_alloc(rt, s, info.shape[1], a);
    const size_t L = s->layers, n = s->kv_heads * a->P * s->head_dim;
    for (size_t l = 0; st == PFX_SUCCESS && l < L; l++) {
        char name[64];
        static const char *const parts[2] = { "prefix_k", "prefix_v" };
        for (int i = 0; st == PFX_SUCCESS && i < 2; i++) {
            snprintf(name, sizeof(name), "layers.%zu.%s", l, parts[i]);
            if ((st = pfx_safetensors_read_f32(f, name, a->kv + (i * L + l) * n, n)))
                st = pfx_error(rt, st, "%s: %s: %s must be [Hkv=%zu, P=%zu, D=%zu]: %s", FN, path,
                               name, s->kv_heads, a->P, s->head_dim, pfx_last_error(NULL));
        }
        snprintf(name, sizeof(name), "layers.%zu.gain", l);
        if (st == PFX_SUCCESS && mode && strcmp(mode, "off") &&
            (st = pfx_safetensors_read_f32(f, name, a->gains + l * s->heads, s->heads)))
            st = pfx_error(rt, st, "%s: %s: %s must be [H=%zu]: %s", FN, path, name, s->heads,
                           pfx_last_error(NULL));
        for (size_t h = 0; st == PFX_SUCCESS && mode && strcmp(mode, "off") && h < s->heads; h++)
            if (!isfinite(a->gains[l * s->heads + h]))
                st = pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: %s: tensor %s[%zu] is %g", FN, path,
                               name, h, (double)a->gains[l * s->heads + h]);
    }
    a->gain_mode = !mode || !strcmp(mode, "off") ? PFX_GAIN_OFF
                   : !strcmp(mode, "linear")     ? PFX_GAIN_LINEAR
                                                 : PFX_GAIN_TANH;
    return st;
}

/* A prefixcl file: prefixes or pretraining's gains, told by its format. */
static pfx_status stage_own(pfx_model *m, const char *path, staged *a)
{
    pfx_safetensors *f = NULL;
    pfx_status st = pfx_safetensors_open(path, &f);
    if (st != PFX_SUCCESS)
        return pfx_error(m->rt, st, "%s: %s", FN, pfx_last_error(NULL));
    st = pfx_gains_file_is(f) ? stage_gains(m, path, f, a) : stage_prefixes(m, path, f, a);
    pfx_safetensors_close(&f);
    return st;
}

static pfx_status bank_alloc(pfx_adapter_bank *b, size_t P)
{
    const pfx_model_shape *s = &b->model->cfg.shape;
    const size_t shape[4] = { b->capacity, s->kv_heads, P, s->head_dim };
    pfx_status st = PFX_SUCCESS;
    for (size_t l = 0; st == PFX_SUCCESS && l < s->layers; l++)
        if ((st = pfx_tensor_create(b->model->rt, PFX_DTYPE_F32, 4, shape, &b->keys[l])) ==
            PFX_SUCCESS)
            st = pfx_tensor_create(b->model->rt, PFX_DTYPE_F32, 4, shape, &b->values[l]);
    for (size_t l = 0; st != PFX_SUCCESS && l < s->layers; l++) {
        pfx_tensor_destroy(&b->keys[l]);
        pfx_tensor_destroy(&b->values[l]);
    }
    if (st == PFX_SUCCESS)
        b->P = P;
    return st;
}

/* Whether `path` names a PEFT folder's weights file (.../adapter_model.safetensors);
 * its folder into dir (dir_size). */
static bool peft_weights_file(const char *path, char *dir, size_t dir_size)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strcmp(base, "adapter_model.safetensors") != 0)
        return false;
    const int n = (int)(base - path);
    if (n > 1)
        snprintf(dir, dir_size, "%.*s", n - 1, path); /* without the trailing '/' */
    else
        snprintf(dir, dir_size, "%s", n ? "/" : ".");
    return true;
}

/* Which kind of adapter `path` is: a PEFT folder (*peft; its folder in dir,
 * also when `path` names the folder's adapter_model.safetensors) or a
 * prefixcl one (the file to read in own: path itself, or
 * path/prefixes.safetensors, else path/gains.safetensors: a pretraining
 * output folder). */
static pfx_status resolve(pfx_runtime *rt, const char *path, bool *peft, char *dir, size_t dir_size,
                          char *own, size_t own_size)
{
    *peft = false;
    snprintf(own, own_size, "%s", path);
    snprintf(dir, dir_size, "%s", path);
    if (is_dir(path)) {
        snprintf(own, own_size, "%s/adapter_config.json", path);
        *peft = exists(own);
        snprintf(own, own_size, "%s/prefixes.safetensors", path);
        if (!*peft && !exists(own))
            snprintf(own, own_size, "%s/" PFX_GAINS_FILE, path);
        if (!*peft && !exists(own))
            return pfx_error(rt, PFX_ERROR_IO,
                             "%s: %s holds neither adapter_config.json nor prefixes.safetensors "
                             "nor " PFX_GAINS_FILE,
                             FN, path);
    } else if (!exists(path)) {
        return pfx_error(rt, PFX_ERROR_IO, "%s: %s does not exist", FN, path);
    } else if (peft_weights_file(path, dir, dir_size)) {
        /* the weights of a PEFT folder stand for the folder */
        snprintf(own, own_size, "%s/adapter_config.json", dir);
        if (!exists(own))
            return pfx_error(
                rt, PFX_ERROR_IO,
                "%s: %s is a PEFT adapter's weights but %s is missing: pass the PEFT folder "
                "(adapter_config.json + adapter_model.safetensors)",
                FN, path, own);
        *peft = true;
    }
    return PFX_SUCCESS;
}

pfx_status pfx_adapter_prefix_len(const char *path, size_t *prefix_len)
{
    if (!path || !prefix_len)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "adapter_prefix_len: %s is NULL",
                         !path ? "path" : "prefix_len");
    char own[4096], dir[4096];
    bool peft;
    pfx_status st = resolve(NULL, path, &peft, dir, sizeof(dir), own, sizeof(own));
    if (st == PFX_SUCCESS && peft) {
        pfx_peft_config cfg;
        if ((st = pfx_peft_read_config(dir, &cfg)) == PFX_SUCCESS)
            *prefix_len = cfg.num_virtual_tokens;
        return st;
    }
    pfx_safetensors *f = NULL;
    if (st == PFX_SUCCESS && (st = pfx_safetensors_open(own, &f)) == PFX_SUCCESS) {
        long i = pfx_safetensors_find(f, "layers.0.prefix_k");
        pfx_st_info info;
        if (pfx_gains_file_is(f))
            *prefix_len = 0; /* gains without prefix */
        else if (i < 0 || pfx_safetensors_info(f, (size_t)i, &info) != PFX_SUCCESS ||
                 info.ndim != 3)
            st = pfx_error(NULL, PFX_ERROR_FORMAT,
                           "adapter_prefix_len: %s: no tensor layers.0.prefix_k [Hkv, P, D]", own);
        else
            *prefix_len = info.shape[1];
        pfx_safetensors_close(&f);
    }
    return st;
}

/* The adapter at path into entry e (e == count: a new one, else in place
 * of what e held); the bank unchanged on failure. */
static pfx_status load_into(pfx_adapter_bank *bank, const char *path, size_t e, const char *fn)
{
    pfx_model *m = bank->model;
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    char own[4096], dir[4096];
    bool peft;
    pfx_status st = resolve(rt, path, &peft, dir, sizeof(dir), own, sizeof(own));
    if (st != PFX_SUCCESS)
        return st;
    staged a;
    memset(&a, 0, sizeof(a));
    st = peft ? stage_peft(m, dir, &a) : stage_own(m, own, &a);
    /* one prefix length per bank; a gains file (P 0) and prefix adapters
     * would need items without prefix at other positions in one call */
    if (st == PFX_SUCCESS && bank->count && a.P != bank->P)
        st = pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                       "%s: %s has prefix length %zu%s, the bank holds %zu (%s)%s", fn, path, a.P,
                       a.P ? "" : " (a gains file)", bank->P, bank->first,
                       a.P && bank->P ? ""
                                      : ": gains files and prefix adapters go into separate banks");
    char *first = st == PFX_SUCCESS && !bank->count ? strdup(path) : NULL;
    if (st == PFX_SUCCESS && !bank->count && !first)
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    const bool fresh = st == PFX_SUCCESS && !bank->count && a.P;
    if (fresh)
        st = bank_alloc(bank, a.P);
    const size_t L = s->layers, n = s->kv_heads * a.P * s->head_dim;
    for (size_t l = 0; st == PFX_SUCCESS && a.P && l < L; l++)
        if ((st = pfx_tensor_write(bank->keys[l], e * n, n, a.kv + l * n)) == PFX_SUCCESS)
            st = pfx_tensor_write(bank->values[l], e * n, n, a.kv + (L + l) * n);
    if (st != PFX_SUCCESS && fresh && bank->P) {
        /* the first adapter failed after the allocation: back to an empty bank */
        for (size_t l = 0; l < L; l++) {
            pfx_tensor_destroy(&bank->keys[l]);
            pfx_tensor_destroy(&bank->values[l]);
        }
        bank->P = 0;
    }
    if (st == PFX_SUCCESS) {
        bank->gain_mode[e] = a.gain_mode;
        memcpy(bank->gains + e * L * s->heads, a.gains, L * s->heads * sizeof(float));
        bank->structured[e] = a.structured;
        if (a.structured)
            memcpy(bank->dim_gains + e * L * s->heads * s->head_dim, a.dim_gains,
                   L * s->heads * s->head_dim * sizeof(float));
        if (first) {
            bank->first = first;
            bank->P = a.P;
            first = NULL;
        }
    }
    free(first);
    free(a.kv);
    free(a.gains);
    free(a.dim_gains);
    return st;
}

pfx_status pfx_adapter_bank_add(pfx_adapter_bank *bank, const char *path, int32_t *entry)
{
    if (!bank || !path || !entry)
        return pfx_error(bank ? bank->model->rt : NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL",
                         FN,
                         !bank   ? "bank"
                         : !path ? "path"
                                 : "entry");
    if (bank->count == bank->capacity)
        return pfx_error(bank->model->rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: the bank is full (%zu adapters)", FN, bank->capacity);
    const pfx_status st = load_into(bank, path, bank->count, FN);
    if (st == PFX_SUCCESS)
        *entry = (int32_t)bank->count++;
    return st;
}

pfx_status pfx_adapter_bank_replace(pfx_adapter_bank *bank, int32_t entry, const char *path)
{
    if (!bank || !path)
        return pfx_error(bank ? bank->model->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "adapter_bank_replace: %s is NULL", !bank ? "bank" : "path");
    if (entry < 0 || (size_t)entry >= bank->count)
        return pfx_error(bank->model->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "adapter_bank_replace: entry %d outside the bank's 0..%zu", (int)entry,
                         bank->count ? bank->count - 1 : 0);
    return load_into(bank, path, (size_t)entry, "adapter_bank_replace");
}
