/* SPDX-License-Identifier: Apache-2.0
 *
 * Running a function of ours in a forked child that does not exec, with one
 * way back for its error. Every fork-without-exec of the host code goes
 * through lz_fork_call (programs are started by common/spawn.h; src/guest
 * runs inside the sandbox; the daemonising double fork of the
 * coordinator's bootstrap is the one exception, see
 * coordinator/bootstrap.c): a child's failure comes back to the caller as
 * the child's own lz_error (errnum, message, hint), not as an exit code to
 * decode, and the caller holds the child by a pidfd or waits for it.
 *
 * The channel is a socketpair (both ends close-on-exec), so that the parent
 * can also answer: a child that says it is ready (lz_fork_ready) waits for
 * the parent's go-ahead, and the parent may act on the child in between
 * (write a new user namespace's id maps, say).
 */
#ifndef LAZARET_COMMON_FORK_H
#define LAZARET_COMMON_FORK_H

#include <sys/types.h>

#include "common/error.h"
#include "common/spawn.h"

/* The function the child runs. channel is the child's end of the error
 * channel, for lz_fork_ready and for a keep list of lz_close_fds_except
 * (a child that closes it only loses its way to report; the helper checks
 * that the descriptor is still the channel before it writes). fn returns
 * the child's exit status (0..255), or -1 with *err set: the error goes to
 * the caller and the child exits with status 1. A child that runs on
 * forever (a relay, a watcher) never returns: it _exit()s itself. */
typedef int (*lz_fork_fn)(void *arg, int channel, lz_error **err);

typedef struct lz_fork_options {
    /* The child in messages: "cannot start <what>". */
    const char *what;
    /* The signal the child gets when the caller ends (PR_SET_PDEATHSIG), or
     * 0. With a signal, a child whose caller has already ended exits at
     * once, before fn. */
    int pdeathsig;
    /* The child's process name (PR_SET_NAME), or NULL to keep the caller's. */
    const char *name;
    /* Optional, in the caller: called when the child said lz_fork_ready,
     * before the child goes on. On failure the child is killed and reaped
     * and lz_fork_call fails with this error. */
    int (*on_ready)(pid_t child, void *ready_arg, lz_error **err);
    void *ready_arg;
} lz_fork_options;

/* Run fn(arg, channel, err) in a forked child (fork(2): the C library's
 * fork handlers run, which a child that goes on without exec needs).
 *
 * With ret (a child that runs on): returns 0 once the child called
 * lz_fork_ready and was given the go-ahead; *ret holds its pid and a pidfd
 * (O_CLOEXEC), the caller's to wait for or release. Fails (-1, *err set, no
 * child left) when the child could not be started, reported an error, or
 * ended before it was ready.
 *
 * Without ret (a child that runs to completion): waits for the child to
 * end and returns its exit status (0..255, or 128+N when signal N killed
 * it); -1 with *err set when it could not be started or reported an error
 * (the child's error, as it set it). A child here may call lz_fork_ready
 * too (for opt->on_ready). */
LZ_MUST_CHECK
int lz_fork_call(lz_fork_fn fn, void *arg, const lz_fork_options *opt, lz_child *ret,
                 lz_error **err);

/* In the child: tell the caller it is ready and wait for the go-ahead
 * (after the caller's on_ready). Returns 0, or -1 when the caller refused
 * or ended: the child should then exit. */
LZ_MUST_CHECK
int lz_fork_ready(int channel);

#endif
