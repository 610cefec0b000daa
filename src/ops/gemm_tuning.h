/*
 * Stored CLBlast GEMM tunings (internal, not installed): the parameters of
 * CLBlast's Xgemm and XgemmDirect kernels and the GEMM routine's
 * XGEMM_MIN_INDIRECT_SIZE (products with m n k below its cube take the
 * direct kernel), found by `prefixcl gemm-tune` (gemm_tune.c) and applied
 * through CLBlastOverrideParameters when a runtime is created.
 *
 * One JSON file per device, driver and precision in the kernel cache folder:
 * "gemm-tuning-<16 hex of platform, device, driver, version>-f32.json",
 * written atomically. A file that does not parse, names another device or
 * driver, lacks a parameter or holds values CLBlast's kernels cannot run
 * (the constraints of CLBlast's own tuners, the device's work-group and
 * local-memory limits) is rejected and ignored.
 */
#ifndef PFX_OPS_GEMM_TUNING_H
#define PFX_OPS_GEMM_TUNING_H

#include "internal.h"

/* Indexes into pfx_gemm_tuning's arrays (prefixcl/gemm_tune.h), in
 * CLBlast's database order. */
enum {
    PFX_XG_GEMMK,
    PFX_XG_KREG,
    PFX_XG_KWG,
    PFX_XG_KWI,
    PFX_XG_MDIMA,
    PFX_XG_MDIMC,
    PFX_XG_MWG,
    PFX_XG_NDIMB,
    PFX_XG_NDIMC,
    PFX_XG_NWG,
    PFX_XG_SA,
    PFX_XG_SB,
    PFX_XG_STRM,
    PFX_XG_STRN,
    PFX_XG_VWM,
    PFX_XG_VWN
};
enum {
    PFX_XD_KWID,
    PFX_XD_MDIMAD,
    PFX_XD_MDIMCD,
    PFX_XD_NDIMBD,
    PFX_XD_NDIMCD,
    PFX_XD_PADA,
    PFX_XD_PADB,
    PFX_XD_VWMD,
    PFX_XD_VWND,
    PFX_XD_WGD
};
extern const char *const pfx_xgemm_names[PFX_XGEMM_PARAMS];
extern const char *const pfx_xgemm_direct_names[PFX_XGEMM_DIRECT_PARAMS];

/* CLBlast 1.5's generic defaults (its database's "default" entries). */
void pfx_gemm_tuning_defaults(pfx_gemm_tuning *t);

/* Whether CLBlast can run these values on this device; *why names the
 * broken rule. */
bool pfx_xgemm_valid(const size_t *v, const pfx_device_info *info, char *why, size_t cap);
bool pfx_xgemm_direct_valid(const size_t *v, const pfx_device_info *info, char *why, size_t cap);

/* The file of this device in cache_dir; false when cache_dir is "" or the
 * path does not fit. */
bool pfx_gemm_tuning_path(const pfx_device_info *info, const char *cache_dir, char *out,
                          size_t cap);

/* Reads and checks a file. PFX_ERROR_IO when there is none (or it cannot be
 * read), PFX_ERROR_FORMAT when it is rejected; *why says why in both cases. */
pfx_status pfx_gemm_tuning_read(const char *path, const pfx_device_info *info, pfx_gemm_tuning *out,
                                char *why, size_t cap);

/* Writes the file atomically (errors recorded for rt). */
pfx_status pfx_gemm_tuning_write(pfx_runtime *rt, const char *path, const pfx_gemm_tuning *t);

/* Makes CLBlast use these values on rt's device (float32), for the whole
 * process: CLBlast keeps one database per device. */
pfx_status pfx_gemm_tuning_override(pfx_runtime *rt, const pfx_gemm_tuning *t);

/* Only the routine's direct/indirect threshold (the tuner forces one kernel). */
pfx_status pfx_gemm_min_indirect_override(pfx_runtime *rt, size_t min_indirect);

#endif
