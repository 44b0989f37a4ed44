/* SPDX-License-Identifier: Apache-2.0
 *
 * The keeper: what every escalated host command runs under (keeper.c).
 * A fork of the coordinator (no exec) that is a child subreaper, starts the
 * command with lz_spawn_start(opt) and, when the command's main process
 * ends, when it gets SIGTERM (the coordinator cancels), and when the
 * coordinator dies (PR_SET_PDEATHSIG(SIGTERM)), kills the command's process
 * group and every descendant left, reaps them and exits with the command's
 * status (0..255, 128+N for signal N).
 */
#ifndef LAZARET_COORDINATOR_KEEPER_H
#define LAZARET_COORDINATOR_KEEPER_H

#include "common/error.h"
#include "common/spawn.h"

/* Start the keeper, which starts the program (label names it in errors;
 * opt as for lz_spawn_start, with new_session set by the caller). wipe(arg)
 * runs first in the keeper: it clears what the fork's copy of the caller's
 * memory must not keep. The keeper holds only opt's descriptors. On
 * success *ret is the keeper (its pidfd: SIGTERM ends the command; it
 * exits with the command's status). 0, or -1 with *err and nothing left
 * running. */
LZ_MUST_CHECK
int keeper_start(const char *label, char *const argv[], const lz_spawn_async *opt,
                 void (*wipe)(void *), void *wipe_arg, lz_child *ret, lz_error **err);

#endif
