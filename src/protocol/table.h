/* SPDX-License-Identifier: Apache-2.0
 *
 * The protocol table: the one place that says which message may arrive on
 * which channel, from which end, in which state of the receiver, with how
 * many descriptors and at most how many bytes (OpenSSH monitor.c's
 * mon_dispatch is the model). Every receiver — coordinator (sessions and
 * supervisor channel), supervisor, CLI — admits a message through
 * lz_proto_recv() before any decoder or handler sees it, then calls the
 * handler it registered for the type with lz_proto_dispatch().
 *
 * Adding a message type: one row in lz_proto_table (table.c), an encoder and
 * decoder in messages.{c,h}, and the handler in the receiver's handler rows.
 * tests/unit/test_protocol.c checks that every row is reachable and that
 * every receiver has a handler for every row addressed to it.
 *
 * A violation (unknown type, wrong direction, out of state, wrong number of
 * descriptors, oversized, truncated, or a payload its decoder refuses) ends
 * the connection it arrived on, with the reason logged by the receiver:
 * never the Domain (a supervisor-channel violation ends that channel, and
 * with it the generation's sandbox, which is the channel's only purpose),
 * never another session.
 *
 * Channels today: the session channel (CLI <-> coordinator) and the
 * supervisor channel (coordinator <-> Runtime Supervisor). The guest
 * launcher (lazaret-exec) gets its work as argv and returns it as an exit
 * status through runsc exec: it has no message channel to the coordinator
 * yet; the mailbox of host escalation (docs/escalation.md) will be the third
 * channel and add its rows here.
 *
 * libc only: this directory builds into a static library the static guest
 * binaries link too (src/protocol/meson.build).
 */
#ifndef LAZARET_PROTOCOL_TABLE_H
#define LAZARET_PROTOCOL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "protocol/wire.h"

typedef enum lz_proto_dir {
    LZ_DIR_CLI_TO_COORDINATOR,
    LZ_DIR_COORDINATOR_TO_CLI,
    LZ_DIR_COORDINATOR_TO_SUPERVISOR,
    LZ_DIR_SUPERVISOR_TO_COORDINATOR,
    LZ_DIR_COUNT
} lz_proto_dir;

/* States of the receiving end, one enumeration per direction. */

/* LZ_DIR_CLI_TO_COORDINATOR: the coordinator's view of one session. */
typedef enum lz_proto_session_state {
    LZ_PS_SESSION_HELLO,         /* connected; HELLO expected */
    LZ_PS_SESSION_RUN,           /* HELLO accepted; RUN expected */
    LZ_PS_SESSION_QUEUED,        /* RUN accepted; the sandbox is starting */
    LZ_PS_SESSION_RUNNING_TTY,   /* an interactive command runs */
    LZ_PS_SESSION_RUNNING_PIPES, /* a non-interactive command runs */
    LZ_PS_SESSION_ENROLL,        /* connected, in the clear; ENROLL expected (then the
                                  * TLS handshake, whose datagrams are not messages,
                                  * then HELLO) */
} lz_proto_session_state;

/* LZ_DIR_COORDINATOR_TO_CLI: the CLI's view of its session. */
typedef enum lz_proto_client_state {
    LZ_PS_CLIENT_WAITING,       /* HELLO and RUN sent; no STARTED yet */
    LZ_PS_CLIENT_RUNNING_TTY,   /* STARTED, interactive */
    LZ_PS_CLIENT_RUNNING_PIPES, /* STARTED, non-interactive */
    LZ_PS_CLIENT_ENROLLING,     /* ENROLL sent, in the clear; ENROLLED expected */
} lz_proto_client_state;

/* LZ_DIR_COORDINATOR_TO_SUPERVISOR: the supervisor's view. */
typedef enum lz_proto_supervisor_state {
    LZ_PS_SUPERVISOR_IDLE,    /* no sandbox yet */
    LZ_PS_SUPERVISOR_RUNNING, /* the sandbox was started */
} lz_proto_supervisor_state;

/* LZ_DIR_SUPERVISOR_TO_COORDINATOR: the coordinator's generation state. */
typedef enum lz_proto_generation_state {
    LZ_PS_GENERATION_STARTING,
    LZ_PS_GENERATION_RUNNING,
    LZ_PS_GENERATION_FAILED,
    LZ_PS_GENERATION_TEARDOWN,
} lz_proto_generation_state;

#define LZ_PROTO_STATE(s) (1u << (s))
#define LZ_PROTO_FDS(n) ((uint8_t) (1u << (n)))

typedef struct lz_proto_entry {
    uint16_t type;
    const char *name;
    lz_proto_dir dir;
    uint32_t states;   /* LZ_PROTO_STATE bits of the receiver's states */
    uint8_t fd_counts; /* LZ_PROTO_FDS bits: the descriptor counts allowed */
    uint32_t max_len;  /* bytes of the whole message, type included */
} lz_proto_entry;

extern const lz_proto_entry lz_proto_table[];
extern const size_t lz_proto_table_len;

/* The row of `type`, or NULL for a type no channel has. */
const lz_proto_entry *lz_proto_find(uint16_t type);
/* The name of a type ("HELLO"), or "unknown". */
const char *lz_proto_name(uint16_t type);
/* The name of a receiver state ("RUNNING_TTY"), or "unknown". */
const char *lz_proto_state_name(lz_proto_dir dir, unsigned state);

/* One received, admitted message. fds are owned by the message until a
 * handler takes them (sets the slot to -1); lz_proto_msg_clear closes the
 * rest. */
typedef struct lz_proto_msg {
    uint8_t buf[LZ_WIRE_MAX];
    size_t len;
    lz_rbuf r; /* positioned after the type */
    const lz_proto_entry *entry;
    int fds[LZ_WIRE_MAX_FDS];
    size_t nfds;
} lz_proto_msg;

/* Admit a message of `type`, `len` bytes and `nfds` descriptors arriving in
 * direction dir while the receiver is in `state`. Returns its row, or NULL
 * with a one-line reason in why[0..why_len) ("RUN is not allowed in state
 * RUNNING_TTY"). Pure: no I/O. */
const lz_proto_entry *lz_proto_admit(lz_proto_dir dir, unsigned state, uint16_t type, size_t len,
                                     size_t nfds, char *why, size_t why_len);

/* Receive one message from sock and admit it (lz_proto_admit).
 * Returns 1 with *m filled, 0 on orderly shutdown by the peer, or -1 with
 * *err set (errno EPROTO for a violation, whose message says which, or the
 * receive error); on -1 and 0 every received descriptor is already closed.
 * The caller ends the connection on 0 and -1. */
LZ_MUST_CHECK
int lz_proto_recv(int sock, lz_proto_dir dir, unsigned state, lz_proto_msg *m, lz_error **err);

/* The second half of lz_proto_recv, for a message that arrived some other
 * way (trust/channel.h decrypts it): m->buf, m->len and m->fds/m->nfds are
 * filled; admit it in direction dir, state `state`. Returns 1, or -1 with
 * errno EPROTO in *err and the descriptors closed. */
LZ_MUST_CHECK
int lz_proto_admit_msg(lz_proto_dir dir, unsigned state, lz_proto_msg *m, lz_error **err);

/* Close the descriptors the message still owns. */
void lz_proto_msg_clear(lz_proto_msg *m);

/* A receiver's handler for one type. Returns 0, or -1 when the payload is
 * malformed (the decoder refused it, or a field is out of range): a
 * violation, the caller ends the connection. */
typedef int (*lz_proto_handler)(void *ctx, lz_proto_msg *m);

typedef struct lz_proto_handler_row {
    uint16_t type;
    lz_proto_handler fn;
} lz_proto_handler_row;

/* Call the handler of m's type from rows[0..n). Returns the handler's
 * result; -1 with errno ENOSYS when the receiver has no handler for an
 * admitted type (a programming error the unit tests rule out). */
int lz_proto_dispatch(const lz_proto_handler_row *rows, size_t n, void *ctx, lz_proto_msg *m);

/* For tests: does `rows` handle every table row addressed in direction dir?
 * Returns the first type without a handler, or 0. */
uint16_t lz_proto_unhandled(lz_proto_dir dir, const lz_proto_handler_row *rows, size_t n);

#endif
