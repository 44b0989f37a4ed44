/* SPDX-License-Identifier: Apache-2.0
 *
 * Test-only LD_PRELOAD for the control of test_security_nproc.py: the
 * deliberately weakened layout without the host task bound. It turns
 * setrlimit(RLIMIT_NPROC, ...) into a no-op that reports success, so the
 * supervisor's runsc processes keep the test user's own (host-wide, large)
 * RLIMIT_NPROC, as before the bound existed. Nothing in the product reads
 * or offers this; it only exists as a test build product.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/resource.h>

typedef int setrlimit_fn(__rlimit_resource_t, const void *);

static int weakened(const char *name, __rlimit_resource_t resource, const void *rlim)
{
    if (resource == RLIMIT_NPROC)
        return 0;
    setrlimit_fn *real = (setrlimit_fn *) dlsym(RTLD_NEXT, name);
    return real ? real(resource, rlim) : -1;
}

/* Both names: with _FILE_OFFSET_BITS=64 (Meson's default) the call binds
 * to setrlimit64. */
int setrlimit(__rlimit_resource_t resource, const struct rlimit *rlim)
{
    return weakened("setrlimit", resource, rlim);
}

int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *rlim)
{
    return weakened("setrlimit64", resource, rlim);
}
