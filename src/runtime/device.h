/* Device selection internals (src/runtime/device.c), visible to tests. */
#ifndef PFX_RUNTIME_DEVICE_H
#define PFX_RUNTIME_DEVICE_H

#include "internal.h"

typedef enum pfx_selector_kind {
    PFX_SELECT_DEFAULT, /* empty selector: the default policy */
    PFX_SELECT_INDEX,   /* "P:D" */
    PFX_SELECT_TYPE,    /* "gpu", "cpu", "accelerator" */
    PFX_SELECT_NAME,    /* case-insensitive substring */
} pfx_selector_kind;

typedef struct pfx_selector {
    pfx_selector_kind kind;
    unsigned platform, device;
    pfx_device_type type;
    char text[256];
} pfx_selector;

/* False when the selector is malformed ("3:", "1:x", too long). */
bool pfx_selector_parse(const char *selector, pfx_selector *out);
bool pfx_selector_matches(const pfx_selector *sel, const pfx_device_info *info);

/* Resolves a selector (NULL/"" and use_env: $PREFIXCL_DEVICE first). */
pfx_status pfx_device_resolve(const char *selector, bool use_env, pfx_device_info *info,
                              cl_platform_id *platform, cl_device_id *device);

const char *pfx_device_type_name(pfx_device_type type);

/* needle occurs in hay, ignoring ASCII case ("" occurs everywhere). */
bool pfx_contains_nocase(const char *hay, const char *needle);

#endif
