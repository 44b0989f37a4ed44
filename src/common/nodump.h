/* SPDX-License-Identifier: Apache-2.0
 *
 * Keeping resolved secrets (profile `env:` values) out of core dumps and out
 * of memory that no longer needs them. The design, what it covers and what
 * it does not, is in docs/runtime.md, "Secrets in memory and core dumps".
 *
 * Two kernel mechanisms, measured on this platform (Linux 6.18):
 *
 *  - PR_SET_DUMPABLE 0: the kernel skips every core dump of the process
 *    before it looks at kernel.core_pattern (file, pipe or socket handler),
 *    whatever fs.suid_dumpable says. It also makes /proc/PID files root-owned
 *    and refuses ptrace (and /proc/PID/{mem,environ,fd}) to the same user.
 *    Inherited by fork; reset to 1 by execve of an ordinary binary, and to
 *    fs.suid_dumpable by a credential change (setresuid & co.) - so a
 *    process re-asserts it after changing credentials.
 *
 *  - RLIMIT_CORE: inherited by fork and execve, so it is what protects the
 *    programs Lazaret executes (runsc above all, which holds the session
 *    environment). Lazaret sets 1 byte, not 0: a file dump needs at least a
 *    page, so 1 stops it like 0 does, and 1 is the kernel's special value that
 *    also aborts a dump to a piped core_pattern ("|handler"), which ignores
 *    0. Only a socket core_pattern ("@", Linux 6.16+) ignores the limit
 *    entirely; `lazaret doctor` reports that.
 */
#ifndef LAZARET_COMMON_NODUMP_H
#define LAZARET_COMMON_NODUMP_H

#include <sys/resource.h>

#include "common/error.h"

/* The RLIMIT_CORE (soft and hard) Lazaret gives itself and its children. */
#define LZ_CORE_LIMIT ((rlim_t) 1)

/* Make the calling process non-dumpable and lower RLIMIT_CORE, soft and hard,
 * to LZ_CORE_LIMIT (to 0 when the hard limit already is 0: an unprivileged
 * process cannot raise it). Call it first thing, before any secret is read.
 * Returns 0, or -1 with *err set. */
LZ_MUST_CHECK
int lz_nodump_enter(lz_error **err);

/* Only PR_SET_DUMPABLE 0 again, for use after a credential change and at the
 * start of every long-lived forked process (belt and braces: fork inherits
 * it). Async-signal-safe. Returns 0, or -1 with errno set. */
int lz_nodump_reassert(void);

/* Only the RLIMIT_CORE part of lz_nodump_enter(), for a child about to
 * execve a program (execve keeps the limit, but resets dumpability).
 * Async-signal-safe. Returns 0, or -1 with errno set. */
int lz_nodump_limit_core(void);

/* Overwrite the NUL-terminated string s with zeros, then free it. NULL is
 * fine. For every heap copy of a secret. */
void lz_secret_free(char *s);

/* Overwrite the value of the environment variable `name` in this process's
 * environment with zeros (the bytes /proc/PID/environ shows live in the
 * process's own memory) and remove the variable. Not thread-safe, like
 * unsetenv(3). */
void lz_environ_scrub(const char *name);

#endif
