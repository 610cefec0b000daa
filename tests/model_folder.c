/* Tiny Hugging Face model folders for the model tests (model_folder.h). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include "model_folder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "half.h"
#include "reference/random.h"

static float *add(tf_model *m, ref_rng *rng, const char *name, size_t d0, size_t d1, float center,
                  float spread)
{
    if (m->count >= TF_MAX_TENSORS)
        abort();
    tf_tensor *t = &m->t[m->count++];
    snprintf(t->name, sizeof(t->name), "%s", name);
    snprintf(t->dtype, sizeof(t->dtype), "F32");
    t->ndim = d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    size_t n = d0 * (d1 ? d1 : 1);
    t->data = malloc(n * sizeof(float));
    if (!t->data)
        abort();
    ref_rng_fill(rng, t->data, n, center - spread, center + spread);
    return t->data;
}

/* A linear weight of fan-in `in`: standard deviation about 1/sqrt(in). */
static float lin_spread(size_t in)
{
    return 1.7f / sqrtf((float)in);
}

void tf_model_init(tf_model *m, const ref_model_config *rc, bool tied, const char *model_type,
                   uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->rc = *rc;
    if (rc->layers > TF_MAX_LAYERS)
        abort();
    snprintf(m->model_type, sizeof(m->model_type), "%s", model_type);
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    const size_t C = rc->hidden, I = rc->inner, V = rc->vocab, QD = rc->heads * rc->head_dim,
                 KVD = rc->kv_heads * rc->head_dim;
    char name[96];
    if (rc->family == REF_MODEL_GPT2) {
        m->tied = true;
        m->w.wte = add(m, &rng, "transformer.wte.weight", V, C, 0.0f, 1.0f);
        m->w.wpe = add(m, &rng, "transformer.wpe.weight", rc->max_positions, C, 0.0f, 0.5f);
        for (size_t l = 0; l < rc->layers; l++) {
            ref_model_layer *y = &m->layer[l];
#define G(field, suffix, d0, d1, c, s)                                                             \
    snprintf(name, sizeof(name), "transformer.h.%zu.%s", l, suffix);                               \
    y->field = add(m, &rng, name, d0, d1, c, s)
            G(ln_1_w, "ln_1.weight", C, 0, 1.0f, 0.2f);
            G(ln_1_b, "ln_1.bias", C, 0, 0.0f, 0.1f);
            G(c_attn_w, "attn.c_attn.weight", C, 3 * C, 0.0f, lin_spread(C));
            G(c_attn_b, "attn.c_attn.bias", 3 * C, 0, 0.0f, 0.1f);
            G(attn_proj_w, "attn.c_proj.weight", C, C, 0.0f, lin_spread(C));
            G(attn_proj_b, "attn.c_proj.bias", C, 0, 0.0f, 0.1f);
            G(ln_2_w, "ln_2.weight", C, 0, 1.0f, 0.2f);
            G(ln_2_b, "ln_2.bias", C, 0, 0.0f, 0.1f);
            G(c_fc_w, "mlp.c_fc.weight", C, I, 0.0f, lin_spread(C));
            G(c_fc_b, "mlp.c_fc.bias", I, 0, 0.0f, 0.1f);
            G(mlp_proj_w, "mlp.c_proj.weight", I, C, 0.0f, lin_spread(I));
            G(mlp_proj_b, "mlp.c_proj.bias", C, 0, 0.0f, 0.1f);
#undef G
        }
        m->w.final_w = add(m, &rng, "transformer.ln_f.weight", C, 0, 1.0f, 0.2f);
        m->w.final_b = add(m, &rng, "transformer.ln_f.bias", C, 0, 0.0f, 0.1f);
    } else {
        m->tied = tied;
        m->w.wte = add(m, &rng, "model.embed_tokens.weight", V, C, 0.0f, 1.0f);
        for (size_t l = 0; l < rc->layers; l++) {
            ref_model_layer *y = &m->layer[l];
#define G(field, suffix, d0, d1, c, s)                                                             \
    snprintf(name, sizeof(name), "model.layers.%zu.%s", l, suffix);                                \
    y->field = add(m, &rng, name, d0, d1, c, s)
            G(input_norm_w, "input_layernorm.weight", C, 0, 1.0f, 0.2f);
            G(q_w, "self_attn.q_proj.weight", QD, C, 0.0f, lin_spread(C));
            if (rc->qkv_bias) {
                G(q_b, "self_attn.q_proj.bias", QD, 0, 0.0f, 0.1f);
            }
            G(k_w, "self_attn.k_proj.weight", KVD, C, 0.0f, lin_spread(C));
            if (rc->qkv_bias) {
                G(k_b, "self_attn.k_proj.bias", KVD, 0, 0.0f, 0.1f);
            }
            G(v_w, "self_attn.v_proj.weight", KVD, C, 0.0f, lin_spread(C));
            if (rc->qkv_bias) {
                G(v_b, "self_attn.v_proj.bias", KVD, 0, 0.0f, 0.1f);
            }
            G(o_w, "self_attn.o_proj.weight", C, QD, 0.0f, lin_spread(QD));
            G(post_norm_w, "post_attention_layernorm.weight", C, 0, 1.0f, 0.2f);
            G(gate_w, "mlp.gate_proj.weight", I, C, 0.0f, lin_spread(C));
            G(up_w, "mlp.up_proj.weight", I, C, 0.0f, lin_spread(C));
            G(down_w, "mlp.down_proj.weight", C, I, 0.0f, lin_spread(I));
#undef G
        }
        m->w.final_w = add(m, &rng, "model.norm.weight", C, 0, 1.0f, 0.2f);
        if (!tied)
            m->w.lm_head = add(m, &rng, "lm_head.weight", V, C, 0.0f, lin_spread(C));
    }
    m->w.layer = m->layer;
}

void tf_model_free(tf_model *m)
{
    for (size_t i = 0; i < m->count; i++)
        free(m->t[i].data);
    memset(m, 0, sizeof(*m));
}

tf_tensor *tf_find(tf_model *m, const char *name)
{
    for (size_t i = 0; i < m->count; i++)
        if (strcmp(m->t[i].name, name) == 0)
            return &m->t[i];
    return NULL;
}

static size_t elem_size(const char *dtype)
{
    return strcmp(dtype, "F32") == 0 || strcmp(dtype, "I32") == 0 ? 4 : 2;
}

static size_t numel(const tf_tensor *t)
{
    return t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
}

/* Rounds the data to the dtype and appends its little-endian bytes. */
static void encode(tf_tensor *t, unsigned char *out)
{
    size_t n = numel(t);
    for (size_t i = 0; i < n; i++) {
        float f = t->data[i];
        uint32_t u;
        if (strcmp(t->dtype, "F16") == 0) {
            uint16_t h = pfx_float_to_half(f);
            t->data[i] = pfx_half_to_float(h);
            out[2 * i] = (unsigned char)h;
            out[2 * i + 1] = (unsigned char)(h >> 8);
        } else if (strcmp(t->dtype, "BF16") == 0) {
            memcpy(&u, &f, 4);
            u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
            uint16_t h = (uint16_t)(u >> 16);
            uint32_t back = (uint32_t)h << 16;
            memcpy(&t->data[i], &back, 4);
            out[2 * i] = (unsigned char)h;
            out[2 * i + 1] = (unsigned char)(h >> 8);
        } else {
            if (strcmp(t->dtype, "I32") == 0) {
                int32_t k = (int32_t)lrintf(f * 100.0f);
                memcpy(&u, &k, 4);
            } else {
                memcpy(&u, &f, 4);
            }
            for (int b = 0; b < 4; b++)
                out[4 * i + b] = (unsigned char)(u >> (8 * b));
        }
    }
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p)
        abort();
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* One safetensors file of the tensors [first, first + count). */
static int write_file(tf_model *m, const char *path, size_t first, size_t count)
{
    size_t cap = 256 + count * 200, used = 0, offset = 0;
    char *hdr = malloc(cap);
    if (!hdr)
        return -1;
    used += (size_t)snprintf(hdr + used, cap - used, "{");
    for (size_t i = first; i < first + count; i++) {
        tf_tensor *t = &m->t[i];
        size_t bytes = numel(t) * elem_size(t->dtype);
        used +=
            (size_t)snprintf(hdr + used, cap - used, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu",
                             i > first ? "," : "", t->name, t->dtype, t->shape[0]);
        if (t->ndim == 2)
            used += (size_t)snprintf(hdr + used, cap - used, ",%zu", t->shape[1]);
        used += (size_t)snprintf(hdr + used, cap - used, "],\"data_offsets\":[%zu,%zu]}", offset,
                                 offset + bytes);
        offset += bytes;
    }
    used += (size_t)snprintf(hdr + used, cap - used, "}");
    while (used % 8)
        hdr[used++] = ' ';
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(hdr);
        return -1;
    }
    unsigned char len[8];
    for (int b = 0; b < 8; b++)
        len[b] = (unsigned char)((uint64_t)used >> (8 * b));
    int rc = fwrite(len, 1, 8, fp) == 8 && fwrite(hdr, 1, used, fp) == used ? 0 : -1;
    for (size_t i = first; rc == 0 && i < first + count; i++) {
        tf_tensor *t = &m->t[i];
        size_t bytes = numel(t) * elem_size(t->dtype);
        unsigned char *buf = malloc(bytes);
        if (!buf) {
            rc = -1;
            break;
        }
        encode(t, buf);
        if (fwrite(buf, 1, bytes, fp) != bytes)
            rc = -1;
        free(buf);
    }
    if (fclose(fp) != 0)
        rc = -1;
    free(hdr);
    return rc;
}

static const char *act_name(ref_activation a)
{
    static const char *const names[] = { "gelu_new", "gelu", "relu", "silu" };
    return names[a];
}

int tf_write_config_text(const char *dir, const char *json)
{
    char *path = join(dir, "config.json");
    FILE *fp = fopen(path, "wb");
    free(path);
    if (!fp)
        return -1;
    int rc = fputs(json, fp) >= 0 ? 0 : -1;
    return fclose(fp) == 0 ? rc : -1;
}

static int write_config(const tf_model *m, const char *dir)
{
    const ref_model_config *c = &m->rc;
    char json[2048];
    if (c->family == REF_MODEL_GPT2) {
        snprintf(json, sizeof(json),
                 "{\"model_type\": \"gpt2\", \"n_embd\": %zu, \"n_layer\": %zu, \"n_head\": %zu, "
                 "\"n_inner\": %zu, "
                 "\"vocab_size\": %zu, \"n_positions\": %zu, \"activation_function\": \"%s\", "
                 "\"layer_norm_epsilon\": %.17g, \"tie_word_embeddings\": true%s}\n",
                 c->hidden, c->layers, c->heads, c->inner, c->vocab, c->max_positions,
                 act_name(c->act), c->eps, m->extra_json);
    } else {
        char rope[256] = "";
        if (c->rope.llama3)
            snprintf(rope, sizeof(rope),
                     ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.17g, "
                     "\"low_freq_factor\": %.17g, "
                     "\"high_freq_factor\": %.17g, \"original_max_position_embeddings\": %.17g}",
                     c->rope.factor, c->rope.low_freq_factor, c->rope.high_freq_factor,
                     c->rope.original_max_position_embeddings);
        snprintf(
            json, sizeof(json),
            "{\"model_type\": \"%s\", \"hidden_size\": %zu, \"intermediate_size\": %zu, "
            "\"num_hidden_layers\": %zu, \"num_attention_heads\": %zu, \"num_key_value_heads\": "
            "%zu, "
            "\"head_dim\": %zu, \"vocab_size\": %zu, \"max_position_embeddings\": %zu, "
            "\"rms_norm_eps\": %.17g, "
            "\"hidden_act\": \"silu\", \"tie_word_embeddings\": %s, \"rope_theta\": %.17g%s%s}\n",
            m->model_type, c->hidden, c->inner, c->layers, c->heads, c->kv_heads, c->head_dim,
            c->vocab, c->max_positions, c->eps, m->tied ? "true" : "false", c->rope.theta, rope,
            m->extra_json);
    }
    return tf_write_config_text(dir, json);
}

int tf_write(tf_model *m, const char *dir, unsigned shards)
{
    if (write_config(m, dir) != 0)
        return -1;
    if (shards <= 1) {
        char *path = join(dir, "model.safetensors");
        int rc = write_file(m, path, 0, m->count);
        free(path);
        return rc;
    }
    size_t per = (m->count + shards - 1) / shards;
    char *index = malloc(256 + m->count * 160);
    if (!index)
        return -1;
    size_t used = (size_t)sprintf(index, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    int rc = 0;
    for (unsigned s = 0; s < shards && rc == 0; s++) {
        char file[64];
        snprintf(file, sizeof(file), "model-%05u-of-%05u.safetensors", s + 1, shards);
        size_t first = s * per,
               n = first >= m->count ? 0 : (m->count - first < per ? m->count - first : per);
        for (size_t i = first; i < first + n; i++)
            used += (size_t)sprintf(index + used, "%s\"%s\": \"%s\"", i ? ", " : "", m->t[i].name,
                                    file);
        char *path = join(dir, file);
        rc = write_file(m, path, first, n);
        free(path);
    }
    sprintf(index + used, "}}\n");
    if (rc == 0) {
        char *path = join(dir, "model.safetensors.index.json");
        FILE *fp = fopen(path, "wb");
        free(path);
        rc = fp && fputs(index, fp) >= 0 ? 0 : -1;
        if (fp && fclose(fp) != 0)
            rc = -1;
    }
    free(index);
    return rc;
}

char *tf_tempdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *p = malloc(512);
    if (!p)
        abort();
    snprintf(p, 512, "%s/pfx-%s-XXXXXX", base && base[0] ? base : "/tmp", tag);
    if (!mkdtemp(p))
        abort();
    return p;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tf_rmdir(const char *dir)
{
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}
