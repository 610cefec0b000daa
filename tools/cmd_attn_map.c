/* prefixcl attn-map: the probability map of one head of a small random
 * problem (pfx_gain_softmax_probs), written as a grayscale heat map. Rows are
 * queries, columns keys (the prefix first); brightness is sqrt(p / max p). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "image.h"
#include "prefixcl/prefixcl.h"

static int usage(void)
{
    fprintf(stderr,
            "usage: prefixcl attn-map [--device SEL] [--out FILE.png|FILE.pgm] [--seed S]\n"
            "         [--n N] [--m M] [--p P] [--d D] [--heads H] [--head I]\n"
            "         [--gain G] [--gain-mode off|linear|tanh] [--causal] [--scale PIXELS]\n"
            "defaults: --out attn-map.png --seed 1 --n 64 --m 64 --p 8 --d 32 --heads 4\n"
            "          --head 0 --gain 1.0 --gain-mode linear --scale 4\n");
    return 2;
}

/* A size option through the one strict parser (tools/cli.h). */
static bool parse_size(const char *s, size_t lo, size_t hi, size_t *out)
{
    uint64_t v;
    if (!cli_uint(s, lo, hi, &v))
        return false;
    *out = (size_t)v;
    return true;
}

/* splitmix64, uniform in [-1, 1]. */
static float next_uniform(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return (float)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static pfx_status random_tensor(pfx_runtime *rt, unsigned ndim, const size_t *shape, uint64_t *rng,
                                float amp, pfx_tensor **t)
{
    size_t n = 1;
    for (unsigned i = 0; i < ndim; i++)
        n *= shape[i];
    float *x = malloc(n * sizeof(float));
    if (!x)
        return PFX_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        x[i] = amp * next_uniform(rng);
    pfx_status st = pfx_tensor_create(rt, PFX_DTYPE_F32, ndim, shape, t);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_write(*t, 0, n, x);
    free(x);
    return st;
}

int cmd_attn_map(int argc, char **argv)
{
    const char *selector = NULL, *out = "attn-map.png";
    size_t N = 64, M = 64, P = 8, D = 32, H = 4, head = 0, scale = 4, seed = 1;
    float gain = 1.0f;
    pfx_gain_mode mode = PFX_GAIN_LINEAR;
    bool causal = false;
    const size_t big = 1 << 14;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--causal")) {
            causal = true;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (!strcmp(a, "--device"))
            selector = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--seed"))
            ok = parse_size(v, 0, SIZE_MAX, &seed);
        else if (!strcmp(a, "--n"))
            ok = parse_size(v, 1, big, &N);
        else if (!strcmp(a, "--m"))
            ok = parse_size(v, 1, big, &M);
        else if (!strcmp(a, "--p"))
            ok = parse_size(v, 0, big, &P);
        else if (!strcmp(a, "--d"))
            ok = parse_size(v, 1, 1024, &D);
        else if (!strcmp(a, "--heads"))
            ok = parse_size(v, 1, 256, &H);
        else if (!strcmp(a, "--head"))
            ok = parse_size(v, 0, 255, &head);
        else if (!strcmp(a, "--scale"))
            ok = parse_size(v, 1, 64, &scale);
        else if (!strcmp(a, "--gain")) {
            char *end;
            gain = strtof(v, &end);
            ok = *end == 0 && end != v && isfinite(gain);
        } else if (!strcmp(a, "--gain-mode")) {
            mode = !strcmp(v, "off") ? PFX_GAIN_OFF
                   : !strcmp(v, "linear") ? PFX_GAIN_LINEAR
                   : !strcmp(v, "tanh") ? PFX_GAIN_TANH : (pfx_gain_mode)-1;
            ok = (int)mode >= 0;
        } else
            ok = false;
        if (!ok) {
            fprintf(stderr, "prefixcl attn-map: bad option %s %s\n", a, v);
            return usage();
        }
    }
    if (head >= H) {
        fprintf(stderr, "prefixcl attn-map: --head %zu is not below --heads %zu\n", head, H);
        return 2;
    }
    size_t cols = P + M;
    if ((N * scale) * (cols * scale) > ((size_t)1 << 28)) {
        fprintf(stderr, "prefixcl attn-map: image of %zu x %zu pixels is too large\n",
                cols * scale, N * scale);
        return 2;
    }

    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.device = selector;
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, &params) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl attn-map: %s\n", pfx_last_error(NULL));
        return 1;
    }

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
    desc.gain_mode = mode;
    desc.gain = gains;

    pfx_tensor *q = NULL, *k = NULL, *v = NULL, *pk = NULL, *pv = NULL, *probs = NULL;
    size_t qs[4] = { 1, H, N, D }, ks[4] = { 1, H, M, D }, ps[3] = { H, P, D };
    size_t map_shape[2] = { N, cols };
    float amp = 2.0f; /* logits of a few units with D around 32..128 */
    pfx_status st = random_tensor(rt, 4, qs, &rng, amp, &q);
    if (st == PFX_SUCCESS)
        st = random_tensor(rt, 4, ks, &rng, amp, &k);
    if (st == PFX_SUCCESS)
        st = random_tensor(rt, 4, ks, &rng, 1.0f, &v);
    if (st == PFX_SUCCESS && P)
        st = random_tensor(rt, 3, ps, &rng, amp, &pk);
    if (st == PFX_SUCCESS && P)
        st = random_tensor(rt, 3, ps, &rng, 1.0f, &pv);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, map_shape, &probs);
    pfx_attention_inputs in = { q, k, v, pk, pv };
    if (st == PFX_SUCCESS)
        st = pfx_gain_softmax_probs(rt, &desc, &in, 0, head, probs);

    float *map = NULL;
    uint8_t *pixels = NULL;
    int rc = 1;
    if (st == PFX_SUCCESS) {
        map = malloc(N * cols * sizeof(float));
        pixels = malloc(N * scale * cols * scale);
        if (!map || !pixels)
            st = PFX_ERROR_OUT_OF_MEMORY;
        else
            st = pfx_tensor_read(probs, 0, N * cols, map);
    }
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl attn-map: %s\n", pfx_last_error(rt));
    } else {
        double prefix_mass = 0, worst_row = 0;
        size_t rows = 0;
        for (size_t i = 0; i < N; i++) {
            double sum = 0, pre = 0;
            for (size_t j = 0; j < cols; j++) {
                sum += map[i * cols + j];
                if (j < P)
                    pre += map[i * cols + j];
            }
            if (sum > 0) {
                rows++;
                prefix_mass += pre;
                worst_row = fmax(worst_row, fabs(sum - 1.0));
            }
        }
        image_gray_from_floats(map, cols, N, scale, pixels);
        if (image_write(out, pixels, cols * scale, N * scale) != 0) {
            fprintf(stderr, "prefixcl attn-map: cannot write %s: %s\n", out, strerror(errno));
        } else {
            printf("%s: %zu x %zu pixels (keys %zu = prefix %zu + input %zu, queries %zu, scale %zu)\n"
                   "head %zu of %zu, D %zu, gain %s %g%s, seed %zu\n"
                   "mean prefix mass %.4f over %zu rows, max |row sum - 1| %.2e\n",
                   out, cols * scale, N * scale, cols, P, M, N, scale, head, H, D,
                   mode == PFX_GAIN_OFF ? "off" : mode == PFX_GAIN_LINEAR ? "linear" : "tanh",
                   (double)gain, causal ? ", causal" : "", seed,
                   rows ? prefix_mass / (double)rows : 0.0, rows, worst_row);
            rc = 0;
        }
    }
    free(map);
    free(pixels);
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
