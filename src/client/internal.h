/* SPDX-License-Identifier: Apache-2.0
 *
 * What the client library's files share among themselves; nothing outside
 * src/client/ includes it.
 */
#ifndef LAZARET_CLIENT_INTERNAL_H
#define LAZARET_CLIENT_INTERNAL_H

#include "client/client.h"
#include "common/io.h"

/* The handlers of the prompt's rows (prompt.c). */
int lz_client_on_prompt(void *ctx, lz_proto_msg *m);
int lz_client_on_prompt_closed(void *ctx, lz_proto_msg *m);

/* A notice that arrived while the prompt was up, shown after it. */
void lz_client_hold_notice(lz_client *cl, const char *text);

#endif
