/* A model written back as a Hugging Face folder (model.h, pfx_model_save):
 * config.json as it was read, the weights under their checkpoint names (the
 * Llama family's stacked q | k | v split back into q_proj, k_proj and
 * v_proj), one file or shards with the index save_pretrained writes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io_internal.h"
#include "model_internal.h"
#include "prefixcl/io.h"

#define SINGLE_NAME         "model.safetensors"
#define INDEX_NAME          "model.safetensors.index.json"
#define DEFAULT_SHARD_BYTES ((size_t)5000 * 1000 * 1000) /* save_pretrained's "5GB" */

/* One tensor of the folder: the model's own, or (a part of the stacked
 * q | k | v) a temporary device copy `copy` that the save releases. */
typedef struct save_item {
    pfx_named_tensor nt;
    size_t bytes;
    pfx_tensor *copy;
} save_item;

/* The rows of spec s (a q, k or v weight or bias) copied out of its layer's
 * stacked tensor on the device. */
static pfx_status split_part(pfx_model *m, const pfx_weight_spec *s, save_item *it)
{
    const pfx_model_shape *sh = &m->cfg.shape;
    const size_t QD = sh->heads * sh->head_dim, KVD = sh->kv_heads * sh->head_dim;
    const bool bias = s->role == PFX_W_Q_B || s->role == PFX_W_K_B || s->role == PFX_W_V_B;
    const pfx_weight_role base = bias ? (pfx_weight_role)(s->role - PFX_W_Q_B + PFX_W_Q) : s->role;
    const size_t first = base == PFX_W_Q ? 0 : base == PFX_W_K ? QD : QD + KVD;
    const size_t cols = s->ndim == 2 ? s->shape[1] : 1;
    const pfx_tensor *fused = m->fused_qkv[2 * s->layer + bias];
    pfx_status st = pfx_tensor_create(m->rt, fused->dtype, s->ndim, s->shape, &it->copy);
    if (st != PFX_SUCCESS)
        return st;
    cl_int err = clEnqueueCopyBuffer(m->rt->queue, fused->mem, it->copy->mem,
                                     first * cols * pfx_dtype_size(fused->dtype), 0,
                                     it->copy->bytes, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return pfx_cl_error(m->rt, err,
                            "model_save: a q, k, v part copied out of the stacked tensor");
    it->nt.tensor = it->copy;
    return PFX_SUCCESS;
}

/* The shard index: {"metadata": {"total_size": N}, "weight_map": {name: file}}. */
static pfx_status write_index(pfx_runtime *rt, const char *path, const save_item *items,
                              size_t count, const size_t *shard_of, size_t shards, size_t total)
{
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    bool ok = root && meta && map && cJSON_AddNumberToObject(meta, "total_size", (double)total);
    for (size_t i = 0; ok && i < count; i++) {
        char file[64];
        snprintf(file, sizeof(file), "model-%05zu-of-%05zu.safetensors", shard_of[i] + 1, shards);
        ok = cJSON_AddStringToObject(map, items[i].nt.name, file) != NULL;
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model_save: host memory");
    pfx_status st = pfx_write_file(rt, path, text, strlen(text));
    free(text);
    return st;
}

static pfx_status write_shards(pfx_model *m, const char *dir, save_item *items, size_t count,
                               size_t max_bytes)
{
    pfx_runtime *rt = m->rt;
    size_t *shard_of = malloc(count * sizeof(size_t));
    if (!shard_of)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model_save: host memory");
    size_t shards = 1, in_shard = 0, total = 0;
    for (size_t i = 0; i < count; i++) {
        if (in_shard && in_shard + items[i].bytes > max_bytes) {
            shards++;
            in_shard = 0;
        }
        shard_of[i] = shards - 1;
        in_shard += items[i].bytes;
        total += items[i].bytes;
    }
    pfx_named_tensor *nt = malloc(count * sizeof(*nt));
    pfx_status st =
        nt ? PFX_SUCCESS : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model_save: host memory");
    const pfx_st_metadata meta = { "format", "pt" };
    for (size_t s = 0, first = 0; st == PFX_SUCCESS && s < shards; s++) {
        size_t n = 0;
        while (first + n < count && shard_of[first + n] == s) {
            nt[n] = items[first + n].nt;
            n++;
        }
        char file[64];
        if (shards == 1)
            snprintf(file, sizeof(file), "%s", SINGLE_NAME);
        else
            snprintf(file, sizeof(file), "model-%05zu-of-%05zu.safetensors", s + 1, shards);
        char *path = pfx_join_path(dir, file);
        st = path ? pfx_safetensors_save(rt, path, nt, n, &meta, 1)
                  : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model_save: host memory");
        free(path);
        first += n;
    }
    if (st == PFX_SUCCESS && shards > 1) {
        char *path = pfx_join_path(dir, INDEX_NAME);
        st = path ? write_index(rt, path, items, count, shard_of, shards, total)
                  : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model_save: host memory");
        free(path);
    }
    if (st == PFX_SUCCESS)
        /* the other layout of an earlier save, which a loader would prefer or mix in */
        st = pfx_remove_stale(rt, "model_save", dir, shards > 1 ? SINGLE_NAME : INDEX_NAME);
    free(nt);
    free(shard_of);
    return st;
}

pfx_status pfx_model_save(pfx_model *model, const char *dir, const pfx_model_save_params *params)
{
    static const char fn[] = "model_save";
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: model is NULL", fn);
    pfx_runtime *rt = model->rt;
    if (!dir)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: dir is NULL", fn);
    if (!*dir)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: dir is empty", fn);
    if (model->p.storage == PFX_DTYPE_Q8_0)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: the model holds Q8_0 weights, which a checkpoint does not (save the "
                         "model loaded as float32, half or bfloat16)",
                         fn);
    const size_t max_bytes =
        params && params->max_shard_bytes ? params->max_shard_bytes : DEFAULT_SHARD_BYTES;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return pfx_error(rt, PFX_ERROR_IO, "%s: cannot create the folder '%s': %s", fn, dir,
                         strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return pfx_error(rt, PFX_ERROR_IO, "%s: '%s' is not a folder", fn, dir);
    save_item *items = calloc(model->spec_count, sizeof(*items));
    if (!items)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; st == PFX_SUCCESS && i < model->spec_count; i++) {
        const pfx_weight_spec *s = &model->specs[i];
        save_item *it = &items[i];
        it->nt.name = s->name;
        if (model->tensors[i])
            it->nt.tensor = model->tensors[i];
        else
            st = split_part(model, s, it);
        it->bytes =
            s->shape[0] * (s->ndim == 2 ? s->shape[1] : 1) * pfx_dtype_size(model->p.storage);
    }
    if (st == PFX_SUCCESS)
        st = write_shards(model, dir, items, model->spec_count, max_bytes);
    if (st == PFX_SUCCESS) {
        char *path = pfx_join_path(dir, "config.json");
        st = path ? pfx_write_file(rt, path, model->config_text, model->config_size)
                  : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
        free(path);
    }
    for (size_t i = 0; i < model->spec_count; i++)
        pfx_tensor_destroy(&items[i].copy);
    free(items);
    return st;
}

void pfx_model_set_config_text(pfx_model *m, unsigned char *text, size_t size)
{
    free(m->config_text);
    m->config_text = text;
    m->config_size = size;
}
