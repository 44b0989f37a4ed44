/* SPDX-License-Identifier: Apache-2.0
 *
 * 'run''s relays between this process's stdio and a started session
 * (cmd_run.c sends HELLO and RUN, then hands the connection here).
 *
 * RELAY_WIPE: the session's bytes (its output, the developer's input) can
 * hold a secret — a command that prints its environment prints the
 * profile's env values, a password typed or piped in — and this process
 * lives as long as the session. Each relay buffer is wiped (explicit_bzero)
 * as soon as its bytes are forwarded, so after the start this CLI holds no
 * copy of a value, not even in its last chunk of output. docs/runtime.md,
 * "Secrets in memory and core dumps".
 */
#ifndef LAZARET_CLI_RELAY_H
#define LAZARET_CLI_RELAY_H

#include "client/client.h"

/* Interactive: the raw terminal <-> INPUT/OUTPUT messages, the window size
 * on every SIGWINCH (RESIZE); SIGHUP, SIGTERM, SIGINT, SIGQUIT or a
 * terminal gone end the session (CLOSE). *cl->status gets the exit status. */
lz_attempt_result lz_cli_relay_terminal(lz_client *cl);

/* Non-interactive: stdin -> in_w, out_r -> stdout, err_r -> stderr (the
 * pipes handed to the sandboxed process); signals to this CLI are the
 * command's (docs/runtime.md "Signals"). Closes in_w, out_r and err_r. */
lz_attempt_result lz_cli_relay_pipes(lz_client *cl, int in_w, int out_r, int err_r);

#endif
