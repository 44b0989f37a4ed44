/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/limits.h"

#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

uint64_t lz_limit_memory_default(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0)
        return 4ULL << 30; /* unknown: a bound that fits any machine Lazaret supports */
    return (uint64_t) pages * (uint64_t) size / 2;
}

uint64_t lz_limit_memory_effective(void)
{
    uint64_t bound = lz_limit_memory_default();
    struct rlimit cur;
    if (getrlimit(RLIMIT_FSIZE, &cur) == 0 && cur.rlim_cur != RLIM_INFINITY &&
        (uint64_t) cur.rlim_cur < bound)
        bound = (uint64_t) cur.rlim_cur;
    return bound;
}

int lz_limits_apply(uint64_t *ret_memory, lz_error **err)
{
    uint64_t bound = lz_limit_memory_effective();
    struct rlimit r = { .rlim_cur = (rlim_t) bound, .rlim_max = (rlim_t) bound };
    if (setrlimit(RLIMIT_FSIZE, &r) < 0) {
        lz_error_set(err, errno, "cannot set the Domain memory bound (RLIMIT_FSIZE %llu bytes)",
                     (unsigned long long) bound);
        return lz_error_hint(err, "see docs/limits.md");
    }
    if (ret_memory)
        *ret_memory = bound;
    return 0;
}
