/* SPDX-License-Identifier: Apache-2.0
 *
 * What an escalation request leaves (escalation_internal.h): its records
 * in the outbox, signed with the generation's key and written whole (the
 * result; the output chunks and their removal once acknowledged), its log
 * lines (refused inbox records rate-limited) and its Domain Store row.
 */
#include "coordinator/escalation_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"
#include "coordinator/log.h"
#include "fs/atomic.h"
#include "common/io.h"

/* A refused record: the sandbox can send them as fast as it can write
 * files, so the log gets the first REFUSALS_LOGGED of a generation and
 * then one line per REFUSALS_EVERY (with the count): the log stays small
 * whatever the sandbox does (attack round i11b, B4). */
#define REFUSALS_LOGGED 100
#define REFUSALS_EVERY 1000

/* What the records keep of an argv: JSON, cut (visibly) after
 * RECORD_ARGV_MAX bytes, so a row or a log line is bounded whatever the
 * request holds (the whole request is at most 64 KiB, but escaped it could
 * be six times that). */
#define RECORD_ARGV_MAX 8192
#define LOG_ARGV_MAX 1024

const char *esc_outcome_name(lz_mbx_outcome o)
{
    switch (o) {
    case LZ_MBX_COMPLETED:
        return "Completed";
    case LZ_MBX_DENIED:
        return "Denied";
    case LZ_MBX_TIMED_OUT:
        return "TimedOut";
    case LZ_MBX_CANCELLED:
        return "Cancelled";
    case LZ_MBX_FAILED:
        return "Failed";
    default:
        return "Failed";
    }
}

/* Write one signed record as outbox/<id>/<name>, whole (fs/atomic.h):
 * the client never reads a part of one. No fsync: the outbox is in the
 * runtime directory (RAM), and a record is worth nothing after a crash.
 * On failure errno says why (the callers log it). */
int esc_outbox_write(escalation *e, const char *name, const lz_wbuf *b)
{
    esc_state *st = e->c->esc;
    uint8_t sig[LZ_SIG_LEN];
    if (!e->has_dir || lz_sig_sign(st->coord_seed, st->nonce, b->data, b->len, sig) < 0)
        return -1;
    /* The outbox is read-only inside: its entries are the coordinator's. */
    _cleanup_close_ int dir =
        openat(st->outbox_fd, e->req.request_id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return -1;
    const struct iovec iov[] = { { (void *) b->data, b->len }, { sig, sizeof(sig) } };
    lz_error *err = NULL;
    if (lz_write_atomic_iov(dir, name, iov, 2, 0444, LZ_ATOMIC_NO_SYNC, "an escalation record",
                            &err) < 0) {
        int errnum = err->errnum;
        lz_error_free(err);
        errno = errnum ? errnum : EIO;
        return -1;
    }
    return 0;
}

void esc_write_result(escalation *e, lz_mbx_outcome outcome, int status, const char *message)
{
    lz_mbx_result r = { .outcome = (uint32_t) outcome,
                        .status = outcome == LZ_MBX_COMPLETED ? (uint32_t) status : 0,
                        .n_chunks = e->seq,
                        .message = (char *) message };
    memcpy(r.request_id, e->req.request_id, sizeof(r.request_id));
    lz_wbuf b;
    lz_mbx_result_encode(&b, &r);
    if (esc_outbox_write(e, "result", &b) < 0)
        clog_(e->c, "escalation %.8s: cannot write its result: %s", e->req.request_id,
              strerror(errno));
}

__attribute__((format(printf, 2, 3))) void esc_refusal(coord *c, const char *fmt, ...)
{
    esc_state *st = c->esc;
    st->refusals++;
    if (st->refusals > REFUSALS_LOGGED && st->refusals % REFUSALS_EVERY != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    if (vasprintf(&line, fmt, ap) < 0)
        line = NULL;
    va_end(ap);
    if (!line)
        return;
    if (st->refusals > REFUSALS_LOGGED)
        clog_(c, "%s (%llu records refused so far; most are not logged)", line,
              (unsigned long long) st->refusals);
    else
        clog_(c, "%s", line);
    free(line);
}

static char *argv_json(const lz_mbx_request *r)
{
    json_t *a = json_array();
    for (size_t i = 0; i < r->argc; i++)
        json_array_append_new(a, json_stringn(r->argv[i], strlen(r->argv[i])));
    char *t = json_dumps(a, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(a);
    if (t && strlen(t) > RECORD_ARGV_MAX) {
        char *cut = lz_xasprintf("%.*s… (%zu bytes not kept)", RECORD_ARGV_MAX, t,
                                 strlen(t) - RECORD_ARGV_MAX);
        free(t);
        t = cut;
    }
    return t ? t : lz_xstrdup("[]");
}

/* The request's row, once: Pending, or Running with its decision when it
 * starts at once (a rule). */
void esc_record_begin(escalation *e, const char *decision)
{
    coord *c = e->c;
    if (e->recorded)
        return;
    e->recorded = true;
    char *argv = argv_json(&e->req);
    lz_error *err = NULL;
    if (lz_store_escalation_begin(c->a->store, c->generation, e->req.request_id, e->session_id,
                                  argv, e->req.cwd, e->req.why, decision, &err) < 0) {
        log_error(c, "cannot record an escalation request", err);
        lz_error_free(err);
    }
    char *safe = lz_text_printable(argv);
    if (strlen(safe) > LOG_ARGV_MAX)
        strcpy(safe + LOG_ARGV_MAX - 4, "…"); /* the Domain Store keeps more */
    clog_(c, "escalation %s: requested by session %s: %s", e->req.request_id, e->session_id, safe);
    free(safe);
    free(argv);
}

int esc_chunk_remove(escalation *e, const char *name)
{
    _cleanup_close_ int dir = openat(e->c->esc->outbox_fd, e->req.request_id,
                                     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return dir >= 0 && unlinkat(dir, name, 0) == 0 ? 0 : -1;
}
