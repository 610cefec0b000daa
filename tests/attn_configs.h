/* Tile configurations the registry may pick, forced on the test runtime one
 * after the other through the runtime's kernel tuning override, so the
 * suites check each against the double reference on whatever device they run
 * on. A configuration the device cannot hold (local memory, work-group size)
 * is skipped with the reason printed.
 *
 * Which ones run ($PREFIXCL_TEST_CONFIGS):
 *   unset, "sample"  this device's (what the registry picks here) and a fixed
 *                    sample of the others: the head-size-64 configurations
 *                    of the nvidia family (the GPU path: KSPLIT work-items
 *                    per row, the decode tiles) and the head-size-64 extra
 *                    below (the CPU path at a width and tile no entry uses).
 *                    The default `meson test`: a cold kernel cache compiles
 *                    a few programs more than the device's own.
 *   "all"            every configuration of every vendor family, and the
 *                    extras (suite 'exhaustive', which CI runs).
 *   "gpu"            every configuration of the GPU families (nvidia, amd,
 *                    intel, other) and this device's; no CPU vector path
 *                    (the Oclgrind setup, tests/oclgrind_run.py).
 *   "gpu-sample"     of those, each tile shape (the options but the head
 *                    size) once, at the first head size that uses it (this
 *                    device's first), and every head-size-256 configuration
 *                    (the most local memory): the Oclgrind setup, where each
 *                    configuration is a minute of simulation.
 *   "cpu"            the CPU family's and the extras (the CPU vector paths
 *                    alone: under Oclgrind by hand, README "Devices").
 */
#ifndef PFX_TEST_ATTN_CONFIGS_H
#define PFX_TEST_ATTN_CONFIGS_H

#include "attention_tuning.h"
#include "internal.h"
#include "pfx_test.h"

#define ATTN_CONFIGS_MAX 256

/* Valid tiles no database entry uses, for the CPU paths' rounded loop
 * bounds: key and row tiles that are multiples of VEC but not of 2 VEC,
 * and each vector width. */
static const pfx_program_config attn_extra_configs[] = {
    { "attention_fwd", "-DPFX_ATTN_HEAD_DIM=64 -DPFX_ATTN_BLOCK_M=16 -DPFX_ATTN_BLOCK_N=48 "
                       "-DPFX_ATTN_KSPLIT=1 -DPFX_ATTN_KV_PAD=0 -DPFX_ATTN_Q_LOCAL=0 "
                       "-DPFX_ATTN_POLY_EXP2=1 -DPFX_ATTN_VEC=16" },
    { "attention_fwd", "-DPFX_ATTN_HEAD_DIM=32 -DPFX_ATTN_BLOCK_M=48 -DPFX_ATTN_BLOCK_N=24 "
                       "-DPFX_ATTN_KSPLIT=1 -DPFX_ATTN_KV_PAD=0 -DPFX_ATTN_Q_LOCAL=0 "
                       "-DPFX_ATTN_POLY_EXP2=1 -DPFX_ATTN_VEC=8" },
    { "attention_fwd", "-DPFX_ATTN_HEAD_DIM=16 -DPFX_ATTN_BLOCK_M=8 -DPFX_ATTN_BLOCK_N=12 "
                       "-DPFX_ATTN_KSPLIT=1 -DPFX_ATTN_KV_PAD=0 -DPFX_ATTN_Q_LOCAL=0 "
                       "-DPFX_ATTN_POLY_EXP2=1 -DPFX_ATTN_VEC=4" },
    /* VEC 16 in a tile of 4 rows (register blocks of 4 rows up to 8 rows) */
    { "attention_fwd", "-DPFX_ATTN_HEAD_DIM=32 -DPFX_ATTN_BLOCK_M=4 -DPFX_ATTN_BLOCK_N=48 "
                       "-DPFX_ATTN_KSPLIT=1 -DPFX_ATTN_KV_PAD=0 -DPFX_ATTN_Q_LOCAL=0 "
                       "-DPFX_ATTN_POLY_EXP2=1 -DPFX_ATTN_VEC=16" },
    { "attention_bwd", "-DPFX_ATTN_HEAD_DIM=64 -DPFX_ATTN_BLOCK_M=16 -DPFX_ATTN_BLOCK_N=48 "
                       "-DPFX_ATTN_DSPLIT=1 -DPFX_ATTN_VEC=16" },
    { "attention_bwd", "-DPFX_ATTN_HEAD_DIM=32 -DPFX_ATTN_BLOCK_M=24 -DPFX_ATTN_BLOCK_N=40 "
                       "-DPFX_ATTN_DSPLIT=1 -DPFX_ATTN_VEC=8" },
    { "attention_bwd", "-DPFX_ATTN_HEAD_DIM=16 -DPFX_ATTN_BLOCK_M=12 -DPFX_ATTN_BLOCK_N=8 "
                       "-DPFX_ATTN_DSPLIT=1 -DPFX_ATTN_VEC=4" },
};

typedef enum attn_config_set {
    ATTN_CONFIGS_SAMPLE,
    ATTN_CONFIGS_ALL,
    ATTN_CONFIGS_GPU,
    ATTN_CONFIGS_CPU,
    ATTN_CONFIGS_GPU_SAMPLE
} attn_config_set;

/* The set $PREFIXCL_TEST_CONFIGS names (see the top); another value fails. */
static inline attn_config_set attn_config_set_of_env(void)
{
    const char *env = getenv("PREFIXCL_TEST_CONFIGS");
    if (!env || !*env || !strcmp(env, "sample"))
        return ATTN_CONFIGS_SAMPLE;
    if (!strcmp(env, "all"))
        return ATTN_CONFIGS_ALL;
    if (!strcmp(env, "gpu"))
        return ATTN_CONFIGS_GPU;
    if (!strcmp(env, "cpu"))
        return ATTN_CONFIGS_CPU;
    if (!strcmp(env, "gpu-sample"))
        return ATTN_CONFIGS_GPU_SAMPLE;
    fail_msg("PREFIXCL_TEST_CONFIGS=%s: expected sample, all, gpu, gpu-sample or cpu", env);
    return ATTN_CONFIGS_SAMPLE;
}

/* Whether a configuration of a vendor family (PFX_VENDOR_FAMILIES: the
 * extras; -1: this device's) belongs to the set. */
static inline bool attn_config_in_set(attn_config_set set, int family, const char *options)
{
    const bool this_device = family < 0, extra = family == PFX_VENDOR_FAMILIES;
    const pfx_vendor vendor = this_device || extra ? PFX_VENDOR_OTHER : pfx_vendor_families[family];
    switch (set) {
    case ATTN_CONFIGS_ALL: return true;
    case ATTN_CONFIGS_GPU:
    case ATTN_CONFIGS_GPU_SAMPLE: return this_device || (!extra && vendor != PFX_VENDOR_CPU);
    case ATTN_CONFIGS_CPU: return extra || (!this_device && vendor == PFX_VENDOR_CPU);
    case ATTN_CONFIGS_SAMPLE:
    default:
        return this_device || ((extra || vendor == PFX_VENDOR_NVIDIA) &&
                               strstr(options, "-DPFX_ATTN_HEAD_DIM=64 ") != NULL);
    }
}

/* The options without their head size: the tile shape. */
static inline void attn_config_shape(const char *options, char *shape, size_t cap)
{
    const char *hd = strstr(options, "-DPFX_ATTN_HEAD_DIM=");
    if (!hd) {
        snprintf(shape, cap, "%s", options);
        return;
    }
    const char *rest = strchr(hd, ' ');
    snprintf(shape, cap, "%.*s%s", (int)(hd - options), options, rest ? rest + 1 : "");
}

/* In the set "gpu-sample": whether a GPU configuration adds a tile shape not
 * yet among the kept ones (all[0..count)) or has head size 256. */
static inline bool attn_config_sampled(const pfx_program_config *all, size_t count,
                                       const char *options)
{
    if (strstr(options, "-DPFX_ATTN_HEAD_DIM=256 "))
        return true;
    char shape[PFX_OPTIONS_MAX], kept[PFX_OPTIONS_MAX];
    attn_config_shape(options, shape, sizeof(shape));
    for (size_t s = 0; s < count; s++) {
        attn_config_shape(all[s].options, kept, sizeof(kept));
        if (!strcmp(kept, shape))
            return false;
    }
    return true;
}

/* Runs fn(rt, head_dim_class, arg) per distinct configuration of program
 * ("attention_fwd" or "attention_bwd") in the set $PREFIXCL_TEST_CONFIGS
 * names; returns how many ran. */
static inline size_t attn_for_each_config(pfx_runtime *rt, const char *program,
                                          void (*fn)(pfx_runtime *, unsigned, void *), void *arg)
{
    static pfx_program_config all[ATTN_CONFIGS_MAX * (PFX_VENDOR_FAMILIES + 1)];
    static const char *const set_names[] = { "sample", "all", "gpu", "cpu", "gpu-sample" };
    const attn_config_set set = attn_config_set_of_env();
    size_t count = 0, ran = 0, skipped = 0;
    /* this device's first, then each family's */
    for (int v = -1; v < PFX_VENDOR_FAMILIES; v++) {
        pfx_program_config c[ATTN_CONFIGS_MAX];
        size_t n;
        if (v >= 0) {
            pfx_vendor vendor = pfx_vendor_families[v];
            n = pfx_program_configs(vendor, NULL, pfx_vendor_typical_local_mem(vendor), c,
                                    ATTN_CONFIGS_MAX);
        } else {
            n = pfx_runtime_configs(rt, c, ATTN_CONFIGS_MAX); /* this device's, shrunk to fit */
        }
        assert_true(n <= ATTN_CONFIGS_MAX);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(c[i].program, program) || !attn_config_in_set(set, v, c[i].options))
                continue;
            bool seen = false;
            for (size_t s = 0; s < count && !seen; s++)
                seen = !strcmp(all[s].options, c[i].options);
            if (!seen && set == ATTN_CONFIGS_GPU_SAMPLE)
                seen = !attn_config_sampled(all, count, c[i].options);
            if (!seen)
                all[count++] = c[i];
        }
    }
    for (size_t e = 0; e < sizeof(attn_extra_configs) / sizeof(attn_extra_configs[0]); e++)
        if (!strcmp(attn_extra_configs[e].program, program) &&
            attn_config_in_set(set, PFX_VENDOR_FAMILIES, attn_extra_configs[e].options))
            all[count++] = attn_extra_configs[e];
    const bool bwd = !strcmp(program, "attention_bwd");
    for (size_t i = 0; i < count; i++) {
        const char *hd = strstr(all[i].options, "PFX_ATTN_HEAD_DIM=");
        assert_non_null(hd);
        unsigned head_dim = (unsigned)strtoul(hd + strlen("PFX_ATTN_HEAD_DIM="), NULL, 10);
        char text[PFX_OPTIONS_MAX + 32];
        snprintf(text, sizeof(text), "%s %s", program, all[i].options);
        assert_int_equal(pfx_attn_override_set(rt, text), PFX_SUCCESS);
        pfx_attn_fwd_tiles f;
        pfx_attn_bwd_tiles b;
        pfx_status st = bwd ? pfx_attn_bwd_select(rt, "config", head_dim, &b)
                            : pfx_attn_fwd_select(rt, "config", head_dim, 1, &f);
        if (st == PFX_ERROR_UNSUPPORTED) {
            printf("  skipped on this device: %s\n", pfx_last_error(rt));
            skipped++;
            continue;
        }
        assert_int_equal(st, PFX_SUCCESS);
        printf("  %s\n", text);
        fflush(stdout);
        fn(rt, head_dim, arg);
        ran++;
    }
    assert_int_equal(pfx_attn_override_set(rt, NULL), PFX_SUCCESS);
    printf("  %s: %zu configurations run, %zu skipped (set %s, $PREFIXCL_TEST_CONFIGS)\n", program,
           ran, skipped, set_names[set]);
    return ran;
}

#endif
