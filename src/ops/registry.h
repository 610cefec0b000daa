/*
 * Every kernel program and the -D options the runtime builds it with, per
 * vendor family. One place, so that warm-up, `prefixcl kernel-configs` and the
 * cross-vendor compile gate (tests/kernel_gate.py) see exactly the
 * configurations the ops choose at run time.
 */
#ifndef PFX_OPS_REGISTRY_H
#define PFX_OPS_REGISTRY_H

#include "internal.h"

#define PFX_OPTIONS_MAX 384

typedef struct pfx_program_config {
    const char *program;           /* cl/<program>.cl */
    char options[PFX_OPTIONS_MAX]; /* -D options */
} pfx_program_config;

/* Fills up to cap configurations a device of this vendor family (with this
 * much local memory) may build; returns how many there are in all (when
 * they do not all fit, a bound: repeated options are dropped only among the
 * stored ones, so call again with that capacity for the count). info
 * picks the architecture and device entries of the tuning database (NULL:
 * the vendor's defaults). */
/* Whether cl/peak.cl is built with its many-chain FMA kernels (-DPEAK_ILP):
 * on CPU devices, whose OpenCL compiler runs a work-item's loop serially,
 * except Mesa's rusticl (platform_name may be NULL: not rusticl), whose
 * llvmpipe computes vector fma() wrong and took over 15 minutes to compile
 * them. */
bool pfx_peak_ilp(pfx_vendor vendor, const char *platform_name);

size_t pfx_program_configs(pfx_vendor vendor, const pfx_device_info *info, uint64_t local_mem_bytes,
                           pfx_program_config *out, size_t cap);

/* What rt builds: the configurations above for its device, with the kernel
 * tuning override of rt applied (the tiles the ops would pick). */
size_t pfx_runtime_configs(pfx_runtime *rt, pfx_program_config *out, size_t cap);

/* Every vendor family, in the order `prefixcl kernel-configs` prints them. */
#define PFX_VENDOR_FAMILIES 5
extern const pfx_vendor pfx_vendor_families[PFX_VENDOR_FAMILIES];

/* Local memory the tile tables assume for a family when listing its
 * configurations (NVIDIA 48 KiB, AMD and Intel 64 KiB, CPU 1 MiB, other
 * 32 KiB); the runtime uses the device's real figure. */
uint64_t pfx_vendor_typical_local_mem(pfx_vendor vendor);

const char *pfx_vendor_name(pfx_vendor vendor);

#endif
