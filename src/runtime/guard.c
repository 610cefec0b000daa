/* One thread at a time per runtime: a compare-and-swap on the owner, so a
 * second thread gets PFX_ERROR_BUSY instead of corrupting the program table or
 * setting another launch's kernel arguments (a crash inside the driver). */
#include "internal.h"

/* Its address is unique per live thread. */
static _Thread_local char thread_token;

pfx_status pfx_rt_enter(pfx_runtime *rt, const char *what)
{
    uintptr_t me = (uintptr_t)&thread_token, none = 0;
    if (atomic_compare_exchange_strong(&rt->owner, &none, me)) {
        rt->owner_depth = 1;
        return PFX_SUCCESS;
    }
    if (none == me) {
        rt->owner_depth++;
        return PFX_SUCCESS;
    }
    /* rt->error belongs to the thread inside; the detail goes to this thread's. */
    return pfx_error(
        NULL, PFX_ERROR_BUSY,
        "%s: the runtime is in use by another thread (a runtime is used by one thread at a time)",
        what);
}

void pfx_rt_leave(pfx_runtime *rt)
{
    if (--rt->owner_depth == 0)
        atomic_store(&rt->owner, (uintptr_t)0);
}
