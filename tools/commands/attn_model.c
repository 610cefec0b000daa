/* prefixcl attn-map --model: the attention of one head (or, with --grid, of
 * every head of a layer) of a Hugging Face model folder over a text
 * (pfx_model_attention_probs), with an optional PEFT prefix-tuning adapter
 * whose prefix columns come first and whose gains (prefixcl tune's
 * gains.safetensors beside it) are in the titles. Tokens from the folder's tokenizer, or
 * --ids for a folder without one. Prints each map's mean prefix mass and
 * entropy beside the library's (pfx_model_attention_stats), writes --csv and
 * the picture (attn_plot.h). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

#include "attn_model.h"
#include "plot/attn_plot.h"
#include "chart.h"
#include "common/cli.h"
#include "common/tool_util.h"
#include "prefixcl/prefixcl.h"

#define LABEL_LEN      24
#define MAX_MAP_TOKENS 512 /* beyond that a map has no readable cells */

typedef struct job {
    const char *dir, *adapter, *text, *ids_arg, *out, *csv, *selector;
    size_t layer, head;
    bool grid;
    pfx_gain_mode mode;
    float gain;
    bool gain_given; /* --gain / --gain-mode: every head's, over the adapter's file */
} job;

/* What `prefixcl tune` writes beside a PEFT adapter: PEFT has no place for gains. */
#define GAINS_FILE "gains.safetensors"

static const cli_doc doc = {
    "prefixcl attn-map --model DIR [--adapter DIR] (--text TEXT | --ids I,J,..)\n"
    "  --layer L (--head H | --grid) [--gain G --gain-mode off|linear|tanh]\n"
    "  [--out FILE.png|FILE.svg] [--csv FILE] [--device SEL]",
    "A model's attention over a text: one head's probabilities, or every head of a layer.\n",
    "Gains: ADAPTER/" GAINS_FILE " (prefixcl tune's) when there is one, unless --gain or\n"
    "--gain-mode sets every head's; default off.\n"
};

bool attn_check_outputs(const char *picture, const char *csv)
{
    if (csv && !strcmp(picture, csv)) {
        fprintf(stderr, "prefixcl attn-map: --out and --csv name the same file %s\n", csv);
        return false;
    }
    return cli_check_output("attn-map", "--out", picture) &&
           (!csv || cli_check_output("attn-map", "--csv", csv));
}

/* A token's bytes as an axis label cairo can draw: whole UTF-8 characters
 * that fit, a control character as a space, a byte that is no character
 * (a byte-level token is often part of one) as '?'. */
static void label_of(const char *bytes, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t n =
            utf8proc_iterate((const utf8proc_uint8_t *)bytes + i, (utf8proc_ssize_t)(len - i), &c);
        if (n <= 0) {
            c = '?';
            n = 1;
        } else if (c < 0x20 || c == 0x7f) {
            c = ' ';
        }
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t w = utf8proc_encode_char(c, enc);
        if (o + (size_t)w >= LABEL_LEN)
            break;
        memcpy(out + o, enc, (size_t)w);
        o += (size_t)w;
        i += (size_t)n;
    }
    out[o] = 0;
}

/* The text's ids (with the tokenizer's special tokens, as transformers
 * encodes by default), or --ids; each token's string for the axes. */
static int tokens(const job *j, const pfx_model_shape *s, int32_t **ids, size_t *n,
                  char (**labels)[LABEL_LEN])
{
    pfx_tokenizer *tok = NULL;
    if (j->text) {
        if (pfx_tokenizer_load(j->dir, &tok) != PFX_SUCCESS) {
            fprintf(stderr,
                    "prefixcl attn-map: %s has no tokenizer this library reads (%s); pass --ids\n",
                    j->dir, pfx_last_error(NULL));
            return 2;
        }
        if (pfx_tokenizer_encode(tok, j->text, strlen(j->text), PFX_ENCODE_ADD_SPECIAL, ids, n) !=
            PFX_SUCCESS) {
            fprintf(stderr, "prefixcl attn-map: --text: %s\n", pfx_last_error(NULL));
            pfx_tokenizer_free(&tok);
            return 1;
        }
    } else if (!cli_ids(j->ids_arg, s->vocab, ids, n)) {
        fprintf(stderr,
                "prefixcl attn-map: --ids must be comma-separated ids below the vocabulary's %zu\n",
                s->vocab);
        return 2;
    }
    int rc = 0;
    if (*n == 0) {
        fprintf(stderr, "prefixcl attn-map: --text gives no tokens\n");
        rc = 2;
    }
    for (size_t i = 0; rc == 0 && i < *n; i++)
        if ((size_t)(*ids)[i] >= s->vocab) {
            fprintf(stderr,
                    "prefixcl attn-map: token %d is outside the model's vocabulary of %zu\n",
                    (int)(*ids)[i], s->vocab);
            rc = 2;
        }
    *labels = rc ? NULL : malloc(*n * sizeof(**labels));
    if (rc == 0 && !*labels)
        rc = 1;
    for (size_t i = 0; rc == 0 && i < *n; i++) {
        char *text = NULL;
        size_t len = 0;
        if (tok && pfx_tokenizer_decode(tok, *ids + i, 1, 0, &text, &len) == PFX_SUCCESS && len)
            label_of(text, len, (*labels)[i]);
        else
            snprintf((*labels)[i], LABEL_LEN, "%d", (int)(*ids)[i]);
        free(text);
    }
    pfx_tokenizer_free(&tok);
    if (rc) {
        free(*ids);
        *ids = NULL;
    }
    return rc;
}

/* The gain of head k of the [L * H] gains: "linear 0.25", "tanh -0.4 (ramp
 * 0.5)", or "off"; k SIZE_MAX: the mode alone. */
static const char *gain_text(const pfx_model_prefix *pre, size_t k, char *buf, size_t size)
{
    if (pre->gain_mode == PFX_GAIN_OFF)
        return "off";
    int n = snprintf(buf, size, "%s", pre->gain_mode == PFX_GAIN_LINEAR ? "linear" : "tanh");
    if (k != SIZE_MAX)
        n += snprintf(buf + n, size - (size_t)n, " %.4g", (double)pre->gains[k]);
    if (pre->gain_ramp != 1.0f)
        snprintf(buf + n, size - (size_t)n, " (ramp %g)", (double)pre->gain_ramp);
    return buf;
}

/* The per-head gains of ADAPTER/gains.safetensors (prefixcl's gains file,
 * io.h, read by pfx_gains_file_read: gain_mode linear or tanh, not
 * structured) into gains [L * H], *mode and *ramp; 0 when there is no such
 * file, 1 when it is there and does not fit the model, 2 when read. */
static int adapter_gains(const char *adapter, const pfx_model_shape *s, float *gains,
                         pfx_gain_mode *mode, float *ramp)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", adapter, GAINS_FILE) >= (int)sizeof(path))
        return 1;
    struct stat sb;
    if (stat(path, &sb) != 0) /* none; anything there is read (or refused) as a file */
        return 0;
    pfx_safetensors *f = NULL;
    float *dim = malloc(s->layers * s->heads * s->head_dim * sizeof(float));
    pfx_gains_values v = { .gains = gains, .dim_gains = dim };
    pfx_status st = dim ? pfx_safetensors_open(path, &f) : PFX_ERROR_OUT_OF_MEMORY;
    if (st == PFX_SUCCESS)
        st = pfx_gains_file_read(f, path, s->layers, s->heads, s->head_dim, &v);
    pfx_safetensors_close(&f);
    const bool oom = dim == NULL;
    free(dim);
    if (st != PFX_SUCCESS) {
        fprintf(stderr,
                "prefixcl attn-map: %s does not fit the model (%zu layers x %zu heads, head size "
                "%zu) or is malformed: %s\n",
                path, s->layers, s->heads, s->head_dim,
                oom ? "host memory for the gains" : pfx_last_error(NULL));
        return 1;
    }
    if (v.gain_mode == PFX_GAIN_OFF || v.structured) {
        fprintf(stderr,
                "prefixcl attn-map: %s: per-head gains only (gain_mode linear or tanh, not "
                "structured)\n",
                path);
        return 1;
    }
    *mode = v.gain_mode;
    *ramp = v.gain_ramp;
    return 2;
}

/* Row statistics of each map beside the library's, the CSV, the picture. */
static int report(const job *j, const pfx_model_prefix *pre, const float *map, size_t maps,
                  size_t N, const float *lib_mass, const float *lib_entropy, size_t heads,
                  char (*labels)[LABEL_LEN])
{
    const size_t P = pre->prefix_len, cols = P + N, h0 = j->grid ? 0 : j->head;
    for (size_t m = 0; m < maps; m++) {
        const float *p = map + m * N * cols;
        double mass = 0, ent = 0, worst = 0;
        for (size_t i = 0; i < N; i++) {
            double sum = 0;
            for (size_t c = 0; c < cols; c++) {
                sum += p[i * cols + c];
                mass += c < P ? p[i * cols + c] : 0.0;
                ent -= p[i * cols + c] > 0 ? p[i * cols + c] * log(p[i * cols + c]) : 0.0;
            }
            worst = fmax(worst, fabs(sum - 1.0));
        }
        const size_t k = j->layer * heads + h0 + m;
        printf("head %zu of %zu: mean prefix mass %.6f (library %.6f), entropy %.6f (library %.6f) "
               "over %zu "
               "rows, max |row sum - 1| %.2e\n",
               h0 + m, heads, mass / (double)N, (double)lib_mass[k], ent / (double)N,
               (double)lib_entropy[k], N, worst);
    }
    char buf[64];
    const char *gain =
        gain_text(pre, j->grid ? SIZE_MAX : j->layer * heads + j->head, buf, sizeof(buf));
    printf("layer %zu, keys %zu = prefix %zu + tokens %zu, gain %s\n", j->layer, cols, P, N, gain);
    if (j->csv) {
        if (tool_write_map_csv(j->csv, map, N, P, N, 't', 't') != 0) {
            fprintf(stderr, "prefixcl attn-map: cannot write %s: %s\n", j->csv, strerror(errno));
            return 1;
        }
        printf("wrote %s\n", j->csv);
    }
    char(*keys)[LABEL_LEN] = malloc((cols + 1) * sizeof(*keys));
    const char **klab = malloc((cols + 1) * sizeof(char *)),
               **qlab = malloc((N + 1) * sizeof(char *));
    attn_plot_map *pm = malloc(maps * sizeof(*pm));
    char(*titles)[128] = malloc(maps * sizeof(*titles));
    int rc = CHART_ERR_IO;
    if (keys && klab && qlab && pm && titles) {
        for (size_t c = 0; c < cols; c++) {
            if (c < P)
                snprintf(keys[c], LABEL_LEN, "p%zu", c);
            else
                memcpy(keys[c], labels[c - P], LABEL_LEN);
            klab[c] = keys[c];
        }
        for (size_t i = 0; i < N; i++)
            qlab[i] = labels[i];
        for (size_t m = 0; m < maps; m++) {
            char hb[64];
            snprintf(titles[m], sizeof(titles[m]), "layer %zu, head %zu, gain %s", j->layer, h0 + m,
                     gain_text(pre, j->layer * heads + h0 + m, hb, sizeof(hb)));
            pm[m] = (attn_plot_map){ .probs = map + m * N * cols,
                                     .queries = N,
                                     .keys = cols,
                                     .prefix_len = P,
                                     .query_labels = qlab,
                                     .key_labels = klab,
                                     .title = titles[m] };
        }
        char title[160];
        snprintf(title, sizeof(title), "layer %zu of %s, %zu prefix + %zu tokens, gain %s",
                 j->layer, j->dir, P, N, gain);
        rc = maps > 1 ? attn_plot_grid(j->out, title, pm, maps) : attn_plot_head(j->out, pm);
    }
    free(keys);
    free(klab);
    free(qlab);
    free(pm);
    free(titles);
    if (rc == CHART_UNAVAILABLE) {
        printf("%s: %s\n", j->out, chart_strerror(rc));
        return 0;
    }
    if (rc != CHART_OK) {
        fprintf(stderr, "prefixcl attn-map: cannot draw %s: %s\n", j->out, chart_strerror(rc));
        return 1;
    }
    printf("wrote %s\n", j->out);
    return 0;
}

/* Loads the adapter, computes the maps and the library's statistics over
 * the loaded model; everything it holds but rt and the model is released
 * here. */
static int run(const job *j, pfx_runtime *rt, pfx_model *model, const pfx_model_shape *s)
{
    int32_t *ids = NULL;
    size_t N = 0, P = 0;
    char(*labels)[LABEL_LEN] = NULL;
    int rc = tokens(j, s, &ids, &N, &labels);
    if (rc)
        return rc;
    pfx_peft_config pc;
    if (j->adapter && pfx_peft_read_config(j->adapter, &pc) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl attn-map: --adapter: %s\n", pfx_last_error(NULL));
        rc = 2;
    } else if (j->adapter &&
               (pc.num_layers != s->layers || pc.token_dim != s->kv_heads * s->head_dim)) {
        fprintf(stderr,
                "prefixcl attn-map: --adapter %s (%zu layers of %zu values) does not fit the model "
                "(%zu layers "
                "of %zu kv heads x %zu)\n",
                j->adapter, pc.num_layers, pc.token_dim, s->layers, s->kv_heads, s->head_dim);
        rc = 2;
    } else if (j->adapter) {
        P = pc.num_virtual_tokens;
    }
    if (rc == 0 && s->layers > 64) {
        fprintf(stderr, "prefixcl attn-map: %zu layers: this command reads at most 64\n",
                s->layers);
        rc = 2;
    }
    if (rc == 0 && (N > MAX_MAP_TOKENS || P + N > s->max_positions)) {
        fprintf(
            stderr,
            "prefixcl attn-map: %zu tokens (+ %zu prefix) do not fit: at most %zu tokens and the "
            "model's %zu positions: shorten --text (or --ids)\n",
            N, P, (size_t)MAX_MAP_TOKENS, s->max_positions);
        rc = 2;
    }
    /* every head's --gain, or the adapter's gains file */
    const size_t L = s->layers, H = s->heads, maps = j->grid ? H : 1;
    float *gains = rc ? NULL : malloc(L * H * sizeof(float)), ramp = 1.0f;
    pfx_gain_mode mode = j->mode;
    if (rc == 0 && !gains)
        rc = 1;
    for (size_t i = 0; gains && i < L * H; i++)
        gains[i] = j->gain;
    if (rc == 0 && j->adapter && !j->gain_given &&
        adapter_gains(j->adapter, s, gains, &mode, &ramp) == 1)
        rc = 2;
    pfx_context *ctx = NULL;
    pfx_tensor *keys[64] = { 0 }, *values[64] = { 0 }, *probs = NULL;
    float *mass = rc ? NULL : malloc(L * H * sizeof(float)),
          *ent = rc ? NULL : malloc(L * H * sizeof(float)),
          *map = rc ? NULL : malloc(maps * N * (P + N) * sizeof(float));
    pfx_status st = PFX_SUCCESS;
    if (rc == 0) {
        pfx_context_params params = { .max_batch = 1, .max_tokens = N, .max_prefix_len = P };
        if (!mass || !ent || !map)
            st = PFX_ERROR_OUT_OF_MEMORY;
        if (st == PFX_SUCCESS)
            st = pfx_context_create(model, &params, &ctx);
        if (st == PFX_SUCCESS && P)
            st = pfx_peft_load_prefixes(rt, j->adapter, s->kv_heads, keys, values, L, NULL);
        const pfx_model_batch batch = { .batch = 1, .tokens = N, .ids = ids };
        const pfx_model_prefix pre = { .prefix_len = P,
                                       .keys = P ? keys : NULL,
                                       .values = P ? values : NULL,
                                       .gain_mode = mode,
                                       .gains = gains,
                                       .gain_ramp = ramp };
        const size_t shape[2] = { N, P + N };
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &probs);
        for (size_t m = 0; m < maps && st == PFX_SUCCESS; m++) {
            st = pfx_model_attention_probs(ctx, &batch, &pre, 0, j->layer, j->grid ? m : j->head,
                                           probs);
            if (st == PFX_SUCCESS)
                st = pfx_tensor_read(probs, 0, N * (P + N), map + m * N * (P + N));
        }
        if (st == PFX_SUCCESS)
            st = pfx_model_attention_stats(ctx, &batch, &pre, mass, ent);
        if (st != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl attn-map: %s\n", pfx_last_error(rt));
            rc = 1;
        } else {
            rc = report(j, &pre, map, maps, N, mass, ent, H, labels);
        }
    }
    for (size_t l = 0; l < 64; l++) {
        pfx_tensor_destroy(&keys[l]);
        pfx_tensor_destroy(&values[l]);
    }
    pfx_tensor_destroy(&probs);
    pfx_context_destroy(&ctx);
    free(gains);
    free(mass);
    free(ent);
    free(map);
    free(ids);
    free(labels);
    return rc;
}

int attn_map_model(int argc, char **argv)
{
    job j = { .out = "attn-map.png", .mode = PFX_GAIN_OFF };
    int mode = PFX_GAIN_OFF; /* pfx_gain_mode (cli_gain_modes) */
    /* the options whose presence counts, at their places in the table */
    enum { O_LAYER = 4, O_HEAD = 5, O_GAIN = 7, O_MODE = 8 };
    const cli_option opts[] = {
        { "--model", CLI_TEXT, &j.dir, 0, 0, NULL, NULL, "DIR",
          "a Hugging Face folder (config.json, safetensors, tokenizer)", NULL },
        { "--adapter", CLI_TEXT, &j.adapter, 0, 0, NULL, NULL, "DIR",
          "a PEFT folder, or its adapter_model.safetensors", NULL },
        { "--text", CLI_TEXT, &j.text, 0, 0, NULL, NULL, "TEXT", "tokenized with DIR's tokenizer",
          NULL },
        { "--ids", CLI_TEXT, &j.ids_arg, 0, 0, NULL, NULL, "I,J,..",
          "token ids, for a folder without a tokenizer", NULL },
        [O_LAYER] = { "--layer", CLI_SIZE, &j.layer, 0, 1 << 20, NULL, NULL, "L",
                      "the layer, from 0", NULL },
        [O_HEAD] = { "--head", CLI_SIZE, &j.head, 0, 1 << 20, NULL, NULL, "H",
                     "the head drawn, from 0", NULL },
        { "--grid", CLI_FLAG, &j.grid, 0, 0, NULL, NULL, NULL,
          "every head of layer L (--csv: the first head)", NULL },
        [O_GAIN] = { "--gain", CLI_FLOAT, &j.gain, -HUGE_VAL, HUGE_VAL, NULL, NULL, "G",
                     "every head's gain", NULL },
        [O_MODE] = { "--gain-mode", CLI_CHOICE, &mode, 0, 0, cli_gain_modes, NULL, "MODE",
                     "the gain's form", NULL },
        { "--out", CLI_TEXT, &j.out, 0, 0, NULL, NULL, "FILE",
          "the heat map: PNG, or SVG for a .svg name", "attn-map.png" },
        { "--csv", CLI_TEXT, &j.csv, 0, 0, NULL, NULL, "FILE", "the probabilities as CSV", NULL },
        { "--device", CLI_TEXT, &j.selector, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
    };
    bool given[sizeof(opts) / sizeof(opts[0])];
    const int parsed =
        cli_parse("attn-map", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), given, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    const bool have_layer = given[O_LAYER], have_head = given[O_HEAD];
    j.mode = (pfx_gain_mode)mode;
    j.gain_given = given[O_GAIN] || given[O_MODE];
    if (!j.dir || !have_layer || (!have_head && !j.grid) || (have_head && j.grid) ||
        !j.text == !j.ids_arg) {
        fprintf(stderr, "prefixcl attn-map: --model needs --layer, one of --head or --grid, one of "
                        "--text or --ids\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }
    if (!attn_check_outputs(j.out, j.csv))
        return 1;
    /* PEFT's weights file stands for its folder (as in generate and eval) */
    static const char weights[] = "adapter_model.safetensors";
    char folder[4096];
    const size_t alen = j.adapter ? strlen(j.adapter) : 0;
    if (alen >= sizeof(weights) - 1 && alen < sizeof(folder) &&
        !strcmp(j.adapter + alen - (sizeof(weights) - 1), weights) &&
        (alen == sizeof(weights) - 1 || j.adapter[alen - sizeof(weights)] == '/')) {
        const size_t n = alen - (sizeof(weights) - 1);
        if (n)
            snprintf(folder, sizeof(folder), "%.*s", (int)(n > 1 ? n - 1 : n), j.adapter);
        else
            snprintf(folder, sizeof(folder), ".");
        j.adapter = folder;
    }
    /* --layer and --head against the model as loaded */
    pfx_runtime *rt = tool_runtime("attn-map", j.selector);
    if (!rt)
        return 1;
    pfx_model *model = NULL;
    int rc = 1;
    if (pfx_model_load(rt, j.dir, NULL, &model) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl attn-map: --model: %s\n", pfx_last_error(rt));
        goto out;
    }
    pfx_model_shape s;
    pfx_model_get_shape(model, &s);
    if (j.layer >= s.layers || (!j.grid && j.head >= s.heads)) {
        fprintf(stderr, "prefixcl attn-map: --%s %zu is not below the model's %zu %s\n",
                j.layer >= s.layers ? "layer" : "head", j.layer >= s.layers ? j.layer : j.head,
                j.layer >= s.layers ? s.layers : s.heads, j.layer >= s.layers ? "layers" : "heads");
        rc = 2;
        goto out;
    }
    rc = run(&j, rt, model, &s);
out:
    pfx_model_destroy(&model);
    pfx_runtime_destroy(&rt);
    return rc;
}
