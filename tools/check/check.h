/* The cases of `prefixcl check`: each runs one operation on random inputs and
 * compares it with the double-precision reference (tests/reference). */
#ifndef PFX_TOOLS_CHECK_H
#define PFX_TOOLS_CHECK_H

#include <stdbool.h>

#include "prefixcl/prefixcl.h"

typedef struct check_totals {
    int run;
    int passed;
} check_totals;

typedef void (*check_case)(pfx_runtime *rt, check_totals *totals);

extern const check_case check_cases[];
extern const size_t check_case_count;

/* Attention cases (check_attention.c). */
void check_attention_forward(pfx_runtime *rt, check_totals *totals);
void check_attention_backward(pfx_runtime *rt, check_totals *totals);
void check_attention_stats(pfx_runtime *rt, check_totals *totals);

/* Prints one row; a failed status counts as a failure with its message. */
void check_report(check_totals *totals, const char *op, const char *shape, pfx_status status,
                  pfx_runtime *rt, double error, double tolerance);

#endif
