/* Tiny Hugging Face model folders written by the tests themselves: random
 * weights in the real tensor names and orientations (what save_pretrained
 * writes), config.json, model.safetensors or a sharded checkpoint, and the
 * same weights as a reference model (tests/reference/model_ref.h). */
#ifndef PFX_TEST_MODEL_FOLDER_H
#define PFX_TEST_MODEL_FOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reference/model_ref.h"

#define TF_MAX_LAYERS  4
#define TF_MAX_TENSORS 80

typedef struct tf_tensor {
    char name[96];
    char dtype[8]; /* "F32", "F16", "BF16", "I32" as written */
    unsigned ndim;
    size_t shape[2];
    float *data; /* rounded to the file's dtype when written */
} tf_tensor;

typedef struct tf_model {
    ref_model_config rc;
    bool tied;
    char model_type[16];
    char extra_json[512]; /* more config fields, ", \"key\": value" */
    tf_tensor t[TF_MAX_TENSORS];
    size_t count;
    ref_model_layer layer[TF_MAX_LAYERS];
    ref_model_weights w;
} tf_model;

/* Random GPT-2 (rc.family REF_MODEL_GPT2) or Llama-family model of the sizes
 * in rc (layers, hidden, heads, kv_heads, head_dim, inner, vocab,
 * max_positions, eps, act, qkv_bias, rope); `tied` for the Llama family. */
void tf_model_init(tf_model *m, const ref_model_config *rc, bool tied, const char *model_type,
                   uint64_t seed);
void tf_model_free(tf_model *m);

/* The tensor named `name`, or NULL. */
tf_tensor *tf_find(tf_model *m, const char *name);

/* Writes dir/config.json (with extra_json) and the weights: one
 * model.safetensors, or `shards` > 1 files plus model.safetensors.index.json.
 * Each tensor is stored in its dtype (data rounded to it first, so the
 * reference sees what the file holds). Returns 0 on success. */
int tf_write(tf_model *m, const char *dir, unsigned shards);

/* Writes only dir/config.json from a JSON text. */
int tf_write_config_text(const char *dir, const char *json);

/* A fresh temporary folder (mkdtemp) under $TMPDIR; caller frees, removes with tf_rmdir. */
char *tf_tempdir(const char *tag);
void tf_rmdir(const char *dir);

#endif
