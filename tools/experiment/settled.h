/* Which heads' gains settled during training (docs/design.md, "Full
 * training": a head has settled when its gain stays beyond a threshold with
 * one sign over the last part of training). Pure host code: the experiment
 * command and its tests. */
#ifndef PFX_TOOLS_EXPERIMENT_SETTLED_H
#define PFX_TOOLS_EXPERIMENT_SETTLED_H

#include <stddef.h>
#include <stdint.h>

/* The window: the measured steps s with 5 s >= 4 total (the last 20% of
 * training). The first index of `steps` (ascending, m entries) in it goes
 * to *first; returns how many measurements the window holds. */
size_t settled_window(const size_t *steps, size_t m, size_t total, size_t *first);

/* The fewest measurements a window needs before a head can be called
 * settled: one point shows no sign change, and says nothing of staying. */
#define SETTLED_MIN_POINTS 2

/* history: [m][heads], the gain of each head at measured step steps[i].
 * sign[h]: +1 when |g| >= threshold at every measured step of the window
 * with g > 0 throughout (the head sharpens: a factor 1 + g above 1), -1 the
 * same with g < 0 (it spreads), 0 otherwise (a value below the threshold, a
 * sign change, or g exactly 0). Returns the number of settled heads, or -1
 * when the window holds fewer than SETTLED_MIN_POINTS measurements (every
 * sign then 0). */
int settled_heads(const float *history, const size_t *steps, size_t m, size_t heads, size_t total,
                  float threshold, int8_t *sign);

/* Since when head h has stayed beyond the threshold with one sign: the
 * measured step from which every later measurement (the last included) has
 * |g| >= threshold and the sign of the last one; 0 when even the last one
 * fails. For "the gains split quickly": compare it with the total. */
size_t settled_since(const float *history, const size_t *steps, size_t m, size_t heads, size_t h,
                     float threshold);

#endif
