/* Writes what suite 'dist' tunes: a tiny random GPT-2 folder (model_folder.c)
 * with the demonstration's tokenizer, and a training text whose lines have
 * uneven lengths (so the ranks' shares of a batch hold uneven label counts).
 *   usage: dist_model OUT_DIR DEMO_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "model_folder.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: dist_model OUT_DIR DEMO_DIR\n");
        return 2;
    }
    char dir[4096], path[4200];
    snprintf(dir, sizeof(dir), "%s/gpt2-tiny", argv[1]);
    mkdir(argv[1], 0777);
    mkdir(dir, 0777);
    /* the demonstration tokenizer's 2,197 ids fit the vocabulary */
    ref_model_config g = { .family = REF_MODEL_GPT2,
                           .layers = 2,
                           .hidden = 24,
                           .heads = 3,
                           .kv_heads = 3,
                           .head_dim = 8,
                           .inner = 40,
                           .vocab = 2200,
                           .max_positions = 64,
                           .eps = 1e-5,
                           .act = REF_ACT_GELU_TANH };
    tf_model m;
    tf_model_init(&m, &g, true, "gpt2", 23);
    int rc = tf_write(&m, dir, 1);
    tf_model_free(&m);
    if (rc)
        return 1;
    snprintf(path, sizeof(path), "%s/tokenizer.json", argv[2]);
    FILE *in = fopen(path, "rb");
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    FILE *out = fopen(path, "wb");
    if (!in || !out)
        return 1;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            return 1;
    fclose(in);
    if (fclose(out))
        return 1;
    snprintf(path, sizeof(path), "%s/train.txt", argv[1]);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    static const char *const who[] = { "The sailor", "A clever goat", "Karin",
                                       "The old teacher of the village", "An old swan" };
    static const char *const what[] = { "measured the small clock", "sold a dark brooch",
                                        "cleaned it", "carried a black anvil up the long hill" };
    for (int i = 0; i < 60; i++)
        fprintf(f, "%s %s%s.\n", who[i % 5], what[(i / 5) % 4], i % 3 ? " near the mill" : "");
    return fclose(f) ? 1 : 0;
}
