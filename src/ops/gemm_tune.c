/* The CLBlast GEMM tuner (see prefixcl/gemm_tune.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gemm_tuning.h"

#include <clblast_c.h>

#include "gemm.h"
#include "io_internal.h"

/* Products at or above this m n k are "large": they score Xgemm. */
#define LARGE_MNK (128.0 * 128.0 * 128.0)
/* XGEMM_MIN_INDIRECT_SIZE that sends every product to one kernel. */
#define ALL_INDIRECT 0
#define ALL_DIRECT   65536

static const pfx_gemm_tune_shape default_shapes[] = {
    { 1024, 768, 768, false, true },  /* layer forward: X W^T at GPT-2 width, B N = 1024 */
    { 1024, 768, 768, false, false }, /* layer backward: dX = dY W */
    { 768, 768, 1024, true, false },  /* layer backward: dW = dY^T X */
    { 96, 64, 64, false, true },      /* prefixcl train: projections */
    { 20, 512, 512, false, true },    /* prefix encoder at GPT-2 sizes */
    { 4, 768, 768, false, true },     /* a decode step's projections */
};

size_t pfx_gemm_tune_default_shapes(const pfx_gemm_tune_shape **out)
{
    *out = default_shapes;
    return sizeof(default_shapes) / sizeof(default_shapes[0]);
}

typedef struct tuner {
    pfx_runtime *rt;
    const pfx_gemm_tune_shape *shapes;
    size_t count;
    bool large[64];
    bool one_kind;
    float *a, *b, *c; /* host copies of A and B; C read back for checks */
    cl_mem da, db, dc;
    size_t na, nb, nc;
    double start, limit;
    uint64_t rng;
    const pfx_gemm_tune_params *params;
    pfx_gemm_tune_report *report;
    double best_gflops;
} tuner;

static double mnk(const pfx_gemm_tune_shape *s)
{
    return (double)s->m * (double)s->n * (double)s->k;
}

static void progress(tuner *t, const char *phase)
{
    if (t->params->progress) {
        double f = (pfx_host_seconds() - t->start) / t->limit;
        t->params->progress(t->params->user, f > 1 ? 1 : f, phase, t->report->tried,
                            t->best_gflops);
    }
}

static CLBlastStatusCode run(tuner *t, const pfx_gemm_tune_shape *s)
{
    size_t lda = s->trans_a ? s->m : s->k, ldb = s->trans_b ? s->k : s->n;
    return CLBlastSgemm(
        CLBlastLayoutRowMajor, s->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
        s->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, s->m, s->n, s->k, 1.0f, t->da, 0,
        lda, t->db, 0, ldb, 0.0f, t->dc, 0, s->n, &t->rt->queue, NULL);
}

/* Sampled entries of C against double dot products of the host copies. */
static bool check(tuner *t, const pfx_gemm_tune_shape *s)
{
    if (clEnqueueReadBuffer(t->rt->queue, t->dc, CL_TRUE, 0, s->m * s->n * sizeof(float), t->c, 0,
                            NULL, NULL) != CL_SUCCESS)
        return false;
    size_t lda = s->trans_a ? s->m : s->k, ldb = s->trans_b ? s->k : s->n;
    uint64_t rng = 12345;
    for (int e = 0; e < 24; e++) {
        size_t i = pfx_splitmix64(&rng) % s->m, j = pfx_splitmix64(&rng) % s->n;
        double sum = 0, mag = 0;
        for (size_t p = 0; p < s->k; p++) {
            double x = s->trans_a ? t->a[p * lda + i] : t->a[i * lda + p];
            double y = s->trans_b ? t->b[j * ldb + p] : t->b[p * ldb + j];
            sum += x * y;
            mag += fabs(x * y);
        }
        double got = t->c[i * s->n + j];
        if (!(fabs(got - sum) <= 1e-5 * mag * sqrt((double)s->k) + 1e-6))
            return false;
    }
    return true;
}

/* Seconds of each selected shape (one run, the best of three for small
 * ones, after a checked warm-up run that also builds the kernels); false
 * when CLBlast fails or is wrong. which: 1 large, 0 small, -1 all. */
static bool time_shapes(tuner *t, int which, double *secs)
{
    for (size_t i = 0; i < t->count; i++) {
        secs[i] = 0;
        if (which >= 0 && !t->one_kind && t->large[i] != (which == 1))
            continue;
        const pfx_gemm_tune_shape *s = &t->shapes[i];
        if (run(t, s) != CLBlastSuccess || clFinish(t->rt->queue) != CL_SUCCESS || !check(t, s))
            return false;
        double best = INFINITY;
        for (int r = 0; r < (t->large[i] ? 1 : 3); r++) { /* small ones are noisier */
            double t0 = pfx_host_seconds();
            if (run(t, s) != CLBlastSuccess || clFinish(t->rt->queue) != CL_SUCCESS)
                return false;
            double dt = pfx_host_seconds() - t0;
            best = dt < best ? dt : best;
        }
        secs[i] = best;
    }
    return true;
}

static double total(const double *secs, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += secs[i];
    return s;
}

static double gflops_of(const tuner *t, const double *secs, int which)
{
    double flops = 0, s = 0;
    for (size_t i = 0; i < t->count; i++)
        if (which < 0 || t->one_kind || t->large[i] == (which == 1)) {
            flops += 2.0 * mnk(&t->shapes[i]);
            s += secs[i];
        }
    return s > 0 ? flops / s * 1e-9 : 0;
}

/* Moves the rows of [fixed, n) that `prefer` accepts in front of the others,
 * keeping their shuffled order: on CPU devices, where each candidate costs a
 * CLBlast build of seconds, the likely ones come first. */
static void prefer_first(size_t *all, size_t fixed, size_t n, size_t width,
                         bool (*prefer)(const size_t *))
{
    size_t *tmp = malloc((n - fixed) * width * sizeof(size_t));
    if (!tmp)
        return;
    size_t out = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = fixed; i < n; i++)
            if (prefer(all + i * width) == (pass == 0))
                memcpy(tmp + (out++) * width, all + i * width, width * sizeof(size_t));
    memcpy(all + fixed * width, tmp, (n - fixed) * width * sizeof(size_t));
    free(tmp);
}

/* Shuffles rows [fixed, n) (Fisher-Yates, the tuner's seed), then on CPU
 * devices moves the ones `cpu_prefers` accepts first. */
static void order(tuner *t, size_t *all, size_t fixed, size_t n, size_t width,
                  bool (*cpu_prefers)(const size_t *))
{
    size_t tmp[PFX_XGEMM_PARAMS];
    for (size_t i = n - 1; i > fixed; i--) {
        size_t j = fixed + pfx_splitmix64(&t->rng) % (i - fixed + 1);
        memcpy(tmp, all + i * width, width * sizeof(size_t));
        memcpy(all + i * width, all + j * width, width * sizeof(size_t));
        memcpy(all + j * width, tmp, width * sizeof(size_t));
    }
    if (t->rt->info.type == PFX_DEVICE_CPU)
        prefer_first(all, fixed, n, width, cpu_prefers);
}

/* CPUs: no local-memory staging (it is ordinary memory there), wide vectors,
 * large tiles (what the PoCL profile favoured). */
static bool cpu_xgemm(const size_t *v)
{
    return !v[PFX_XG_SA] && !v[PFX_XG_SB] && v[PFX_XG_VWM] >= 4 && v[PFX_XG_VWN] >= 4 &&
           v[PFX_XG_MWG] >= 32 && v[PFX_XG_NWG] >= 32;
}

static bool cpu_direct(const size_t *v)
{
    return v[PFX_XD_VWMD] >= 2 && v[PFX_XD_VWND] >= 2 && v[PFX_XD_WGD] >= 16;
}

/* Every Xgemm kernel-0 configuration of CLBlast's tuner variation 2 that
 * passes the rules, shuffled, after CLBlast's defaults and a CPU seed (64x64
 * tiles, float8 vectors: what worked on PoCL). */
static size_t xgemm_candidates(tuner *t, size_t **out)
{
    static const size_t mwg[] = { 16, 32, 64, 128 }, kwg[] = { 16, 32 }, dim[] = { 8, 16, 32 },
                        vw[] = { 1, 2, 4, 8 }, bit[] = { 0, 1 };
    size_t cap = 1 << 16, n = 0;
    size_t *all = malloc(cap * PFX_XGEMM_PARAMS * sizeof(size_t));
    if (!all)
        return 0;
    pfx_gemm_tuning def;
    pfx_gemm_tuning_defaults(&def);
    const size_t seed[PFX_XGEMM_PARAMS] = { 0, 1, 32, 2, 8, 8, 64, 8, 8, 64, 0, 0, 0, 0, 8, 8 };
    char why[128];
    memcpy(all, def.xgemm, sizeof(def.xgemm));
    n = pfx_xgemm_valid(all, &t->rt->info, why, sizeof(why)) ? 1 : 0;
    memcpy(all + n * PFX_XGEMM_PARAMS, seed, sizeof(seed));
    n += pfx_xgemm_valid(all + n * PFX_XGEMM_PARAMS, &t->rt->info, why, sizeof(why)) ? 1 : 0;
    size_t fixed = n;
    size_t v[PFX_XGEMM_PARAMS] = { 0 };
    v[PFX_XG_KREG] = 1;
    v[PFX_XG_KWI] = 2;
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 2; c++)
                for (size_t d = 0; d < 3; d++)
                    for (size_t e = 0; e < 3; e++)
                        for (size_t f = 0; f < 3; f++)
                            for (size_t g = 0; g < 3; g++)
                                for (size_t h = 0; h < 4; h++)
                                    for (size_t i = 0; i < 4; i++)
                                        for (size_t j = 0; j < 16; j++) {
                                            v[PFX_XG_MWG] = mwg[a];
                                            v[PFX_XG_NWG] = mwg[b];
                                            v[PFX_XG_KWG] = kwg[c];
                                            v[PFX_XG_MDIMC] = dim[d];
                                            v[PFX_XG_NDIMC] = dim[e];
                                            v[PFX_XG_MDIMA] = dim[f];
                                            v[PFX_XG_NDIMB] = dim[g];
                                            v[PFX_XG_VWM] = vw[h];
                                            v[PFX_XG_VWN] = vw[i];
                                            v[PFX_XG_STRM] = bit[j & 1];
                                            v[PFX_XG_STRN] = bit[(j >> 1) & 1];
                                            v[PFX_XG_SA] = bit[(j >> 2) & 1];
                                            v[PFX_XG_SB] = bit[(j >> 3) & 1];
                                            if (n < cap &&
                                                pfx_xgemm_valid(v, &t->rt->info, why, sizeof(why)))
                                                memcpy(all + (n++) * PFX_XGEMM_PARAMS, v,
                                                       sizeof(v));
                                        }
    order(t, all, fixed, n, PFX_XGEMM_PARAMS, cpu_xgemm);
    *out = all;
    return n;
}

/* The same for XgemmDirect (its tuner's variation 2). */
static size_t direct_candidates(tuner *t, size_t **out)
{
    static const size_t wgd[] = { 8, 16, 32, 64 }, dim[] = { 8, 16, 32 }, kwid[] = { 2, 8, 16 },
                        vw[] = { 1, 2, 4, 8 };
    size_t cap = 1 << 15, n = 0;
    size_t *all = malloc(cap * PFX_XGEMM_DIRECT_PARAMS * sizeof(size_t));
    if (!all)
        return 0;
    pfx_gemm_tuning def;
    pfx_gemm_tuning_defaults(&def);
    const size_t seed[PFX_XGEMM_DIRECT_PARAMS] = { 2, 8, 8, 8, 8, 1, 1, 4, 4, 32 };
    char why[128];
    memcpy(all, def.direct, sizeof(def.direct));
    n = pfx_xgemm_direct_valid(all, &t->rt->info, why, sizeof(why)) ? 1 : 0;
    memcpy(all + n * PFX_XGEMM_DIRECT_PARAMS, seed, sizeof(seed));
    n += pfx_xgemm_direct_valid(all + n * PFX_XGEMM_DIRECT_PARAMS, &t->rt->info, why, sizeof(why))
             ? 1
             : 0;
    size_t fixed = n;
    size_t v[PFX_XGEMM_DIRECT_PARAMS] = { 0 };
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 3; c++)
                for (size_t d = 0; d < 3; d++)
                    for (size_t e = 0; e < 3; e++)
                        for (size_t f = 0; f < 3; f++)
                            for (size_t g = 0; g < 4; g++)
                                for (size_t h = 0; h < 4; h++)
                                    for (size_t i = 0; i < 4; i++) {
                                        v[PFX_XD_WGD] = wgd[a];
                                        v[PFX_XD_MDIMCD] = dim[b];
                                        v[PFX_XD_NDIMCD] = dim[c];
                                        v[PFX_XD_MDIMAD] = dim[d];
                                        v[PFX_XD_NDIMBD] = dim[e];
                                        v[PFX_XD_KWID] = kwid[f];
                                        v[PFX_XD_VWMD] = vw[g];
                                        v[PFX_XD_VWND] = vw[h];
                                        v[PFX_XD_PADA] = i & 1;
                                        v[PFX_XD_PADB] = (i >> 1) & 1;
                                        if (n < cap && pfx_xgemm_direct_valid(v, &t->rt->info, why,
                                                                              sizeof(why)))
                                            memcpy(all + (n++) * PFX_XGEMM_DIRECT_PARAMS, v,
                                                   sizeof(v));
                                    }
    order(t, all, fixed, n, PFX_XGEMM_DIRECT_PARAMS, cpu_direct);
    *out = all;
    return n;
}

/* Tries candidates of one kernel (direct or not) until `until` (a fraction
 * of the limit), at least one; copies the fastest into best[]. */
static pfx_status search(tuner *t, bool direct, double until, size_t *best, double *best_secs)
{
    size_t *cands = NULL;
    size_t count = direct ? direct_candidates(t, &cands) : xgemm_candidates(t, &cands);
    size_t width = direct ? PFX_XGEMM_DIRECT_PARAMS : PFX_XGEMM_PARAMS;
    if (!count) {
        free(cands);
        return pfx_error(t->rt, PFX_ERROR_UNSUPPORTED,
                         "gemm-tune: no %s configuration fits this device",
                         direct ? "XgemmDirect" : "Xgemm");
    }
    pfx_gemm_tuning def;
    pfx_gemm_tuning_defaults(&def);
    pfx_status st = pfx_gemm_min_indirect_override(t->rt, direct ? ALL_DIRECT : ALL_INDIRECT);
    double best_s = INFINITY, secs[64];
    bool found = false;
    int which = direct ? 0 : 1;
    for (size_t c = 0; c < count && st == PFX_SUCCESS; c++) {
        if (found && pfx_host_seconds() - t->start > until * t->limit)
            break;
        const size_t *v = cands + c * width;
        CLBlastStatusCode s =
            direct ? CLBlastOverrideParameters(t->rt->device, "XgemmDirect", CLBlastPrecisionSingle,
                                               width, (const char **)pfx_xgemm_direct_names, v)
                   : CLBlastOverrideParameters(t->rt->device, "Xgemm", CLBlastPrecisionSingle,
                                               width, (const char **)pfx_xgemm_names, v);
        t->report->tried++;
        if (s != CLBlastSuccess || !time_shapes(t, which, secs)) {
            t->report->rejected++;
            progress(t, direct ? "XgemmDirect" : "Xgemm");
            continue;
        }
        double sum = total(secs, t->count);
        if (sum < best_s) {
            best_s = sum;
            found = true;
            memcpy(best, v, width * sizeof(size_t));
            memcpy(best_secs, secs, t->count * sizeof(double));
            double g = gflops_of(t, secs, which);
            t->best_gflops = g > t->best_gflops ? g : t->best_gflops;
        }
        progress(t, direct ? "XgemmDirect" : "Xgemm");
    }
    free(cands);
    if (st == PFX_SUCCESS && !found)
        st = pfx_error(t->rt, PFX_ERROR_CLBLAST,
                       "gemm-tune: no %s configuration ran correctly on this device",
                       direct ? "XgemmDirect" : "Xgemm");
    return st;
}

/* floor(cbrt(x)) exactly. */
static size_t icbrt(double x)
{
    size_t r = (size_t)cbrt(x);
    while (r > 0 && (double)r * r * r > x)
        r--;
    while ((double)(r + 1) * (r + 1) * (r + 1) <= x)
        r++;
    return r;
}

/* XGEMM_MIN_INDIRECT_SIZE minimizing the total time, given each shape's
 * time on either kernel (products with m n k < size^3 take the direct one). */
static size_t pick_threshold(const tuner *t, const double *ind, const double *dir)
{
    size_t best_t = ALL_DIRECT;
    double best = INFINITY;
    for (size_t c = 0; c <= t->count; c++) {
        size_t thr = c == t->count ? ALL_DIRECT : icbrt(mnk(&t->shapes[c]));
        double sum = 0;
        for (size_t i = 0; i < t->count; i++)
            sum += mnk(&t->shapes[i]) < (double)thr * thr * thr ? dir[i] : ind[i];
        if (sum < best) {
            best = sum;
            best_t = thr;
        }
    }
    return best_t;
}

static pfx_status setup(tuner *t)
{
    for (size_t i = 0; i < t->count; i++) {
        const pfx_gemm_tune_shape *s = &t->shapes[i];
        if (!s->m || !s->n || !s->k)
            return pfx_error(t->rt, PFX_ERROR_INVALID_SHAPE, "gemm-tune: shape %zu has a 0 size",
                             i);
        t->na = s->m * s->k > t->na ? s->m * s->k : t->na;
        t->nb = s->k * s->n > t->nb ? s->k * s->n : t->nb;
        t->nc = s->m * s->n > t->nc ? s->m * s->n : t->nc;
        t->large[i] = mnk(s) >= LARGE_MNK;
    }
    size_t large = 0;
    for (size_t i = 0; i < t->count; i++)
        large += t->large[i];
    t->one_kind = large == 0 || large == t->count; /* both kernels judged on all */
    t->a = malloc(t->na * sizeof(float));
    t->b = malloc(t->nb * sizeof(float));
    t->c = malloc(t->nc * sizeof(float));
    if (!t->a || !t->b || !t->c)
        return pfx_error(t->rt, PFX_ERROR_OUT_OF_MEMORY, "gemm-tune: host allocation failed");
    uint64_t rng = 777;
    for (size_t i = 0; i < t->na; i++)
        t->a[i] = (float)((double)(pfx_splitmix64(&rng) >> 11) / 9007199254740992.0 * 2 - 1);
    for (size_t i = 0; i < t->nb; i++)
        t->b[i] = (float)((double)(pfx_splitmix64(&rng) >> 11) / 9007199254740992.0 * 2 - 1);
    pfx_status st = pfx_buffer_create(t->rt, t->na * sizeof(float), t->a, &t->da);
    if (st == PFX_SUCCESS)
        st = pfx_buffer_create(t->rt, t->nb * sizeof(float), t->b, &t->db);
    if (st == PFX_SUCCESS)
        st = pfx_buffer_create(t->rt, t->nc * sizeof(float), NULL, &t->dc);
    return st;
}

static void teardown(tuner *t)
{
    pfx_buffer_release(t->rt, t->da, t->na * sizeof(float));
    pfx_buffer_release(t->rt, t->db, t->nb * sizeof(float));
    pfx_buffer_release(t->rt, t->dc, t->nc * sizeof(float));
    free(t->a);
    free(t->b);
    free(t->c);
}

/* mkdir -p of the cache folder. */
static void make_dirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    mkdir(tmp, 0755);
}

pfx_status pfx_gemm_tune(pfx_runtime *rt, const pfx_gemm_tune_params *params,
                         pfx_gemm_tune_report *report)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "gemm-tune: rt is NULL");
    if (!params || !report)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "gemm-tune: %s is NULL",
                         params ? "report" : "params");
    memset(report, 0, sizeof(*report));
    if (!(params->time_limit_s > 0) || !isfinite(params->time_limit_s))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "gemm-tune: the time limit (%g s) must be finite and > 0",
                         params->time_limit_s);
    if (!pfx_gemm_tuning_path(&rt->info, rt->cache_dir, report->path, sizeof(report->path)))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "gemm-tune: the runtime has no kernel cache folder to store the result");
    /* where the result goes, checked before the first candidate runs */
    make_dirs(rt->cache_dir);
    pfx_atomic_file probe;
    if (pfx_atomic_begin(rt, report->path, &probe) != PFX_SUCCESS) {
        char why[512];
        snprintf(why, sizeof(why), "%s", pfx_last_error(rt));
        return pfx_error(rt, PFX_ERROR_IO, "gemm-tune: cannot store the result: %s", why);
    }
    pfx_atomic_abort(&probe);
    tuner t;
    memset(&t, 0, sizeof(t));
    t.rt = rt;
    t.params = params;
    t.report = report;
    t.limit = params->time_limit_s;
    t.rng = params->seed * UINT64_C(0x9E3779B97F4A7C15) + 1;
    t.count = params->shapes ? params->shape_count : pfx_gemm_tune_default_shapes(&t.shapes);
    if (params->shapes)
        t.shapes = params->shapes;
    if (t.count == 0 || t.count > 64)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "gemm-tune: %zu shapes (1..64 accepted)",
                         t.count);
    pfx_status st = pfx_rt_enter(rt, "gemm-tune");
    if (st != PFX_SUCCESS)
        return st;
    t.start = pfx_host_seconds();
    st = setup(&t);

    /* Untuned: whatever CLBlast chooses for this device now. */
    double untuned[64], ind[64], dir[64], tuned[64];
    if (st == PFX_SUCCESS && !time_shapes(&t, -1, untuned))
        st = pfx_error(rt, PFX_ERROR_CLBLAST, "gemm-tune: the untuned GEMM failed or was wrong");
    if (st == PFX_SUCCESS) {
        report->untuned_gflops = gflops_of(&t, untuned, -1);
        progress(&t, "untuned");
    }
    pfx_gemm_tuning best;
    pfx_gemm_tuning_defaults(&best);
    if (st == PFX_SUCCESS)
        st = search(&t, false, 0.45, best.xgemm, ind);
    if (st == PFX_SUCCESS)
        st = search(&t, true, 0.7, best.direct, dir);

    /* Each winner on the shapes the other one was judged on, then the
     * threshold between them; the tuned times follow from those. */
    double other[64];
    if (st == PFX_SUCCESS && !t.one_kind) {
        best.min_indirect = ALL_INDIRECT;
        st = pfx_gemm_tuning_override(rt, &best);
        if (st == PFX_SUCCESS && !time_shapes(&t, 0, other))
            st = pfx_error(rt, PFX_ERROR_CLBLAST, "gemm-tune: the Xgemm winner failed on a shape");
        for (size_t i = 0; st == PFX_SUCCESS && i < t.count; i++)
            ind[i] = t.large[i] ? ind[i] : other[i];
        if (st == PFX_SUCCESS &&
            (st = pfx_gemm_min_indirect_override(rt, ALL_DIRECT)) == PFX_SUCCESS &&
            !time_shapes(&t, 1, other))
            st = pfx_error(rt, PFX_ERROR_CLBLAST,
                           "gemm-tune: the XgemmDirect winner failed on a shape");
        for (size_t i = 0; st == PFX_SUCCESS && i < t.count; i++)
            dir[i] = t.large[i] ? other[i] : dir[i];
    }
    if (st == PFX_SUCCESS) {
        progress(&t, "threshold");
        best.min_indirect = pick_threshold(&t, ind, dir);
        st = pfx_gemm_tuning_override(rt, &best);
        for (size_t i = 0; i < t.count; i++) {
            double c = (double)best.min_indirect;
            tuned[i] = mnk(&t.shapes[i]) < c * c * c ? dir[i] : ind[i];
        }
    }
    if (st == PFX_SUCCESS) {
        report->tuned_gflops = gflops_of(&t, tuned, -1);
        best.untuned_gflops = report->untuned_gflops;
        best.tuned_gflops = report->tuned_gflops;
        report->tuning = best;
        progress(&t, "tuned");
        make_dirs(rt->cache_dir);
        st = pfx_gemm_tuning_write(rt, report->path, &best);
    }
    teardown(&t);
    pfx_rt_leave(rt);
    return st;
}
