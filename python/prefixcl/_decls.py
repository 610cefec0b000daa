"""The part of include/prefixcl/*.h this package calls, written as C.

Prototypes, struct members and enum values are kept here as C text, read by
_capi.py into ctypes. tests/test_headers.py compiles them against the
headers: every prototype is declared again after `#include
<prefixcl/prefixcl.h>` (a C compiler refuses a declaration that conflicts),
every struct member's offset and size and every struct's size is compared
with the compiler's, and every enum's constants and struct's member names
are compared with the header's text. A header that changes without this file
fails that test.
"""

# Opaque handles (struct types the headers never define).
HANDLES = (
    "pfx_runtime pfx_tensor pfx_model pfx_context pfx_tokenizer pfx_safetensors "
    "pfx_adapter_bank pfx_kv_cache pfx_scheduler pfx_optimizer"
).split()

# enum name -> ((constant, value), ...): the constants of each enum, all of them.
ENUMS = {
    "pfx_status": (
        ("PFX_SUCCESS", 0),
        ("PFX_ERROR_NULL_ARGUMENT", -1),
        ("PFX_ERROR_INVALID_ARGUMENT", -2),
        ("PFX_ERROR_INVALID_SHAPE", -3),
        ("PFX_ERROR_SIZE_OVERFLOW", -4),
        ("PFX_ERROR_OUT_OF_RANGE", -5),
        ("PFX_ERROR_DTYPE_MISMATCH", -6),
        ("PFX_ERROR_RUNTIME_MISMATCH", -7),
        ("PFX_ERROR_ALIASING", -8),
        ("PFX_ERROR_NOT_FINITE", -9),
        ("PFX_ERROR_UNSUPPORTED", -10),
        ("PFX_ERROR_OUT_OF_MEMORY", -11),
        ("PFX_ERROR_NO_DEVICE", -12),
        ("PFX_ERROR_DEVICE_NOT_FOUND", -13),
        ("PFX_ERROR_BUILD_FAILED", -14),
        ("PFX_ERROR_OPENCL", -15),
        ("PFX_ERROR_CLBLAST", -16),
        ("PFX_ERROR_IO", -17),
        ("PFX_ERROR_FORMAT", -18),
        ("PFX_ERROR_BUSY", -19),
    ),
    "pfx_device_type": (
        ("PFX_DEVICE_CPU", 1),
        ("PFX_DEVICE_GPU", 2),
        ("PFX_DEVICE_ACCELERATOR", 3),
        ("PFX_DEVICE_OTHER", 4),
    ),
    "pfx_gemm_backend": (
        ("PFX_GEMM_AUTO", 0),
        ("PFX_GEMM_CLBLAST", 1),
        ("PFX_GEMM_HOST", 2),
    ),
    "pfx_dtype": (
        ("PFX_DTYPE_F32", 0),
        ("PFX_DTYPE_F16", 1),
        ("PFX_DTYPE_BF16", 2),
        ("PFX_DTYPE_Q8_0", 3),
    ),
    "pfx_gain_mode": (
        ("PFX_GAIN_OFF", 0),
        ("PFX_GAIN_LINEAR", 1),
        ("PFX_GAIN_TANH", 2),
    ),
    "pfx_special_token": (
        ("PFX_TOKEN_BOS", 0),
        ("PFX_TOKEN_EOS", 1),
        ("PFX_TOKEN_PAD", 2),
        ("PFX_TOKEN_UNK", 3),
    ),
    "pfx_st_dtype": (
        ("PFX_ST_F32", 0),
        ("PFX_ST_F16", 1),
        ("PFX_ST_BF16", 2),
        ("PFX_ST_F64", 3),
        ("PFX_ST_I64", 4),
        ("PFX_ST_I32", 5),
        ("PFX_ST_I16", 6),
        ("PFX_ST_I8", 7),
        ("PFX_ST_U64", 8),
        ("PFX_ST_U32", 9),
        ("PFX_ST_U16", 10),
        ("PFX_ST_U8", 11),
        ("PFX_ST_BOOL", 12),
        ("PFX_ST_F8_E4M3", 13),
        ("PFX_ST_F8_E5M2", 14),
    ),
    "pfx_pretrain_data": (
        ("PFX_PRETRAIN_DATA_AUTO", 0),
        ("PFX_PRETRAIN_DATA_TEXT", 1),
        ("PFX_PRETRAIN_DATA_SHARDS", 2),
        ("PFX_PRETRAIN_DATA_RAW_U16", 3),
    ),
    "pfx_finish": (
        ("PFX_FINISH_LENGTH", 0),
        ("PFX_FINISH_STOP", 1),
        ("PFX_FINISH_CANCELLED", 2),
        ("PFX_FINISH_ERROR", 3),
    ),
}

# Macros the package relies on: name -> value.
MACROS = {
    "PFX_ENCODE_ADD_SPECIAL": 1,
    "PFX_DECODE_SKIP_SPECIAL": 1,
    "PFX_ATTENTION_TOPK_MAX": 32,
    "PFX_MODEL_MAX_EOS": 8,
    "PFX_ST_MAX_DIMS": 8,
    "PFX_MAX_DIMS": 4,
    "PFX_LABEL_IGNORE": -100,
    "PFX_SCHEDULER_MAX_STOPS": 16,
    "PFX_TOP_LOGPROBS_MAX": 20,
}

# Function pointer types: name -> prototype with `(*)` for the name.
CALLBACKS = {
    "pfx_tune_step_fn": "void (*)(const pfx_tune_step *step, void *user)",
    "pfx_pretrain_step_fn": "void (*)(const pfx_pretrain_step *step, void *user)",
    "pfx_eval_progress_fn": "void (*)(const pfx_eval_progress *progress, void *user)",
    "pfx_token_fn": "void (*)(void *user, size_t request, int32_t token)",
    "pfx_sched_token_fn": "bool (*)(void *user, int32_t token)",
    "pfx_sched_done_fn": "void (*)(void *user, pfx_finish finish, const char *error)",
    "pfx_sched_logprobs_fn": "void (*)(void *user, const pfx_token_logprobs *logprobs)",
}

# Structs in dependency order: name -> members, one declaration each
# (function pointer members written as `void *name`: same size and place).
STRUCTS = {
    "pfx_device_info": """
        unsigned platform_index; unsigned device_index;
        char platform_name[128]; char device_name[128]; char vendor[128];
        char driver_version[64]; char device_version[64]; char opencl_c_version[64];
        pfx_device_type type; bool unified_memory; unsigned compute_units; unsigned clock_mhz;
        uint64_t global_mem_bytes; uint64_t max_alloc_bytes; uint64_t local_mem_bytes;
        size_t max_work_group_size; unsigned native_float_width;
        bool has_fp16; bool has_fp64; bool has_subgroups; bool has_nv_attributes;
        bool has_amd_attributes; bool has_intel_attributes;""",
    "pfx_runtime_params": """
        const char *device; const char *cache_dir; bool disable_cache;
        const char *kernel_tuning; bool allow_overcommit; pfx_gemm_backend gemm;
        bool gemm_untuned;""",
    "pfx_memory_stats": """
        size_t live_bytes; size_t peak_bytes; size_t live_buffers; size_t workspace_bytes;""",
    "pfx_model_params": "pfx_dtype storage;",
    "pfx_model_shape": """
        char model_type[32]; size_t layers; size_t heads; size_t kv_heads; size_t head_dim;
        size_t hidden; size_t intermediate; size_t vocab; size_t max_positions;
        bool tied_embeddings; size_t parameters; int32_t eos_ids[8]; size_t eos_count;
        float embd_pdrop; float attn_pdrop; float resid_pdrop;""",
    "pfx_context_params": """
        size_t max_batch; size_t max_tokens; size_t max_prefix_len; size_t logits_chunk_rows;
        bool recompute;""",
    "pfx_model_batch": """
        size_t batch; size_t tokens; const int32_t *ids; const int32_t *lens;
        const int32_t *labels;""",
    "pfx_model_prefix": """
        size_t prefix_len; pfx_tensor *const *keys; pfx_tensor *const *values;
        const int32_t *bank_index; pfx_gain_mode gain_mode; const float *gains;
        const float *dim_gains; float gain_ramp;""",
    "pfx_st_info": """
        const char *name; pfx_st_dtype dtype; unsigned ndim; size_t shape[8]; size_t numel;
        size_t bytes;""",
    "pfx_named_tensor": """
        const char *name; const pfx_tensor *tensor; const float *host; unsigned ndim;
        size_t shape[4]; pfx_dtype dtype;""",
    "pfx_st_metadata": "const char *key; const char *value;",
    "pfx_peft_config": """
        size_t num_virtual_tokens; size_t num_layers; size_t token_dim;
        size_t num_attention_heads; size_t num_transformer_submodules;
        size_t encoder_hidden_size; bool prefix_projection; bool inference_mode;
        char task_type[64]; char base_model_name_or_path[512]; pfx_st_dtype dtype;""",
    "pfx_peft_save_params": """
        const char *task_type; const char *base_model_name_or_path;
        size_t num_attention_heads; size_t encoder_hidden_size;""",
    "pfx_gains_values": """
        pfx_gain_mode gain_mode; bool structured; float gain_ramp; float *gains;
        float *dim_gains;""",
    "pfx_data_parallel": """
        size_t rank; size_t ranks; void *reduce; void *any; void *check; void *shard;
        void *user;""",
    "pfx_encoder_param_counts": """
        size_t trainable; size_t mlp; size_t baked_per_position; size_t baked;""",
    "pfx_example_rule": "size_t max_length; size_t special; int32_t eos_id;",
    "pfx_tune_config": """
        const char *model_dir; const char *tokenizer_dir; const char *data_path;
        const char *eval_path; const char *out_dir; size_t prefix_len; size_t hidden;
        size_t epochs; size_t steps; size_t batch; size_t accumulate; size_t max_length;
        bool no_eos; float lr; float gain_lr; pfx_gain_mode gain_mode; uint32_t gain_ramp_steps;
        float weight_decay; float max_grad_norm; uint32_t warmup_steps; uint64_t seed;
        float dropout; pfx_dtype storage; size_t checkpoint_every; size_t eval_every;
        bool recompute; bool resume; size_t stop_after; volatile sig_atomic_t *stop_flag;
        pfx_data_parallel dist;""",
    "pfx_tune_step": """
        size_t step; size_t steps; uint64_t epoch; size_t max_length; double loss;
        float grad_norm; bool skipped; float lr_factor; float gain_ramp; float lr;
        double eval_loss; double build_s; double tokens_per_s; double eta_s; pfx_context *ctx;
        const pfx_model_prefix *prefix;""",
    "pfx_tune_result": """
        size_t steps; size_t steps_done; size_t first_step; bool stopped; double *losses;
        float *grad_norms; float *lrs; double *eval_losses; double eval_before;
        double eval_after; size_t train_examples; size_t eval_examples; size_t eval_tokens;
        size_t max_length; pfx_example_rule rule; pfx_model_shape shape;
        pfx_encoder_param_counts counts; size_t gain_params; float *gains; float *mass_before;
        float *mass_after; double seconds; char base_model[512];""",
    "pfx_layer_head": "size_t layer; size_t head;",
    "pfx_pretrain_config": """
        const char *model_dir; const char *config_dir; const char *tokenizer_dir;
        const char *data_path; const char *eval_path; pfx_pretrain_data data_format;
        const char *out_dir; size_t block; size_t batch; size_t accumulate; size_t steps;
        size_t epochs; float lr; float gain_lr; float weight_decay; bool no_decay_norms;
        float max_grad_norm; uint32_t warmup_steps; float min_lr_ratio;
        pfx_gain_mode gain_mode; bool structured_gain; uint32_t gain_ramp_steps;
        float gain_init; float gain_decay_fraction; const pfx_layer_head *gain_heads;
        size_t gain_head_count; const char *freeze; size_t eval_every; size_t eval_blocks;
        size_t checkpoint_every; bool recompute; uint64_t seed; float dropout; bool resume;
        size_t stop_after; volatile sig_atomic_t *stop_flag; pfx_data_parallel dist;""",
    "pfx_pretrain_step": """
        size_t step; size_t steps; uint64_t epoch; double loss; float grad_norm; bool skipped;
        float lr_factor; float gain_ramp; double eval_loss; double build_s;
        double tokens_per_s; double eta_s; pfx_context *ctx; const pfx_model_prefix *prefix;""",
    "pfx_pretrain_result": """
        size_t steps; size_t steps_done; size_t first_step; bool stopped; double *losses;
        float *grad_norms; float *lrs; double *eval_losses; float *gains; size_t train_blocks;
        size_t eval_blocks; size_t tokens_per_step; size_t trained_weights;
        size_t trained_values; pfx_model_shape shape; char config_filled[160];
        double seconds;""",
    "pfx_eval_config": """
        const char *model_dir; const char *tokenizer_dir; const char *adapter_path;
        const char *data_path; size_t batch; size_t max_length; bool no_eos; pfx_dtype storage;
        volatile sig_atomic_t *stop_flag;""",
    "pfx_eval_progress": """
        size_t pass; size_t passes; size_t batch; size_t batches; size_t tokens; double loss;""",
    "pfx_eval_result": """
        double loss; double perplexity; double adapter_loss; double adapter_perplexity;
        size_t passes; size_t passes_done; size_t batches; size_t batches_done; size_t examples;
        size_t tokens; size_t max_length; pfx_example_rule rule; size_t prefix_len;
        bool stopped; double seconds;""",
    "pfx_logit_bias": "int32_t token; float bias;",
    "pfx_token_logprobs": """
        float logprob; size_t top_count; int32_t top_ids[20]; float top_logprobs[20];""",
    "pfx_sampling": """
        float temperature; size_t top_k; float top_p; size_t max_new_tokens;
        const int32_t *stop; size_t stop_count; float min_p; float presence_penalty;
        float frequency_penalty; float repetition_penalty; const pfx_logit_bias *logit_bias;
        size_t logit_bias_count;""",
    "pfx_request": """
        const int32_t *prompt; size_t prompt_len; int32_t adapter; uint64_t seed; int32_t *out;
        size_t out_len; bool end;""",
    "pfx_generate_stats": """
        size_t prefill_tokens; size_t decode_tokens; double prefill_seconds;
        double decode_seconds; double build_seconds;""",
    "pfx_sched_request": """
        const int32_t *prompt; size_t prompt_len; int32_t adapter; pfx_sampling sampling;
        uint64_t seed; pfx_sched_token_fn on_token; pfx_sched_done_fn on_done; void *user;
        pfx_sched_logprobs_fn on_logprobs; size_t top_logprobs;""",
    "pfx_scheduler_params": "size_t slots; size_t max_len; size_t queue; size_t prompt_cache_bytes; "
                            "pfx_dtype kv_dtype;",
    "pfx_scheduler_stats": """
        size_t queued; size_t running; size_t slots; uint64_t prefill_steps;
        uint64_t decode_steps; uint64_t prefill_tokens; uint64_t generated_tokens;
        uint64_t occupied_slot_steps; double step_seconds; uint64_t failed_steps;
        uint64_t prompt_cache_hits; uint64_t prompt_cache_tokens;""",
}

# Every function the package calls, as the headers declare it.
FUNCTIONS = """
const char *pfx_version(void);
const char *pfx_status_string(pfx_status status);

pfx_status pfx_device_count(size_t *count);
pfx_status pfx_device_list(pfx_device_info *infos, size_t capacity, size_t *count);
pfx_status pfx_device_select(const char *selector, pfx_device_info *info);
void pfx_runtime_default_params(pfx_runtime_params *params);
pfx_status pfx_runtime_create(pfx_runtime **out, const pfx_runtime_params *params);
void pfx_runtime_destroy(pfx_runtime **rt);
const pfx_device_info *pfx_runtime_device(const pfx_runtime *rt);
pfx_gemm_backend pfx_runtime_gemm_backend(const pfx_runtime *rt);
const char *pfx_gemm_backend_name(pfx_gemm_backend backend);
pfx_status pfx_runtime_finish(pfx_runtime *rt);
const char *pfx_last_error(const pfx_runtime *rt);
pfx_status pfx_runtime_memory(const pfx_runtime *rt, pfx_memory_stats *stats);
const char *pfx_runtime_cache_dir(const pfx_runtime *rt);

pfx_status pfx_tensor_create(pfx_runtime *rt, pfx_dtype dtype, unsigned ndim, const size_t *shape, pfx_tensor **out);
void pfx_tensor_destroy(pfx_tensor **t);
pfx_dtype pfx_tensor_dtype(const pfx_tensor *t);
unsigned pfx_tensor_ndim(const pfx_tensor *t);
size_t pfx_tensor_dim(const pfx_tensor *t, unsigned i);
size_t pfx_tensor_numel(const pfx_tensor *t);
pfx_status pfx_tensor_write(pfx_tensor *t, size_t offset, size_t count, const float *src);
pfx_status pfx_tensor_read(const pfx_tensor *t, size_t offset, size_t count, float *dst);

pfx_status pfx_model_read_config(const char *dir, pfx_model_shape *shape);
pfx_status pfx_model_load(pfx_runtime *rt, const char *dir, const pfx_model_params *params, pfx_model **out);
pfx_status pfx_model_init(pfx_runtime *rt, const char *dir, const pfx_model_params *params, uint64_t seed, pfx_model **out);
void pfx_model_destroy(pfx_model **model);
pfx_status pfx_model_get_shape(const pfx_model *model, pfx_model_shape *shape);
pfx_status pfx_context_create(pfx_model *model, const pfx_context_params *params, pfx_context **out);
void pfx_context_destroy(pfx_context **ctx);
pfx_status pfx_context_get_params(const pfx_context *ctx, pfx_context_params *params);
pfx_model *pfx_context_model(const pfx_context *ctx);
pfx_status pfx_model_forward(pfx_context *ctx, const pfx_model_batch *batch, const pfx_model_prefix *prefix, pfx_tensor *logits);
pfx_status pfx_model_last_logits(pfx_context *ctx, const pfx_model_batch *batch, const pfx_model_prefix *prefix, pfx_tensor *logits);
pfx_status pfx_model_loss(pfx_context *ctx, const pfx_model_batch *batch, const pfx_model_prefix *prefix, double *loss);
pfx_status pfx_model_head_stats(pfx_context *ctx, const pfx_model_batch *batch, const pfx_model_prefix *prefix, uint32_t top_k, float *prefix_mass, float *entropy, float *top_k_mass);
pfx_status pfx_model_hidden_states(pfx_context *ctx, const pfx_model_batch *batch, const pfx_model_prefix *prefix, pfx_tensor *hidden);
pfx_status pfx_model_attention_probs(pfx_context *ctx, const pfx_model_batch *batch, const pfx_model_prefix *prefix, size_t item, size_t layer, size_t head, pfx_tensor *probs);

pfx_status pfx_tokenizer_load(const char *dir, pfx_tokenizer **out);
void pfx_tokenizer_free(pfx_tokenizer **tok);
size_t pfx_tokenizer_vocab_size(const pfx_tokenizer *tok);
int32_t pfx_tokenizer_token_to_id(const pfx_tokenizer *tok, const char *token);
const char *pfx_tokenizer_id_to_token(const pfx_tokenizer *tok, int32_t id, size_t *len);
bool pfx_tokenizer_is_special(const pfx_tokenizer *tok, int32_t id);
int32_t pfx_tokenizer_special_id(const pfx_tokenizer *tok, pfx_special_token which);
pfx_status pfx_tokenizer_encode(const pfx_tokenizer *tok, const char *text, size_t len, unsigned flags, int32_t **ids, size_t *count);
pfx_status pfx_tokenizer_decode(const pfx_tokenizer *tok, const int32_t *ids, size_t count, unsigned flags, char **text, size_t *len);

pfx_status pfx_safetensors_open(const char *path, pfx_safetensors **out);
void pfx_safetensors_close(pfx_safetensors **f);
size_t pfx_safetensors_count(const pfx_safetensors *f);
pfx_status pfx_safetensors_info(const pfx_safetensors *f, size_t i, pfx_st_info *info);
long pfx_safetensors_find(const pfx_safetensors *f, const char *name);
const void *pfx_safetensors_data(const pfx_safetensors *f, size_t i);
pfx_status pfx_safetensors_read_f32(const pfx_safetensors *f, const char *name, float *dst, size_t count);
size_t pfx_safetensors_metadata_count(const pfx_safetensors *f);
pfx_status pfx_safetensors_metadata(const pfx_safetensors *f, size_t i, const char **key, const char **value);
pfx_status pfx_safetensors_save(pfx_runtime *rt, const char *path, const pfx_named_tensor *items, size_t count, const pfx_st_metadata *metadata, size_t metadata_count);
size_t pfx_st_dtype_size(pfx_st_dtype dtype);

pfx_status pfx_peft_read_config(const char *dir, pfx_peft_config *config);
pfx_status pfx_peft_load_prefixes(pfx_runtime *rt, const char *dir, size_t kv_heads, pfx_tensor **keys, pfx_tensor **values, size_t num_layers, pfx_peft_config *config);
void pfx_peft_default_save_params(pfx_peft_save_params *params);
pfx_status pfx_peft_save_prefixes(pfx_runtime *rt, const char *dir, pfx_tensor *const *keys, pfx_tensor *const *values, size_t num_layers, const pfx_peft_save_params *params);
pfx_status pfx_gains_file_read(const pfx_safetensors *f, const char *label, size_t L, size_t H, size_t D, pfx_gains_values *out);

void pfx_tune_default_config(pfx_tune_config *cfg);
pfx_status pfx_tune_run(pfx_runtime *rt, const pfx_tune_config *cfg, pfx_tune_step_fn on_step, void *user, pfx_tune_result *result);
void pfx_tune_result_free(pfx_tune_result *result);
void pfx_pretrain_default_config(pfx_pretrain_config *cfg);
pfx_status pfx_pretrain_run(pfx_runtime *rt, const pfx_pretrain_config *cfg, pfx_pretrain_step_fn on_step, void *user, pfx_pretrain_result *result);
void pfx_pretrain_result_free(pfx_pretrain_result *result);
void pfx_eval_default_config(pfx_eval_config *cfg);
pfx_status pfx_eval_run(pfx_runtime *rt, const pfx_eval_config *cfg, pfx_eval_progress_fn on_batch, void *user, pfx_eval_result *result);

pfx_status pfx_adapter_bank_create(pfx_model *model, size_t capacity, pfx_adapter_bank **out);
void pfx_adapter_bank_destroy(pfx_adapter_bank **bank);
pfx_status pfx_adapter_bank_add(pfx_adapter_bank *bank, const char *path, int32_t *entry);
pfx_status pfx_adapter_prefix_len(const char *path, size_t *prefix_len);
size_t pfx_adapter_bank_count(const pfx_adapter_bank *bank);
size_t pfx_adapter_bank_prefix_len(const pfx_adapter_bank *bank);
pfx_status pfx_adapter_bank_prefix(const pfx_adapter_bank *bank, const int32_t *bank_index, size_t batch, pfx_model_prefix *prefix);
pfx_status pfx_kv_cache_create(pfx_model *model, size_t slots, size_t max_len, pfx_kv_cache **out);
pfx_status pfx_kv_cache_create_dtype(pfx_model *model, size_t slots, size_t max_len, pfx_dtype dtype, pfx_kv_cache **out);
pfx_dtype pfx_kv_cache_dtype(const pfx_kv_cache *cache);
void pfx_kv_cache_destroy(pfx_kv_cache **cache);
pfx_status pfx_sample_token(const float *logits, size_t vocab, const pfx_sampling *s, uint64_t *rng, int32_t *token);
pfx_status pfx_sample_next(const float *logits, size_t vocab, const pfx_sampling *s, const int32_t *prompt, size_t prompt_len, const int32_t *generated, size_t generated_len, uint64_t *rng, int32_t *token, pfx_token_logprobs *logprobs);
pfx_status pfx_generate(pfx_context *ctx, pfx_kv_cache *cache, const pfx_adapter_bank *bank, pfx_request *requests, size_t count, const pfx_sampling *sampling, pfx_token_fn on_token, void *user, pfx_generate_stats *stats);

pfx_status pfx_scheduler_create(pfx_model *model, const pfx_adapter_bank *bank, const pfx_scheduler_params *params, pfx_scheduler **out);
pfx_status pfx_scheduler_submit(pfx_scheduler *s, const pfx_sched_request *request, uint64_t *id);
pfx_status pfx_scheduler_cancel(pfx_scheduler *s, uint64_t id);
pfx_status pfx_scheduler_get_stats(pfx_scheduler *s, pfx_scheduler_stats *out);
void pfx_scheduler_destroy(pfx_scheduler **s);
"""
