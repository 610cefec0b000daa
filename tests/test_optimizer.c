/* The AdamW optimizer (include/prefixcl/optimizer.h) against the double
 * reference (reference/adamw_ref.h): several steps with two groups and awkward
 * sizes, clipping on and off, the NaN/Inf skip, schedules, state export and
 * import, determinism, bad inputs and accounting. */
#include <math.h>
#include <unistd.h>

#include "pfx_test.h"
#include "prefixcl/io.h"
#include "prefixcl/optimizer.h"
#include "reference/adamw_ref.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

#define NP 4

/* Awkward sizes: a 2-D tensor, a single gain, one a little over a multiple of
 * the work-group, one beyond the sum-of-squares grid (grid-stride path). */
static const unsigned shape_ndim[NP] = { 2, 1, 1, 2 };
static const size_t shapes[NP][2] = { { 3, 5 }, { 1, 0 }, { 4099, 0 }, { 13, 1543 } };
static const unsigned param_group[NP] = { 0, 1, 0, 1 };
static const char *const param_name[NP] = { "prefix.E", "layer0.gain", "prefix.W1", "prefix.W2" };

static const pfx_optimizer_group_params groups[2] = {
    { .lr = 1e-2f,
      .beta1 = 0.9f,
      .beta2 = 0.999f,
      .eps = 1e-8f,
      .weight_decay = 0.01f }, /* prefix */
    { .lr = 5e-3f,
      .beta1 = 0.8f,
      .beta2 = 0.99f,
      .eps = 1e-6f,
      .weight_decay = 0.0f }, /* gain: half rate */
};
/* The reference gets the same float values, widened (1 - 0.999f is not 1 - 0.999). */
static ref_adamw_group ref_groups[2];

typedef struct rig {
    pfx_runtime *rt;
    pfx_optimizer *opt;
    pfx_optimizer_params params;
    size_t n[NP];
    pfx_tensor *p[NP], *g[NP];
    float *hg[NP];
    double *rp[NP], *rm[NP], *rv[NP];
    uint64_t ref_step;
} rig;

static void rig_init(rig *r, pfx_runtime *rt, const pfx_optimizer_params *params, uint64_t seed)
{
    memset(r, 0, sizeof(*r));
    r->rt = rt;
    r->params = *params;
    assert_int_equal(pfx_optimizer_create(rt, params, &r->opt), PFX_SUCCESS);
    for (unsigned k = 0; k < 2; k++) {
        ref_groups[k] = (ref_adamw_group){ groups[k].lr, groups[k].beta1, groups[k].beta2,
                                           groups[k].eps, groups[k].weight_decay };
        unsigned id = 99;
        assert_int_equal(pfx_optimizer_add_group(r->opt, &groups[k], &id), PFX_SUCCESS);
        assert_int_equal(id, k);
    }
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    for (unsigned i = 0; i < NP; i++) {
        size_t n = shapes[i][0] * (shape_ndim[i] == 2 ? shapes[i][1] : 1);
        r->n[i] = n;
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, shape_ndim[i], shapes[i], &r->p[i]),
                         PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, shape_ndim[i], shapes[i], &r->g[i]),
                         PFX_SUCCESS);
        r->hg[i] = calloc(n, sizeof(float));
        r->rp[i] = calloc(n, sizeof(double));
        r->rm[i] = calloc(n, sizeof(double));
        r->rv[i] = calloc(n, sizeof(double));
        float *init = malloc(n * sizeof(float));
        assert_true(r->hg[i] && r->rp[i] && r->rm[i] && r->rv[i] && init);
        ref_rng_fill(&rng, init, n, -1.0f, 1.0f);
        for (size_t j = 0; j < n; j++)
            r->rp[i][j] = init[j];
        assert_int_equal(pfx_tensor_write(r->p[i], 0, n, init), PFX_SUCCESS);
        free(init);
        assert_int_equal(
            pfx_optimizer_add_param(r->opt, param_group[i], r->p[i], r->g[i], param_name[i]),
            PFX_SUCCESS);
    }
}

static void rig_free(rig *r)
{
    pfx_optimizer_destroy(&r->opt);
    assert_null(r->opt);
    for (unsigned i = 0; i < NP; i++) {
        pfx_tensor_destroy(&r->p[i]);
        pfx_tensor_destroy(&r->g[i]);
        free(r->hg[i]);
        free(r->rp[i]);
        free(r->rm[i]);
        free(r->rv[i]);
    }
}

/* Gradients of step `step` (a function of the step only), times magnitude. */
static void rig_grads(rig *r, uint64_t step, float magnitude)
{
    ref_rng rng;
    ref_rng_seed(&rng, 0xADA0 + step);
    for (unsigned i = 0; i < NP; i++) {
        ref_rng_fill(&rng, r->hg[i], r->n[i], -magnitude, magnitude);
        assert_int_equal(pfx_tensor_write(r->g[i], 0, r->n[i], r->hg[i]), PFX_SUCCESS);
    }
}

/* The reference's step (only when it is not skipped). */
static double rig_ref_step(rig *r, double *scale_out)
{
    const float *gs[NP];
    for (unsigned i = 0; i < NP; i++)
        gs[i] = r->hg[i];
    double norm = ref_grad_norm(gs, r->n, NP);
    double scale = ref_clip_scale(norm, r->params.max_grad_norm);
    double factor = ref_lr_factor(r->ref_step + 1, r->params.warmup_steps,
                                  r->params.decay == PFX_LR_COSINE ? r->params.decay_steps : 0,
                                  r->params.min_lr_ratio);
    r->ref_step++;
    for (unsigned i = 0; i < NP; i++)
        ref_adamw_step(r->rp[i], r->rm[i], r->rv[i], r->hg[i], r->n[i], scale, factor, r->ref_step,
                       &ref_groups[param_group[i]]);
    *scale_out = scale;
    return norm;
}

static double rel(double ref, double got)
{
    return fabs(ref - got) / fmax(fabs(ref), 1e-30);
}

/* Device parameters and moments against the reference. */
static void rig_compare(rig *r, const char *what)
{
    for (unsigned i = 0; i < NP; i++) {
        size_t n = r->n[i];
        float *p = malloc(n * sizeof(float)), *m = malloc(n * sizeof(float)),
              *v = malloc(n * sizeof(float));
        assert_true(p && m && v);
        assert_int_equal(pfx_tensor_read(r->p[i], 0, n, p), PFX_SUCCESS);
        uint64_t step = 0;
        assert_int_equal(pfx_optimizer_export_param(r->opt, i, &step, m, v), PFX_SUCCESS);
        assert_int_equal(step, r->ref_step);
        double ep = rel_l2(r->rp[i], p, n), em = rel_l2(r->rm[i], m, n),
               ev = rel_l2(r->rv[i], v, n);
        if (ep > TOL_ADAMW || em > TOL_ADAMW || ev > TOL_ADAMW)
            fail_msg("%s, step %llu, %s: rel L2 p %.3g m %.3g v %.3g > %g", what,
                     (unsigned long long)r->ref_step, param_name[i], ep, em, ev, TOL_ADAMW);
        free(p);
        free(m);
        free(v);
    }
}

/* One step on both sides with gradients of the given magnitude. */
static void rig_step_checked(rig *r, uint64_t grad_step, float magnitude, const char *what)
{
    rig_grads(r, grad_step, magnitude);
    float expect_factor = pfx_optimizer_lr_factor(r->opt);
    pfx_optimizer_report rep;
    assert_int_equal(pfx_optimizer_step(r->opt, &rep), PFX_SUCCESS);
    double scale;
    double norm = rig_ref_step(r, &scale);
    assert_false(rep.skipped);
    assert_int_equal(rep.step, r->ref_step);
    assert_true(rep.lr_factor == expect_factor);
    if (rel(norm, rep.grad_norm) > TOL_ADAMW || rel(scale, rep.clip_scale) > TOL_ADAMW)
        fail_msg("%s: norm %.9g (ref %.9g), scale %.9g (ref %.9g)", what, (double)rep.grad_norm,
                 norm, (double)rep.clip_scale, scale);
    if (r->params.max_grad_norm == 0.0f || norm < r->params.max_grad_norm)
        assert_true(rep.clip_scale == 1.0f);
    rig_compare(r, what);
}

static void test_matches_reference(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    pfx_optimizer_params params = { .warmup_steps = 3 };
    rig r;
    rig_init(&r, rt, &params, 1);
    for (uint64_t s = 0; s < 6; s++)
        rig_step_checked(&r, s, s % 2 ? 0.01f : 1.0f, "no clipping");
    assert_int_equal(pfx_optimizer_step_count(r.opt), 6);
    rig_free(&r);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

static void test_clipping(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    /* Gradients in [-1, 1] over ~24k elements have a norm near 90: clipped to
     * 1; in [-1e-3, 1e-3] a norm near 0.09: not clipped. With cosine decay. */
    pfx_optimizer_params params = { .max_grad_norm = 1.0f,
                                    .warmup_steps = 2,
                                    .decay = PFX_LR_COSINE,
                                    .decay_steps = 3,
                                    .min_lr_ratio = 0.1f };
    rig r;
    rig_init(&r, rt, &params, 2);
    for (uint64_t s = 0; s < 6; s++) {
        float magnitude = s % 3 == 2 ? 1e-3f : 1.0f;
        rig_step_checked(&r, s, magnitude,
                         magnitude < 1.0f ? "clipping, below max" : "clipping, above max");
    }
    rig_free(&r);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

typedef struct snapshot {
    float *p[NP], *m[NP], *v[NP];
    uint64_t step[NP];
    uint64_t count;
} snapshot;

static void snap(rig *r, snapshot *s)
{
    for (unsigned i = 0; i < NP; i++) {
        size_t n = r->n[i];
        s->p[i] = malloc(n * sizeof(float));
        s->m[i] = malloc(n * sizeof(float));
        s->v[i] = malloc(n * sizeof(float));
        assert_true(s->p[i] && s->m[i] && s->v[i]);
        assert_int_equal(pfx_tensor_read(r->p[i], 0, n, s->p[i]), PFX_SUCCESS);
        assert_int_equal(pfx_optimizer_export_param(r->opt, i, &s->step[i], s->m[i], s->v[i]),
                         PFX_SUCCESS);
    }
    s->count = pfx_optimizer_step_count(r->opt);
}

static void snap_equal(rig *r, const snapshot *a, const snapshot *b, const char *what)
{
    assert_int_equal(a->count, b->count);
    for (unsigned i = 0; i < NP; i++) {
        size_t bytes = r->n[i] * sizeof(float);
        assert_int_equal(a->step[i], b->step[i]);
        if (memcmp(a->p[i], b->p[i], bytes) || memcmp(a->m[i], b->m[i], bytes) ||
            memcmp(a->v[i], b->v[i], bytes))
            fail_msg("%s: %s differs bitwise", what, param_name[i]);
    }
}

static void snap_free(snapshot *s)
{
    for (unsigned i = 0; i < NP; i++) {
        free(s->p[i]);
        free(s->m[i]);
        free(s->v[i]);
    }
}

static void test_nonfinite_skips(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    pfx_optimizer_params params = { .max_grad_norm = 1.0f,
                                    .warmup_steps = 2,
                                    .gain_ramp_steps = 4 };
    rig r;
    rig_init(&r, rt, &params, 3);
    rig_step_checked(&r, 0, 1.0f, "before the skips");
    rig_step_checked(&r, 1, 1.0f, "before the skips");
    snapshot before;
    snap(&r, &before);
    float ramp = pfx_optimizer_gain_ramp(r.opt), factor = pfx_optimizer_lr_factor(r.opt);

    const struct {
        unsigned param;
        size_t index;
        float value;
    } bad[] = { { 2, 4098, NAN }, { 1, 0, INFINITY }, { 3, 7, -INFINITY }, { 0, 0, NAN } };
    for (unsigned k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        rig_grads(&r, 10 + k, 1.0f);
        float value = bad[k].value;
        assert_int_equal(pfx_tensor_write(r.g[bad[k].param], bad[k].index, 1, &value), PFX_SUCCESS);
        pfx_optimizer_report rep;
        assert_int_equal(pfx_optimizer_step(r.opt, &rep), PFX_SUCCESS);
        assert_true(rep.skipped);
        assert_int_equal(rep.step, 2);
        if (isnan(value))
            assert_true(isnan(rep.grad_norm));
        else
            assert_true(isinf(rep.grad_norm) && rep.grad_norm > 0);
        snapshot after;
        snap(&r, &after);
        snap_equal(&r, &before, &after,
                   isnan(value) ? "after a NaN gradient" : "after an Inf gradient");
        snap_free(&after);
        assert_true(pfx_optimizer_gain_ramp(r.opt) == ramp);
        assert_true(pfx_optimizer_lr_factor(r.opt) == factor);
    }
    /* A finite step afterwards goes on exactly like the reference, which never saw the skips. */
    rig_step_checked(&r, 2, 1.0f, "after the skips");
    assert_int_equal(pfx_optimizer_step_count(r.opt), 3);
    snap_free(&before);
    rig_free(&r);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

static void test_schedules(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    /* The standalone functions. */
    assert_true(pfx_schedule_linear_warmup(0, 0) == 1.0f);
    assert_true(pfx_schedule_linear_warmup(5, 0) == 1.0f);
    assert_true(pfx_schedule_linear_warmup(0, 4) == 0.0f);
    assert_true(pfx_schedule_linear_warmup(1, 4) == 0.25f);
    assert_true(pfx_schedule_linear_warmup(3, 4) == 0.75f);
    assert_true(pfx_schedule_linear_warmup(4, 4) == 1.0f);
    assert_true(pfx_schedule_linear_warmup(400, 4) == 1.0f);
    assert_true(pfx_schedule_cosine(0, 10, 0.1f) == 1.0f);
    assert_float_equal(pfx_schedule_cosine(5, 10, 0.0f), 0.5f, 1e-7f);
    assert_float_equal(pfx_schedule_cosine(10, 10, 0.1f), 0.1f, 1e-7f);
    assert_float_equal(pfx_schedule_cosine(99, 10, 0.1f), 0.1f, 1e-7f);
    assert_float_equal(pfx_schedule_cosine(0, 0, 0.25f), 0.25f, 1e-7f);

    /* The optimizer's factors and ramp over its steps (tiny parameter). */
    const pfx_optimizer_params cases[] = {
        { .warmup_steps = 4, .gain_ramp_steps = 3 },
        { .warmup_steps = 2,
          .decay = PFX_LR_COSINE,
          .decay_steps = 4,
          .min_lr_ratio = 0.1f,
          .gain_ramp_steps = 0 },
        { .warmup_steps = 0, .decay = PFX_LR_COSINE, .decay_steps = 1, .min_lr_ratio = 0.0f },
    };
    for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        pfx_optimizer *opt = NULL;
        assert_int_equal(pfx_optimizer_create(rt, &cases[c], &opt), PFX_SUCCESS);
        pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
        unsigned gid;
        assert_int_equal(pfx_optimizer_add_group(opt, &gp, &gid), PFX_SUCCESS);
        size_t n = 3;
        pfx_tensor *p = NULL, *g = NULL;
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &p), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &g), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_fill(p, 1.0f), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_fill(g, 0.5f), PFX_SUCCESS);
        assert_int_equal(pfx_optimizer_add_param(opt, gid, p, g, "p"), PFX_SUCCESS);
        for (uint64_t s = 0; s < 8; s++) {
            const pfx_optimizer_params *cp = &cases[c];
            double f =
                ref_lr_factor(s + 1, cp->warmup_steps,
                              cp->decay == PFX_LR_COSINE ? cp->decay_steps : 0, cp->min_lr_ratio);
            double ramp = ref_gain_ramp(s, cp->gain_ramp_steps);
            assert_float_equal(pfx_optimizer_lr_factor(opt), f, 1e-7);
            assert_float_equal(pfx_optimizer_gain_ramp(opt), ramp, 1e-7);
            assert_true(pfx_optimizer_gain_ramp(opt) >= 0.0f &&
                        pfx_optimizer_gain_ramp(opt) <= 1.0f);
            pfx_optimizer_report rep;
            assert_int_equal(pfx_optimizer_step(opt, &rep), PFX_SUCCESS);
            assert_float_equal(rep.lr_factor, f, 1e-7);
            assert_int_equal(rep.step, s + 1);
        }
        if (c == 0) {
            /* Spot values: warm-up 1/4 .. 1, ramp 0, 1/3, 2/3, 1. */
            assert_int_equal(pfx_optimizer_set_step_count(opt, 0), PFX_SUCCESS);
            assert_true(pfx_optimizer_lr_factor(opt) == 0.25f);
            assert_true(pfx_optimizer_gain_ramp(opt) == 0.0f);
            assert_int_equal(pfx_optimizer_set_step_count(opt, 3), PFX_SUCCESS);
            assert_true(pfx_optimizer_lr_factor(opt) == 1.0f);
            assert_true(pfx_optimizer_gain_ramp(opt) == 1.0f);
        }
        pfx_optimizer_destroy(&opt);
        pfx_tensor_destroy(&p);
        pfx_tensor_destroy(&g);
    }
    assert_true(pfx_optimizer_lr_factor(NULL) == 0.0f);
    assert_true(pfx_optimizer_gain_ramp(NULL) == 0.0f);

    /* A group's decay_fraction: its parameter moves as under an optimizer
     * whose cosine is that much shorter (7 of 10 decay steps -> 0.7 of the
     * steps; 0.04 -> the floor after one step), bit for bit, while the
     * other group and the reported factor keep the optimizer's schedule. */
    const float fractions[2] = { 0.7f, 0.04f };
    const uint32_t shorter[2] = { 7, 1 };
    for (int c = 0; c < 2; c++) {
        float got[2][3], want[3];
        for (int run = 0; run < 2; run++) {
            const pfx_optimizer_params op = { .warmup_steps = 2,
                                              .decay = PFX_LR_COSINE,
                                              .decay_steps = run ? shorter[c] : 10,
                                              .min_lr_ratio = 0.1f };
            pfx_optimizer *opt = NULL;
            assert_int_equal(pfx_optimizer_create(rt, &op, &opt), PFX_SUCCESS);
            pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
            gp.decay_fraction = run ? 0.0f : fractions[c];
            unsigned gid, plain;
            assert_int_equal(pfx_optimizer_add_group(opt, &gp, &gid), PFX_SUCCESS);
            gp.decay_fraction = 1.0f; /* the optimizer's schedule */
            assert_int_equal(pfx_optimizer_add_group(opt, &gp, &plain), PFX_SUCCESS);
            size_t n = 3;
            pfx_tensor *p[2] = { NULL }, *g[2] = { NULL };
            for (int k = 0; k < 2; k++) {
                assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &p[k]), PFX_SUCCESS);
                assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &g[k]), PFX_SUCCESS);
                assert_int_equal(pfx_tensor_fill(p[k], 1.0f), PFX_SUCCESS);
                assert_int_equal(pfx_tensor_fill(g[k], 0.5f), PFX_SUCCESS);
                assert_int_equal(
                    pfx_optimizer_add_param(opt, k ? plain : gid, p[k], g[k], k ? "plain" : "fast"),
                    PFX_SUCCESS);
            }
            for (uint64_t s = 0; s < 9; s++) {
                pfx_optimizer_report rep;
                assert_int_equal(pfx_optimizer_step(opt, &rep), PFX_SUCCESS);
                const double f = ref_lr_factor(s + 1, 2, run ? shorter[c] : 10, op.min_lr_ratio);
                assert_float_equal(rep.lr_factor, f, 1e-7);
            }
            assert_int_equal(pfx_tensor_read(p[0], 0, 3, got[run]), PFX_SUCCESS);
            if (!run)
                assert_int_equal(pfx_tensor_read(p[1], 0, 3, want), PFX_SUCCESS);
            else { /* the plain group of the first run: the 10-step schedule */
                float shorter_plain[3];
                assert_int_equal(pfx_tensor_read(p[1], 0, 3, shorter_plain), PFX_SUCCESS);
                assert_true(memcmp(shorter_plain, want, sizeof(want)) != 0);
            }
            for (int k = 0; k < 2; k++) {
                pfx_tensor_destroy(&p[k]);
                pfx_tensor_destroy(&g[k]);
            }
            pfx_optimizer_destroy(&opt);
        }
        assert_memory_equal(got[0], got[1], sizeof(got[0]));
    }
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

static void test_state_round_trip(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    pfx_optimizer_params params = { .max_grad_norm = 2.0f,
                                    .warmup_steps = 4,
                                    .gain_ramp_steps = 5 };

    /* Uninterrupted: 6 steps, exporting after the third. */
    rig a;
    rig_init(&a, rt, &params, 4);
    for (uint64_t s = 0; s < 3; s++) {
        rig_grads(&a, s, 1.0f);
        assert_int_equal(pfx_optimizer_step(a.opt, NULL), PFX_SUCCESS);
    }
    size_t floats = 0, expect = 0;
    assert_int_equal(pfx_optimizer_state_size(a.opt, &floats), PFX_SUCCESS);
    for (unsigned i = 0; i < NP; i++)
        expect += 2 * a.n[i];
    assert_int_equal(floats, expect);
    assert_int_equal(pfx_optimizer_param_count(a.opt), NP);
    snapshot mid;
    snap(&a, &mid);
    char path[256];
    snprintf(path, sizeof(path), "%s/pfx_optimizer_state_%d.safetensors",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    assert_int_equal(pfx_optimizer_save(a.opt, path), PFX_SUCCESS);
    for (uint64_t s = 3; s < 6; s++) {
        rig_grads(&a, s, 1.0f);
        assert_int_equal(pfx_optimizer_step(a.opt, NULL), PFX_SUCCESS);
    }
    snapshot end_a;
    snap(&a, &end_a);

    /* Restored: a fresh optimizer on fresh tensors holding the step-3 values. */
    rig b;
    rig_init(&b, rt, &params, 5);
    for (unsigned i = 0; i < NP; i++) {
        pfx_optimizer_param_info info;
        assert_int_equal(pfx_optimizer_get_param(a.opt, i, &info), PFX_SUCCESS);
        size_t index = 99;
        assert_int_equal(pfx_optimizer_find_param(b.opt, info.name, &index), PFX_SUCCESS);
        assert_int_equal(index, i);
        assert_int_equal(info.numel, b.n[i]);
        assert_int_equal(info.group, param_group[i]);
        assert_int_equal(pfx_tensor_write(b.p[i], 0, b.n[i], mid.p[i]), PFX_SUCCESS);
        assert_int_equal(pfx_optimizer_import_param(b.opt, index, mid.step[i], mid.m[i], mid.v[i]),
                         PFX_SUCCESS);
    }
    assert_int_equal(pfx_optimizer_set_step_count(b.opt, mid.count), PFX_SUCCESS);
    assert_true(pfx_optimizer_gain_ramp(b.opt) == 3.0f / 5.0f);
    for (uint64_t s = 3; s < 6; s++) {
        rig_grads(&b, s, 1.0f);
        assert_int_equal(pfx_optimizer_step(b.opt, NULL), PFX_SUCCESS);
    }
    snapshot end_b;
    snap(&b, &end_b);
    snap_equal(&a, &end_a, &end_b, "restored run");

    /* The same through a safetensors file. */
    rig c;
    rig_init(&c, rt, &params, 7);
    for (unsigned i = 0; i < NP; i++)
        assert_int_equal(pfx_tensor_write(c.p[i], 0, c.n[i], mid.p[i]), PFX_SUCCESS);
    assert_int_equal(pfx_optimizer_load(c.opt, path), PFX_SUCCESS);
    assert_int_equal(pfx_optimizer_step_count(c.opt), 3);
    for (uint64_t s = 3; s < 6; s++) {
        rig_grads(&c, s, 1.0f);
        assert_int_equal(pfx_optimizer_step(c.opt, NULL), PFX_SUCCESS);
    }
    snapshot end_c;
    snap(&c, &end_c);
    snap_equal(&a, &end_a, &end_c, "run restored from a file");
    snap_free(&end_c);
    rig_free(&c);

    /* A file of another optimizer (one parameter less, another name) is refused
     * and changes nothing; so is a missing file. */
    pfx_optimizer *other = NULL;
    assert_int_equal(pfx_optimizer_create(rt, &params, &other), PFX_SUCCESS);
    unsigned gid;
    assert_int_equal(pfx_optimizer_add_group(other, &groups[0], &gid), PFX_SUCCESS);
    for (unsigned i = 0; i < NP; i++)
        assert_int_equal(
            pfx_optimizer_add_param(other, 0, b.p[i], b.g[i], i == 2 ? "renamed" : param_name[i]),
            PFX_SUCCESS);
    assert_status_names(rt, pfx_optimizer_load(other, path), PFX_ERROR_FORMAT, "renamed");
    assert_int_equal(pfx_optimizer_step_count(other), 0);
    uint64_t st0 = 99;
    assert_int_equal(pfx_optimizer_export_param(other, 0, &st0, NULL, NULL), PFX_SUCCESS);
    assert_int_equal(st0, 0);
    assert_status_names(rt, pfx_optimizer_load(b.opt, "/nonexistent/state.safetensors"),
                        PFX_ERROR_IO, "nonexistent");
    assert_status_names(rt, pfx_optimizer_load(b.opt, NULL), PFX_ERROR_NULL_ARGUMENT, "path");
    assert_status_names(rt, pfx_optimizer_save(b.opt, NULL), PFX_ERROR_NULL_ARGUMENT, "path");
    pfx_optimizer_destroy(&other);
    remove(path);

    snap_free(&mid);
    snap_free(&end_a);
    snap_free(&end_b);
    rig_free(&a);
    rig_free(&b);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

/* A training checkpoint (values, moments, steps and a job's own fields)
 * continues bit for bit in a fresh optimizer whose parameters hold other
 * values; a step that disagrees or a missing moment is refused, changing
 * nothing. */
static void test_checkpoint_round_trip(void **state)
{
    pfx_runtime *rt = *state;
    const size_t base = pfx_test_live_bytes(rt);
    pfx_optimizer_params params = { .max_grad_norm = 2.0f,
                                    .warmup_steps = 4,
                                    .gain_ramp_steps = 5 };
    rig a;
    rig_init(&a, rt, &params, 4);
    for (uint64_t s = 0; s < 3; s++) {
        rig_grads(&a, s, 1.0f);
        assert_int_equal(pfx_optimizer_step(a.opt, NULL), PFX_SUCCESS);
    }
    char path[256];
    snprintf(path, sizeof(path), "%s/pfx_optimizer_ckpt_%d.safetensors",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    const float curve[3] = { 1.5f, 1.25f, 1.0f };
    const pfx_named_tensor extra = {
        .name = "job.curve", .host = curve, .ndim = 1, .shape = { 3 }, .dtype = PFX_DTYPE_F32
    };
    const pfx_st_metadata meta = { "job.steps", "3" };
    assert_int_equal(pfx_optimizer_save_checkpoint(a.opt, path, &extra, 1, &meta, 1), PFX_SUCCESS);
    for (uint64_t s = 3; s < 6; s++) {
        rig_grads(&a, s, 1.0f);
        assert_int_equal(pfx_optimizer_step(a.opt, NULL), PFX_SUCCESS);
    }
    snapshot end_a;
    snap(&a, &end_a);

    rig b; /* other initial values: the checkpoint brings them */
    rig_init(&b, rt, &params, 9);
    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    assert_string_equal(pfx_safetensors_metadata_get(f, "job.steps"), "3");
    float got[3];
    assert_int_equal(pfx_safetensors_read_f32(f, "job.curve", got, 3), PFX_SUCCESS);
    assert_memory_equal(got, curve, sizeof(curve));
    uint64_t step = 0;
    assert_status_names(rt, pfx_optimizer_check_checkpoint(b.opt, f, path, 2, "steps_done", &step),
                        PFX_ERROR_FORMAT, "'optimizer_step' (3) is more than 'steps_done' (2)");
    assert_int_equal(pfx_optimizer_check_checkpoint(b.opt, f, path, 3, "steps_done", &step),
                     PFX_SUCCESS);
    assert_int_equal(step, 3);
    assert_int_equal(pfx_optimizer_restore_checkpoint(b.opt, f, path), PFX_SUCCESS);
    pfx_safetensors_close(&f);
    assert_int_equal(pfx_optimizer_step_count(b.opt), 3);
    for (uint64_t s = 3; s < 6; s++) {
        rig_grads(&b, s, 1.0f);
        assert_int_equal(pfx_optimizer_step(b.opt, NULL), PFX_SUCCESS);
    }
    snapshot end_b;
    snap(&b, &end_b);
    snap_equal(&a, &end_a, &end_b, "run restored from a checkpoint");

    /* another optimizer's checkpoint (a parameter renamed): refused, nothing changed */
    pfx_optimizer *other = NULL;
    assert_int_equal(pfx_optimizer_create(rt, &params, &other), PFX_SUCCESS);
    unsigned gid;
    assert_int_equal(pfx_optimizer_add_group(other, &groups[0], &gid), PFX_SUCCESS);
    for (unsigned i = 0; i < NP; i++)
        assert_int_equal(
            pfx_optimizer_add_param(other, 0, b.p[i], b.g[i], i == 2 ? "renamed" : param_name[i]),
            PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    float before[8], after[8];
    assert_int_equal(pfx_tensor_read(b.p[0], 0, 8, before), PFX_SUCCESS);
    assert_status_names(rt, pfx_optimizer_restore_checkpoint(other, f, path), PFX_ERROR_FORMAT,
                        "renamed");
    pfx_safetensors_close(&f);
    assert_int_equal(pfx_tensor_read(b.p[0], 0, 8, after), PFX_SUCCESS);
    assert_memory_equal(before, after, sizeof(before));
    assert_int_equal(pfx_optimizer_step_count(other), 0);
    assert_status_names(rt, pfx_optimizer_save_checkpoint(other, NULL, NULL, 0, NULL, 0),
                        PFX_ERROR_NULL_ARGUMENT, "path");
    assert_status_names(rt, pfx_optimizer_save_checkpoint(other, path, NULL, 1, NULL, 0),
                        PFX_ERROR_NULL_ARGUMENT, "extra");
    assert_int_equal(pfx_optimizer_check_checkpoint(NULL, NULL, NULL, 0, NULL, NULL),
                     PFX_ERROR_NULL_ARGUMENT);
    pfx_optimizer_destroy(&other);
    remove(path);
    snap_free(&end_a);
    snap_free(&end_b);
    rig_free(&a);
    rig_free(&b);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

static void test_determinism(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    pfx_optimizer_params params = { .max_grad_norm = 1.0f };
    rig r[2];
    float norms[2][3];
    snapshot s[2];
    for (unsigned k = 0; k < 2; k++) {
        rig_init(&r[k], rt, &params, 6);
        for (uint64_t step = 0; step < 3; step++) {
            rig_grads(&r[k], step, 1.0f);
            pfx_optimizer_report rep;
            assert_int_equal(pfx_optimizer_step(r[k].opt, &rep), PFX_SUCCESS);
            norms[k][step] = rep.grad_norm;
        }
        snap(&r[k], &s[k]);
    }
    assert_memory_equal(norms[0], norms[1], sizeof(norms[0]));
    snap_equal(&r[0], &s[0], &s[1], "second identical run");
    for (unsigned k = 0; k < 2; k++) {
        snap_free(&s[k]);
        rig_free(&r[k]);
    }
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

static void test_bad_inputs(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    pfx_optimizer *opt = NULL;

    /* create */
    assert_status_names(NULL, pfx_optimizer_create(NULL, NULL, &opt), PFX_ERROR_NULL_ARGUMENT,
                        "rt");
    assert_status_names(rt, pfx_optimizer_create(rt, NULL, NULL), PFX_ERROR_NULL_ARGUMENT, "out");
    pfx_optimizer_params bp = { .max_grad_norm = NAN };
    assert_status_names(rt, pfx_optimizer_create(rt, &bp, &opt), PFX_ERROR_NOT_FINITE,
                        "max_grad_norm");
    bp = (pfx_optimizer_params){ .max_grad_norm = -1.0f };
    assert_status_names(rt, pfx_optimizer_create(rt, &bp, &opt), PFX_ERROR_INVALID_ARGUMENT,
                        "max_grad_norm");
    bp = (pfx_optimizer_params){ .decay = (pfx_lr_decay)7 };
    assert_status_names(rt, pfx_optimizer_create(rt, &bp, &opt), PFX_ERROR_INVALID_ARGUMENT,
                        "decay");
    bp = (pfx_optimizer_params){ .decay = PFX_LR_COSINE };
    assert_status_names(rt, pfx_optimizer_create(rt, &bp, &opt), PFX_ERROR_INVALID_ARGUMENT,
                        "decay_steps");
    bp = (pfx_optimizer_params){ .decay = PFX_LR_COSINE, .decay_steps = 3, .min_lr_ratio = 1.5f };
    assert_status_names(rt, pfx_optimizer_create(rt, &bp, &opt), PFX_ERROR_INVALID_ARGUMENT,
                        "min_lr_ratio");
    assert_null(opt);

    assert_int_equal(pfx_optimizer_create(rt, NULL, &opt), PFX_SUCCESS);
    /* step with nothing registered */
    assert_status_names(rt, pfx_optimizer_step(opt, NULL), PFX_ERROR_INVALID_ARGUMENT,
                        "no parameter");
    assert_status_names(NULL, pfx_optimizer_step(NULL, NULL), PFX_ERROR_NULL_ARGUMENT, "opt");

    /* add_group */
    unsigned gid = 0;
    pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
    assert_status_names(NULL, pfx_optimizer_add_group(NULL, &gp, &gid), PFX_ERROR_NULL_ARGUMENT,
                        "opt");
    assert_status_names(rt, pfx_optimizer_add_group(opt, NULL, &gid), PFX_ERROR_NULL_ARGUMENT,
                        "params");
    assert_status_names(rt, pfx_optimizer_add_group(opt, &gp, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "group_id");
    const struct {
        float lr, beta1, beta2, eps, wd, fraction;
        pfx_status status;
        const char *needle;
    } bad_groups[] = {
        { NAN, 0.9f, 0.999f, 1e-8f, 0.0f, 0.0f, PFX_ERROR_NOT_FINITE, "lr" },
        { INFINITY, 0.9f, 0.999f, 1e-8f, 0.0f, 0.0f, PFX_ERROR_NOT_FINITE, "lr" },
        { -1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.0f, PFX_ERROR_INVALID_ARGUMENT, "lr" },
        { 1e-3f, 1.0f, 0.999f, 1e-8f, 0.0f, 0.0f, PFX_ERROR_INVALID_ARGUMENT, "beta1" },
        { 1e-3f, -0.1f, 0.999f, 1e-8f, 0.0f, 0.0f, PFX_ERROR_INVALID_ARGUMENT, "beta1" },
        { 1e-3f, 0.9f, 1.0f, 1e-8f, 0.0f, 0.0f, PFX_ERROR_INVALID_ARGUMENT, "beta2" },
        { 1e-3f, 0.9f, NAN, 1e-8f, 0.0f, 0.0f, PFX_ERROR_NOT_FINITE, "beta2" },
        { 1e-3f, 0.9f, 0.999f, 0.0f, 0.0f, 0.0f, PFX_ERROR_INVALID_ARGUMENT, "eps" },
        { 1e-3f, 0.9f, 0.999f, -1e-8f, 0.0f, 0.0f, PFX_ERROR_INVALID_ARGUMENT, "eps" },
        { 1e-3f, 0.9f, 0.999f, INFINITY, 0.0f, 0.0f, PFX_ERROR_NOT_FINITE, "eps" },
        { 1e-3f, 0.9f, 0.999f, 1e-8f, -0.01f, 0.0f, PFX_ERROR_INVALID_ARGUMENT, "weight_decay" },
        { 1e-3f, 0.9f, 0.999f, 1e-8f, NAN, 0.0f, PFX_ERROR_NOT_FINITE, "weight_decay" },
        { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.5f, PFX_ERROR_INVALID_ARGUMENT, "decay_fraction" },
        { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, NAN, PFX_ERROR_NOT_FINITE, "decay_fraction" },
    };
    for (size_t i = 0; i < sizeof(bad_groups) / sizeof(bad_groups[0]); i++) {
        pfx_optimizer_group_params b = { .lr = bad_groups[i].lr,
                                         .beta1 = bad_groups[i].beta1,
                                         .beta2 = bad_groups[i].beta2,
                                         .eps = bad_groups[i].eps,
                                         .weight_decay = bad_groups[i].wd,
                                         .decay_fraction = bad_groups[i].fraction };
        assert_status_names(rt, pfx_optimizer_add_group(opt, &b, &gid), bad_groups[i].status,
                            bad_groups[i].needle);
    }
    /* beta1 = 0 and lr = 0 are legal */
    pfx_optimizer_group_params edge = { .lr = 0.0f, .beta1 = 0.0f, .beta2 = 0.0f, .eps = 1e-8f };
    assert_int_equal(pfx_optimizer_add_group(opt, &edge, &gid), PFX_SUCCESS);
    assert_int_equal(gid, 0);

    /* add_param */
    size_t s35[2] = { 3, 5 }, s53[2] = { 5, 3 }, n15 = 15;
    pfx_tensor *p = NULL, *g = NULL, *g2 = NULL, *g1d = NULL, *h = NULL, *p2 = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, s35, &p), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, s35, &g), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, s53, &g2), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n15, &g1d), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 2, s35, &h), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, s35, &p2), PFX_SUCCESS);
    pfx_runtime *rt2 = pfx_test_runtime();
    pfx_tensor *other = NULL;
    assert_int_equal(pfx_tensor_create(rt2, PFX_DTYPE_F32, 2, s35, &other), PFX_SUCCESS);

    assert_status_names(NULL, pfx_optimizer_add_param(NULL, 0, p, g, "p"), PFX_ERROR_NULL_ARGUMENT,
                        "opt");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, NULL, g, "p"), PFX_ERROR_NULL_ARGUMENT,
                        "param");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, NULL, "p"), PFX_ERROR_NULL_ARGUMENT,
                        "grad");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, g, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "name");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, g, ""), PFX_ERROR_INVALID_ARGUMENT,
                        "name");
    char longname[200];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, g, longname),
                        PFX_ERROR_INVALID_ARGUMENT, "name");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 1, p, g, "p"), PFX_ERROR_INVALID_ARGUMENT,
                        "group_id");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, h, g, "p"), PFX_ERROR_DTYPE_MISMATCH,
                        "param");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, h, "p"), PFX_ERROR_DTYPE_MISMATCH,
                        "grad");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, g2, "p"), PFX_ERROR_INVALID_SHAPE,
                        "shape");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, g1d, "p"), PFX_ERROR_INVALID_SHAPE,
                        "shape");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, other, g, "p"),
                        PFX_ERROR_RUNTIME_MISMATCH, "param");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, other, "p"),
                        PFX_ERROR_RUNTIME_MISMATCH, "grad");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, p, "p"), PFX_ERROR_ALIASING, "grad");
    assert_int_equal(pfx_optimizer_param_count(opt), 0);
    assert_int_equal(pfx_test_live_bytes(rt), base + 5 * 60 + 30 + 12 /* tensors + status */);

    assert_int_equal(pfx_optimizer_add_param(opt, 0, p, g, "p"), PFX_SUCCESS);
    pfx_tensor *g3 = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, s35, &g3), PFX_SUCCESS);
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p, g3, "q"), PFX_ERROR_ALIASING,
                        "param");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p2, g, "q"), PFX_ERROR_ALIASING,
                        "grad");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, g, p2, "q"), PFX_ERROR_ALIASING,
                        "param");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p2, p, "q"), PFX_ERROR_ALIASING,
                        "grad");
    assert_status_names(rt, pfx_optimizer_add_param(opt, 0, p2, g3, "p"),
                        PFX_ERROR_INVALID_ARGUMENT, "'p'");
    assert_int_equal(pfx_optimizer_param_count(opt), 1);

    /* state functions */
    float buf[15] = { 0 }, vbuf[15] = { 0 };
    pfx_optimizer_param_info info;
    size_t idx;
    assert_status_names(rt, pfx_optimizer_get_param(opt, 1, &info), PFX_ERROR_OUT_OF_RANGE,
                        "index");
    assert_status_names(rt, pfx_optimizer_get_param(opt, 0, NULL), PFX_ERROR_NULL_ARGUMENT, "info");
    assert_status_names(rt, pfx_optimizer_find_param(opt, "nope", &idx), PFX_ERROR_INVALID_ARGUMENT,
                        "nope");
    pfx_tensor *tp = NULL, *tg = NULL;
    assert_int_equal(pfx_optimizer_param_tensors(opt, 0, &tp, &tg), PFX_SUCCESS);
    assert_ptr_equal(tp, p);
    assert_ptr_equal(tg, g);
    assert_int_equal(pfx_optimizer_param_tensors(opt, 0, NULL, NULL), PFX_SUCCESS);
    assert_status_names(rt, pfx_optimizer_param_tensors(opt, 1, &tp, &tg), PFX_ERROR_OUT_OF_RANGE,
                        "index");
    assert_status_names(NULL, pfx_optimizer_param_tensors(NULL, 0, &tp, &tg),
                        PFX_ERROR_NULL_ARGUMENT, "opt");
    assert_status_names(rt, pfx_optimizer_state_size(opt, NULL), PFX_ERROR_NULL_ARGUMENT, "floats");
    assert_status_names(rt, pfx_optimizer_export_param(opt, 3, NULL, buf, vbuf),
                        PFX_ERROR_OUT_OF_RANGE, "index");
    assert_status_names(rt, pfx_optimizer_import_param(opt, 0, 1, NULL, vbuf),
                        PFX_ERROR_NULL_ARGUMENT, "m");
    assert_status_names(rt, pfx_optimizer_import_param(opt, 0, 1, buf, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "v");
    assert_status_names(rt, pfx_optimizer_import_param(opt, 1, 1, buf, vbuf),
                        PFX_ERROR_OUT_OF_RANGE, "index");
    buf[3] = NAN;
    assert_status_names(rt, pfx_optimizer_import_param(opt, 0, 1, buf, vbuf), PFX_ERROR_NOT_FINITE,
                        "m[3]");
    buf[3] = 0.0f;
    vbuf[14] = -1.0f;
    assert_status_names(rt, pfx_optimizer_import_param(opt, 0, 1, buf, vbuf),
                        PFX_ERROR_INVALID_ARGUMENT, "v[14]");
    assert_status_names(NULL, pfx_optimizer_set_step_count(NULL, 1), PFX_ERROR_NULL_ARGUMENT,
                        "opt");
    assert_int_equal(pfx_optimizer_step_count(NULL), 0);
    assert_int_equal(pfx_optimizer_param_count(NULL), 0);

    pfx_optimizer_destroy(&opt);
    assert_null(opt);
    pfx_optimizer_destroy(&opt); /* NULL-safe */
    pfx_optimizer_destroy(NULL);
    pfx_tensor *all[] = { p, g, g2, g1d, h, p2, g3 };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        pfx_tensor_destroy(&all[i]);
    pfx_tensor_destroy(&other);
    pfx_runtime_destroy(&rt2);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

/* Counts that cannot advance, sloppy integers in a state file and a name the
 * state file could not hold are refused. */
static void test_hostile_state(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    pfx_optimizer_params params = { 0 };
    pfx_optimizer *opt = NULL;
    assert_int_equal(pfx_optimizer_create(rt, &params, &opt), PFX_SUCCESS);
    unsigned gid;
    assert_int_equal(pfx_optimizer_add_group(opt, &groups[0], &gid), PFX_SUCCESS);
    const size_t shape[1] = { 5 };
    pfx_tensor *p = NULL, *g = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &p), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &g), PFX_SUCCESS);
    assert_status_names(rt, pfx_optimizer_add_param(opt, gid, p, g, "caf\xe9"),
                        PFX_ERROR_INVALID_ARGUMENT, "UTF-8");
    assert_status_names(rt, pfx_optimizer_add_param(opt, gid, p, g, "a\xc3"),
                        PFX_ERROR_INVALID_ARGUMENT, "UTF-8");
    assert_int_equal(pfx_optimizer_param_count(opt), 0);
    assert_int_equal(pfx_optimizer_add_param(opt, gid, p, g, "w"), PFX_SUCCESS);

    float m[5] = { 0.1f, -0.2f, 0.3f, 0, 1 }, v[5] = { 0.01f, 0.02f, 0, 0.5f, 1 };
    assert_status_names(rt, pfx_optimizer_import_param(opt, 0, UINT64_MAX, m, v),
                        PFX_ERROR_INVALID_ARGUMENT, "cannot advance");
    assert_status_names(rt, pfx_optimizer_set_step_count(opt, UINT64_MAX),
                        PFX_ERROR_INVALID_ARGUMENT, "cannot advance");
    assert_int_equal(pfx_optimizer_import_param(opt, 0, PFX_OPTIMIZER_MAX_STEP, m, v), PFX_SUCCESS);
    assert_int_equal(pfx_optimizer_import_param(opt, 0, 2, m, v), PFX_SUCCESS);

    char path[256];
    snprintf(path, sizeof(path), "%s/pfx_optimizer_hostile_%d.safetensors",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    pfx_named_tensor items[2] = {
        { .name = "w.exp_avg", .host = m, .ndim = 1, .shape = { 5 }, .dtype = PFX_DTYPE_F32 },
        { .name = "w.exp_avg_sq", .host = v, .ndim = 1, .shape = { 5 }, .dtype = PFX_DTYPE_F32 },
    };
    static const char *bad[] = {
        " 5", " -5", "-5", "+5", "5 ", "0x5", "", "18446744073709551615", "18446744073709551616"
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (int which = 0; which < 2; which++) {
            pfx_st_metadata meta[3] = { { "format", "prefixcl-adamw-1" },
                                        { "step", which ? "3" : bad[i] },
                                        { "w.step", which ? bad[i] : "3" } };
            assert_int_equal(pfx_safetensors_save(NULL, path, items, 2, meta, 3), PFX_SUCCESS);
            pfx_status st = pfx_optimizer_load(opt, path);
            if (st != PFX_ERROR_FORMAT || !strstr(pfx_last_error(rt), "is not a count"))
                fail_msg("%s '%s': %s, '%s'", which ? "w.step" : "step", bad[i],
                         pfx_status_string(st), pfx_last_error(rt));
            uint64_t t = 0;
            assert_int_equal(pfx_optimizer_export_param(opt, 0, &t, NULL, NULL), PFX_SUCCESS);
            assert_int_equal(t, 2); /* unchanged */
        }
    }
    pfx_st_metadata good[3] = { { "format", "prefixcl-adamw-1" },
                                { "step", "007" },
                                { "w.step", "18446744073709551614" } };
    assert_int_equal(pfx_safetensors_save(NULL, path, items, 2, good, 3), PFX_SUCCESS);
    assert_int_equal(pfx_optimizer_load(opt, path), PFX_SUCCESS);
    assert_int_equal(pfx_optimizer_step_count(opt), 7);
    remove(path);
    pfx_optimizer_destroy(&opt);
    pfx_tensor_destroy(&p);
    pfx_tensor_destroy(&g);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference), cmocka_unit_test(test_clipping),
        cmocka_unit_test(test_nonfinite_skips),   cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_state_round_trip),  cmocka_unit_test(test_checkpoint_round_trip),
        cmocka_unit_test(test_determinism),       cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_hostile_state),
    };
    return cmocka_run_group_tests_name("optimizer", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
