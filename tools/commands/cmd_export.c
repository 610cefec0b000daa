/* prefixcl export --fold-gains: a model folder with trained attention gains
 * folded into its query projections (pfx_model_fold_gains), written as a
 * plain Hugging Face folder that computes the gain model's logits with no
 * gain arithmetic at all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common/cli.h"
#include "common/tool_util.h"
#include "prefixcl/prefixcl.h"

static const cli_doc doc = {
    "prefixcl export --fold-gains --model DIR --gains FILE --out DIR [--device SEL]",
    "  Folds a gains file (what pretrain and tune write: gains.safetensors) into the model's\n"
    "  query projections: head h's query rows and bias scaled by 1 + g_h (linear) or\n"
    "  1 + tanh g_h (tanh), each query dimension d by 1 + G_hd (the structured gain; a rotary\n"
    "  model only where each rotated pair of dimensions shares its G), the gain ramp at 1 as\n"
    "  generation applies it. OUT gets config.json, model.safetensors (float32) and the\n"
    "  model folder's tokenizer and generation files: stock transformers loads it.\n",
    NULL
};

/* The files of a model folder besides its weights that OUT gets too. */
static const char *const side_files[] = { "tokenizer.json",
                                          "tokenizer_config.json",
                                          "special_tokens_map.json",
                                          "generation_config.json",
                                          "vocab.json",
                                          "merges.txt",
                                          "chat_template.jinja" };

/* Copies dir/name to out/name when it exists; false after saying why. */
static bool copy_side_file(const char *dir, const char *out, const char *name)
{
    char src[4200], dst[4200];
    snprintf(src, sizeof(src), "%s/%s", dir, name);
    snprintf(dst, sizeof(dst), "%s/%s", out, name);
    FILE *in = fopen(src, "rb");
    if (!in)
        return errno == ENOENT;
    pfx_output_file *f = NULL;
    bool ok = pfx_output_open(dst, &f) == PFX_SUCCESS;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof(buf), in)) > 0)
        ok = fwrite(buf, 1, n, pfx_output_stream(f)) == n;
    ok = ok && !ferror(in);
    fclose(in);
    if (ok)
        ok = pfx_output_commit(&f) == PFX_SUCCESS;
    else
        pfx_output_discard(&f);
    if (!ok)
        fprintf(stderr, "prefixcl export: copying %s to %s failed: %s\n", src, dst,
                pfx_last_error(NULL));
    return ok;
}

int cmd_export(int argc, char **argv)
{
    const char *model_dir = NULL, *gains_path = NULL, *out = NULL, *device = NULL;
    bool fold = false;
    const cli_option opts[] = {
        { "--fold-gains", CLI_FLAG, &fold, 0, 0, NULL, NULL, NULL,
          "fold --gains into the query projections (the one export)", NULL },
        { "--model", CLI_TEXT, &model_dir, 0, 0, NULL, NULL, "DIR",
          "the model folder the gains were trained with", NULL },
        { "--gains", CLI_TEXT, &gains_path, 0, 0, NULL, NULL, "FILE", "its gains.safetensors",
          NULL },
        { "--out", CLI_TEXT, &out, 0, 0, NULL, NULL, "DIR", "the folder to write", NULL },
        { "--device", CLI_TEXT, &device, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
    };
    const size_t nopts = sizeof(opts) / sizeof(opts[0]);
    const int parsed = cli_parse("export", argc, argv, opts, nopts, NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (!fold || !model_dir || !gains_path || !out) {
        fprintf(stderr, "prefixcl export: %s is needed\n\n",
                !fold         ? "--fold-gains"
                : !model_dir  ? "--model DIR"
                : !gains_path ? "--gains FILE"
                              : "--out DIR");
        return cli_help(stderr, &doc, opts, nopts);
    }
    pfx_model_shape s;
    if (pfx_model_read_config(model_dir, &s) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl export: --model %s: %s\n", model_dir, pfx_last_error(NULL));
        return 2;
    }
    const size_t LH = s.layers * s.heads;
    pfx_gains_values g = { .gains = calloc(LH, sizeof(float)),
                           .dim_gains = calloc(LH * s.head_dim, sizeof(float)) };
    pfx_safetensors *f = NULL;
    int rc = 2;
    pfx_runtime *rt = NULL;
    pfx_model *m = NULL;
    if (!g.gains || !g.dim_gains) {
        fprintf(stderr, "prefixcl export: out of host memory\n");
        goto out;
    }
    if (pfx_safetensors_open(gains_path, &f) != PFX_SUCCESS ||
        pfx_gains_file_read(f, gains_path, s.layers, s.heads, s.head_dim, &g) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl export: --gains: %s\n", pfx_last_error(NULL));
        goto out;
    }
    if (g.gain_mode == PFX_GAIN_OFF && !g.structured) {
        fprintf(stderr,
                "prefixcl export: --gains %s holds no gain (gain_mode off, not "
                "structured): nothing to fold\n",
                gains_path);
        goto out;
    }
    static const char *const outputs[] = { "config.json", "model.safetensors" };
    if (!cli_check_output_dir("export", "--out", out, outputs, 2))
        goto out;
    rc = 1;
    if (!(rt = tool_runtime("export", device)))
        goto out;
    const pfx_model_prefix pre = { .gain_mode = g.gain_mode,
                                   .gains = g.gains,
                                   .dim_gains = g.structured ? g.dim_gains : NULL,
                                   .gain_ramp = 1.0f };
    const pfx_model_params params = { .storage = PFX_DTYPE_F32 };
    pfx_status st = pfx_model_load(rt, model_dir, &params, &m);
    if (st == PFX_SUCCESS)
        st = pfx_model_fold_gains(m, &pre);
    if (st == PFX_SUCCESS)
        st = pfx_model_save(m, out, NULL);
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl export: %s\n", pfx_last_error(rt));
        rc = st == PFX_ERROR_INVALID_ARGUMENT ? 2 : 1; /* gains the model cannot take */
        goto out;
    }
    for (size_t i = 0; i < sizeof(side_files) / sizeof(side_files[0]); i++)
        if (!copy_side_file(model_dir, out, side_files[i]))
            goto out;
    printf("wrote %s: %s with the %s%s%s gains of %s folded into its query projections (%zu "
           "layers x %zu heads)\n",
           out, model_dir, g.gain_mode == PFX_GAIN_OFF ? "" : cli_gain_modes[g.gain_mode],
           g.gain_mode != PFX_GAIN_OFF && g.structured ? " and " : "",
           g.structured ? "structured" : "", gains_path, s.layers, s.heads);
    rc = 0;
out:
    pfx_model_destroy(&m);
    pfx_runtime_destroy(&rt);
    pfx_safetensors_close(&f);
    free(g.gains);
    free(g.dim_gains);
    return rc;
}
