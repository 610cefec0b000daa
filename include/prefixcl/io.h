/*
 * prefixcl: files. safetensors (the format of PEFT and the Hugging Face hub)
 * and PEFT prefix-tuning adapter folders.
 *
 * safetensors layout: an 8-byte little-endian header length n, n bytes of
 * UTF-8 JSON (an object: tensor name -> {"dtype", "shape", "data_offsets":
 * [begin, end)} relative to the data section, plus an optional
 * "__metadata__" string -> string map), then the raw little-endian data.
 *
 * The reader validates the whole file when it opens it and never reads out of
 * bounds: a truncated file, a header length past the end of the file or above
 * 100 MB, bad UTF-8 or JSON, a header that is not an object, missing or extra
 * fields, an unknown dtype, a shape whose product overflows, offsets outside
 * the data section or reversed, a byte size that is not numel * dtype size,
 * overlapping tensors, holes (the data section must be covered exactly),
 * duplicate names and a "\u0000" escape in a name or metadata string are all
 * rejected. Statuses: PFX_ERROR_IO (cannot read or
 * write the file), PFX_ERROR_FORMAT (malformed content), PFX_ERROR_OUT_OF_RANGE
 * (offsets outside the data, absurd header length), PFX_ERROR_SIZE_OVERFLOW
 * (shape product), PFX_ERROR_INVALID_SHAPE (byte size disagrees with the
 * shape), PFX_ERROR_DTYPE_MISMATCH (unknown dtype). The message names the
 * file, the tensor and the field.
 *
 * Every file is read only when it is a regular file: a FIFO, a device or a
 * folder where a file is expected is PFX_ERROR_IO at once (never a read that
 * blocks). Symbolic links are followed wherever they point, also out of the
 * folder that names them: a model folder of the Hugging Face cache
 * (snapshots/<rev>/) holds links to files under blobs/, shards included.
 *
 * Calls without a runtime record their error detail in pfx_last_error(NULL)
 * (per thread); calls with one in pfx_last_error(rt).
 */
#ifndef PREFIXCL_IO_H
#define PREFIXCL_IO_H

#include <stdio.h>

#include "prefixcl/attention.h"
#include "prefixcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- output files */

/* Every file the library writes (safetensors, PEFT folders, optimizer state;
 * the kernel cache has its own temp-and-rename writer) and every file of the
 * prefixcl tool goes through this atomic replacement:
 *  - the bytes go to "<path>.tmp-<pid>-XXXXXX" in the destination's folder,
 *    created with mode 0666 less the umask (as fopen would);
 *  - commit checks every write, flushes, fsyncs, closes and renames it over
 *    path, so path holds the old content or the new one, never a part;
 *  - a destination that exists and is not a regular file (a device node, a
 *    FIFO, a folder) is refused with PFX_ERROR_IO and left as it is; a symbolic
 *    link to a regular file is replaced by the new file;
 *  - interrupted saves (Ctrl-C, SIGTERM, SIGKILL, a crash): the library
 *    installs no signal handler, so a killed process leaves its temporary
 *    file; the next save to the same path removes every "<path>.tmp-<pid>-*"
 *    whose process no longer exists. A failed save removes its own at once.
 * Errors go to pfx_last_error(NULL). */
typedef struct pfx_output_file pfx_output_file;

/* Starts replacing path. *out is NULL on failure (PFX_ERROR_IO,
 * PFX_ERROR_INVALID_ARGUMENT for an empty path). */
PFX_API pfx_status pfx_output_open(const char *path, pfx_output_file **out);
/* The stream to write to (NULL for NULL). */
PFX_API FILE *pfx_output_stream(pfx_output_file *file);
/* Finishes: PFX_ERROR_IO when any write, the flush, sync, close or rename
 * failed (the destination is then untouched). Releases *file, sets it NULL. */
PFX_API pfx_status pfx_output_commit(pfx_output_file **file);
/* Abandons the new content (removes the temporary file); NULL-safe. */
PFX_API void pfx_output_discard(pfx_output_file **file);

/* ---------------------------------------------------------------- input files */

/* Opens path for reading ("rb") only when it is a regular file (a symbolic
 * link to one included): a FIFO, a device or a folder is PFX_ERROR_IO "not
 * a regular file: PATH" at once, never a read that blocks or never ends.
 * The library reads every file this way; the prefixcl tool too. *out is
 * NULL on failure (PFX_ERROR_IO, PFX_ERROR_NULL_ARGUMENT,
 * PFX_ERROR_INVALID_ARGUMENT for an empty path); fclose it after. Errors
 * go to pfx_last_error(NULL). */
PFX_API pfx_status pfx_input_open(const char *path, FILE **out);

/* ---------------------------------------------------------------- safetensors */

/* Element types of the safetensors format. Every one is accepted by the
 * parser; the float readers convert F32, F16, BF16 and F64. */
typedef enum pfx_st_dtype {
    PFX_ST_F32 = 0,
    PFX_ST_F16,
    PFX_ST_BF16,
    PFX_ST_F64,
    PFX_ST_I64,
    PFX_ST_I32,
    PFX_ST_I16,
    PFX_ST_I8,
    PFX_ST_U64,
    PFX_ST_U32,
    PFX_ST_U16,
    PFX_ST_U8,
    PFX_ST_BOOL,
    PFX_ST_F8_E4M3,
    PFX_ST_F8_E5M2,
} pfx_st_dtype;

/* Most dimensions a tensor in a file may have. */
#define PFX_ST_MAX_DIMS 8
/* Largest header accepted (bytes). */
#define PFX_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* The format's name of a dtype ("F32", "BF16"); "?" for a bad value. */
PFX_API const char *pfx_st_dtype_name(pfx_st_dtype dtype);
/* Bytes per element; 0 for a bad value. */
PFX_API size_t pfx_st_dtype_size(pfx_st_dtype dtype);

/* A parsed, validated file held in host memory. */
typedef struct pfx_safetensors pfx_safetensors;

/* Reads and validates the whole file. On failure *out is NULL and
 * pfx_last_error(NULL) names the file and the problem. */
PFX_API pfx_status pfx_safetensors_open(const char *path, pfx_safetensors **out);

/* Same, from `size` bytes in memory (copied; `data` may be freed afterwards).
 * `label` names the source in messages (NULL: "<memory>"). */
PFX_API pfx_status pfx_safetensors_open_memory(const void *data, size_t size, const char *label,
                                               pfx_safetensors **out);

/* Releases the file and sets *f to NULL; NULL-safe. */
PFX_API void pfx_safetensors_close(pfx_safetensors **f);

/* Number of tensors (0 for NULL). */
PFX_API size_t pfx_safetensors_count(const pfx_safetensors *f);

typedef struct pfx_st_info {
    const char *name; /* owned by the file */
    pfx_st_dtype dtype;
    unsigned ndim; /* 0 for a scalar */
    size_t shape[PFX_ST_MAX_DIMS];
    size_t numel; /* product of shape (1 for a scalar) */
    size_t bytes; /* numel * dtype size */
} pfx_st_info;

/* Tensor i in header order. PFX_ERROR_OUT_OF_RANGE when i >= count. */
PFX_API pfx_status pfx_safetensors_info(const pfx_safetensors *f, size_t i, pfx_st_info *info);

/* Index of the tensor named `name`, or -1 (also for NULL arguments). */
PFX_API long pfx_safetensors_find(const pfx_safetensors *f, const char *name);

/* Raw little-endian bytes of a tensor (owned by the file), or NULL. */
PFX_API const void *pfx_safetensors_data(const pfx_safetensors *f, size_t i);

/* Copies tensor `name` into dst as float (F16, BF16 and F64 converted).
 * `count` must equal its number of elements (PFX_ERROR_INVALID_SHAPE);
 * a missing name is PFX_ERROR_INVALID_ARGUMENT, an integer dtype
 * PFX_ERROR_DTYPE_MISMATCH. */
PFX_API pfx_status pfx_safetensors_read_f32(const pfx_safetensors *f, const char *name, float *dst,
                                            size_t count);

/* __metadata__ entries: count, entry i (key and value owned by the file),
 * and the value of a key (NULL when absent). */
PFX_API size_t pfx_safetensors_metadata_count(const pfx_safetensors *f);
PFX_API pfx_status pfx_safetensors_metadata(const pfx_safetensors *f, size_t i, const char **key,
                                            const char **value);
PFX_API const char *pfx_safetensors_metadata_get(const pfx_safetensors *f, const char *key);

/* Copies tensor `name` into the device tensor dst, whose shape must equal the
 * file's (PFX_ERROR_INVALID_SHAPE otherwise; a file scalar matches shape [1]).
 * Any float dtype in the file goes into an F32, F16 or BF16 tensor (rounded to
 * nearest even where narrower) or a Q8_0 one (quantized; finite values only).
 * Errors go to
 * pfx_last_error(rt). */
PFX_API pfx_status pfx_safetensors_load_tensor(pfx_runtime *rt, const pfx_safetensors *f,
                                               const char *name, pfx_tensor *dst);

/* Creates a device tensor of `dtype` with the file's shape (1 to 4
 * dimensions; a scalar becomes [1]) and loads it. The caller owns *out
 * (pfx_tensor_destroy); *out is NULL on failure. */
PFX_API pfx_status pfx_safetensors_create_tensor(pfx_runtime *rt, const pfx_safetensors *f,
                                                 const char *name, pfx_dtype dtype,
                                                 pfx_tensor **out);

/* One tensor to save: either a device tensor (saved in its dtype: F32, F16 or
 * BF16), or host floats with a shape, stored as `dtype` (PFX_DTYPE_F32, F16
 * or BF16). */
typedef struct pfx_named_tensor {
    const char *name;
    const pfx_tensor *tensor;   /* device tensor, or NULL for host data */
    const float *host;          /* host data when tensor is NULL */
    unsigned ndim;              /* host data: 0 (scalar) to PFX_MAX_DIMS */
    size_t shape[PFX_MAX_DIMS]; /* host data */
    pfx_dtype dtype;            /* host data: storage type in the file */
} pfx_named_tensor;

typedef struct pfx_st_metadata {
    const char *key;
    const char *value;
} pfx_st_metadata;

/* Writes a safetensors file atomically (see "Output files"): header padded with spaces to a multiple of 8 bytes, tensors
 * in the order given, contiguous. Names must be non-empty, unique, valid
 * UTF-8 and not "__metadata__"; metadata keys unique. rt may be NULL when
 * every item is host data; errors go to pfx_last_error(rt). On failure the
 * destination is untouched and no temporary file remains (a killed process's
 * is removed by the next save, see "Output files"). */
PFX_API pfx_status pfx_safetensors_save(pfx_runtime *rt, const char *path,
                                        const pfx_named_tensor *items, size_t count,
                                        const pfx_st_metadata *metadata, size_t metadata_count);

/* ------------------------------------------------- PEFT prefix-tuning folders */

/* adapter_config.json of a PREFIX_TUNING adapter. */
typedef struct pfx_peft_config {
    size_t num_virtual_tokens;         /* P */
    size_t num_layers;                 /* L */
    size_t token_dim;                  /* Hkv * D (PEFT's view: num_attention_heads * D) */
    size_t num_attention_heads;        /* the heads PEFT splits token_dim into */
    size_t num_transformer_submodules; /* 1: decoder-only (encoder-decoder adapters are refused) */
    size_t encoder_hidden_size;        /* the MLP's hidden size; 0 if absent */
    bool prefix_projection;            /* trained through the MLP */
    bool inference_mode;
    char task_type[64];                /* "" if absent or null */
    char base_model_name_or_path[512]; /* "" if absent or null */
    pfx_st_dtype dtype;                /* of prompt_embeddings (set by the loaders) */
} pfx_peft_config;

/* Reads and checks dir/adapter_config.json (at most 1 MiB): one UTF-8 JSON
 * object and nothing after it but white space, no key twice, no "\u0000"
 * escape, peft_type "PREFIX_TUNING", positive num_virtual_tokens, num_layers,
 * token_dim, num_attention_heads (each at most 2^31), task_type shorter than
 * 64 bytes and base_model_name_or_path shorter than 512.
 * num_transformer_submodules must be 1 (absent means 1): encoder-decoder
 * adapters (2) are PFX_ERROR_UNSUPPORTED. Errors: PFX_ERROR_INVALID_ARGUMENT
 * (an empty dir), PFX_ERROR_IO, PFX_ERROR_FORMAT, PFX_ERROR_UNSUPPORTED
 * (another peft_type, two submodules), in pfx_last_error(NULL). */
PFX_API pfx_status pfx_peft_read_config(const char *dir, pfx_peft_config *config);

/* Same checks on `size` bytes of adapter_config.json in memory; `label` names
 * the source in messages (NULL: "<memory>"). */
PFX_API pfx_status pfx_peft_read_config_memory(const void *data, size_t size, const char *label,
                                               pfx_peft_config *config);

/* Loads a PEFT prefix-tuning folder into per-layer prefixes.
 * dir/adapter_model.safetensors must hold "prompt_embeddings" (the name PEFT's
 * get_peft_model_state_dict writes) of shape (num_virtual_tokens,
 * num_layers * 2 * token_dim) in F32, F16 or BF16: the baked prefixes, viewed
 * as [P][L][2][Hkv][D]. Layer l's keys[l][hk][t][d] = Y[t][l][0][hk][d] and
 * values[l][hk][t][d] = Y[t][l][1][hk][d].
 * Adapters trained with prefix_projection keep only baked embeddings in this
 * file when PEFT saved them in training mode (the usual case); a file whose
 * prompt_embeddings is the MLP's input table (num_virtual_tokens, token_dim)
 * is refused (PFX_ERROR_UNSUPPORTED): only baked adapters are read.
 * dir must not be empty (PFX_ERROR_INVALID_ARGUMENT).
 *   kv_heads   Hkv; 0 takes num_attention_heads from the config (PEFT's own
 *              view). token_dim must be a multiple of it; D = token_dim / Hkv.
 *   keys, values  arrays of num_layers entries (must equal the config's).
 *              A NULL entry is allocated here (F32, [Hkv, P, D]) and owned by
 *              the caller afterwards; a non-NULL entry must be an F32 or F16
 *              tensor of shape [Hkv, P, D] and is overwritten; no tensor may
 *              appear twice in keys and values together, and the two arrays
 *              must not overlap (keys == values included): PFX_ERROR_ALIASING.
 *              On failure the
 *              entries allocated here are destroyed and set back to NULL;
 *              caller tensors may have been partly written.
 *   config     filled when not NULL.
 * Errors go to pfx_last_error(rt). */
PFX_API pfx_status pfx_peft_load_prefixes(pfx_runtime *rt, const char *dir, size_t kv_heads,
                                          pfx_tensor **keys, pfx_tensor **values, size_t num_layers,
                                          pfx_peft_config *config);

/* The writer accepts exactly what pfx_peft_read_config reads back. */
typedef struct pfx_peft_save_params {
    const char *task_type;               /* NULL: "CAUSAL_LM"; UTF-8, < 64 bytes */
    const char *base_model_name_or_path; /* NULL: null; UTF-8, < 512 bytes */
    size_t num_attention_heads;          /* 0: Hkv (the heads the prefixes are split into) */
    size_t encoder_hidden_size;          /* 0: token_dim */
} pfx_peft_save_params;

PFX_API void pfx_peft_default_save_params(pfx_peft_save_params *params);

/* Writes baked prefixes as a PEFT prefix-tuning folder (created if missing):
 * adapter_config.json (peft_type PREFIX_TUNING, prefix_projection false,
 * inference_mode true, num_transformer_submodules 1) and
 * adapter_model.safetensors with prompt_embeddings (P, L*2*Hkv*D) in F32.
 * keys[l] and values[l] are [Hkv, P, D] tensors (F32 or F16), all of one
 * shape. params may be NULL. Each file is written atomically. A string or
 * count the reader would refuse is PFX_ERROR_INVALID_ARGUMENT, an empty dir
 * too. */
PFX_API pfx_status pfx_peft_save_prefixes(pfx_runtime *rt, const char *dir, pfx_tensor *const *keys,
                                          pfx_tensor *const *values, size_t num_layers,
                                          const pfx_peft_save_params *params);

/* ------------------------------------------------------------- gains files */

/* gains.safetensors, the trained attention gains the training jobs write
 * (pretrain.h, tune.h: out_dir/gains.safetensors) and the adapter bank
 * reads (generate.h). Metadata: "format" PFX_GAINS_FORMAT, "gain_mode" off |
 * linear | tanh, "structured" true | false, "gain_ramp" (the warm-up factor
 * r the job had reached when it stopped, the one its final evaluation used,
 * in [0, 1]; absent: 1; the bank applies the gains at 1 whatever it says).
 * Tensors: "gains" [L, H] exactly when gain_mode is not off, "dim_gains"
 * [L, H, D] exactly when structured, nothing else.
 * Legacy form (what prefixcl tune wrote before it wrote the above, same
 * format name): no "structured" metadata, one tensor "layers.L.gain" [H] per
 * layer and nothing else, gain_mode linear or tanh, gain_ramp; read as
 * "gains" [L, H], not structured. */
#define PFX_GAINS_FORMAT "prefixcl-gains-1"

/* What a gains file holds for a model of L layers, H heads, head size D. */
typedef struct pfx_gains_values {
    pfx_gain_mode gain_mode; /* OFF: no "gains" tensor */
    bool structured;         /* a "dim_gains" tensor */
    float gain_ramp;         /* in [0, 1]: the ramp r when training stopped */
    float *gains;            /* caller's [L * H], written with a gain mode */
    float *dim_gains;        /* caller's [L * H * D], written when structured */
} pfx_gains_values;

/* Reads the gains file f (named `label` in messages) for a model of L
 * layers, H heads, head size D into out (its gains and dim_gains the
 * caller's). PFX_ERROR_NULL_ARGUMENT: f, label, out, out->gains or
 * out->dim_gains NULL; PFX_ERROR_INVALID_ARGUMENT: L, H or D 0;
 * PFX_ERROR_FORMAT: format, gain_mode, structured or gain_ramp, a tensor
 * missing or extra; PFX_ERROR_INVALID_SHAPE: a tensor's shape (named, with
 * the model's); PFX_ERROR_DTYPE_MISMATCH: an integer tensor;
 * PFX_ERROR_NOT_FINITE: a NaN or infinite value (tensor and index). Errors
 * go to pfx_last_error(NULL); on failure the values written are
 * meaningless. */
PFX_API pfx_status pfx_gains_file_read(const pfx_safetensors *f, const char *label, size_t L,
                                       size_t H, size_t D, pfx_gains_values *out);

#ifdef __cplusplus
}
#endif

#endif
