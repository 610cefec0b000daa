/* The parts of dist.h that are the same with and without MPI: every
 * argument checked here, before the transport (dist_backend.h) is called. */
#include "dist_backend.h"

#include <math.h>
#include <stdlib.h>

#include "device.h"
#include "internal.h"

pfx_status pfx_dist_init(int *argc, char ***argv)
{
    if (!argc != !argv)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_dist_init: %s is NULL (argc and argv are both given or both NULL)",
                         !argc ? "argc" : "argv");
    return dist_join(argc, argv);
}

pfx_status pfx_dist_shard(size_t total, size_t *begin, size_t *count)
{
    if (!begin || !count)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dist_shard: %s is NULL",
                         !begin ? "begin" : "count");
    size_t r = (size_t)pfx_dist_rank(), n = (size_t)pfx_dist_size();
    /* total * r / n without overflowing: quotient and remainder apart */
    size_t b = total / n * r + total % n * r / n, e = total / n * (r + 1) + total % n * (r + 1) / n;
    *begin = b;
    *count = e - b;
    return PFX_SUCCESS;
}

/* The devices a selector matches, the selected one first, then the others in
 * platform and device order; local ranks take them round robin. */
static pfx_status pick_device(const char *selector, char *buf, size_t cap, const char **out)
{
    if (!selector || !*selector) {
        const char *env = getenv("PREFIXCL_DEVICE");
        selector = env && *env ? env : NULL;
    }
    pfx_device_info first;
    pfx_status st = pfx_device_select(selector, &first);
    if (st != PFX_SUCCESS)
        return st;
    size_t count = 0;
    st = pfx_device_list(NULL, 0, &count);
    if (st != PFX_SUCCESS)
        return st;
    pfx_device_info *all = calloc(2 * count + 1, sizeof(*all));
    size_t listed = 0;
    if (!all)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_dist_device: listing %zu devices",
                         count);
    st = pfx_device_list(all, count, &listed);
    if (st == PFX_SUCCESS && listed != count)
        st = pfx_error(NULL, PFX_ERROR_OPENCL, "pfx_dist_device: %zu devices listed, then %zu",
                       count, listed);
    pfx_device_info *cand = all + count;
    size_t n = 0;
    cand[n++] = first;
    for (size_t i = 0; st == PFX_SUCCESS && i < count; i++) {
        const pfx_device_info *d = &all[i];
        bool match = false;
        st = pfx_device_matches(selector, d, &match);
        if (st == PFX_SUCCESS && match &&
            !(d->platform_index == first.platform_index && d->device_index == first.device_index))
            cand[n++] = *d;
    }
    if (st == PFX_SUCCESS) {
        const pfx_device_info *pick = &cand[(size_t)pfx_dist_local_rank() % n];
        snprintf(buf, cap, "%u:%u", pick->platform_index, pick->device_index);
        *out = buf;
    }
    free(all);
    return st;
}

pfx_status pfx_dist_device(const char *selector, char *buf, size_t cap, const char **out)
{
    if (!buf || !out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dist_device: %s is NULL",
                         !buf ? "buf" : "out");
    *out = NULL;
    if (cap < sizeof("4294967295:4294967295"))
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_dist_device: cap %zu is too small for \"P:D\" (at least %zu)", cap,
                         sizeof("4294967295:4294967295"));
    /* the selector's syntax, before any device is opened */
    pfx_selector sel;
    if (!pfx_selector_parse(selector, &sel))
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_dist_device: device selector '%s' cannot be parsed", selector);
    buf[0] = '\0';
    if (pfx_dist_size() == 1) {
        *out = selector;
        return PFX_SUCCESS;
    }
    pfx_status st = pick_device(selector, buf, cap, out);
    if (st != PFX_SUCCESS) { /* the device's error, with the rank that met it */
        char why[512];
        snprintf(why, sizeof(why), "%s", pfx_last_error(NULL));
        pfx_error(NULL, st, "rank %d: %s", pfx_dist_rank(), why);
    }
    return st;
}

pfx_status pfx_dist_agree(const char *what, const char *text)
{
    if (!what || !text)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dist_agree: %s is NULL",
                         !what ? "what" : "text");
    return pfx_dist_size() > 1 ? dist_agree_text(what, text) : PFX_SUCCESS;
}

static pfx_status check_count(const char *fn, const double *count, const void *other,
                              const char *other_name)
{
    if (!count || !other)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !count ? "count" : other_name);
    if (!isfinite(*count) || *count < 0)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: count %g (finite and >= 0: the items in this rank's loss)", fn,
                         *count);
    return PFX_SUCCESS;
}

pfx_status pfx_dist_reduce_grads(pfx_optimizer *opt, double *count, double *mean_loss)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dist_reduce_grads: opt is NULL");
    pfx_status st = check_count("pfx_dist_reduce_grads", count, mean_loss, "mean_loss");
    if (st != PFX_SUCCESS || pfx_dist_size() == 1)
        return st;
    return dist_reduce(opt, count, mean_loss);
}

pfx_status pfx_dist_mean(double *count, double *mean)
{
    pfx_status st = check_count("pfx_dist_mean", count, mean, "mean");
    if (st == PFX_SUCCESS && pfx_dist_size() > 1)
        dist_mean_of(count, mean);
    return st;
}

bool pfx_dist_any(bool mine)
{
    return pfx_dist_size() > 1 ? dist_any_of(mine) : mine;
}

pfx_status pfx_dist_check_params(pfx_optimizer *opt, uint64_t step)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dist_check_params: opt is NULL");
    return pfx_dist_size() > 1 ? dist_check(opt, step) : PFX_SUCCESS;
}

pfx_status pfx_dist_shard_optimizer(pfx_optimizer *opt)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dist_shard_optimizer: opt is NULL");
    return pfx_dist_size() > 1 ? dist_shard(opt) : PFX_SUCCESS;
}

static pfx_status shard_hook(void *user, pfx_optimizer *opt)
{
    (void)user;
    return pfx_dist_shard_optimizer(opt);
}

static pfx_status reduce_hook(void *user, pfx_optimizer *opt, double *count, double *mean_loss)
{
    (void)user;
    return pfx_dist_reduce_grads(opt, count, mean_loss);
}

static bool any_hook(void *user, bool mine)
{
    (void)user;
    return pfx_dist_any(mine);
}

static pfx_status check_hook(void *user, pfx_optimizer *opt, uint64_t step)
{
    (void)user;
    return pfx_dist_check_params(opt, step);
}

pfx_status pfx_dist_hooks(pfx_data_parallel *out)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dist_hooks: out is NULL");
    *out = (pfx_data_parallel){ .rank = (size_t)pfx_dist_rank(),
                                .ranks = (size_t)pfx_dist_size(),
                                .reduce = reduce_hook,
                                .any = any_hook,
                                .check = check_hook,
                                .shard = shard_hook };
    return PFX_SUCCESS;
}
