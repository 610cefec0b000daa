/* prefixcl attn-map: the probability map of one head (or, with --grid, of
 * every head) of a small random problem (pfx_gain_softmax_probs), drawn as a
 * heat map (attn_plot.h): rows are queries, columns keys with the prefix
 * keys first and marked, a colour bar, the gain in the title. --csv writes
 * the probabilities too (also in a build without cairo). For kernel
 * debugging: the inputs are random, not a model's; with --model the map is
 * a model's over a text (attn_model.c). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "commands.h"
#include "attn_model.h"
#include "plot/attn_plot.h"
#include "chart.h"
#include "common/tool_util.h"
#include "prefixcl/prefixcl.h"

static const cli_doc doc = {
    "prefixcl attn-map --model DIR ... (a model's attention over a text; --model alone: its "
    "usage)\n"
    "prefixcl attn-map [--device SEL] [--out FILE.png|FILE.svg] [--csv FILE]\n"
    "  [--seed S] [--n N] [--m M] [--p P] [--d D] [--heads H] [--head I | --grid]\n"
    "  [--gain G] [--gain-mode off|linear|tanh] [--causal]",
    "Without --model: random queries, keys and values of one attention problem.\n", NULL
};

/* Column labels: "p0".. for the prefix keys, "k0".. for the input's. */
static char (*key_labels(size_t P, size_t M))[24]
{
    char(*l)[24] = malloc((P + M + 1) * sizeof(*l));
    for (size_t j = 0; l && j < P + M; j++)
        snprintf(l[j], sizeof(l[j]), j < P ? "p%zu" : "k%zu", j < P ? j : j - P);
    return l;
}

/* The statistics of each map beside the library's (pfx_attention_stats: the
 * same quantities without the map; tests/check_attn_map.py compares them),
 * the CSV and the picture. */
static int report(const char *out, const char *csv, const float *map, size_t maps, size_t head,
                  const pfx_attention_desc *desc, const float *lib_mass, const float *lib_entropy,
                  float gain, size_t seed)
{
    const size_t N = desc->queries, P = desc->prefix_len, M = desc->keys, cols = P + M;
    for (size_t h = 0; h < maps; h++) {
        const float *m = map + h * N * cols;
        double prefix_mass = 0, entropy = 0, worst_row = 0;
        size_t rows = 0;
        for (size_t i = 0; i < N; i++) {
            double sum = 0, pre = 0, ent = 0;
            for (size_t j = 0; j < cols; j++) {
                double p = m[i * cols + j];
                sum += p;
                if (j < P)
                    pre += p;
                if (p > 0)
                    ent -= p * log(p);
            }
            if (sum > 0) {
                rows++;
                prefix_mass += pre;
                entropy += ent;
                worst_row = fmax(worst_row, fabs(sum - 1.0));
            }
        }
        printf("head %zu of %zu: mean prefix mass %.6f (library %.6f), entropy %.6f (library "
               "%.6f) over %zu rows, max |row sum - 1| %.2e\n",
               head + h, desc->heads, rows ? prefix_mass / (double)rows : 0.0,
               (double)lib_mass[head + h], rows ? entropy / (double)rows : 0.0,
               (double)lib_entropy[head + h], rows, worst_row);
    }
    printf("keys %zu = prefix %zu + input %zu, queries %zu, D %zu, gain %s %g%s, seed %zu\n", cols,
           P, M, N, desc->head_dim, cli_gain_modes[desc->gain_mode], (double)gain,
           desc->causal ? ", causal" : "", seed);
    if (csv) {
        if (tool_write_map_csv(csv, map, N, P, M, 'k', 'q') != 0) {
            fprintf(stderr, "prefixcl attn-map: cannot write %s: %s\n", csv, strerror(errno));
            return 1;
        }
        printf("wrote %s\n", csv);
    }
    char(*keys)[24] = key_labels(P, M);
    char(*queries)[24] = malloc((N + 1) * sizeof(*queries));
    const char **klab = malloc((cols + 1) * sizeof(char *)),
               **qlab = malloc((N + 1) * sizeof(char *));
    attn_plot_map *pm = malloc(maps * sizeof(*pm));
    char(*titles)[96] = malloc(maps * sizeof(*titles));
    int rc = CHART_ERR_IO;
    if (keys && queries && klab && qlab && pm && titles) {
        for (size_t j = 0; j < cols; j++)
            klab[j] = keys[j];
        for (size_t i = 0; i < N; i++) {
            snprintf(queries[i], sizeof(queries[i]), "q%zu", i);
            qlab[i] = queries[i];
        }
        for (size_t h = 0; h < maps; h++) {
            snprintf(titles[h], sizeof(titles[h]), "head %zu, gain %s %g", head + h,
                     cli_gain_modes[desc->gain_mode], (double)gain);
            pm[h] = (attn_plot_map){ .probs = map + h * N * cols,
                                     .queries = N,
                                     .keys = cols,
                                     .prefix_len = P,
                                     .query_labels = qlab,
                                     .key_labels = klab,
                                     .title = titles[h] };
        }
        char title[160];
        snprintf(title, sizeof(title), "random attention problem: %zu heads, D %zu, seed %zu%s",
                 desc->heads, desc->head_dim, seed, desc->causal ? ", causal" : "");
        rc = maps > 1 ? attn_plot_grid(out, title, pm, maps) : attn_plot_head(out, pm);
    }
    free(keys);
    free(queries);
    free(klab);
    free(qlab);
    free(pm);
    free(titles);
    if (rc == CHART_UNAVAILABLE) {
        printf("%s: %s\n", out, chart_strerror(rc));
        return 0;
    }
    if (rc != CHART_OK) {
        fprintf(stderr, "prefixcl attn-map: cannot draw %s: %s\n", out, chart_strerror(rc));
        return 1;
    }
    printf("wrote %s\n", out);
    return 0;
}

int cmd_attn_map(int argc, char **argv)
{
    const char *selector = NULL, *out = "attn-map.png", *csv = NULL;
    size_t N = 64, M = 64, P = 8, D = 32, H = 4, head = 0, seed = 1;
    float gain = 1.0f;
    int mode = PFX_GAIN_LINEAR; /* pfx_gain_mode (cli_gain_modes) */
    bool causal = false, grid = false;
    const size_t big = 1 << 14;
    if (cli_has(argc, argv, "--model"))
        return attn_map_model(argc, argv);
    const cli_option opts[] = {
        { "--device", CLI_TEXT, &selector, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
        { "--out", CLI_TEXT, &out, 0, 0, NULL, NULL, "FILE",
          "the heat map: PNG, or SVG for a .svg name", "attn-map.png" },
        { "--csv", CLI_TEXT, &csv, 0, 0, NULL, NULL, "FILE", "the probabilities as CSV", NULL },
        { "--seed", CLI_SIZE, &seed, 0, 1.9e19, NULL, NULL, "S", "seed of the inputs", "1" },
        { "--n", CLI_SIZE, &N, 1, big, NULL, NULL, "N", "queries", "64" },
        { "--m", CLI_SIZE, &M, 1, big, NULL, NULL, "M", "keys", "64" },
        { "--p", CLI_SIZE, &P, 0, big, NULL, NULL, "P", "prefix positions", "8" },
        { "--d", CLI_SIZE, &D, 1, 1024, NULL, NULL, "D", "head size", "32" },
        { "--heads", CLI_SIZE, &H, 1, 256, NULL, NULL, "H", "attention heads", "4" },
        { "--head", CLI_SIZE, &head, 0, 255, NULL, NULL, "I", "the head drawn", "0" },
        { "--grid", CLI_FLAG, &grid, 0, 0, NULL, NULL, NULL,
          "every head in one picture (--csv: head 0)", NULL },
        { "--gain", CLI_FLOAT, &gain, -HUGE_VAL, HUGE_VAL, NULL, NULL, "G", "every head's gain",
          "1.0" },
        { "--gain-mode", CLI_CHOICE, &mode, 0, 0, cli_gain_modes, NULL, "MODE", "the gain's form",
          "linear" },
        { "--causal", CLI_FLAG, &causal, 0, 0, NULL, NULL, NULL, "a causal mask", NULL },
    };
    const int parsed =
        cli_parse("attn-map", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (head >= H) {
        fprintf(stderr, "prefixcl attn-map: --head %zu is not below --heads %zu\n", head, H);
        return 2;
    }
    size_t cols = P + M;
    if (N > 4096 || cols > 4096) {
        fprintf(stderr,
                "prefixcl attn-map: a map of %zu x %zu cells is too large to draw "
                "(4096 at most)\n",
                N, cols);
        return 2;
    }

    if (!attn_check_outputs(out, csv))
        return 1;
    pfx_runtime *rt = tool_runtime("attn-map", selector);
    if (!rt)
        return 1;

    uint64_t rng = (uint64_t)seed;
    float *gains = malloc(H * sizeof(float));
    for (size_t h = 0; h < H; h++)
        gains[h] = gain;
    pfx_attention_desc desc;
    pfx_attention_desc_init(&desc);
    desc.batch = 1;
    desc.heads = desc.kv_heads = H;
    desc.queries = N;
    desc.keys = M;
    desc.prefix_len = P;
    desc.head_dim = D;
    desc.causal = causal;
    desc.gain_mode = (pfx_gain_mode)mode;
    desc.gain = gains;

    pfx_tensor *q = NULL, *k = NULL, *v = NULL, *pk = NULL, *pv = NULL, *probs = NULL;
    size_t qs[4] = { 1, H, N, D }, ks[4] = { 1, H, M, D }, ps[3] = { H, P, D };
    size_t map_shape[2] = { N, cols };
    float amp = 2.0f; /* logits of a few units with D around 32..128 */
    pfx_status st = tool_random_tensor(rt, 4, qs, &rng, amp, &q);
    if (st == PFX_SUCCESS)
        st = tool_random_tensor(rt, 4, ks, &rng, amp, &k);
    if (st == PFX_SUCCESS)
        st = tool_random_tensor(rt, 4, ks, &rng, 1.0f, &v);
    if (st == PFX_SUCCESS && P)
        st = tool_random_tensor(rt, 3, ps, &rng, amp, &pk);
    if (st == PFX_SUCCESS && P)
        st = tool_random_tensor(rt, 3, ps, &rng, 1.0f, &pv);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, map_shape, &probs);
    pfx_attention_inputs in = { q, k, v, pk, pv };
    const size_t maps = grid ? H : 1;
    float *map = NULL;
    if (st == PFX_SUCCESS) {
        map = malloc(maps * N * cols * sizeof(float));
        if (!map)
            st = PFX_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < maps && st == PFX_SUCCESS; i++) {
        st = pfx_gain_softmax_probs(rt, &desc, &in, 0, grid ? i : head, probs);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_read(probs, 0, N * cols, map + i * N * cols);
    }
    /* the library's statistics of every head, without the map */
    pfx_tensor *mass_t = NULL, *entropy_t = NULL;
    float *lib_mass = malloc(H * sizeof(float)), *lib_entropy = malloc(H * sizeof(float));
    const size_t hshape[1] = { H };
    if (st == PFX_SUCCESS && (!lib_mass || !lib_entropy))
        st = PFX_ERROR_OUT_OF_MEMORY;
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hshape, &mass_t);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hshape, &entropy_t);
    if (st == PFX_SUCCESS)
        st = pfx_attention_stats(rt, &desc, &in, 1, entropy_t, NULL, mass_t);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_read(mass_t, 0, H, lib_mass);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_read(entropy_t, 0, H, lib_entropy);
    int rc = 1;
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl attn-map: %s\n", pfx_last_error(rt));
    } else {
        rc = report(out, csv, map, maps, grid ? 0 : head, &desc, lib_mass, lib_entropy, gain, seed);
    }
    free(map);
    free(lib_mass);
    free(lib_entropy);
    pfx_tensor_destroy(&mass_t);
    pfx_tensor_destroy(&entropy_t);
    free(gains);
    pfx_tensor_destroy(&q);
    pfx_tensor_destroy(&k);
    pfx_tensor_destroy(&v);
    pfx_tensor_destroy(&pk);
    pfx_tensor_destroy(&pv);
    pfx_tensor_destroy(&probs);
    pfx_runtime_destroy(&rt);
    return rc;
}
