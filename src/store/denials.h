/* SPDX-License-Identifier: Apache-2.0
 *
 * The Domain's denial log (issue 25, item 4; docs/network.md "Every denial
 * is visible"): each DNS query the Network Sidecar refused and each
 * connection its router rejected, with the rule that decided and the
 * configuration line that would allow it. Written only by the sidecar
 * (outside the sandbox) into <storage Domain Root>/logs/, read by
 * `lazaret log` and `lazaret status`.
 *
 * A flood never fills a disk nor slows the sandbox: records are
 * rate-limited (a token bucket; identical records within a second are
 * counted, not repeated), what is dropped is counted and said in a later
 * record, and the files are size-capped (the current file is rotated to
 * one older file when full, so at most two caps' worth is ever kept).
 * Recording never blocks on anything but the write of a line to a local
 * file, and a failed write is dropped, not retried.
 *
 * Every text field of a record may come from the sandbox (a name it asked
 * for): the file is JSON (jansson escapes it), and readers print it only
 * through lz_text_printable.
 */
#ifndef LAZARET_STORE_DENIALS_H
#define LAZARET_STORE_DENIALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define LZ_DENIALS_FILE "denials.jsonl"
#define LZ_DENIALS_OLD_FILE "denials.1.jsonl"

typedef enum lz_denial_kind {
    LZ_DENIAL_DNS = 1, /* a query answered NXDOMAIN/empty instead of being asked upstream */
    LZ_DENIAL_TCP,     /* a connection rejected (reset) */
    LZ_DENIAL_UDP,     /* a datagram rejected (port unreachable) */
    LZ_DENIAL_OTHER,   /* any other protocol */
    LZ_DENIAL_NAME,    /* a connection refused by the name check (SNI / Host) */
} lz_denial_kind;

typedef struct lz_denial {
    lz_denial_kind kind;
    int64_t time_ms; /* CLOCK_REALTIME, milliseconds; 0: now */
    bool has_addr;
    uint8_t addr[4];   /* destination */
    uint16_t port;     /* destination port (TCP, UDP), 0 otherwise */
    uint8_t proto;     /* IP protocol number for OTHER */
    const char *name;  /* the host name when known (canonical), or NULL */
    const char *qtype; /* DNS: the query type ("A", "TXT", ...), else NULL */
    const char *rule;  /* what decided, e.g. "not in allow_hosts (strict DNS)",
                          "deny_hosts \"*.x\"", "default deny", "deny_egress
                          203.0.113.0/24", "never routed: loopback" */
    const char *allow; /* the configuration line that would allow it, e.g.
                          "allow_hosts = [\"x\"]", or NULL when none can */
} lz_denial;

typedef struct lz_denial_log lz_denial_log;

/* Open (create, append) the log in the Domain's logs directory, given as
 * a descriptor (the caller resolved it confined). cap_bytes: the size at
 * which the current file is rotated (0: the default, 1 MiB). */
LZ_MUST_CHECK
int lz_denial_log_open(int logs_dirfd, size_t cap_bytes, lz_denial_log **ret, lz_error **err);

/* Record d (rate-limited, deduplicated, capped as above). Never fails
 * loudly: what cannot be written is counted as dropped. */
void lz_denial_log_record(lz_denial_log *log, const lz_denial *d);

/* Count n denials that happened but cannot be itemised (packets the
 * kernel's log limit kept back, reports a full queue held back): they are
 * added to the dropped count, so the totals stay exact. */
void lz_denial_log_count(lz_denial_log *log, uint64_t n);

/* Write the count of records dropped since the last call, if any, as a
 * record of its own; the sidecar calls it about once a second. */
void lz_denial_log_tick(lz_denial_log *log);

void lz_denial_log_close(lz_denial_log *log);

/* ---- readers (lazaret log, lazaret status) ---------------------------- */

typedef struct lz_denial_summary {
    uint64_t total; /* denials recorded in the kept files, dropped ones included */
    size_t n_last;
    char **last; /* the newest records, one line each, oldest first, printable */
} lz_denial_summary;

/* Summarize the kept files under logs_dirfd: the total and the newest
 * `last` records formatted for a terminal. Missing files: an empty
 * summary. */
LZ_MUST_CHECK
int lz_denial_summary_read(int logs_dirfd, size_t last, lz_denial_summary *ret, lz_error **err);
void lz_denial_summary_clear(lz_denial_summary *s);

/* Each whole line of the kept files, oldest first (a line without its
 * newline yet is not given). `lazaret log` lists with it. */
typedef int (*lz_denial_line_fn)(void *ctx, const char *line, size_t len);
LZ_MUST_CHECK
int lz_denial_lines_read(int logs_dirfd, lz_denial_line_fn fn, void *ctx, lz_error **err);

/* One stored line: how many denials it stands for (1, its count, or the
 * dropped count of a summary; 0 for a line that is not a record); the
 * line for a terminal ("TIME  denied  WHAT  rule: ...  allow with: ...",
 * escaped by lz_text_printable, long fields cut); the object as compact
 * ASCII JSON. The last two return NULL for a line that is not a record. */
uint64_t lz_denial_line_weight(const char *line, size_t len);
char *lz_denial_line_text(const char *line, size_t len);
char *lz_denial_line_json(const char *line, size_t len);

#endif
