/* libFuzzer harness for the JSONL data set parser: every input is a JSONL
 * file tokenized with a fixed byte-level tokenizer (the 256 byte tokens,
 * "<|endoftext|>" and a few merges); a data set that loads is served for
 * two epochs of batches whose invariants are checked (labels are the ids or
 * -100, padding past each length, every example once an epoch), then split
 * by hold_out; loading has the per-input time limit of fuzz.h. The
 * dictionary and corpus carry string escapes and duplicate keys. Replayed
 * over corpus/data_jsonl/ by run_corpus.c in every build. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "prefixcl/data.h"
#include "text/text_internal.h" /* the byte-level table */

#define MAX_LEN 12
#define BATCH   3

static pfx_tokenizer *tokenizer(void)
{
    static pfx_tokenizer *tok;
    if (tok)
        return tok;
    /* vocab.json of the byte-level table: byte b's character has id b. */
    static char vocab[8192];
    size_t at = 0;
    pfx_byte_level_init();
    at += (size_t)snprintf(vocab + at, sizeof(vocab) - at, "{");
    for (unsigned b = 0; b < 256; b++) {
        size_t n;
        const unsigned char *u = (const unsigned char *)pfx_byte_to_utf8((unsigned char)b, &n);
        unsigned cp = n == 1 ? u[0] : ((u[0] & 0x1fu) << 6) | (u[1] & 0x3fu);
        at += (size_t)snprintf(vocab + at, sizeof(vocab) - at, "\"\\u%04x\":%u,", cp, b);
    }
    at += (size_t)snprintf(vocab + at, sizeof(vocab) - at,
                           "\"\\u0120t\":256,\"he\":257,\"\\u0120the\":258,\"<|endoftext|>\":259}");
    static const char merges[] = "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\n";
    if (pfx_tokenizer_load_vocab_merges_memory(vocab, at, merges, sizeof(merges) - 1, "fuzz",
                                               &tok) != PFX_SUCCESS)
        abort();
    return tok;
}

static pfx_status load(const uint8_t *data, size_t size, const char *label, pfx_dataset **ds)
{
    pfx_dataset_options opt;
    pfx_dataset_default_options(&opt);
    opt.format = PFX_DATA_JSONL;
    opt.max_length = MAX_LEN;
    opt.append_eos = size & 1;
    opt.seed = size;
    return pfx_dataset_load_memory(data, size, label, tokenizer(), &opt, ds);
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    pfx_dataset *ds = NULL;
    bool ok = load(data, size, label, &ds) == PFX_SUCCESS;
    pfx_dataset_free(&ds);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfx_dataset *ds = NULL;
    const double start = pfx_fuzz_now();
    pfx_status st = load(data, size, "fuzz.jsonl", &ds);
    pfx_fuzz_deadline(start, "loading a JSONL data set");
    if (st != PFX_SUCCESS) {
        if (ds)
            abort();
        return 0;
    }
    pfx_dataset_info info;
    if (pfx_dataset_get_info(ds, &info) != PFX_SUCCESS || info.examples == 0 ||
        info.longest > MAX_LEN)
        abort();
    int32_t ids[BATCH * MAX_LEN], labels[BATCH * MAX_LEN], lengths[BATCH];
    pfx_data_position pos = { 0, 0 };
    size_t served = 0, rows, width;
    while (pos.epoch < 2) {
        if (pfx_dataset_next_batch(ds, &pos, BATCH, ids, lengths, labels, &rows, &width) !=
                PFX_SUCCESS ||
            rows == 0 || rows > BATCH || width > MAX_LEN)
            abort();
        for (size_t r = 0; r < BATCH; r++)
            for (size_t t = 0; t < width; t++) {
                int32_t id = ids[r * width + t], lab = labels[r * width + t];
                bool inside = r < rows && t < (size_t)lengths[r];
                if ((lab != PFX_LABEL_IGNORE && lab != id) ||
                    (!inside && (lab != PFX_LABEL_IGNORE || id != info.pad_id)))
                    abort();
            }
        served += rows;
    }
    if (served != 2 * info.examples)
        abort();
    pfx_dataset *ev = NULL;
    if (info.examples >= 2) {
        if (pfx_dataset_hold_out(ds, 1, &ev) != PFX_SUCCESS)
            abort();
        pfx_dataset_info a, b;
        pfx_dataset_get_info(ds, &a);
        pfx_dataset_get_info(ev, &b);
        if (a.examples + b.examples != info.examples || a.tokens + b.tokens != info.tokens)
            abort();
    }
    pfx_dataset_free(&ev);
    pfx_dataset_free(&ds);
    return 0;
}
