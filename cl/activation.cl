/*
 * Elementwise pieces of the MLP over float32 [rows, cols] views (offset, row
 * stride): activations forward and backward, SwiGLU, the bias added to
 * every row, and column blocks split and joined (src/ops/activation.c,
 * src/ops/bias.c, src/ops/columns.c). Grid-stride loops over
 * rows * cols (8 elements a step where the views are contiguous); every
 * element is read and written by one work-item, so the in-place forms are
 * safe.
 */

/* Activation codes: the values of pfx_activation (src/ops/model_ops.h). */
#define ACT_GELU_TANH 0
#define ACT_GELU 1
#define ACT_RELU 2
#define ACT_SILU 3

#define GELU_K 0.7978845608028654f   /* sqrt(2 / pi) */
#define GELU_A 0.044715f
#define INV_SQRT2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f

/* The math of the elementwise ops, once per float type (SUF 1: float, 8:
 * float8; contiguous views run 8 elements per step, so a CPU compiler
 * vectorizes them: the library tanh, exp and the per-element call were 5-10x
 * the memory time on PoCL). exp from the attention's polynomial 2^x on
 * x <= 0 (cl/common.cl, with mad(): rusticl's vector fma() is wrong); the
 * sigmoid and tanh take it on -|u| so its range is never left. tanh as
 * (1 - e) / (1 + e), e = exp(-2|y|): absolute error a few ulps of 1, what
 * 1 + tanh in the GELU needs. */
#define PFX_DEFINE_ACT_MATH(SUF, T, I, CONVERT_I, AS_T)                                      \
    PFX_DEFINE_POLY_EXP2_WITH(exp2_neg##SUF, T, I, CONVERT_I, AS_T, mad)                     \
    T sigmoid##SUF(T u)                                                                      \
    {                                                                                        \
        const T e = exp2_neg##SUF(-fabs(u) * PFX_LOG2E);                                     \
        return select(e, (T)1.0f, u >= (T)0.0f) / ((T)1.0f + e);                             \
    }                                                                                        \
    T tanh##SUF(T y)                                                                         \
    {                                                                                        \
        const T e = exp2_neg##SUF((-2.0f * PFX_LOG2E) * fabs(y));                            \
        return copysign(((T)1.0f - e) / ((T)1.0f + e), y);                                   \
    }                                                                                        \
    T act_forward##SUF(int act, T u)                                                         \
    {                                                                                        \
        switch (act) {                                                                       \
        case ACT_GELU_TANH:                                                                  \
            return 0.5f * u * (1.0f + tanh##SUF(GELU_K * (u + GELU_A * u * u * u)));         \
        case ACT_GELU:                                                                       \
            return 0.5f * u * (1.0f + erf(u * INV_SQRT2));                                   \
        case ACT_RELU:                                                                       \
            return fmax(u, (T)0.0f);                                                         \
        default:                                                                             \
            return u * sigmoid##SUF(u);                                                      \
        }                                                                                    \
    }                                                                                        \
    T act_derivative##SUF(int act, T u)                                                      \
    {                                                                                        \
        switch (act) {                                                                       \
        case ACT_GELU_TANH: {                                                                \
            const T t = tanh##SUF(GELU_K * (u + GELU_A * u * u * u));                        \
            return 0.5f * (1.0f + t) +                                                       \
                   0.5f * u * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * u * u);      \
        }                                                                                    \
        case ACT_GELU:                                                                       \
            return 0.5f * (1.0f + erf(u * INV_SQRT2)) + u * INV_SQRT_2PI * exp(-0.5f * u * u); \
        case ACT_RELU:                                                                       \
            return select((T)0.0f, (T)1.0f, u > (T)0.0f);                                    \
        default: {                                                                           \
            const T s = sigmoid##SUF(u);                                                     \
            return s * (1.0f + u * (1.0f - s));                                              \
        }                                                                                    \
        }                                                                                    \
    }
PFX_DEFINE_ACT_MATH(1, float, int, convert_int, as_float)
PFX_DEFINE_ACT_MATH(8, float8, int8, convert_int8, as_float8)

/* Views whose rows follow each other (row stride = cols, or one row): their
 * elements are one run from the offset. */
#define FLAT(ld) ((ld) == cols || rows == 1)
/* The flat form: chunks of 8 elements (index i of the chunk), then the tail
 * one element at a time (i the element). */
#define FOR_FLAT_CHUNKS                                                                      \
    for (ulong i = get_global_id(0); i < rows * cols / 8; i += get_global_size(0))
#define FOR_FLAT_TAIL                                                                        \
    for (ulong i = rows * cols / 8 * 8 + get_global_id(0); i < rows * cols;                 \
         i += get_global_size(0))

#define AT(base, off, ld) (base)[(off) + r * (ld) + c]

/* Grid-stride loop over the rows * cols elements of the views, with the
 * element's row r and column c stepped along: one division per work-item
 * instead of one per element (a 64-bit division costs more than the rest of
 * an elementwise op on a CPU). */
#define FOR_ELEMENTS(rows, cols)                                                              \
    const ulong n_ = (rows) * (cols), g_ = get_global_size(0);                                 \
    const ulong dr_ = g_ / (cols), dc_ = g_ - dr_ * (cols);                                    \
    ulong r = get_global_id(0) / (cols), c = get_global_id(0) - r * (cols);                    \
    for (ulong i_ = get_global_id(0); i_ < n_; i_ += g_, r += dr_ + (c + dc_ >= (cols)),       \
               c = c + dc_ >= (cols) ? c + dc_ - (cols) : c + dc_)

/* y = act(x) */
__kernel void pfx_act_forward(const ulong rows, const ulong cols, const int act,
                              __global const float *x, const ulong x_off, const ulong x_ld,
                              __global float *y, const ulong y_off, const ulong y_ld)
{
    if (FLAT(x_ld) && FLAT(y_ld)) {
        FOR_FLAT_CHUNKS vstore8(act_forward8(act, vload8(i, x + x_off)), i, y + y_off);
        FOR_FLAT_TAIL y[y_off + i] = act_forward1(act, x[x_off + i]);
        return;
    }
    FOR_ELEMENTS(rows, cols) {
        AT(y, y_off, y_ld) = act_forward1(act, AT(x, x_off, x_ld));
    }
}

/* dx = act'(x) * dy */
__kernel void pfx_act_backward(const ulong rows, const ulong cols, const int act,
                               __global const float *x, const ulong x_off, const ulong x_ld,
                               __global const float *dy, const ulong dy_off, const ulong dy_ld,
                               __global float *dx, const ulong dx_off, const ulong dx_ld)
{
    if (FLAT(x_ld) && FLAT(dy_ld) && FLAT(dx_ld)) {
        FOR_FLAT_CHUNKS vstore8(act_derivative8(act, vload8(i, x + x_off)) *
                                    vload8(i, dy + dy_off), i, dx + dx_off);
        FOR_FLAT_TAIL dx[dx_off + i] = act_derivative1(act, x[x_off + i]) * dy[dy_off + i];
        return;
    }
    FOR_ELEMENTS(rows, cols) {
        AT(dx, dx_off, dx_ld) = act_derivative1(act, AT(x, x_off, x_ld)) * AT(dy, dy_off, dy_ld);
    }
}

/* out = silu(gate) * up */
__kernel void pfx_swiglu_forward(const ulong rows, const ulong cols,
                                 __global const float *g, const ulong g_off, const ulong g_ld,
                                 __global const float *u, const ulong u_off, const ulong u_ld,
                                 __global float *o, const ulong o_off, const ulong o_ld)
{
    if (FLAT(g_ld) && FLAT(u_ld) && FLAT(o_ld)) {
        FOR_FLAT_CHUNKS {
            const float8 gv = vload8(i, g + g_off);
            vstore8(gv * sigmoid8(gv) * vload8(i, u + u_off), i, o + o_off);
        }
        FOR_FLAT_TAIL o[o_off + i] = g[g_off + i] * sigmoid1(g[g_off + i]) * u[u_off + i];
        return;
    }
    FOR_ELEMENTS(rows, cols) {
        const float gv = AT(g, g_off, g_ld);
        AT(o, o_off, o_ld) = gv * sigmoid1(gv) * AT(u, u_off, u_ld);
    }
}

/* dgate = dout * up * silu'(gate), dup = dout * silu(gate) */
__kernel void pfx_swiglu_backward(const ulong rows, const ulong cols,
                                  __global const float *g, const ulong g_off, const ulong g_ld,
                                  __global const float *u, const ulong u_off, const ulong u_ld,
                                  __global const float *d, const ulong d_off, const ulong d_ld,
                                  __global float *dg, const ulong dg_off, const ulong dg_ld,
                                  __global float *du, const ulong du_off, const ulong du_ld)
{
    if (FLAT(g_ld) && FLAT(u_ld) && FLAT(d_ld) && FLAT(dg_ld) && FLAT(du_ld)) {
        FOR_FLAT_CHUNKS {
            const float8 gv = vload8(i, g + g_off), uv = vload8(i, u + u_off);
            const float8 dv = vload8(i, d + d_off), s = sigmoid8(gv);
            vstore8(dv * uv * s * (1.0f + gv * (1.0f - s)), i, dg + dg_off);
            vstore8(dv * gv * s, i, du + du_off);
        }
        FOR_FLAT_TAIL {
            const float gv = g[g_off + i], uv = u[u_off + i], dv = d[d_off + i];
            const float s = sigmoid1(gv);
            dg[dg_off + i] = dv * uv * s * (1.0f + gv * (1.0f - s));
            du[du_off + i] = dv * gv * s;
        }
        return;
    }
    FOR_ELEMENTS(rows, cols) {
        const float gv = AT(g, g_off, g_ld), uv = AT(u, u_off, u_ld), dv = AT(d, d_off, d_ld);
        const float s = sigmoid1(gv);
        AT(dg, dg_off, dg_ld) = dv * uv * s * (1.0f + gv * (1.0f - s));
        AT(du, du_off, du_ld) = dv * gv * s;
    }
}

/* y[r, c] += bias[c] (bias float or half, element c at b_off + c * b_step) */
__kernel void pfx_bias_add(const ulong rows, const ulong cols,
                           __global float *y, const ulong y_off, const ulong y_ld,
                           __global const void *b, const ulong b_off, const ulong b_step,
                           const int b_half)
{
    if (cols % 8 == 0) { /* rows of whole 8-column chunks (c: the chunk) */
        FOR_ELEMENTS(rows, cols / 8) {
            __global float *yr = y + y_off + r * y_ld + 8 * c;
            vstore8(vload8(0, yr) + pfx_load8(b, b_off, b_step, b_half, c), 0, yr);
        }
        return;
    }
    FOR_ELEMENTS(rows, cols) {
        AT(y, y_off, y_ld) += pfx_load(b, b_off + c * b_step, b_half);
    }
}

/* The element of part p's view at row r, column col of the side-by-side
 * matrix (parts of widths w0, w1, the rest). */
__global float *part_at(ulong r, ulong col, ulong w0, ulong w1,
                        __global float *y0, ulong y0_off, ulong y0_ld,
                        __global float *y1, ulong y1_off, ulong y1_ld,
                        __global float *y2, ulong y2_off, ulong y2_ld)
{
    if (col < w0)
        return y0 + y0_off + r * y0_ld + col;
    if (col < w0 + w1)
        return y1 + y1_off + r * y1_ld + (col - w0);
    return y2 + y2_off + r * y2_ld + (col - w0 - w1);
}

#define PART_AT(col) part_at(r, (col), w0, w1, y0, y0_off, y0_ld, y1, y1_off, y1_ld, y2, y2_off, y2_ld)
#define PARTS_ARGS                                                                           \
    const ulong rows, const ulong w0, const ulong w1, const ulong w2,                        \
        __global float *x, const ulong x_off, const ulong x_ld,                              \
        __global float *y0, const ulong y0_off, const ulong y0_ld,                           \
        __global float *y1, const ulong y1_off, const ulong y1_ld,                           \
        __global float *y2, const ulong y2_off, const ulong y2_ld

/* Columns [0, w0), [w0, w0 + w1) and the last w2 of x, plus the bias when
 * has_b, to y0, y1 and y2 (src/ops/columns.c: the fused Q/K/V projection's
 * output into Q, K and V). 8 columns a step when every width is a multiple
 * of 8 (a chunk then lies in one part). */
__kernel void pfx_split_columns(PARTS_ARGS, __global const void *b, const ulong b_off,
                                const ulong b_step, const int b_half, const int has_b)
{
    const ulong cols = w0 + w1 + w2;
    if (w0 % 8 == 0 && w1 % 8 == 0 && w2 % 8 == 0) {
        FOR_ELEMENTS(rows, cols / 8) {
            float8 v = vload8(0, x + x_off + r * x_ld + 8 * c);
            if (has_b)
                v += pfx_load8(b, b_off, b_step, b_half, c);
            vstore8(v, 0, PART_AT(8 * c));
        }
        return;
    }
    FOR_ELEMENTS(rows, cols) {
        *PART_AT(c) = AT(x, x_off, x_ld) + (has_b ? pfx_load(b, b_off + c * b_step, b_half) : 0.0f);
    }
}

/* The reverse: y0, y1, y2 side by side into x (the Q, K, V gradients into
 * the fused projection's). */
__kernel void pfx_join_columns(PARTS_ARGS)
{
    const ulong cols = w0 + w1 + w2;
    if (w0 % 8 == 0 && w1 % 8 == 0 && w2 % 8 == 0) {
        FOR_ELEMENTS(rows, cols / 8) {
            vstore8(vload8(0, PART_AT(8 * c)), 0, x + x_off + r * x_ld + 8 * c);
        }
        return;
    }
    FOR_ELEMENTS(rows, cols) {
        AT(x, x_off, x_ld) = *PART_AT(c);
    }
}

/* The bias gradient: db[c] (+)= sum_r dy[r, c], one work-item a column
 * (grid-stride), the rows in order: deterministic, no atomics. */
__kernel void pfx_bias_grad(const ulong rows, const ulong cols,
                            __global const float *dy, const ulong dy_off, const ulong dy_ld,
                            __global float *db, const ulong db_off, const ulong db_step,
                            const int accumulate)
{
    for (ulong c = get_global_id(0); c < cols; c += get_global_size(0)) {
        float s = 0.0f;
        for (ulong r = 0; r < rows; r++)
            s += dy[dy_off + r * dy_ld + c];
        __global float *b = db + db_off + c * db_step;
        *b = accumulate ? *b + s : s;
    }
}
