/* SPDX-License-Identifier: Apache-2.0
 *
 * The session's channel at its simplest: a message to the coordinator over
 * the secured channel, and the coordinator's text shown safely. Below the
 * handlers (session.c) and the prompt (prompt.c), which both use it.
 */
#include <stdlib.h>

#include "client/internal.h"
#include "client/screen.h"
#include "common/text.h"
#include "common/util.h"

void lz_print_remote(FILE *out, const char *prefix, const char *text, const char *suffix)
{
    char *safe = lz_text_printable(text);
    fprintf(out, "%s%s%s", prefix, safe, suffix);
    free(safe);
}

void lz_client_post(lz_client *cl, const lz_wbuf *b)
{
    lz_tls_proto_post(cl->tls, cl->sock, b);
}

void lz_client_send_resize(lz_client *cl, unsigned rows, unsigned cols)
{
    if (cl->screen)
        lz_screen_resize(cl->screen, rows, cols);
    lz_wbuf b;
    lz_msg_pair_encode(&b, LZ_MSG_RESIZE, rows, cols);
    lz_client_post(cl, &b);
}
