/* SPDX-License-Identifier: Apache-2.0
 *
 * The developer's terminal, as 'run' and 'stop' present a session: raw
 * mode and its restoration on every exit path (DX-5; docs/errors.md
 * "Terminal"), and the client library's UI (client/client.h) over it.
 */
#ifndef LAZARET_CLI_TERMINAL_H
#define LAZARET_CLI_TERMINAL_H

#include <stdbool.h>

#include "client/client.h"

/* The UI of a session on this process's stdin, stdout and stderr. */
extern const lz_client_ui lz_cli_terminal_ui;

/* Put stdin's terminal in raw mode (its original mode is restored at exit
 * at the latest); back to the original mode. */
void lz_cli_terminal_raw(void);
void lz_cli_terminal_restore(void);

/* Image preparation's phases reach stderr with or without a terminal; notes
 * only on a terminal (lz_progress_fn). */
void lz_cli_progress(lz_progress_kind kind, const char *line, void *userdata);

/* Tell the coordinator stdin's terminal size (RESIZE), when it has one. */
void lz_cli_send_resize(lz_client *cl);

#endif
