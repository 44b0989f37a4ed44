/* SPDX-License-Identifier: Apache-2.0
 *
 * Host escalation (FR-5, SR-7..SR-9) will live here: the coordinator's half
 * of `lazaret-escalate`. Nothing of it exists yet; this header marks the
 * place and the contract the escalation issue builds on.
 *
 *  - The mailbox: a per-generation directory the sandbox can write, watched
 *    with inotify through one lz_loop_add_fd() call (common/loop.h); every
 *    record in it is untrusted input, parsed by a bounded, fuzzed decoder
 *    and admitted by rows of the protocol table (protocol/table.h) on a
 *    third channel, guest -> coordinator.
 *  - Routing: a request is bound to the Client Session that started the
 *    asking process; its prompt goes to that session's terminal only,
 *    through new rows on the session channel (coordinator -> CLI prompt,
 *    CLI -> coordinator decision), admitted in the session's state.
 *  - Execution: an approved command runs from a pinned, validated
 *    executable descriptor through the common launcher (common/spawn.h),
 *    without a shell; its output streams are loop sources, its deadline
 *    and the request's cancellation are loop timers.
 *
 * See docs/coordinator.md for how the coordinator's files divide the work.
 */
#ifndef LAZARET_COORDINATOR_ESCALATION_H
#define LAZARET_COORDINATOR_ESCALATION_H
#endif
