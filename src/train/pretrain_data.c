/* The full-training job's data: the tokenized corpus packed in blocks or
 * token shards mapped, the held-out blocks, the ids checked against the
 * model. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gains_file.h"
#include "io_internal.h"
#include "job.h"
#include "pretrain_internal.h"

/* ---- data ---- */

static pfx_status load_blocks(pfx_pretrain_job *j, const char *path, pfx_blocks **out)
{
    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.max_length =
        (size_t)1 << 24; /* documents whole (the largest the data set keeps): the blocks cut them */
    o.append_eos = true;
    o.shuffle = false;
    pfx_dataset *ds = NULL;
    pfx_status st = pfx_dataset_load(path, j->tok, &o, &ds);
    if (st == PFX_SUCCESS)
        st = pfx_blocks_pack(ds, j->cfg->block, out);
    pfx_dataset_free(&ds);
    if (st != PFX_SUCCESS)
        return pfx_error(j->rt, st, "pretrain: %s", pfx_last_error(NULL));
    return PFX_SUCCESS;
}

/* The format of one path: AUTO resolved (a glob character or an llm.c
 * magic at its start: shards). */
static pfx_pretrain_data format_of(pfx_pretrain_data f, const char *path)
{
    if (f != PFX_PRETRAIN_DATA_AUTO)
        return f;
    if (strpbrk(path, "*?["))
        return PFX_PRETRAIN_DATA_SHARDS;
    unsigned char m[4] = { 0 };
    /* O_NONBLOCK and regular files only: a FIFO is left to the reader that refuses it */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    ssize_t got = 0;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
        got = read(fd, m, 4);
    if (fd >= 0)
        close(fd);
    const long magic =
        (long)((uint32_t)m[0] | (uint32_t)m[1] << 8 | (uint32_t)m[2] << 16 | (uint32_t)m[3] << 24);
    return got == 4 && (magic == PFX_SHARD_MAGIC || magic == PFX_SHARD_MAGIC_U32)
               ? PFX_PRETRAIN_DATA_SHARDS
               : PFX_PRETRAIN_DATA_TEXT;
}

/* Text tokenized into memory, or shards mapped. */
static pfx_status open_blocks(pfx_pretrain_job *j, const char *path, pfx_blocks **out)
{
    const pfx_pretrain_data f = format_of(j->cfg->data_format, path);
    if (f == PFX_PRETRAIN_DATA_TEXT)
        return load_blocks(j, path, out);
    const pfx_status st = pfx_blocks_open_shards(
        path, f == PFX_PRETRAIN_DATA_RAW_U16 ? PFX_SHARD_RAW_U16 : PFX_SHARD_LLMC, j->cfg->block,
        out);
    return st == PFX_SUCCESS ? st : pfx_error(j->rt, st, "pretrain: %s", pfx_last_error(NULL));
}

/* Shards are a pattern: the blocks it gave join the options a checkpoint
 * must agree with, so that a shard added or removed since is refused on
 * --resume instead of silently changing the order. */
static void note_blocks(pfx_pretrain_job *j, const char *path)
{
    const size_t len = strlen(j->options);
    if (format_of(j->cfg->data_format, path) != PFX_PRETRAIN_DATA_TEXT && len < sizeof(j->options))
        snprintf(j->options + len, sizeof(j->options) - len, "data_blocks=%zu+%zu\n",
                 pfx_blocks_count(j->train), pfx_blocks_count(j->eval));
}

pfx_status pfx_pretrain_load_data(pfx_pretrain_job *j)
{
    const pfx_pretrain_config *c = j->cfg;
    if ((unsigned)c->data_format > PFX_PRETRAIN_DATA_RAW_U16)
        return pfx_error(j->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pretrain: config.data_format %d is not AUTO, TEXT, SHARDS or RAW_U16",
                         (int)c->data_format);
    const char *tok_dir = pfx_pretrain_tokenizer_dir(c);
    /* the tokenizer reads text; shards are tokens already */
    const bool text =
        format_of(c->data_format, c->data_path) == PFX_PRETRAIN_DATA_TEXT ||
        (c->eval_path && format_of(c->data_format, c->eval_path) == PFX_PRETRAIN_DATA_TEXT);
    pfx_status st = pfx_tokenizer_load(tok_dir, &j->tok);
    if (st != PFX_SUCCESS && !text) { /* shards alone: the output folder goes without one */
        j->tok = NULL;
        st = PFX_SUCCESS;
    }
    if (st != PFX_SUCCESS)
        return pfx_error(j->rt, st, "pretrain: the tokenizer: %s", pfx_last_error(NULL));
    if (text && pfx_tokenizer_special_id(j->tok, PFX_TOKEN_EOS) < 0)
        return pfx_error(
            j->rt, PFX_ERROR_INVALID_ARGUMENT,
            "pretrain: the tokenizer of %s names no end-of-text token to separate the documents",
            tok_dir);
    if ((st = open_blocks(j, c->data_path, &j->train)))
        return st;
    if (c->eval_path) {
        if ((st = open_blocks(j, c->eval_path, &j->eval)))
            return st;
        note_blocks(j, c->data_path);
        return PFX_SUCCESS;
    }
    const size_t n = pfx_blocks_count(j->train), held = n / 20 ? n / 20 : 1;
    if (n < 2)
        return pfx_error(
            j->rt, PFX_ERROR_OUT_OF_RANGE,
            "pretrain: %s fills %zu block of %zu tokens; holding one out for evaluation needs two "
            "(give more data, a smaller --block, or --eval FILE)",
            c->data_path, n, c->block);
    if ((st = pfx_blocks_split(j->train, held, &j->eval)))
        return pfx_error(j->rt, st, "pretrain: %s", pfx_last_error(NULL));
    note_blocks(j, c->data_path);
    return PFX_SUCCESS;
}

/* Every id of the blocks within the model's vocabulary: text's checked at
 * once, shards' as each block is read (the start does not read the
 * corpus). */
pfx_status pfx_pretrain_check_ids(pfx_pretrain_job *j, pfx_blocks *b, const char *what)
{
    const pfx_status st = pfx_blocks_set_vocab(b, j->shape.vocab);
    if (st != PFX_SUCCESS)
        return pfx_error(j->rt, st,
                         "pretrain: the %s data: %s (the tokenizer does not belong to the model)",
                         what, pfx_last_error(NULL));
    return PFX_SUCCESS;
}
