/* SPDX-License-Identifier: Apache-2.0
 *
 * The setuid/setgid guard of the sandbox (docs/limits.md): a seccomp filter
 * that the in-sandbox launcher installs on itself before it runs anything,
 * so that the container's init, every session command and all their
 * descendants inherit it (a seccomp filter cannot be removed).
 */
#ifndef LAZARET_GUEST_MODE_GUARD_H
#define LAZARET_GUEST_MODE_GUARD_H

/* Install the filter on the calling thread. Returns 0, or -1 with errno set
 * when the kernel (gVisor's) refused it; the caller must then not run the
 * session: an unguarded sandbox could leave setuid files on the host. */
int lz_mode_guard_install(void);

#endif
