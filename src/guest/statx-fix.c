/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret-statx-fix.so: an LD_PRELOAD shim for runsc releases that reject
 * statx(2) with AT_NO_AUTOMOUNT (EINVAL). coreutils 9 (Debian 12 and later
 * images) passes that flag, so `ls` and `stat` fail inside such a sandbox.
 * AT_NO_AUTOMOUNT only matters for automount points, which a gVisor sandbox
 * does not have, so clearing it changes nothing else.
 *
 * Lazaret probes the sandbox at start (lazaret-exec --probe-statx) and
 * preloads this library into session processes only when the probe fails.
 *
 * Built without the C library's start files and linked to no particular
 * libc: `syscall` is resolved at load time from whatever libc the image has
 * (glibc and musl both export it), so it works in any image.
 */
#include <fcntl.h>
#include <sys/syscall.h>

#ifndef AT_NO_AUTOMOUNT
#define AT_NO_AUTOMOUNT 0x800
#endif

struct statx;
long syscall(long number, ...);
int statx(int dirfd, const char *pathname, int flags, unsigned int mask, struct statx *statxbuf);

__attribute__((visibility("default"))) int statx(int dirfd, const char *pathname, int flags,
                                                 unsigned int mask, struct statx *statxbuf)
{
    return (int) syscall(SYS_statx, dirfd, pathname, flags & ~AT_NO_AUTOMOUNT, mask, statxbuf);
}
