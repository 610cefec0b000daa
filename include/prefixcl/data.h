/*
 * prefixcl: training data sets. A file of examples, tokenized once, served
 * as padded batches for causal-LM training.
 *
 * Formats:
 *  - plain text: one example a line (empty lines are skipped, a trailing
 *    "\r" dropped; the bytes go to the tokenizer as they are);
 *  - JSONL: one JSON object a line (blank lines skipped), either
 *    {"text": "..."} or {"prompt": "...", "completion": "..."}; other fields
 *    are ignored. Prompt + completion is supervised fine-tuning: the loss
 *    counts the completion's tokens only.
 *
 * An example's tokens: the post-processor's leading tokens (BOS ...) when
 * add_special, the text (or prompt, then completion, each encoded alone), the
 * post-processor's trailing tokens, EOS when append_eos; then cut to
 * max_length. Only the head of a long line that the cut keeps is tokenized
 * (grown until its complete pre-tokenizer pieces give the tokens kept), so
 * a line of any length costs memory and time for max_length tokens, beside
 * the file itself. Labels are HF's: the token id where the loss counts it, -100
 * elsewhere (leading special tokens and prompt, padding); the model shifts
 * them (logits at t predict label t+1). Examples that leave no counted label
 * at a position t >= 1 teach nothing and are skipped (counted in the info).
 *
 * Errors name the file and the line: PFX_ERROR_IO (cannot read it),
 * PFX_ERROR_FORMAT (a line that is not a JSON object, lacks the fields or
 * holds a non-string, invalid UTF-8 in a JSONL line, no example at all).
 * Messages go to pfx_last_error(NULL). A data set serves one thread at a
 * time (pfx_dataset_next_batch keeps the epoch's order).
 */
#ifndef PREFIXCL_DATA_H
#define PREFIXCL_DATA_H

#include "prefixcl/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The label of tokens the loss does not count (HF's ignore index). */
#define PFX_LABEL_IGNORE (-100)

typedef enum pfx_data_format {
    PFX_DATA_AUTO = 0, /* JSONL for names ending .jsonl or .json, else text */
    PFX_DATA_TEXT,
    PFX_DATA_JSONL,
} pfx_data_format;

typedef struct pfx_dataset_options {
    pfx_data_format format;
    size_t max_length; /* tokens kept per example, >= 2 */
    bool add_special;  /* the post-processor's tokens (BOS ...) */
    bool append_eos;   /* EOS after each example (the tokenizer must have one) */
    bool shuffle;      /* a new order every epoch, from seed and epoch */
    uint64_t seed;
} pfx_dataset_options;

/* Defaults: AUTO, max_length 512, add_special, no EOS, shuffle, seed 0.
 * (The jobs that read examples, tune.h and eval.h, build them by one rule
 * of their own: pfx_example_rule.) */
PFX_API void pfx_dataset_default_options(pfx_dataset_options *options);

typedef struct pfx_dataset pfx_dataset;

/* The tokens an example keeps in the jobs that read examples (tune.h,
 * eval.h) unless told otherwise, fewer where the model's positions less the
 * prefix leave fewer. */
#define PFX_DATA_DEFAULT_MAX_LENGTH 128

/* How tune and eval build examples, one rule for both so that the same
 * adapter and file give the same loss in either: the post-processor's
 * special tokens (add_special), EOS after each example unless the job's
 * config says no_eos (or the tokenizer has none), then cut at max_length.
 * The EOS is what PEFT's causal-LM examples and TRL's SFTTrainer append in
 * training; a loss computed as model(**tokenizer(text), labels=ids) has
 * none (no_eos). What a job used, in its result: */
typedef struct pfx_example_rule {
    size_t max_length; /* tokens kept of an example */
    size_t special;    /* tokens the post-processor adds to a text (BOS ...) */
    int32_t eos_id;    /* appended to every example; -1: none */
} pfx_example_rule;

/* Reads and tokenizes a whole file. The tokenizer is only used here (the
 * data set keeps its padding id). options NULL: the defaults. */
PFX_API pfx_status pfx_dataset_load(const char *path, const pfx_tokenizer *tok,
                                    const pfx_dataset_options *options, pfx_dataset **out);

/* The same from bytes in memory; `label` names them in messages (NULL:
 * "<memory>") and decides PFX_DATA_AUTO. */
PFX_API pfx_status pfx_dataset_load_memory(const void *data, size_t size, const char *label,
                                           const pfx_tokenizer *tok,
                                           const pfx_dataset_options *options, pfx_dataset **out);

/* Releases the data set and sets *ds to NULL; NULL-safe. */
PFX_API void pfx_dataset_free(pfx_dataset **ds);

typedef struct pfx_dataset_info {
    size_t examples;  /* kept */
    size_t skipped;   /* examples without a counted label at t >= 1 */
    size_t truncated; /* examples cut to max_length */
    size_t tokens;    /* tokens of the kept examples */
    size_t counted;   /* labels the loss counts (t >= 1) */
    size_t longest;   /* longest kept example */
    size_t max_length;
    int32_t pad_id; /* the tokenizer's pad, else EOS, else 0 */
} pfx_dataset_info;

PFX_API pfx_status pfx_dataset_get_info(const pfx_dataset *ds, pfx_dataset_info *info);

/* Example i in file order: its ids and labels (owned by the data set). */
PFX_API pfx_status pfx_dataset_example(const pfx_dataset *ds, size_t i, const int32_t **ids,
                                       const int32_t **labels, size_t *len);

/* Where an iteration stands: `index` examples of epoch `epoch` served.
 * Plain numbers: save them with a checkpoint, restore them to resume. */
typedef struct pfx_data_position {
    uint64_t epoch;
    uint64_t index;
} pfx_data_position;

/* The next batch from *pos, which it advances. Rows are examples in the
 * epoch's order; an epoch ends with a short batch (*rows < batch) and the
 * next call starts the following epoch. Writes ids and labels as [batch, N]
 * with N = *width, the longest example of the batch, right-padded (pad id,
 * label -100), and lengths[batch] (0 for rows past *rows). ids and labels
 * must hold batch * max_length values. */
PFX_API pfx_status pfx_dataset_next_batch(pfx_dataset *ds, pfx_data_position *pos, size_t batch,
                                          int32_t *ids, int32_t *lengths, int32_t *labels,
                                          size_t *rows, size_t *width);

/* Batches per epoch (the last one short when batch does not divide). */
PFX_API size_t pfx_dataset_batches_per_epoch(const pfx_dataset *ds, size_t batch);

/* Moves `count` examples (chosen from the seed) into a new data set *eval,
 * which is not shuffled; ds keeps the others, both in file order.
 * PFX_ERROR_OUT_OF_RANGE unless 0 < count < the number of examples. */
PFX_API pfx_status pfx_dataset_hold_out(pfx_dataset *ds, size_t count, pfx_dataset **eval);

/* ---- pre-training blocks ----
 * A stream of token ids cut into blocks of `block` tokens, every position a
 * label (no padding); the tail that fills no block is dropped (what nanoGPT
 * and transformers' group_texts do). The stream is either a data set's
 * examples joined end to end in file order, held in memory (pfx_blocks_pack:
 * load it with append_eos, so that documents stay apart, and a max_length
 * that keeps them whole), or token shards joined in name order, memory-mapped
 * (pfx_blocks_open_shards). Both serve the same blocks in the same order for
 * the same tokens. Errors go to pfx_last_error(NULL). */
typedef struct pfx_blocks pfx_blocks;

/* PFX_ERROR_OUT_OF_RANGE when the data does not fill one block. */
PFX_API pfx_status pfx_blocks_pack(const pfx_dataset *ds, size_t block, pfx_blocks **out);
PFX_API void pfx_blocks_free(pfx_blocks **b);
PFX_API size_t pfx_blocks_count(const pfx_blocks *b);
/* Moves the last `tail` blocks into *out (a held-out evaluation slice; both
 * share the tokens); at least one stays (PFX_ERROR_OUT_OF_RANGE). */
PFX_API pfx_status pfx_blocks_split(pfx_blocks *b, size_t tail, pfx_blocks **out);
/* Block i in order: `block` ids owned by b. Blocks packed in memory only
 * (PFX_ERROR_UNSUPPORTED for shards: pfx_blocks_read copies either). */
PFX_API pfx_status pfx_blocks_get(const pfx_blocks *b, size_t i, const int32_t **ids);
/* Copies block i (in order) into ids[block]. */
PFX_API pfx_status pfx_blocks_read(const pfx_blocks *b, size_t i, int32_t *ids);
/* Ids at or past `vocab` refused from now on: blocks in memory are checked
 * at once (PFX_ERROR_INVALID_SHAPE naming the block), shards as each block
 * is read (PFX_ERROR_FORMAT naming the shard and the byte offset), so that
 * opening them does not read the corpus. 0: unchecked (the default). */
PFX_API pfx_status pfx_blocks_set_vocab(pfx_blocks *b, size_t vocab);
/* The next rows from *pos, which it advances: blocks in the order of epoch
 * pos->epoch, *rows of them (fewer than batch at the end of an epoch; the
 * next call starts the following one) as [rows, block] ids. The order is a
 * permutation from seed and the epoch, computed per position (a keyed
 * Feistel network walked onto [0, count)): no table, no set-up, any size.
 * A position is plain numbers: save it with a checkpoint, restore it to
 * resume. */
PFX_API pfx_status pfx_blocks_next_batch(pfx_blocks *b, pfx_data_position *pos, size_t batch,
                                         uint64_t seed, int32_t *ids, size_t *rows);
/* The same batch read by one of `ranks` processes: only its rows
 * [rows * rank / ranks, rows * (rank + 1) / ranks) are read, to the same
 * places of ids; the position advances by the whole batch, as on every
 * rank. rank 0 of 1 is pfx_blocks_next_batch. */
PFX_API pfx_status pfx_blocks_next_rows(pfx_blocks *b, pfx_data_position *pos, size_t batch,
                                        uint64_t seed, size_t rank, size_t ranks, int32_t *ids,
                                        size_t *rows);

/* ---- token shards ----
 * llm.c's layout: a header of 256 little-endian int32 (magic, version, the
 * token count; the rest reserved, written 0 and not read), then the tokens,
 * documents separated by the end-of-text token:
 *   magic 20240520, version 1: uint16 tokens (vocabularies up to 65,536);
 *   magic 20240801, version 7: uint32 tokens (llm.c's Llama 3 shards).
 * nanoGPT's train.bin and val.bin are uint16 tokens without a header
 * (PFX_SHARD_RAW_U16). */
#define PFX_SHARD_MAGIC        20240520
#define PFX_SHARD_MAGIC_U32    20240801
#define PFX_SHARD_HEADER_BYTES 1024
/* Tokens a shard holds at most (the header's count is an int32). */
#define PFX_SHARD_MAX_TOKENS 2147483647u

typedef enum pfx_shard_format {
    PFX_SHARD_LLMC = 0, /* llm.c's header, uint16 or uint32 tokens */
    PFX_SHARD_RAW_U16,  /* nanoGPT's headerless uint16 tokens */
} pfx_shard_format;

/* Opens the files that `pattern` matches (glob(3), in name order; a plain
 * name matches itself), regular files only, memory-mapped, their tokens
 * joined in that order and cut into blocks of `block` tokens. Only the
 * headers are read: opening takes the same time for any corpus. A block
 * read copies from the mappings and gives the pages it touched back, so the
 * resident memory stays flat for a corpus of any size. Every header field
 * is checked: PFX_ERROR_IO (no file matches, one cannot be read or is not a
 * regular file), PFX_ERROR_FORMAT naming the shard and the offset (a magic
 * or version not above, a negative count, a size that disagrees with the
 * count: truncated or trailing bytes; raw-u16 of an odd size),
 * PFX_ERROR_OUT_OF_RANGE (fewer tokens than one block). */
PFX_API pfx_status pfx_blocks_open_shards(const char *pattern, pfx_shard_format format,
                                          size_t block, pfx_blocks **out);

typedef struct pfx_shard_write_info {
    size_t shards;      /* files written: <prefix>_000000.bin, ... */
    size_t tokens;      /* in all */
    size_t documents;   /* examples of the data set */
    size_t token_bytes; /* 2 or 4 */
    size_t stale;       /* <prefix>_NNNNNN.bin files numbered right after the last one
                         * written, from an earlier run: a pattern would match them too */
} pfx_shard_write_info;

/* Tokens a shard holds by default (llm.c's fineweb.py: 10^8). */
#define PFX_SHARD_DEFAULT_TOKENS 100000000u

/* Tokenizes a text or JSONL file as the pre-training job does (data.h's
 * loader with append_eos, documents whole), a piece of whole lines at a time
 * (64 MiB: the memory does not grow with the file), and writes the tokens
 * as shards
 * <prefix>_000000.bin, <prefix>_000001.bin, ... of shard_tokens tokens
 * each (the last one fewer; 0: PFX_SHARD_DEFAULT_TOKENS; at most
 * PFX_SHARD_MAX_TOKENS), each replaced atomically (io.h): uint16 when the
 * tokenizer's vocabulary fits, else uint32. info may be NULL. */
PFX_API pfx_status pfx_shards_write(const char *path, const pfx_tokenizer *tok, const char *prefix,
                                    size_t shard_tokens, pfx_shard_write_info *info);

#ifdef __cplusplus
}
#endif

#endif
