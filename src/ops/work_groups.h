/* Work-group sizes of the programs whose kernels reduce over a fixed-size
 * group: the one definition. Each such program is built with -DPFX_WG=<its
 * size> (the options below, which registry.c also lists for the kernel
 * gate), so its .cl file holds no copy and refuses to build without it. */
#ifndef PFX_WORK_GROUPS_H
#define PFX_WORK_GROUPS_H

#define PFX_NORM_WG  64 /* cl/norm.cl: one group per row */
#define PFX_CE_WG    64 /* cl/cross_entropy.cl: one group per row */
#define PFX_OPT_WG   64 /* cl/optimizer.cl: the gradient norm's partial sums */
#define PFX_LAYER_WG 64 /* cl/layer.cl: the MSE loss's partial sums */

#define PFX_WG_STRING_(x) #x
#define PFX_WG_STRING(x)  PFX_WG_STRING_(x)
#define PFX_NORM_OPTIONS  "-DPFX_WG=" PFX_WG_STRING(PFX_NORM_WG)
#define PFX_CE_OPTIONS    "-DPFX_WG=" PFX_WG_STRING(PFX_CE_WG)
#define PFX_OPT_OPTIONS   "-DPFX_WG=" PFX_WG_STRING(PFX_OPT_WG)
#define PFX_LAYER_OPTIONS "-DPFX_WG=" PFX_WG_STRING(PFX_LAYER_WG)

#endif
