/* PEFT prefix-tuning adapter folders: adapter_config.json and
 * adapter_model.safetensors ("prompt_embeddings", [P][L][2][Hkv][D]). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io_internal.h"

#define CONFIG_NAME      "adapter_config.json"
#define MODEL_NAME       "adapter_model.safetensors"
#define EMBEDDINGS       "prompt_embeddings"
#define CONFIG_MAX_BYTES ((size_t)1 << 20)
pfx_status pfx_peft_parse_config(pfx_runtime *rt, const unsigned char *buf, size_t size,
                                 const char *label, pfx_peft_config *config)
{
    const char *path = label ? label : "<memory>";
    memset(config, 0, sizeof(*config));
    if (size > CONFIG_MAX_BYTES)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: %zu bytes, more than the %zu accepted",
                         path, size, CONFIG_MAX_BYTES);
    cJSON *root = NULL;
    pfx_peft_config c = { 0 };
    pfx_status st = pfx_json_parse_object(rt, path, buf, size, &root);
    if (st != PFX_SUCCESS)
        goto out;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "peft_type");
    if (!cJSON_IsString(type)) {
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field 'peft_type' is missing or not a string",
                       path);
        goto out;
    }
    if (strcmp(type->valuestring, "PREFIX_TUNING") != 0) {
        st = pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                       "%s: peft_type is '%.64s'; only PREFIX_TUNING adapters are read", path,
                       type->valuestring);
        goto out;
    }
    if ((st = pfx_json_field_count(rt, path, root, "num_virtual_tokens", true, 0,
                                   &c.num_virtual_tokens)) ||
        (st = pfx_json_field_count(rt, path, root, "num_layers", true, 0, &c.num_layers)) ||
        (st = pfx_json_field_count(rt, path, root, "token_dim", true, 0, &c.token_dim)) ||
        (st = pfx_json_field_count(rt, path, root, "num_attention_heads", true, 0,
                                   &c.num_attention_heads)) ||
        (st = pfx_json_field_count(rt, path, root, "num_transformer_submodules", false, 1,
                                   &c.num_transformer_submodules)) ||
        (st = pfx_json_field_count(rt, path, root, "encoder_hidden_size", false, 0,
                                   &c.encoder_hidden_size)) ||
        (st = pfx_json_field_bool(rt, path, root, "prefix_projection", &c.prefix_projection)) ||
        (st = pfx_json_field_bool(rt, path, root, "inference_mode", &c.inference_mode)) ||
        (st = pfx_json_field_string(rt, path, root, "task_type", c.task_type,
                                    sizeof(c.task_type))) ||
        (st = pfx_json_field_string(rt, path, root, "base_model_name_or_path",
                                    c.base_model_name_or_path, sizeof(c.base_model_name_or_path))))
        goto out;
    /* Encoder-decoder adapters interleave the encoder's and the decoder's
     * layers in one table; reading them as decoder-only puts wrong slots in
     * every layer. */
    if (c.num_transformer_submodules != 1) {
        st = pfx_error(
            rt, PFX_ERROR_UNSUPPORTED,
            "%s: num_transformer_submodules is %zu; only decoder-only adapters (1) are read", path,
            c.num_transformer_submodules);
        goto out;
    }
    c.dtype = PFX_ST_F32;
    *config = c;
out:
    cJSON_Delete(root);
    return st;
}

pfx_status pfx_peft_read_config_rt(pfx_runtime *rt, const char *dir, pfx_peft_config *config)
{
    if (!dir || !config)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_peft_read_config: %s is NULL",
                         !dir ? "dir" : "config");
    memset(config, 0, sizeof(*config));
    if (!dir[0])
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "pfx_peft_read_config: dir is empty");
    char *path = pfx_join_path(dir, CONFIG_NAME);
    if (!path)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pfx_peft_read_config: host memory");
    unsigned char *buf = NULL;
    size_t size = 0;
    pfx_status st = pfx_read_file(rt, path, CONFIG_MAX_BYTES, &buf, &size);
    if (st == PFX_SUCCESS)
        st = pfx_peft_parse_config(rt, buf, size, path, config);
    free(buf);
    free(path);
    return st;
}

pfx_status pfx_peft_read_config(const char *dir, pfx_peft_config *config)
{
    return pfx_peft_read_config_rt(NULL, dir, config);
}

pfx_status pfx_peft_read_config_memory(const void *data, size_t size, const char *label,
                                       pfx_peft_config *config)
{
    if ((!data && size) || !config)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_peft_read_config_memory: %s is NULL",
                         !config ? "config" : "data");
    return pfx_peft_parse_config(NULL, data ? data : "", size, label, config);
}

static pfx_status check_prefix_tensor(pfx_runtime *rt, const pfx_tensor *t, const char *what,
                                      size_t l, size_t hkv, size_t p, size_t d)
{
    if (t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s[%zu] belongs to another runtime", what,
                         l);
    if (t->dtype != PFX_DTYPE_F32 && t->dtype != PFX_DTYPE_F16)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s[%zu]: dtype %d", what, l, (int)t->dtype);
    if (t->ndim != 3 || t->shape[0] != hkv || t->shape[1] != p || t->shape[2] != d)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s[%zu] is not [Hkv=%zu, P=%zu, D=%zu]",
                         what, l, hkv, p, d);
    return PFX_SUCCESS;
}

typedef struct slot_ref {
    cl_mem mem;
    size_t layer;
    int is_value;
} slot_ref;

static int cmp_slot(const void *a, const void *b)
{
    const slot_ref *x = a, *y = b;
    return x->mem < y->mem ? -1 : x->mem > y->mem;
}

/* Every caller tensor in keys and values is written once: one that appears
 * twice would end up holding the last write only. */
static pfx_status check_distinct(pfx_runtime *rt, pfx_tensor *const *keys,
                                 pfx_tensor *const *values, size_t L)
{
    if (L > SIZE_MAX / (2 * sizeof(slot_ref)))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "pfx_peft_load_prefixes: num_layers %zu", L);
    /* Overlapping arrays: a NULL entry allocated into one slot would be
     * replaced by the other array's allocation (and leak). */
    if (L && keys < values + L && values < keys + L)
        return pfx_error(rt, PFX_ERROR_ALIASING,
                         "pfx_peft_load_prefixes: the keys and values arrays overlap (entries %s)",
                         keys == values ? "are shared" : "are shared in part");
    slot_ref *refs = malloc((2 * L + 1) * sizeof(*refs));
    if (!refs)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pfx_peft_load_prefixes: host memory");
    size_t n = 0;
    for (size_t l = 0; l < L; l++) {
        if (keys[l])
            refs[n++] = (slot_ref){ keys[l]->mem, l, 0 };
        if (values[l])
            refs[n++] = (slot_ref){ values[l]->mem, l, 1 };
    }
    qsort(refs, n, sizeof(*refs), cmp_slot);
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 1; i < n && st == PFX_SUCCESS; i++)
        if (refs[i].mem == refs[i - 1].mem)
            st = pfx_error(rt, PFX_ERROR_ALIASING,
                           "pfx_peft_load_prefixes: %s[%zu] and %s[%zu] are the same tensor",
                           refs[i - 1].is_value ? "values" : "keys", refs[i - 1].layer,
                           refs[i].is_value ? "values" : "keys", refs[i].layer);
    free(refs);
    return st;
}

pfx_status pfx_peft_load_prefixes(pfx_runtime *rt, const char *dir, size_t kv_heads,
                                  pfx_tensor **keys, pfx_tensor **values, size_t num_layers,
                                  pfx_peft_config *config)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_peft_load_prefixes: rt is NULL");
    if (!dir || !keys || !values)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_peft_load_prefixes: %s is NULL",
                         !dir    ? "dir"
                         : !keys ? "keys"
                                 : "values");
    if (!dir[0])
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "pfx_peft_load_prefixes: dir is empty");
    pfx_status st = check_distinct(rt, keys, values, num_layers);
    if (st != PFX_SUCCESS)
        return st;
    pfx_peft_config c;
    if ((st = pfx_peft_read_config_rt(rt, dir, &c)) != PFX_SUCCESS)
        return st;
    if (num_layers != c.num_layers)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: the adapter has num_layers %zu, %zu asked for", dir, c.num_layers,
                         num_layers);
    size_t hkv = kv_heads ? kv_heads : c.num_attention_heads;
    if (c.token_dim % hkv != 0)
        return pfx_error(
            rt, PFX_ERROR_INVALID_ARGUMENT,
            "%s: token_dim %zu is not a multiple of the %zu kv heads (token_dim = Hkv * D)", dir,
            c.token_dim, hkv);
    size_t p = c.num_virtual_tokens, d = c.token_dim / hkv, L = c.num_layers;
    for (size_t l = 0; l < L; l++) {
        if ((keys[l] && (st = check_prefix_tensor(rt, keys[l], "keys", l, hkv, p, d))) ||
            (values[l] && (st = check_prefix_tensor(rt, values[l], "values", l, hkv, p, d))))
            return st;
    }

    char *path = pfx_join_path(dir, MODEL_NAME);
    if (!path)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pfx_peft_load_prefixes: host memory");
    pfx_safetensors *f = NULL;
    float *y = NULL, *kbuf = NULL, *vbuf = NULL;
    bool *made = NULL;
    st = pfx_st_open_rt(rt, path, &f);
    if (st != PFX_SUCCESS)
        goto out;
    long idx = pfx_safetensors_find(f, EMBEDDINGS);
    if (idx < 0) {
        st = pfx_error(rt, PFX_ERROR_FORMAT,
                       "%s: no tensor '" EMBEDDINGS "' (the file has no tensor)", path);
        if (pfx_safetensors_count(f)) {
            pfx_st_info first;
            pfx_safetensors_info(f, 0, &first);
            st = pfx_error(rt, PFX_ERROR_FORMAT,
                           "%s: no tensor '" EMBEDDINGS "' (%zu tensors, the first is '%.100s')",
                           path, pfx_safetensors_count(f), first.name);
        }
        goto out;
    }
    pfx_st_info info;
    pfx_safetensors_info(f, (size_t)idx, &info);
    c.dtype = info.dtype;
    if (info.dtype != PFX_ST_F32 && info.dtype != PFX_ST_F16 && info.dtype != PFX_ST_BF16) {
        st = pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                       "%s: " EMBEDDINGS " is %s; F32, F16 or BF16 expected", path,
                       pfx_st_dtype_name(info.dtype));
        goto out;
    }
    size_t width = L * 2 * c.token_dim; /* fields are <= 2^31: no overflow in 64-bit size_t */
    if (info.ndim == 2 && info.shape[0] == p && info.shape[1] == c.token_dim &&
        c.prefix_projection && width != c.token_dim) {
        st = pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                       "%s: " EMBEDDINGS
                       " is the prefix_projection MLP's input table (%zu x %zu), not baked "
                       "prefixes; only baked adapters (%zu x %zu) are read",
                       path, p, c.token_dim, p, width);
        goto out;
    }
    if (info.ndim != 2 || info.shape[0] != p || info.shape[1] != width) {
        char shape[128];
        pfx_shape_text(shape, sizeof(shape), info.ndim, info.shape);
        st = pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                       "%s: " EMBEDDINGS
                       " has shape %s; the config asks for [num_virtual_tokens=%zu, "
                       "num_layers*2*token_dim=%zu]",
                       path, shape, p, width);
        goto out;
    }
    size_t per = hkv * p * d;
    y = malloc(p * width * sizeof(float));
    kbuf = malloc(per * sizeof(float));
    vbuf = malloc(per * sizeof(float));
    made = calloc(2 * L, sizeof(bool));
    if (!y || !kbuf || !vbuf || !made) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory for the prefixes", path);
        goto out;
    }
    if ((st = pfx_st_read_f32_rt(rt, f, (size_t)idx, y, p * width)) != PFX_SUCCESS)
        goto out;
    const size_t shape[3] = { hkv, p, d };
    for (size_t l = 0; l < L; l++) {
        /* Y[t][l][s][hk][dd] -> prefix_s[hk][t][dd] */
        for (size_t hk = 0; hk < hkv; hk++)
            for (size_t t = 0; t < p; t++) {
                const float *row = y + t * width + l * 2 * c.token_dim + hk * d;
                memcpy(kbuf + (hk * p + t) * d, row, d * sizeof(float));
                memcpy(vbuf + (hk * p + t) * d, row + c.token_dim, d * sizeof(float));
            }
        for (int s = 0; s < 2; s++) {
            pfx_tensor **slot = s ? &values[l] : &keys[l];
            if (!*slot) {
                if ((st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, slot)) != PFX_SUCCESS)
                    goto out;
                made[2 * l + (size_t)s] = true;
            }
            if ((st = pfx_tensor_write(*slot, 0, per, s ? vbuf : kbuf)) != PFX_SUCCESS)
                goto out;
        }
    }
    if (config)
        *config = c;
out:
    if (st != PFX_SUCCESS && made) {
        for (size_t l = 0; l < L; l++) {
            if (made[2 * l])
                pfx_tensor_destroy(&keys[l]);
            if (made[2 * l + 1])
                pfx_tensor_destroy(&values[l]);
        }
    }
    free(made);
    free(y);
    free(kbuf);
    free(vbuf);
    pfx_safetensors_close(&f);
    free(path);
    return st;
}

void pfx_peft_default_save_params(pfx_peft_save_params *params)
{
    if (params)
        memset(params, 0, sizeof(*params));
}

/* A string field as pfx_peft_parse_config reads it back: UTF-8 (the whole
 * file must be) and shorter than its slot in pfx_peft_config. */
static pfx_status check_save_string(pfx_runtime *rt, const char *field, const char *text,
                                    size_t cap)
{
    if (!text)
        return PFX_SUCCESS;
    size_t n = strlen(text);
    if (n >= cap)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_peft_save_prefixes: %s has %zu bytes; the reader takes at most %zu",
                         field, n, cap - 1);
    if (!pfx_utf8_valid((const unsigned char *)text, n))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_peft_save_prefixes: %s is not valid UTF-8", field);
    return PFX_SUCCESS;
}

static pfx_status write_config(pfx_runtime *rt, const char *path, const pfx_peft_save_params *pp,
                               size_t p, size_t L, size_t token_dim, size_t heads, size_t hidden)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    ok = ok && cJSON_AddNullToObject(root, "auto_mapping");
    ok = ok && (pp->base_model_name_or_path
                    ? cJSON_AddStringToObject(root, "base_model_name_or_path",
                                              pp->base_model_name_or_path) != NULL
                    : cJSON_AddNullToObject(root, "base_model_name_or_path") != NULL);
    ok = ok && cJSON_AddNumberToObject(root, "encoder_hidden_size", (double)hidden);
    ok = ok && cJSON_AddBoolToObject(root, "inference_mode", 1);
    ok = ok && cJSON_AddNumberToObject(root, "num_attention_heads", (double)heads);
    ok = ok && cJSON_AddNumberToObject(root, "num_layers", (double)L);
    ok = ok && cJSON_AddNumberToObject(root, "num_transformer_submodules", 1.0);
    ok = ok && cJSON_AddNumberToObject(root, "num_virtual_tokens", (double)p);
    ok = ok && cJSON_AddStringToObject(root, "peft_type", "PREFIX_TUNING");
    ok = ok && cJSON_AddBoolToObject(root, "prefix_projection", 0);
    ok = ok && cJSON_AddNullToObject(root, "revision");
    ok = ok &&
         cJSON_AddStringToObject(root, "task_type", pp->task_type ? pp->task_type : "CAUSAL_LM");
    ok = ok && cJSON_AddNumberToObject(root, "token_dim", (double)token_dim);
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: building the JSON", path);
    pfx_atomic_file af;
    pfx_status st = pfx_atomic_begin(rt, path, &af);
    if (st == PFX_SUCCESS) {
        if ((st = pfx_atomic_write(rt, &af, text, strlen(text))) == PFX_SUCCESS &&
            (st = pfx_atomic_write(rt, &af, "\n", 1)) == PFX_SUCCESS)
            st = pfx_atomic_commit(rt, &af);
        else
            pfx_atomic_abort(&af);
    }
    cJSON_free(text);
    return st;
}

pfx_status pfx_peft_save_prefixes(pfx_runtime *rt, const char *dir, pfx_tensor *const *keys,
                                  pfx_tensor *const *values, size_t num_layers,
                                  const pfx_peft_save_params *params)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_peft_save_prefixes: rt is NULL");
    if (!dir || !keys || !values)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_peft_save_prefixes: %s is NULL",
                         !dir    ? "dir"
                         : !keys ? "keys"
                                 : "values");
    if (num_layers == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "pfx_peft_save_prefixes: num_layers is 0");
    if (!dir[0])
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "pfx_peft_save_prefixes: dir is empty");
    pfx_peft_save_params pp;
    pfx_peft_default_save_params(&pp);
    if (params)
        pp = *params;
    pfx_status st;
    if ((st = check_save_string(rt, "task_type", pp.task_type,
                                sizeof(((pfx_peft_config *)0)->task_type))) ||
        (st = check_save_string(rt, "base_model_name_or_path", pp.base_model_name_or_path,
                                sizeof(((pfx_peft_config *)0)->base_model_name_or_path))))
        return st;
    for (size_t l = 0; l < num_layers; l++)
        if (!keys[l] || !values[l])
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_peft_save_prefixes: %s[%zu] is NULL",
                             !keys[l] ? "keys" : "values", l);
    if (keys[0]->ndim != 3)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "pfx_peft_save_prefixes: keys[0] is not [Hkv, P, D]");
    size_t hkv = keys[0]->shape[0], p = keys[0]->shape[1], d = keys[0]->shape[2];
    for (size_t l = 0; l < num_layers; l++) {
        if ((st = check_prefix_tensor(rt, keys[l], "keys", l, hkv, p, d)) ||
            (st = check_prefix_tensor(rt, values[l], "values", l, hkv, p, d)))
            return st;
    }
    size_t token_dim, width, total;
    if (pfx_mul_overflows(hkv, d, &token_dim) ||
        pfx_mul_overflows(token_dim, 2 * num_layers, &width) ||
        pfx_mul_overflows(width, p, &total) || total > SIZE_MAX / sizeof(float))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                         "pfx_peft_save_prefixes: the prefixes are too large");
    size_t heads = pp.num_attention_heads ? pp.num_attention_heads : hkv;
    size_t hidden = pp.encoder_hidden_size ? pp.encoder_hidden_size : token_dim;
    /* The counts the reader checks (pfx_json_field_count): each at most PFX_JSON_FIELD_MAX. */
    const struct {
        const char *name;
        size_t v;
    } counts[] = {
        { "num_virtual_tokens", p },       { "num_layers", num_layers },
        { "token_dim", token_dim },        { "num_attention_heads", heads },
        { "encoder_hidden_size", hidden },
    };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        if (counts[i].v > PFX_JSON_FIELD_MAX)
            return pfx_error(
                rt, PFX_ERROR_INVALID_ARGUMENT,
                "pfx_peft_save_prefixes: %s %zu is above %llu, which the reader refuses",
                counts[i].name, counts[i].v, (unsigned long long)PFX_JSON_FIELD_MAX);
    if (token_dim % heads != 0)
        return pfx_error(
            rt, PFX_ERROR_INVALID_ARGUMENT,
            "pfx_peft_save_prefixes: num_attention_heads %zu does not divide token_dim %zu", heads,
            token_dim);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return pfx_error(rt, PFX_ERROR_IO, "cannot create the folder '%s': %s", dir,
                         strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return pfx_error(rt, PFX_ERROR_IO, "'%s' is not a folder", dir);

    size_t per = hkv * p * d;
    float *y = malloc(total * sizeof(float));
    float *buf = malloc(per * sizeof(float));
    char *cfg_path = pfx_join_path(dir, CONFIG_NAME), *model_path = pfx_join_path(dir, MODEL_NAME);
    if (!y || !buf || !cfg_path || !model_path) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pfx_peft_save_prefixes: host memory");
        goto out;
    }
    for (size_t l = 0; l < num_layers; l++) {
        for (int s = 0; s < 2; s++) {
            if ((st = pfx_tensor_read(s ? values[l] : keys[l], 0, per, buf)) != PFX_SUCCESS)
                goto out;
            for (size_t hk = 0; hk < hkv; hk++)
                for (size_t t = 0; t < p; t++)
                    memcpy(y + t * width + (l * 2 + (size_t)s) * token_dim + hk * d,
                           buf + (hk * p + t) * d, d * sizeof(float));
        }
    }
    pfx_named_tensor item = {
        .name = EMBEDDINGS, .host = y, .ndim = 2, .shape = { p, width }, .dtype = PFX_DTYPE_F32
    };
    pfx_st_metadata meta = { "format", "pt" };
    if ((st = pfx_safetensors_save(rt, model_path, &item, 1, &meta, 1)) != PFX_SUCCESS)
        goto out;
    st = write_config(rt, cfg_path, &pp, p, num_layers, token_dim, heads, hidden);
out:
    free(y);
    free(buf);
    free(cfg_path);
    free(model_path);
    return st;
}
