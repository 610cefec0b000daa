/* Whole models: loading a Hugging Face folder (single or sharded
 * safetensors checkpoint), the shape queries; drawing weights for a config
 * alone is model_draw.c's. The workspace of the calls is a context's (context.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "safetensors_internal.h"
#include "model_internal.h"

#define SINGLE_NAME     "model.safetensors"
#define INDEX_NAME      "model.safetensors.index.json"
#define INDEX_MAX_BYTES ((size_t)64 << 20)
#define LAYER_ROLES     (PFX_W_ROLE_COUNT - PFX_W_FIRST_LAYER_ROLE)

void pfx_model_free(pfx_model *m)
{
    for (size_t i = 0; m->tensors && i < m->spec_count; i++)
        pfx_tensor_destroy(&m->tensors[i]);
    for (size_t i = 0; m->fused_qkv && i < 2 * m->cfg.shape.layers; i++)
        pfx_tensor_destroy(&m->fused_qkv[i]);
    free(m->fused_qkv);
    free(m->weights);
    free(m->weight_at);
    free(m->config_text);
    pfx_tensor_destroy(&m->inv_freq);
    free(m->tensors);
    free(m->layer_w);
    free(m->specs);
    free(m);
}

void pfx_model_destroy(pfx_model **mp)
{
    if (!mp || !*mp)
        return;
    pfx_model *m = *mp;
    *mp = NULL;
    if (m->contexts) /* the last pfx_context_destroy frees it */
        m->released = true;
    else
        pfx_model_free(m);
}

/* Re-records the last message of rt with `path: ` in front. */
static pfx_status with_path(pfx_runtime *rt, pfx_status st, const char *path)
{
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", pfx_last_error(rt));
    return pfx_error(rt, st, "%s: %s", path, msg);
}

pfx_status pfx_model_check_params(pfx_runtime *rt, const pfx_model_params *in, pfx_model_params *p)
{
    if (in)
        *p = *in;
    else
        memset(p, 0, sizeof(*p));
    if (p->storage != PFX_DTYPE_F32 && p->storage != PFX_DTYPE_F16 &&
        p->storage != PFX_DTYPE_BF16 && p->storage != PFX_DTYPE_Q8_0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "model_load: params.storage %d is not F32, F16, BF16 or Q8_0",
                         (int)p->storage);
    return PFX_SUCCESS;
}

/* The dtype of a weight of role r with rows of `cols` elements: the storage,
 * except with Q8_0, which holds the matrices that products and the token
 * embedding read, when their rows are whole blocks (as llama.cpp's Q8_0
 * files); norms, biases and positions stay float32. */
static pfx_dtype weight_dtype(pfx_dtype storage, pfx_weight_role r, size_t cols)
{
    if (storage != PFX_DTYPE_Q8_0)
        return storage;
    const bool matrix = r == PFX_W_EMBED || r == PFX_W_LM_HEAD || r == PFX_W_QKV || r == PFX_W_Q ||
                        r == PFX_W_K || r == PFX_W_V || r == PFX_W_O || r == PFX_W_UP ||
                        r == PFX_W_GATE || r == PFX_W_DOWN;
    return matrix && cols % 32 == 0 ? PFX_DTYPE_Q8_0 : PFX_DTYPE_F32;
}

/* Device bytes of a weight of `numel` elements in rows of `cols`; false on
 * overflow. */
static bool weight_bytes(pfx_dtype storage, pfx_weight_role r, size_t cols, size_t numel,
                         size_t *bytes)
{
    return pfx_dtype_bytes(weight_dtype(storage, r, cols), numel, bytes);
}

/* The model without weights: specs (those given, owned from here on, or
 * the config's) and tensors allocated. */
pfx_status pfx_model_create_empty(pfx_runtime *rt, const pfx_model_config *cfg,
                                  const pfx_model_params *p, bool gpt2_prefix,
                                  pfx_weight_spec *specs, size_t spec_count, pfx_model **out)
{
    pfx_model *m = calloc(1, sizeof(*m));
    if (!m) {
        free(specs);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    }
    m->rt = rt;
    m->cfg = *cfg;
    m->p = *p;
    const pfx_model_shape *s = &cfg->shape;
    const size_t L = s->layers;
    m->specs = specs;
    m->spec_count = spec_count;
    pfx_status st =
        specs ? PFX_SUCCESS : pfx_weight_specs(rt, cfg, gpt2_prefix, &m->specs, &m->spec_count);
    if (st == PFX_SUCCESS) {
        m->tensors = calloc(m->spec_count, sizeof(*m->tensors));
        m->layer_w = calloc(L * LAYER_ROLES, sizeof(*m->layer_w));
        if (!m->tensors || !m->layer_w)
            st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    }
    m->conv1d_held_linear = cfg->family == PFX_FAMILY_GPT2 && p->storage == PFX_DTYPE_Q8_0;
    for (size_t i = 0; st == PFX_SUCCESS && i < m->spec_count; i++) {
        const pfx_weight_spec *w = &m->specs[i];
        const bool t = pfx_model_held_transposed(m, w->role) && w->ndim == 2;
        const size_t shape[2] = { w->shape[t ? 1 : 0], w->shape[t ? 0 : 1] };
        st = pfx_tensor_create(rt, weight_dtype(p->storage, w->role, shape[w->ndim - 1]), w->ndim,
                               w->ndim == 2 ? shape : w->shape, &m->tensors[i]);
        if (st != PFX_SUCCESS)
            st = with_path(rt, st, w->name);
        else if (w->role < PFX_W_FIRST_LAYER_ROLE)
            m->global[w->role] = m->tensors[i];
        else
            m->layer_w[w->layer * LAYER_ROLES + (w->role - PFX_W_FIRST_LAYER_ROLE)] = m->tensors[i];
    }
    const bool llama = cfg->family == PFX_FAMILY_LLAMA;
    if (st == PFX_SUCCESS && llama) {
        size_t half = s->head_dim / 2;
        float *freq = malloc(half * sizeof(float));
        if (!freq)
            st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
        if (st == PFX_SUCCESS)
            st = pfx_rope_inv_freq(rt, &cfg->rope, freq);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &half, &m->inv_freq);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_write(m->inv_freq, 0, half, freq);
        free(freq);
    }
    if (st != PFX_SUCCESS) {
        pfx_model_destroy(&m);
        return st;
    }
    *out = m;
    return PFX_SUCCESS;
}

static bool skipped_by(const pfx_model_config *cfg, const char *name)
{
    /* a tied head saved anyway is the embedding again */
    return pfx_weight_name_ignored(name) ||
           (cfg->shape.tied_embeddings && strcmp(name, "lm_head.weight") == 0);
}

static bool skipped(const pfx_model *m, const char *name)
{
    return skipped_by(&m->cfg, name);
}

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Whether GPT-2 names carry "transformer." (GPT2LMHeadModel) or not (GPT2Model). */
static bool names_have_gpt2_prefix(const pfx_model_config *cfg, char *const *names, size_t n)
{
    if (cfg->family != PFX_FAMILY_GPT2)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strncmp(names[i], "transformer.", 12) == 0)
            return true;
    return false;
}

/* The Llama family's q, k and v projections stacked into one tensor per
 * layer ([QD + 2 KVD, C], biases likewise), so that one product computes
 * all three (GPT-2's c_attn is stored so already); the separate tensors are
 * released layer by layer (device copies: released buffers live until the
 * copies that read them are done). */
pfx_status pfx_model_fuse_qkv(pfx_model *m)
{
    if (m->cfg.family != PFX_FAMILY_LLAMA)
        return PFX_SUCCESS;
    pfx_runtime *rt = m->rt;
    const size_t L = m->cfg.shape.layers;
    if (!(m->fused_qkv = calloc(2 * L, sizeof(*m->fused_qkv))))
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    static const pfx_weight_role parts[2][3] = { { PFX_W_Q, PFX_W_K, PFX_W_V },
                                                 { PFX_W_Q_B, PFX_W_K_B, PFX_W_V_B } };
    static const pfx_weight_role fused[2] = { PFX_W_QKV, PFX_W_QKV_B };
    for (size_t l = 0; l < L; l++) {
        const pfx_tensor **w = m->layer_w + l * LAYER_ROLES;
        for (int bias = 0; bias < 2; bias++) {
            const pfx_tensor *q = w[parts[bias][0] - PFX_W_FIRST_LAYER_ROLE];
            if (!q)
                continue; /* no q, k, v biases */
            size_t shape[2] = { 0, q->ndim == 2 ? q->shape[1] : 0 };
            for (int i = 0; i < 3; i++)
                shape[0] += w[parts[bias][i] - PFX_W_FIRST_LAYER_ROLE]->shape[0];
            pfx_tensor **out = &m->fused_qkv[2 * l + (size_t)bias];
            pfx_status st = pfx_tensor_create(rt, q->dtype, q->ndim, shape, out);
            size_t at = 0;
            for (int i = 0; i < 3 && st == PFX_SUCCESS; i++) {
                const pfx_tensor *src = w[parts[bias][i] - PFX_W_FIRST_LAYER_ROLE];
                cl_int err = clEnqueueCopyBuffer(rt->queue, src->mem, (*out)->mem, 0, at,
                                                 src->bytes, 0, NULL, NULL);
                if (err != CL_SUCCESS)
                    st = pfx_cl_error(rt, err, "model: q, k, v stacked");
                at += src->bytes;
            }
            if (st != PFX_SUCCESS)
                return st;
            w[fused[bias] - PFX_W_FIRST_LAYER_ROLE] = *out;
            for (int i = 0; i < 3; i++)
                w[parts[bias][i] - PFX_W_FIRST_LAYER_ROLE] = NULL;
        }
        for (size_t i = 0; i < m->spec_count; i++) {
            const pfx_weight_role r = m->specs[i].role;
            const bool part = r == PFX_W_Q || r == PFX_W_K || r == PFX_W_V || r == PFX_W_Q_B ||
                              r == PFX_W_K_B || r == PFX_W_V_B;
            if (part && m->specs[i].layer == l)
                pfx_tensor_destroy(&m->tensors[i]);
        }
    }
    return PFX_SUCCESS;
}

/* Sorted references into names[n]: a lookup by name in log n. */
static int cmp_name_ref(const void *a, const void *b)
{
    return strcmp(**(char **const *)a, **(char **const *)b);
}

static char ***sort_names(char **names, size_t n)
{
    char ***refs = malloc((n ? n : 1) * sizeof(*refs));
    for (size_t i = 0; refs && i < n; i++)
        refs[i] = &names[i];
    if (refs)
        qsort(refs, n, sizeof(*refs), cmp_name_ref);
    return refs;
}

/* Position of `name` in the names behind refs, or -1. */
static long find_name(char **names, char ***refs, size_t n, const char *name)
{
    char *key = (char *)name, **kp = &key;
    char ***hit = bsearch(&kp, refs, n, sizeof(*refs), cmp_name_ref);
    return hit ? (long)(*hit - names) : -1;
}

/* What a checkpoint is checked against before anything is allocated. */
typedef struct ckpt_check {
    const pfx_model_config *cfg;
    const pfx_weight_spec *specs;
    size_t spec_count;
    char **spec_names, ***spec_refs;
    const pfx_st_index *index; /* NULL: a single file */
    char ***index_refs;
    size_t *listed; /* [shard]: entries of the index in that shard */
    const char *index_path;
    bool *seen; /* [spec] */
} ckpt_check;

static pfx_status shape_mismatch(pfx_runtime *rt, const char *path, const pfx_st_info *info,
                                 const pfx_weight_spec *w)
{
    char file[160], want[160], fields[320];
    pfx_shape_text(file, sizeof(file), info->ndim, info->shape);
    pfx_shape_text(want, sizeof(want), w->ndim, w->shape);
    if (w->ndim == 1 || strcmp(w->field[0], w->field[1]) == 0)
        snprintf(fields, sizeof(fields), "%s %zu", w->field[0], w->shape[0]);
    else
        snprintf(fields, sizeof(fields), "%s %zu, %s %zu", w->field[0], w->shape[0], w->field[1],
                 w->shape[1]);
    return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                     "%s: tensor '%.200s' is %s in the file; config.json (%s) makes it %s", path,
                     info->name, file, fields, want);
}

/* One file of the checkpoint (shard `shard` of the index): every tensor
 * listed in the index under this shard and nowhere else, named by the
 * config, of a float dtype and of the config's shape (the reader checked
 * byte sizes against shapes when it opened the file). */
static pfx_status check_file(pfx_runtime *rt, const ckpt_check *c, const pfx_safetensors *f,
                             const char *path, size_t shard)
{
    const pfx_st_index *x = c->index;
    const pfx_model_config *cfg = c->cfg;
    size_t n = pfx_safetensors_count(f), listed = 0;
    for (size_t i = 0; i < n; i++) {
        pfx_st_info info;
        pfx_status st = pfx_safetensors_info(f, i, &info);
        if (st != PFX_SUCCESS)
            return st;
        if (x) {
            long e = find_name(x->names, c->index_refs, x->count, info.name);
            if (e < 0)
                return pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor '%.200s' is not listed in %s",
                                 path, info.name, c->index_path);
            if (x->shard[e] != shard)
                return pfx_error(rt, PFX_ERROR_FORMAT,
                                 "%s: tensor '%.200s' is listed under %s in %s", path, info.name,
                                 x->shards[x->shard[e]], c->index_path);
            listed++;
        }
        if (skipped_by(cfg, info.name))
            continue;
        long k = find_name(c->spec_names, c->spec_refs, c->spec_count, info.name);
        if (k < 0)
            return pfx_error(
                rt, PFX_ERROR_FORMAT,
                "%s: tensor '%.200s' is not part of a %s model with %zu layers (config.json)", path,
                info.name, cfg->shape.model_type, cfg->shape.layers);
        if (c->seen[k])
            return pfx_error(rt, PFX_ERROR_FORMAT,
                             "%s: tensor '%.200s' was already read from another shard", path,
                             info.name);
        c->seen[k] = true;
        if (!pfx_st_is_float(info.dtype))
            return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                             "%s: tensor '%.200s' is %s, not a float type", path, info.name,
                             pfx_st_dtype_name(info.dtype));
        const pfx_weight_spec *w = &c->specs[k];
        if (info.ndim != w->ndim || info.shape[0] != w->shape[0] ||
            (w->ndim == 2 && info.shape[1] != w->shape[1]))
            return shape_mismatch(rt, path, &info, w);
    }
    if (x && listed != c->listed[shard]) /* the index names a tensor this shard lacks */
        for (size_t e = 0; e < x->count; e++)
            if (x->shard[e] == shard && pfx_safetensors_find(f, x->names[e]) < 0)
                return pfx_error(rt, PFX_ERROR_FORMAT,
                                 "%s: tensor '%.200s', listed in %s for this shard, is not in it",
                                 path, x->names[e], c->index_path);
    return PFX_SUCCESS;
}

/* The configuration's sizes against the device's limits, before the first
 * allocation: the largest weight against the largest allocation, all of
 * them against the device's memory (unless the runtime overcommits). */
pfx_status pfx_model_check_fits(pfx_runtime *rt, const char *dir, const pfx_model_config *cfg,
                                const pfx_model_params *p)
{
    const pfx_model_shape *s = &cfg->shape;
    const bool gpt2 = cfg->family == PFX_FAMILY_GPT2;
    const struct {
        const char *field;
        size_t rows;
        pfx_weight_role role;
    } big[] = {
        { "vocab_size", s->vocab, PFX_W_EMBED },
        { gpt2 ? "n_positions" : "", gpt2 ? s->max_positions : 0, PFX_W_POS },
        { gpt2 ? "n_inner" : "intermediate_size", s->intermediate, PFX_W_UP },
        { gpt2 ? "n_head" : "num_attention_heads", (s->heads + 2 * s->kv_heads) * s->head_dim,
          PFX_W_QKV },
    };
    size_t numel, bytes;
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
        if (pfx_mul_overflows(big[i].rows, s->hidden, &numel) ||
            !weight_bytes(p->storage, big[i].role, s->hidden, numel, &bytes) ||
            bytes > rt->info.max_alloc_bytes)
            return pfx_error(
                rt, PFX_ERROR_OUT_OF_MEMORY,
                "%s/config.json: a weight of %zu x %zu (%s x hidden size) exceeds the device's "
                "largest allocation (%llu bytes)",
                dir, big[i].rows, s->hidden, big[i].field,
                (unsigned long long)rt->info.max_alloc_bytes);
    /* all parameters; Q8_0: as blocks when the hidden size is whole blocks
     * (else most matrices stay float32), plus the float32 positions and
     * vectors (16 a layer bound them) */
    const bool blocks = p->storage == PFX_DTYPE_Q8_0 && s->hidden % 32 == 0;
    size_t extra = 0;
    bool over = !pfx_dtype_bytes(blocks                         ? PFX_DTYPE_Q8_0
                                 : p->storage == PFX_DTYPE_Q8_0 ? PFX_DTYPE_F32
                                                                : p->storage,
                                 blocks ? (s->parameters + 31) / 32 * 32 : s->parameters, &bytes);
    if (blocks)
        over = over || pfx_mul_overflows(s->max_positions + 16 * s->layers, s->hidden, &extra) ||
               pfx_mul_overflows(extra, sizeof(float), &extra) ||
               __builtin_add_overflow(bytes, extra, &bytes);
    if (!rt->allow_overcommit && (over || bytes > rt->info.global_mem_bytes))
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY,
                         "%s/config.json: %zu parameters (%s, %zu layers) exceed the device's "
                         "memory (%llu bytes)",
                         dir, s->parameters, s->model_type, s->layers,
                         (unsigned long long)rt->info.global_mem_bytes);
    return PFX_SUCCESS;
}

/* [rows, cols] host values written transposed into t ([cols, rows]). */
pfx_status pfx_model_write_transposed(pfx_runtime *rt, const float *src, size_t rows, size_t cols,
                                      pfx_tensor *t)
{
    float *tr = malloc(rows * cols * sizeof(float));
    if (!tr)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            tr[c * rows + r] = src[r * cols + c];
    pfx_status st = pfx_tensor_write(t, 0, rows * cols, tr);
    free(tr);
    return st;
}

/* Tensor i of f (checked: its shape is t's transposed) into t. */
static pfx_status load_transposed(pfx_model *m, const pfx_safetensors *f, size_t i, pfx_tensor *t)
{
    const size_t rows = t->shape[1], cols = t->shape[0];
    float *host = malloc(rows * cols * sizeof(float));
    if (!host)
        return pfx_error(m->rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    pfx_status st = pfx_st_read_f32_rt(m->rt, f, i, host, rows * cols);
    if (st == PFX_SUCCESS)
        st = pfx_model_write_transposed(m->rt, host, rows, cols, t);
    free(host);
    return st;
}

/* Loads every tensor of the open file f (read from path), which passed
 * check_file, and closes it. */
static pfx_status load_open(pfx_model *m, const ckpt_check *c, pfx_safetensors *f, const char *path)
{
    pfx_status st = PFX_SUCCESS;
    size_t n = pfx_safetensors_count(f);
    for (size_t i = 0; i < n && st == PFX_SUCCESS; i++) {
        pfx_st_info info;
        if ((st = pfx_safetensors_info(f, i, &info)) || skipped(m, info.name))
            continue;
        long k = find_name(c->spec_names, c->spec_refs, c->spec_count, info.name);
        if (k < 0) /* the file changed since it was checked */
            st = pfx_error(m->rt, PFX_ERROR_FORMAT, "%s: tensor '%.200s' appeared after the check",
                           path, info.name);
        else if ((st = pfx_model_held_transposed(m, c->specs[k].role)
                           ? load_transposed(m, f, i, m->tensors[k])
                           : pfx_st_load_index_rt(m->rt, f, i, m->tensors[k])))
            st = with_path(m->rt, st, path);
    }
    pfx_safetensors_close(&f);
    return st;
}

static pfx_status load_file(pfx_model *m, const ckpt_check *c, const char *path)
{
    pfx_safetensors *f = NULL;
    pfx_status st = pfx_st_open_rt(m->rt, path, &f);
    return st == PFX_SUCCESS ? load_open(m, c, f, path) : st;
}

/* The first tensor of the config that the checkpoint lacks when it holds
 * fewer tensors than the config needs (`available` names): only the specs
 * of the layers that cannot all be there are made, so a huge n_layer costs
 * nothing before it is refused. */
static pfx_status too_few_tensors(pfx_runtime *rt, const pfx_model_config *cfg, bool prefix,
                                  char **names, char ***refs, size_t available, const char *where)
{
    size_t fixed, per_layer;
    pfx_weight_count(cfg, &fixed, &per_layer);
    pfx_model_config part = *cfg;
    size_t layers = available < fixed || !per_layer ? 0 : (available - fixed) / per_layer + 1;
    part.shape.layers = layers < cfg->shape.layers ? layers : cfg->shape.layers;
    pfx_weight_spec *specs = NULL;
    size_t count = 0;
    pfx_status st = pfx_weight_specs(rt, &part, prefix, &specs, &count);
    for (size_t k = 0; st == PFX_SUCCESS && k < count; k++)
        if (find_name(names, refs, available, specs[k].name) < 0)
            st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor '%s' is missing (%s, %zu layers)",
                           where, specs[k].name, cfg->shape.model_type, cfg->shape.layers);
    free(specs);
    if (st == PFX_SUCCESS) /* cannot happen: more names than the checkpoint has */
        st = pfx_error(rt, PFX_ERROR_FORMAT,
                       "%s: %zu tensors, fewer than a %s model with %zu layers has", where,
                       available, cfg->shape.model_type, cfg->shape.layers);
    return st;
}

static pfx_status load_checkpoint(pfx_runtime *rt, const char *dir, const pfx_model_config *cfg,
                                  const pfx_model_params *p, pfx_model **out)
{
    char *single = pfx_join_path(dir, SINGLE_NAME), *index_path = pfx_join_path(dir, INDEX_NAME);
    pfx_st_index *index = NULL;
    pfx_safetensors *probe = NULL;
    pfx_model *m = NULL;
    pfx_weight_spec *specs = NULL;
    size_t spec_count = 0, *listed = NULL;
    bool *loaded = NULL;
    char **names = NULL, **spec_names = NULL, ***name_refs = NULL, ***spec_refs = NULL;
    pfx_status st = PFX_SUCCESS;
    if (!single || !index_path) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
        goto out;
    }
    const bool sharded = !file_exists(single) && file_exists(index_path);
    size_t available = 0;
    if (sharded) {
        unsigned char *buf = NULL;
        size_t size = 0;
        st = pfx_read_file(rt, index_path, INDEX_MAX_BYTES, &buf, &size);
        if (st == PFX_SUCCESS)
            st = pfx_st_index_parse(rt, buf, size, index_path, &index);
        free(buf);
        if (st != PFX_SUCCESS)
            goto out;
        available = index->count;
    } else {
        if ((st = pfx_st_open_rt(rt, single, &probe)))
            goto out;
        available = pfx_safetensors_count(probe);
        names = calloc(available ? available : 1, sizeof(char *));
        if (!names) {
            st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
            goto out;
        }
        for (size_t i = 0; i < available; i++) {
            pfx_st_info info;
            pfx_safetensors_info(probe, i, &info);
            names[i] = (char *)info.name;
        }
    }
    char **ckpt_names = sharded ? index->names : names;
    const char *where = sharded ? index_path : single;
    const bool prefix = names_have_gpt2_prefix(cfg, ckpt_names, available);
    if (!(name_refs = sort_names(ckpt_names, available))) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
        goto out;
    }
    /* The checkpoint against the config before the first allocation: a count
     * first (n_layer may be absurd), then every name, dtype and shape. */
    size_t fixed, per_layer, needed;
    pfx_weight_count(cfg, &fixed, &per_layer);
    if (available < fixed || pfx_mul_overflows(per_layer, cfg->shape.layers, &needed) ||
        needed > available - fixed) {
        st = too_few_tensors(rt, cfg, prefix, ckpt_names, name_refs, available, where);
        goto out;
    }
    if ((st = pfx_weight_specs(rt, cfg, prefix, &specs, &spec_count)))
        goto out;
    spec_names = calloc(spec_count, sizeof(char *));
    loaded = calloc(spec_count, sizeof(bool));
    if (sharded)
        listed = calloc(index->shard_count, sizeof(size_t));
    if (!spec_names || !loaded || (sharded && !listed)) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
        goto out;
    }
    for (size_t k = 0; k < spec_count; k++)
        spec_names[k] = specs[k].name;
    if (!(spec_refs = sort_names(spec_names, spec_count))) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
        goto out;
    }
    ckpt_check check = { cfg,   specs,     spec_count, spec_names, spec_refs,
                         index, name_refs, listed,     index_path, loaded };
    if (sharded) {
        for (size_t i = 0; i < index->count && st == PFX_SUCCESS; i++) {
            listed[index->shard[i]]++;
            if (!skipped_by(cfg, index->names[i]) &&
                find_name(spec_names, spec_refs, spec_count, index->names[i]) < 0)
                st = pfx_error(
                    rt, PFX_ERROR_FORMAT,
                    "%s: tensor '%.200s' is not part of a %s model with %zu layers (config.json)",
                    index_path, index->names[i], cfg->shape.model_type, cfg->shape.layers);
        }
        for (size_t s = 0; s < index->shard_count && st == PFX_SUCCESS; s++) {
            char *shard = pfx_join_path(dir, index->shards[s]);
            pfx_safetensors *f = NULL;
            st = shard ? pfx_st_open_rt(rt, shard, &f)
                       : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
            if (st == PFX_SUCCESS)
                st = check_file(rt, &check, f, shard, s);
            pfx_safetensors_close(&f);
            free(shard);
        }
    } else {
        st = check_file(rt, &check, probe, single, 0);
    }
    for (size_t k = 0; st == PFX_SUCCESS && k < spec_count; k++) {
        if (loaded[k])
            continue;
        long e = sharded ? find_name(index->names, name_refs, index->count, specs[k].name) : -1;
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor '%s' is missing (%s, %zu layers)",
                       e >= 0 ? index->shards[index->shard[e]] : where, specs[k].name,
                       cfg->shape.model_type, cfg->shape.layers);
    }
    if (st == PFX_SUCCESS)
        st = pfx_model_check_fits(rt, dir, cfg, p);
    if (st != PFX_SUCCESS)
        goto out;

    st = pfx_model_create_empty(rt, cfg, p, prefix, specs, spec_count, &m);
    specs = NULL; /* the model's now */
    if (st != PFX_SUCCESS)
        goto out;
    if (probe) {
        st = load_open(m, &check, probe, single);
        probe = NULL;
    } else {
        for (size_t s = 0; s < index->shard_count && st == PFX_SUCCESS; s++) {
            char *shard = pfx_join_path(dir, index->shards[s]);
            if (!shard) {
                st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
                break;
            }
            st = load_file(m, &check, shard);
            free(shard);
        }
    }
    if (st == PFX_SUCCESS)
        st = pfx_model_fuse_qkv(m);
    if (st == PFX_SUCCESS)
        st = pfx_model_weights_index(m);
    if (st == PFX_SUCCESS)
        st = pfx_runtime_finish(rt);
out:
    if (st != PFX_SUCCESS)
        pfx_model_destroy(&m);
    *out = m;
    free(specs);
    free(spec_names);
    free(spec_refs);
    free(name_refs);
    free(listed);
    free(loaded);
    free(names);
    pfx_safetensors_close(&probe);
    pfx_st_index_free(&index);
    free(single);
    free(index_path);
    return st;
}

pfx_status pfx_model_begin(pfx_runtime *rt, const char *fn, const char *dir, pfx_model **out)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", fn);
    if (!out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!dir)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: dir is NULL", fn);
    return PFX_SUCCESS;
}

pfx_status pfx_model_load(pfx_runtime *rt, const char *dir, const pfx_model_params *params,
                          pfx_model **out)
{
    pfx_status st = pfx_model_begin(rt, "model_load", dir, out);
    pfx_model_config cfg;
    pfx_model_params p;
    unsigned char *text = NULL;
    size_t size = 0;
    if (st == PFX_SUCCESS)
        st = pfx_model_config_read_text(rt, dir, &cfg, &text, &size);
    if (st == PFX_SUCCESS)
        st = pfx_model_check_params(rt, params, &p);
    if (st == PFX_SUCCESS)
        st = load_checkpoint(rt, dir, &cfg, &p, out);
    if (st == PFX_SUCCESS) {
        (*out)->config_text = text;
        (*out)->config_size = size;
    } else {
        free(text);
    }
    return st;
}

pfx_status pfx_model_get_shape(const pfx_model *model, pfx_model_shape *shape)
{
    if (!model || !shape)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "model_get_shape: %s is NULL", !model ? "model" : "shape");
    *shape = model->cfg.shape;
    return PFX_SUCCESS;
}

pfx_status pfx_model_get_params(const pfx_model *model, pfx_model_params *params)
{
    if (!model || !params)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "model_get_params: %s is NULL", !model ? "model" : "params");
    *params = model->p;
    return PFX_SUCCESS;
}
