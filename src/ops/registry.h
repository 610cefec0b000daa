/*
 * Every kernel program and the -D options the runtime builds it with, per
 * vendor family. One place, so that warm-up, `prefixcl kernel-configs` and the
 * cross-vendor compile gate (tests/kernel_gate.py) see exactly the
 * configurations the ops choose at run time.
 */
#ifndef PFX_OPS_REGISTRY_H
#define PFX_OPS_REGISTRY_H

#include "internal.h"

#define PFX_OPTIONS_MAX 256

typedef struct pfx_program_config {
    const char *program;           /* cl/<program>.cl */
    char options[PFX_OPTIONS_MAX]; /* -D options */
} pfx_program_config;

/* Fills up to cap configurations a device of this vendor family (with this
 * much local memory) may build; returns how many there are in all. */
size_t pfx_program_configs(pfx_vendor vendor, uint64_t local_mem_bytes,
                           pfx_program_config *out, size_t cap);

const char *pfx_vendor_name(pfx_vendor vendor);

#endif
