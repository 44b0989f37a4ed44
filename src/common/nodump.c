/* SPDX-License-Identifier: Apache-2.0 */
#include "common/nodump.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

int lz_nodump_reassert(void)
{
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : -1;
}

int lz_nodump_limit_core(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_CORE, &rl) < 0)
        return -1;
    /* Lowering is always allowed; raising a hard limit of 0 to 1 is not
     * (and 0 still stops file dumps). */
    rlim_t want = rl.rlim_max < LZ_CORE_LIMIT ? rl.rlim_max : LZ_CORE_LIMIT;
    rl.rlim_cur = rl.rlim_max = want;
    return setrlimit(RLIMIT_CORE, &rl);
}

int lz_nodump_enter(lz_error **err)
{
    /* The limit first: it is what survives into the programs we execute. */
    if (lz_nodump_limit_core() < 0)
        return lz_error_set(err, errno,
                            "cannot lower this process's core file size limit "
                            "(RLIMIT_CORE)");
    if (lz_nodump_reassert() < 0)
        return lz_error_set(err, errno,
                            "cannot make this process non-dumpable "
                            "(PR_SET_DUMPABLE)");
    return 0;
}

void lz_secret_free(char *s)
{
    if (!s)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

void lz_environ_scrub(const char *name)
{
    char *v = getenv(name);
    if (!v)
        return;
    explicit_bzero(v, strlen(v));
    unsetenv(name);
}
