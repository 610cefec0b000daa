/* The demonstration model's folder (tune_demo.h). */
#include "tune_demo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* src's bytes to dst, atomically. */
static int copy_file(const char *src, const char *dst)
{
    FILE *in;
    if (pfx_input_open(src, &in) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tune: %s\n", pfx_last_error(NULL));
        return 1;
    }
    pfx_output_file *out = NULL;
    pfx_status st = pfx_output_open(dst, &out);
    char buf[1 << 16];
    size_t got;
    while (st == PFX_SUCCESS && (got = fread(buf, 1, sizeof(buf), in)) > 0)
        if (fwrite(buf, 1, got, pfx_output_stream(out)) != got)
            st = PFX_ERROR_IO;
    if (st == PFX_SUCCESS && ferror(in)) {
        fprintf(stderr, "prefixcl tune: reading %s failed\n", src);
        pfx_output_discard(&out);
        fclose(in);
        return 1;
    }
    fclose(in);
    if (st == PFX_SUCCESS)
        st = pfx_output_commit(&out);
    else
        pfx_output_discard(&out);
    if (st != PFX_SUCCESS)
        fprintf(stderr, "prefixcl tune: writing %s: %s\n", dst, pfx_last_error(NULL));
    return st != PFX_SUCCESS;
}

/* GPT-2 small's config.json over `vocab` tokens. */
static int write_config(const char *dir, size_t layers, size_t vocab)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    pfx_output_file *f = NULL;
    pfx_status st = pfx_output_open(path, &f);
    if (st == PFX_SUCCESS) {
        fprintf(pfx_output_stream(f),
                "{\n  \"model_type\": \"gpt2\",\n  \"n_layer\": %zu,\n  \"n_head\": 12,\n  "
                "\"n_embd\": 768,\n"
                "  \"n_positions\": 1024,\n  \"vocab_size\": %zu,\n  \"activation_function\": "
                "\"gelu_new\",\n"
                "  \"layer_norm_epsilon\": 1e-05\n}\n",
                layers, vocab);
        st = pfx_output_commit(&f);
    }
    if (st != PFX_SUCCESS)
        fprintf(stderr, "prefixcl tune: writing %s: %s\n", path, pfx_last_error(NULL));
    return st != PFX_SUCCESS;
}

/* Rank 0's part: the whole folder. */
static int write_folder(pfx_runtime *rt, const char *demo_dir, const char *dir, size_t layers,
                        pfx_dtype storage, uint64_t seed)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "prefixcl tune: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    pfx_tokenizer *tok = NULL;
    if (pfx_tokenizer_load(demo_dir, &tok) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tune: the tokenizer of %s: %s\n", demo_dir, pfx_last_error(NULL));
        return 1;
    }
    const size_t vocab = pfx_tokenizer_vocab_size(tok);
    pfx_tokenizer_free(&tok);
    if (write_config(dir, layers, vocab))
        return 1;
    /* no context: this model is only drawn and saved (a checkpoint holds no
     * Q8_0: then float32, quantized when tune loads it) */
    pfx_model_params mp = { .storage = storage == PFX_DTYPE_Q8_0 ? PFX_DTYPE_F32 : storage };
    pfx_model *model = NULL;
    pfx_status st = pfx_model_create_random(rt, dir, &mp, seed, &model);
    if (st == PFX_SUCCESS)
        st = pfx_model_save(model, dir, NULL);
    pfx_model_destroy(&model);
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tune: the demonstration model in %s: %s\n", dir,
                pfx_last_error(rt));
        return 1;
    }
    char src[4200], dst[4200];
    snprintf(src, sizeof(src), "%s/tokenizer.json", demo_dir);
    snprintf(dst, sizeof(dst), "%s/tokenizer.json", dir);
    return copy_file(src, dst);
}

int tune_demo_write(pfx_runtime *rt, const char *demo_dir, const char *out_dir, size_t layers,
                    pfx_dtype storage, uint64_t seed, char *dir, size_t cap)
{
    if (snprintf(dir, cap, "%s/demo-model", out_dir) >= (int)cap) {
        fprintf(stderr, "prefixcl tune: --out %s: too long a path\n", out_dir);
        return 1;
    }
    const int rc =
        pfx_dist_rank() == 0 ? write_folder(rt, demo_dir, dir, layers, storage, seed) : 0;
    /* the other ranks load the folder once rank 0 has written it (a failed
     * rank 0 ends the whole job: pfx_dist_finish) */
    if (rc == 0 && pfx_dist_size() > 1)
        pfx_dist_any(false);
    return rc;
}
