/* SPDX-License-Identifier: Apache-2.0
 *
 * The Git Sentry's eye: a helper process that can look where the developer
 * cannot (docs/git.md "Directories closed to the developer").
 *
 * A sandbox whose image runs as root can make directories owned by another
 * sandbox user (a subordinate id on the host) and close them (mode 0700):
 * the developer — and the audit, which runs as the developer — can neither
 * list nor watch them. What the sandbox builds inside stays unseen until it
 * opens the directory (chmod, or a rename out of it), and then all of it is
 * reachable by the developer's Git at once, for as long as a walk of it
 * takes: a time the sandbox chooses by the size of what it built (attack
 * round i23c: 0.6-1.9 s with 20,000-45,000 directories).
 *
 * The eye removes the blind spot instead of racing it. It is a child of the
 * coordinator in a user namespace that maps the developer (as 0) and the
 * subordinate ids, exactly the ids the sandbox can give a file (its gofer
 * runs in such a namespace): there it holds CAP_DAC_READ_SEARCH,
 * CAP_DAC_OVERRIDE and CAP_FOWNER over every inode the sandbox can make. The
 * audit does what it always does and asks the eye only when the kernel
 * refuses the developer: open a directory or an entry (the descriptor comes
 * back and is read by the audit, which needs no permission for that),
 * place an inotify watch on the audit's own instance, move an entry into
 * the quarantine. So a closed directory is watched and audited while it is
 * made, like any other, and opening it reveals nothing new.
 *
 * The operation set is closed and tabled (eye_ops in eye.c); every
 * path is resolved by openat2 beneath a descriptor the audit passes, no
 * symlink followed, no mount crossed; names to rename are single
 * components. The eye holds no descriptor but its socket (close_range at
 * start) and dies with the coordinator (PR_SET_PDEATHSIG) or when the
 * socket closes.
 *
 * Every function returns its result (a descriptor, a watch descriptor, 0)
 * or -1 with errno set — as the system call it stands for would.
 */
#ifndef LAZARET_GITSENTRY_EYE_H
#define LAZARET_GITSENTRY_EYE_H

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct lz_sentry_eye lz_sentry_eye;

/* Start the eye (lz_userns_spawn: needs the developer's subordinate ids,
 * like the Domain itself). */
LZ_MUST_CHECK
int lz_sentry_eye_start(lz_sentry_eye **ret, lz_error **err);

/* openat2(dirfd, rel, flags | O_CLOEXEC) confined (RESOLVE_BENEATH,
 * NO_SYMLINKS, NO_MAGICLINKS, NO_XDEV), in the eye. flags: O_RDONLY with
 * any of O_DIRECTORY, O_PATH, O_NOFOLLOW, O_NONBLOCK. */
int lz_sentry_eye_open(lz_sentry_eye *eye, int dirfd, const char *rel, int flags);

/* inotify_add_watch(inotify_fd, <the directory dirfd>, mask), in the eye:
 * the watch is the caller's instance's, its events the caller's. */
int lz_sentry_eye_watch(lz_sentry_eye *eye, int inotify_fd, int dirfd, uint32_t mask);

/* renameat2(olddirfd, oldname, newdirfd, newname, RENAME_NOREPLACE), in the
 * eye; both names single components. */
int lz_sentry_eye_rename(lz_sentry_eye *eye, int olddirfd, const char *oldname, int newdirfd,
                         const char *newname);

/* How many requests the eye has served (the teardown log). */
unsigned long lz_sentry_eye_requests(const lz_sentry_eye *eye);

/* Close the socket and reap the eye. NULL is fine. */
void lz_sentry_eye_stop(lz_sentry_eye *eye);

#endif
