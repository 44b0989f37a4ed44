/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/protocol/table.c, the protocol table, and the newer
 * encoders of src/protocol/messages.c:
 *
 *  - every row of lz_proto_table through lz_proto_admit: admitted in each of
 *    its receiver states with each allowed descriptor count at max_len;
 *    refused, with a reason naming the message, in every other state of its
 *    direction, from every other direction, with every disallowed
 *    descriptor count (0..7), and at max_len + 1; every type no row has is
 *    refused as unknown; types and names are unique;
 *  - every receiver has a handler for every row addressed to it
 *    (lz_proto_unhandled): the coordinator's sessions and supervisor
 *    channel, the supervisor, and the CLI (the client library's rows,
 *    src/client/session.c);
 *  - the largest message each encoder can write for a row is admitted
 *    (max_len is not tighter than the vocabulary);
 *  - lz_proto_recv over a real SOCK_SEQPACKET socketpair: an admitted
 *    message with its descriptors; a violation returns -1/EPROTO and closes
 *    every descriptor that came with it (checked with fcntl F_GETFD on the
 *    numbers the kernel used); a record larger than LZ_WIRE_MAX is refused
 *    as truncated; a record without a type is refused; orderly shutdown
 *    returns 0;
 *  - lz_msg_empty/data/started/sup_started round-trip and their decoders
 *    refuse the encoding with a byte more or a byte less.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client.h"
#include "common/util.h"
#include "coordinator/generation.h"
#include "coordinator/session.h"
#include "protocol/messages.h"
#include "protocol/table.h"
#include "protocol/wire.h"
#include "supervisor/supervisor.h"

#include "unit_fds.h"

/* ---- helpers ------------------------------------------------------------ */

/* The receiver states of each direction (table.h's enumerations). */
static const unsigned n_states[LZ_DIR_COUNT] = {
    [LZ_DIR_CLI_TO_COORDINATOR] = LZ_PS_SESSION_ENROLL + 1,
    [LZ_DIR_COORDINATOR_TO_CLI] = LZ_PS_CLIENT_ENROLLING + 1,
    [LZ_DIR_COORDINATOR_TO_SUPERVISOR] = LZ_PS_SUPERVISOR_RUNNING + 1,
    [LZ_DIR_SUPERVISOR_TO_COORDINATOR] = LZ_PS_GENERATION_TEARDOWN + 1,
};

static bool fd_is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0 || errno != EBADF;
}

/* The n lowest descriptor numbers free now: where the kernel puts the next
 * received descriptors. */
static void lowest_free_fds(int *out, size_t n)
{
    int fd = 0;
    for (size_t i = 0; i < n; fd++)
        if (!fd_is_open(fd))
            out[i++] = fd;
}

static void admit_ok(const lz_proto_entry *e, unsigned state, size_t len, size_t nfds)
{
    char why[160] = "";
    const lz_proto_entry *got = lz_proto_admit(e->dir, state, e->type, len, nfds, why, sizeof(why));
    if (got != e)
        print_error("%s refused in state %s with %zu fds, %zu bytes: %s\n", e->name,
                    lz_proto_state_name(e->dir, state), nfds, len, why);
    assert_ptr_equal(got, e);
}

static void admit_refused(lz_proto_dir dir, unsigned state, uint16_t type, size_t len, size_t nfds,
                          const char *needle1, const char *needle2)
{
    char why[160] = "";
    const lz_proto_entry *got = lz_proto_admit(dir, state, type, len, nfds, why, sizeof(why));
    if (got || !strstr(why, needle1) || (needle2 && !strstr(why, needle2)))
        print_error("type %u dir %d state %u nfds %zu len %zu: %s (reason \"%s\")\n",
                    (unsigned) type, (int) dir, state, nfds, len, got ? "admitted" : "refused",
                    why);
    assert_null(got);
    assert_non_null(strstr(why, needle1));
    if (needle2)
        assert_non_null(strstr(why, needle2));
}

/* ---- the table ---------------------------------------------------------- */

static void test_table_types_and_names_unique(void **state)
{
    (void) state;
    assert_true(lz_proto_table_len > 0);
    for (size_t i = 0; i < lz_proto_table_len; i++) {
        const lz_proto_entry *e = &lz_proto_table[i];
        assert_non_null(e->name);
        assert_true(e->dir < LZ_DIR_COUNT);
        assert_true(e->states != 0);                       /* reachable in some state */
        assert_true(e->states < (1u << n_states[e->dir])); /* only real states */
        assert_true(e->fd_counts != 0);
        assert_true(e->fd_counts < LZ_PROTO_FDS(LZ_WIRE_MAX_FDS + 1)); /* receivable */
        assert_true(e->max_len >= 2);
        assert_ptr_equal(lz_proto_find(e->type), e);
        assert_string_equal(lz_proto_name(e->type), e->name);
        for (size_t j = i + 1; j < lz_proto_table_len; j++) {
            assert_int_not_equal(e->type, lz_proto_table[j].type);
            assert_string_not_equal(e->name, lz_proto_table[j].name);
        }
    }
    assert_string_equal(lz_proto_name(0), "unknown");
}

static void test_state_names_match_the_enumerations(void **state)
{
    (void) state;
    for (int d = 0; d < LZ_DIR_COUNT; d++) {
        for (unsigned s = 0; s < n_states[d]; s++)
            assert_string_not_equal(lz_proto_state_name((lz_proto_dir) d, s), "unknown");
        assert_string_equal(lz_proto_state_name((lz_proto_dir) d, n_states[d]), "unknown");
    }
    assert_string_equal(lz_proto_state_name(LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_RUNNING_TTY),
                        "RUNNING_TTY");
    assert_string_equal(lz_proto_state_name(LZ_DIR_COUNT, 0), "unknown");
}

static void test_every_row_admitted_where_allowed(void **state)
{
    (void) state;
    size_t admitted = 0;
    for (size_t i = 0; i < lz_proto_table_len; i++) {
        const lz_proto_entry *e = &lz_proto_table[i];
        for (unsigned s = 0; s < n_states[e->dir]; s++) {
            if (!(e->states & LZ_PROTO_STATE(s)))
                continue;
            for (size_t n = 0; n < 8; n++) {
                if (!(e->fd_counts & LZ_PROTO_FDS(n)))
                    continue;
                admit_ok(e, s, e->max_len, n);
                admit_ok(e, s, 2, n); /* just the type */
                admitted++;
            }
        }
    }
    assert_true(admitted >= lz_proto_table_len);
}

static void test_every_row_refused_elsewhere(void **state)
{
    (void) state;
    for (size_t i = 0; i < lz_proto_table_len; i++) {
        const lz_proto_entry *e = &lz_proto_table[i];
        unsigned ok_state = (unsigned) __builtin_ctz(e->states);
        size_t ok_fds = (size_t) __builtin_ctz(e->fd_counts);

        /* Every other state of its own direction (and one past them). */
        for (unsigned s = 0; s <= n_states[e->dir]; s++)
            if (!(e->states & LZ_PROTO_STATE(s)))
                admit_refused(e->dir, s, e->type, 2, ok_fds, e->name, "not allowed in state");
        admit_refused(e->dir, 31, e->type, 2, ok_fds, e->name, "not allowed in state");
        admit_refused(e->dir, 1000, e->type, 2, ok_fds, e->name, "not allowed in state");

        /* From every other direction, in every state of that one. */
        for (int d = 0; d < LZ_DIR_COUNT; d++) {
            if ((lz_proto_dir) d == e->dir)
                continue;
            for (unsigned s = 0; s < n_states[d]; s++)
                admit_refused((lz_proto_dir) d, s, e->type, 2, ok_fds, e->name, "is sent by");
        }

        /* Every disallowed descriptor count, and absurd ones. */
        for (size_t n = 0; n < 8; n++)
            if (!(e->fd_counts & LZ_PROTO_FDS(n)))
                admit_refused(e->dir, ok_state, e->type, 2, n, e->name, "descriptors");
        admit_refused(e->dir, ok_state, e->type, 2, 8, e->name, "descriptors");
        admit_refused(e->dir, ok_state, e->type, 2, SIZE_MAX, e->name, "descriptors");

        /* One byte too many, in every allowed state. */
        for (unsigned s = 0; s < n_states[e->dir]; s++)
            if (e->states & LZ_PROTO_STATE(s))
                admit_refused(e->dir, s, e->type, (size_t) e->max_len + 1, ok_fds, e->name,
                              "bytes");
        admit_refused(e->dir, ok_state, e->type, SIZE_MAX, ok_fds, e->name, "bytes");
    }
}

static void test_unknown_types_refused(void **state)
{
    (void) state;
    size_t unknown = 0;
    for (uint32_t t = 0; t <= UINT16_MAX; t++) {
        if (lz_proto_find((uint16_t) t))
            continue;
        unknown++;
        char needle[32];
        snprintf(needle, sizeof(needle), "unknown message type %u", (unsigned) t);
        for (int d = 0; d < LZ_DIR_COUNT; d++)
            admit_refused((lz_proto_dir) d, 0, (uint16_t) t, 2, 0, needle, NULL);
        assert_string_equal(lz_proto_name((uint16_t) t), "unknown");
    }
    assert_int_equal(unknown, 65536 - lz_proto_table_len);
}

/* The reason is truncated, never overflows, and a zero-sized buffer is
 * not written. */
static void test_admit_reason_bounded(void **state)
{
    (void) state;
    char why[8];
    memset(why, 'X', sizeof(why));
    assert_null(
        lz_proto_admit(LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, LZ_MSG_RUN, 2, 0, why, 4));
    assert_int_equal(strlen(why), 3);
    assert_int_equal(why[4], 'X');
    char none = 'Y';
    assert_null(
        lz_proto_admit(LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, LZ_MSG_RUN, 2, 0, &none, 0));
    assert_int_equal(none, 'Y');
}

/* The largest message the vocabulary allows for a row fits its max_len:
 * a bound tighter than the decoders' would refuse valid peers. */
static lz_wbuf big;

static void expect_fits(uint16_t type)
{
    assert_false(big.overflow);
    const lz_proto_entry *e = lz_proto_find(type);
    assert_non_null(e);
    if (big.len > e->max_len)
        print_error("%s: largest valid encoding has %zu bytes, max_len %u\n", e->name, big.len,
                    (unsigned) e->max_len);
    assert_true(big.len <= e->max_len);
}

static void test_largest_encodings_fit(void **state)
{
    (void) state;
    char id64[65], text[LZ_MSG_MAX_TEXT + 1];
    memset(id64, 'a', 64);
    id64[64] = '\0';
    memset(text, 't', LZ_MSG_MAX_TEXT);
    text[LZ_MSG_MAX_TEXT] = '\0';
    static uint8_t data[LZ_MSG_MAX_DATA];
    memset(data, 'd', sizeof(data));

    lz_msg_hello h = { UINT32_MAX, id64, id64 };
    lz_msg_hello_encode(&big, &h);
    expect_fits(LZ_MSG_HELLO);
    lz_msg_data_encode(&big, LZ_MSG_INPUT, data, sizeof(data));
    expect_fits(LZ_MSG_INPUT);
    lz_msg_data_encode(&big, LZ_MSG_OUTPUT, data, sizeof(data));
    expect_fits(LZ_MSG_OUTPUT);
    lz_msg_pair_encode(&big, LZ_MSG_RESIZE, 65535, 65535);
    expect_fits(LZ_MSG_RESIZE);
    lz_msg_empty_encode(&big, LZ_MSG_CLOSE);
    expect_fits(LZ_MSG_CLOSE);
    lz_msg_text_encode(&big, LZ_MSG_PROGRESS, text);
    expect_fits(LZ_MSG_PROGRESS);
    lz_msg_refused m = { UINT32_MAX, text, text };
    lz_msg_refused_encode(&big, LZ_MSG_REFUSED, &m);
    expect_fits(LZ_MSG_REFUSED);
    lz_msg_refused_encode(&big, LZ_SUP_FAILED, &m);
    expect_fits(LZ_SUP_FAILED);
    lz_msg_started_encode(&big, "0123456789abcdef0123456789abcdef");
    expect_fits(LZ_MSG_STARTED);
    lz_msg_pair_encode(&big, LZ_MSG_EXIT, 1, UINT32_MAX);
    expect_fits(LZ_MSG_EXIT);
    lz_msg_empty_encode(&big, LZ_SUP_START);
    expect_fits(LZ_SUP_START);
    lz_msg_pair_encode(&big, LZ_SUP_SIGNAL, UINT32_MAX, UINT32_MAX);
    expect_fits(LZ_SUP_SIGNAL);
    lz_msg_empty_encode(&big, LZ_SUP_STOP);
    expect_fits(LZ_SUP_STOP);
    lz_msg_sup_started_encode(&big, true);
    expect_fits(LZ_SUP_STARTED);
    lz_msg_pair_encode(&big, LZ_SUP_EXEC_EXITED, UINT32_MAX, UINT32_MAX);
    expect_fits(LZ_SUP_EXEC_EXITED);
    lz_msg_empty_encode(&big, LZ_SUP_STOPPED);
    expect_fits(LZ_SUP_STOPPED);
    lz_msg_empty_encode(&big, LZ_SUP_MAILBOX);
    expect_fits(LZ_SUP_MAILBOX);
    /* RUN and SUP_EXEC are bounded by the wire (LZ_WIRE_MAX) itself. */
    assert_int_equal(lz_proto_find(LZ_MSG_RUN)->max_len, LZ_WIRE_MAX);
    assert_int_equal(lz_proto_find(LZ_SUP_EXEC)->max_len, LZ_WIRE_MAX);
}

/* ---- receivers' handlers ------------------------------------------------ */

static void test_every_receiver_handles_its_rows(void **state)
{
    (void) state;
    assert_int_equal(
        lz_proto_unhandled(LZ_DIR_CLI_TO_COORDINATOR, session_handlers, session_handlers_len), 0);
    assert_int_equal(lz_proto_unhandled(LZ_DIR_SUPERVISOR_TO_COORDINATOR, supervisor_event_handlers,
                                        supervisor_event_handlers_len),
                     0);
    assert_int_equal(lz_proto_unhandled(LZ_DIR_COORDINATOR_TO_SUPERVISOR, lz_supervisor_handlers,
                                        lz_supervisor_handlers_len),
                     0);
    assert_int_equal(
        lz_proto_unhandled(LZ_DIR_COORDINATOR_TO_CLI, lz_client_handlers, lz_client_n_handlers), 0);
}

/* No receiver registers a handler for a type it can never be admitted. */
static void check_rows_in_direction(const lz_proto_handler_row *rows, size_t n, lz_proto_dir dir)
{
    for (size_t i = 0; i < n; i++) {
        const lz_proto_entry *e = lz_proto_find(rows[i].type);
        assert_non_null(e);
        assert_int_equal(e->dir, dir);
        assert_non_null(rows[i].fn);
    }
}

static void test_handlers_only_for_their_direction(void **state)
{
    (void) state;
    check_rows_in_direction(session_handlers, session_handlers_len, LZ_DIR_CLI_TO_COORDINATOR);
    check_rows_in_direction(supervisor_event_handlers, supervisor_event_handlers_len,
                            LZ_DIR_SUPERVISOR_TO_COORDINATOR);
    check_rows_in_direction(lz_supervisor_handlers, lz_supervisor_handlers_len,
                            LZ_DIR_COORDINATOR_TO_SUPERVISOR);
    check_rows_in_direction(lz_client_handlers, lz_client_n_handlers, LZ_DIR_COORDINATOR_TO_CLI);
}

/* lz_proto_unhandled itself: a missing row, and a row with a NULL
 * handler, are both reported (the check above could not fail otherwise). */
static int h_ok(void *ctx, lz_proto_msg *m)
{
    (void) m;
    (*(int *) ctx)++;
    return 0;
}

static int h_bad(void *ctx, lz_proto_msg *m)
{
    (void) ctx, (void) m;
    return -1;
}

static void test_unhandled_and_dispatch(void **state)
{
    (void) state;
    const lz_proto_handler_row partial[] = { { LZ_SUP_MAILBOX, h_ok },
                                             { LZ_SUP_STARTED, h_ok },
                                             { LZ_SUP_FAILED, h_ok },
                                             { LZ_SUP_EXEC_EXITED, h_ok } };
    assert_int_equal(lz_proto_unhandled(LZ_DIR_SUPERVISOR_TO_COORDINATOR, partial, 4),
                     LZ_SUP_STOPPED);
    const lz_proto_handler_row null_fn[] = { { LZ_SUP_MAILBOX, h_ok },
                                             { LZ_SUP_STARTED, h_ok },
                                             { LZ_SUP_FAILED, NULL },
                                             { LZ_SUP_EXEC_EXITED, h_ok },
                                             { LZ_SUP_STOPPED, h_ok } };
    assert_int_equal(lz_proto_unhandled(LZ_DIR_SUPERVISOR_TO_COORDINATOR, null_fn, 5),
                     LZ_SUP_FAILED);
    /* The table's first row of that direction. */
    assert_int_equal(lz_proto_unhandled(LZ_DIR_SUPERVISOR_TO_COORDINATOR, NULL, 0), LZ_SUP_MAILBOX);

    static lz_proto_msg m;
    memset(&m, 0, sizeof(m));
    uint8_t msg[2] = { 0, LZ_SUP_FAILED };
    assert_true(lz_rbuf_init(&m.r, msg, 2));
    int calls = 0;
    const lz_proto_handler_row rows[] = { { LZ_SUP_STARTED, h_bad }, { LZ_SUP_FAILED, h_ok } };
    assert_int_equal(lz_proto_dispatch(rows, 2, &calls, &m), 0);
    assert_int_equal(calls, 1);
    m.r.type = LZ_SUP_STARTED;
    assert_int_equal(lz_proto_dispatch(rows, 2, &calls, &m), -1);
    m.r.type = LZ_SUP_STOPPED;
    errno = 0;
    assert_int_equal(lz_proto_dispatch(rows, 2, &calls, &m), -1);
    assert_int_equal(errno, ENOSYS);
    assert_int_equal(calls, 1);
}

/* ---- lz_proto_recv over a socketpair -------------------------------------- */

typedef struct sock_fixture {
    int sv[2];
    int base_fds;
} sock_fixture;

static int sock_setup(void **state)
{
    sock_fixture *f = calloc(1, sizeof(*f));
    if (!f || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->sv) < 0)
        return -1;
    f->base_fds = count_open_fds();
    *state = f;
    return 0;
}

static int sock_teardown(void **state)
{
    sock_fixture *f = *state;
    /* A test that closed one end of the pair accounts for it here. */
    int now = count_open_fds() + (f->sv[0] < 0) + (f->sv[1] < 0);
    if (f->sv[0] >= 0)
        close(f->sv[0]);
    if (f->sv[1] >= 0)
        close(f->sv[1]);
    bool leak = now != f->base_fds;
    if (leak)
        fprintf(stderr, "descriptor leak: %d open at setup, %d at teardown\n", f->base_fds, now);
    free(f);
    return leak ? -1 : 0;
}

static lz_proto_msg rm;
static lz_wbuf wb;

static void send_msg(int sock, const lz_wbuf *b, size_t nfds)
{
    int fds[LZ_WIRE_MAX_FDS] = { -1, -1, -1, -1 };
    for (size_t i = 0; i < nfds; i++)
        assert_true((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
    lz_error *err = NULL;
    assert_int_equal(lz_wire_send(sock, b, fds, nfds, &err), 0);
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]); /* in flight: the receiver's copies are the only ones */
}

static void encode_hello(lz_wbuf *b)
{
    lz_msg_hello h = { LZ_SESSION_PROTOCOL_VERSION, (char *) "d", (char *) "f" };
    lz_msg_hello_encode(b, &h);
}

static void encode_run(lz_wbuf *b, bool interactive)
{
    char *argv[] = { (char *) "true", NULL };
    lz_msg_run r = {
        .interactive = interactive, .term = (char *) "", .cwd = (char *) "", .argv = argv, .argc = 1
    };
    lz_msg_run_encode(b, &r);
}

static void test_recv_admitted(void **state)
{
    sock_fixture *f = *state;
    lz_error *err = NULL;
    encode_hello(&wb);
    send_msg(f->sv[0], &wb, 0);
    assert_int_equal(
        lz_proto_recv(f->sv[1], LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, &rm, &err), 1);
    assert_null(err);
    assert_ptr_equal(rm.entry, lz_proto_find(LZ_MSG_HELLO));
    assert_int_equal(rm.r.type, LZ_MSG_HELLO);
    assert_int_equal(rm.len, wb.len);
    assert_int_equal(rm.nfds, 0);
    lz_msg_hello h;
    assert_true(lz_msg_hello_decode(&rm.r, &h)); /* the reader is after the type */
    assert_string_equal(h.domain_id, "d");
    lz_msg_hello_clear(&h);
    lz_proto_msg_clear(&rm);
}

static void test_recv_admitted_with_fds(void **state)
{
    sock_fixture *f = *state;
    lz_error *err = NULL;
    encode_run(&wb, false);
    send_msg(f->sv[0], &wb, 3);
    assert_int_equal(
        lz_proto_recv(f->sv[1], LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_RUN, &rm, &err), 1);
    assert_int_equal(rm.nfds, 3);
    struct stat null_st;
    assert_int_equal(stat("/dev/null", &null_st), 0);
    for (size_t i = 0; i < 3; i++) {
        struct stat st;
        assert_int_equal(fstat(rm.fds[i], &st), 0);
        assert_int_equal(st.st_rdev, null_st.st_rdev);
        assert_true(fcntl(rm.fds[i], F_GETFD) & FD_CLOEXEC);
    }
    /* A handler takes one; clearing closes the others only. */
    int taken = rm.fds[1];
    rm.fds[1] = -1;
    int others[2] = { rm.fds[0], rm.fds[2] };
    lz_proto_msg_clear(&rm);
    assert_false(fd_is_open(others[0]));
    assert_false(fd_is_open(others[1]));
    assert_true(fd_is_open(taken));
    close(taken);
}

/* Send `b` with nfds descriptors, receive it in `st`: a violation whose
 * reason contains needle, and none of the descriptors stays open. */
static void expect_violation(sock_fixture *f, lz_proto_dir dir, unsigned st, size_t nfds,
                             const char *needle)
{
    int expect_at[LZ_WIRE_MAX_FDS];
    send_msg(f->sv[0], &wb, nfds);
    lowest_free_fds(expect_at, LZ_WIRE_MAX_FDS);
    int before = count_open_fds();
    lz_error *err = NULL;
    errno = 0;
    assert_int_equal(lz_proto_recv(f->sv[1], dir, st, &rm, &err), -1);
    assert_non_null(err);
    if (err->errnum != EPROTO || !strstr(err->message, needle))
        print_error("unexpected: errnum %d, \"%s\"\n", err->errnum, err->message);
    assert_int_equal(err->errnum, EPROTO);
    /* The reason only: each receiver says "protocol violation" itself. */
    assert_null(strstr(err->message, "protocol violation"));
    assert_non_null(strstr(err->message, needle));
    lz_error_free(err);
    assert_int_equal(rm.nfds, 0);
    /* The kernel put the received descriptors at the lowest free numbers;
     * every one of them is closed again. */
    for (size_t i = 0; i < nfds; i++)
        assert_false(fd_is_open(expect_at[i]));
    assert_int_equal(count_open_fds(), before);
}

static void test_recv_violation_state_closes_fds(void **state)
{
    sock_fixture *f = *state;
    encode_run(&wb, false);
    /* RUN before HELLO, with stdio. */
    expect_violation(f, LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, 3,
                     "RUN is not allowed in state HELLO");
}

static void test_recv_violation_fd_count_closes_fds(void **state)
{
    sock_fixture *f = *state;
    encode_run(&wb, false);
    expect_violation(f, LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_RUN, 2, "RUN with 2 descriptors");
    expect_violation(f, LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_RUN, 4, "RUN with 4 descriptors");
    encode_hello(&wb);
    expect_violation(f, LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, 1,
                     "HELLO with 1 descriptors");
}

static void test_recv_violation_direction_and_unknown(void **state)
{
    sock_fixture *f = *state;
    /* A supervisor message on a session: refused, with its descriptors. */
    lz_msg_empty_encode(&wb, LZ_SUP_STOPPED);
    expect_violation(f, LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, 2,
                     "SUP_STOPPED is sent by the supervisor, not by the CLI");
    lz_wbuf_init(&wb, 9999);
    expect_violation(f, LZ_DIR_SUPERVISOR_TO_COORDINATOR, LZ_PS_GENERATION_STARTING, 1,
                     "unknown message type 9999");
}

static void test_recv_violation_oversized_row(void **state)
{
    sock_fixture *f = *state;
    /* HELLO one byte past its max_len (the wire would carry it). */
    const lz_proto_entry *e = lz_proto_find(LZ_MSG_HELLO);
    lz_wbuf_init(&wb, LZ_MSG_HELLO);
    static uint8_t pad[LZ_WIRE_MAX];
    memset(pad, 0, sizeof(pad));
    wb.len = e->max_len + 1;
    memcpy(wb.data + 2, pad, wb.len - 2);
    char needle[64];
    snprintf(needle, sizeof(needle), "HELLO of %u bytes", (unsigned) e->max_len + 1);
    expect_violation(f, LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, 0, needle);
    /* At max_len exactly it is admitted (its decoder judges the rest). */
    wb.len = e->max_len;
    send_msg(f->sv[0], &wb, 0);
    lz_error *err = NULL;
    assert_int_equal(
        lz_proto_recv(f->sv[1], LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, &rm, &err), 1);
    lz_proto_msg_clear(&rm);
}

static void test_recv_no_type(void **state)
{
    sock_fixture *f = *state;
    wb.len = 1;
    wb.overflow = false;
    expect_violation(f, LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, 1, "has no type");
}

static void test_recv_larger_than_wire_max(void **state)
{
    sock_fixture *f = *state;
    /* One record of LZ_WIRE_MAX + 1 bytes (a valid HELLO type), with two
     * descriptors: truncated on receipt, refused, descriptors closed. */
    static uint8_t rec[LZ_WIRE_MAX + 1];
    memset(rec, 0, sizeof(rec));
    rec[1] = LZ_MSG_HELLO;
    int fds[2];
    for (int i = 0; i < 2; i++)
        assert_true((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
    struct iovec iov = { .iov_base = rec, .iov_len = sizeof(rec) };
    union {
        char buf[CMSG_SPACE(sizeof(fds))];
        struct cmsghdr align;
    } ctrl;
    memset(&ctrl, 0, sizeof(ctrl));
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = ctrl.buf,
                          .msg_controllen = sizeof(ctrl.buf) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(c), fds, sizeof(fds));
    assert_int_equal(sendmsg(f->sv[0], &msg, MSG_NOSIGNAL), (ssize_t) sizeof(rec));
    close(fds[0]);
    close(fds[1]);
    int expect_at[2];
    lowest_free_fds(expect_at, 2);
    int before = count_open_fds();
    lz_error *err = NULL;
    assert_int_equal(
        lz_proto_recv(f->sv[1], LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_HELLO, &rm, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->errnum, EPROTO);
    assert_non_null(strstr(err->message, "truncated"));
    lz_error_free(err);
    assert_false(fd_is_open(expect_at[0]));
    assert_false(fd_is_open(expect_at[1]));
    assert_int_equal(count_open_fds(), before);
    assert_int_equal(rm.nfds, 0);
}

static void test_recv_orderly_shutdown(void **state)
{
    sock_fixture *f = *state;
    close(f->sv[0]);
    f->sv[0] = -1;
    lz_error *err = NULL;
    assert_int_equal(lz_proto_recv(f->sv[1], LZ_DIR_SUPERVISOR_TO_COORDINATOR,
                                   LZ_PS_GENERATION_RUNNING, &rm, &err),
                     0);
    assert_null(err);
    assert_int_equal(rm.nfds, 0);
}

/* A zero-length SOCK_SEQPACKET record reads as the peer's shutdown
 * (recvmsg returns 0), yet it can carry SCM_RIGHTS descriptors: they must
 * be closed like those of any refused message, or every connection could
 * leave up to LZ_WIRE_MAX_FDS descriptors in the coordinator. */
static void test_recv_zero_length_record_with_fds(void **state)
{
    sock_fixture *f = *state;
    int fds[3];
    for (int i = 0; i < 3; i++)
        assert_true((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
    union {
        char buf[CMSG_SPACE(sizeof(fds))];
        struct cmsghdr align;
    } ctrl;
    memset(&ctrl, 0, sizeof(ctrl));
    char nothing = 0;
    struct iovec iov = { .iov_base = &nothing, .iov_len = 0 };
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = ctrl.buf,
                          .msg_controllen = sizeof(ctrl.buf) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(c), fds, sizeof(fds));
    assert_int_equal(sendmsg(f->sv[0], &msg, MSG_NOSIGNAL), 0);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    int expect_at[3];
    lowest_free_fds(expect_at, 3);
    int before = count_open_fds();
    lz_error *err = NULL;
    assert_int_equal(
        lz_proto_recv(f->sv[1], LZ_DIR_CLI_TO_COORDINATOR, LZ_PS_SESSION_RUN, &rm, &err), 0);
    assert_null(err);
    assert_int_equal(rm.nfds, 0);
    for (int i = 0; i < 3; i++)
        assert_false(fd_is_open(expect_at[i]));
    assert_int_equal(count_open_fds(), before);
}

/* ---- the newer encoders ------------------------------------------------- */

static lz_rbuf rd;

static bool reread(const lz_wbuf *b, size_t len)
{
    return lz_rbuf_init(&rd, b->data, len);
}

static void test_empty_round_trip(void **state)
{
    (void) state;
    const uint16_t types[] = { LZ_MSG_CLOSE, LZ_SUP_START, LZ_SUP_STOP, LZ_SUP_STOPPED };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(types); i++) {
        lz_msg_empty_encode(&wb, types[i]);
        assert_int_equal(wb.len, 2);
        assert_true(reread(&wb, wb.len));
        assert_int_equal(rd.type, types[i]);
        assert_true(lz_msg_empty_decode(&rd));
        /* A byte more is refused; a byte less has no type at all. */
        wb.data[2] = 0;
        assert_true(reread(&wb, 3));
        assert_false(lz_msg_empty_decode(&rd));
        assert_false(reread(&wb, 1));
        assert_false(lz_msg_empty_decode(&rd));
    }
}

static void test_data_round_trip(void **state)
{
    (void) state;
    static uint8_t data[LZ_MSG_MAX_DATA + 1];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t) (i * 7);
    const size_t sizes[] = { 0, 1, 100, LZ_MSG_MAX_DATA };
    for (size_t k = 0; k < LZ_ARRAY_SIZE(sizes); k++) {
        size_t n = sizes[k];
        lz_msg_data_encode(&wb, k % 2 ? LZ_MSG_INPUT : LZ_MSG_OUTPUT, data, n);
        assert_false(wb.overflow);
        assert_int_equal(wb.len, 2 + 4 + n);
        const uint8_t *p = NULL;
        size_t got = 99999999;
        assert_true(reread(&wb, wb.len));
        assert_true(lz_msg_data_decode(&rd, &p, &got));
        assert_int_equal(got, n);
        if (n)
            assert_memory_equal(p, data, n);
        /* A byte less (the payload is short of its length) is refused, and
         * a byte more (trailing) too; the outputs stay untouched. */
        p = NULL;
        got = 12345;
        assert_true(reread(&wb, wb.len - 1));
        assert_false(lz_msg_data_decode(&rd, &p, &got));
        wb.data[wb.len] = 0x55;
        assert_true(reread(&wb, wb.len + 1));
        assert_false(lz_msg_data_decode(&rd, &p, &got));
        assert_null(p);
        assert_int_equal(got, 12345);
    }
    /* One byte past LZ_MSG_MAX_DATA: encodable, but the decoder refuses. */
    lz_msg_data_encode(&wb, LZ_MSG_INPUT, data, LZ_MSG_MAX_DATA + 1);
    assert_false(wb.overflow);
    const uint8_t *p;
    size_t got;
    assert_true(reread(&wb, wb.len));
    assert_false(lz_msg_data_decode(&rd, &p, &got));
}

static void test_started_round_trip(void **state)
{
    (void) state;
    const char *id = "0123456789abcdef0123456789abcdef";
    lz_msg_started_encode(&wb, id);
    assert_int_equal(wb.len, 2 + 4 + 32);
    assert_true(reread(&wb, wb.len));
    assert_int_equal(rd.type, LZ_MSG_STARTED);
    char *got = lz_msg_started_decode(&rd);
    assert_non_null(got);
    assert_string_equal(got, id);
    free(got);
    /* A byte less, a byte more (trailing). */
    assert_true(reread(&wb, wb.len - 1));
    assert_null(lz_msg_started_decode(&rd));
    wb.data[wb.len] = 'a';
    assert_true(reread(&wb, wb.len + 1));
    assert_null(lz_msg_started_decode(&rd));
    /* 31 and 33 digits (encoded consistently), upper case, not hex. */
    const char *bad[] = { "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdef0",
                          "0123456789ABCDEF0123456789abcdef", "0123456789abcdef0123456789abcdeg",
                          "" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        lz_msg_started_encode(&wb, bad[i]);
        assert_true(reread(&wb, wb.len));
        assert_null(lz_msg_started_decode(&rd));
    }
}

static void test_sup_started_round_trip(void **state)
{
    (void) state;
    for (int v = 0; v <= 1; v++) {
        lz_msg_sup_started_encode(&wb, v == 1);
        assert_int_equal(wb.len, 2 + 4);
        assert_true(reread(&wb, wb.len));
        assert_int_equal(rd.type, LZ_SUP_STARTED);
        bool got = v == 0;
        assert_true(lz_msg_sup_started_decode(&rd, &got));
        assert_int_equal(got, v == 1);
        /* A byte less, a byte more: refused, output untouched. */
        got = true;
        assert_true(reread(&wb, wb.len - 1));
        assert_false(lz_msg_sup_started_decode(&rd, &got));
        wb.data[wb.len] = 0;
        assert_true(reread(&wb, wb.len + 1));
        assert_false(lz_msg_sup_started_decode(&rd, &got));
        assert_true(got);
    }
    /* Only 0 and 1 are values. */
    lz_wbuf_init(&wb, LZ_SUP_STARTED);
    lz_wbuf_u32(&wb, 2);
    bool got = false;
    assert_true(reread(&wb, wb.len));
    assert_false(lz_msg_sup_started_decode(&rd, &got));
    assert_false(got);
}

#define S(fn) cmocka_unit_test_setup_teardown(fn, sock_setup, sock_teardown)

/* --publish specs (docs/network.md "Publishing a port"). */
static void test_publish_parse(void **state)
{
    (void) state;
    char why[256];
    lz_msg_publish p;
    assert_true(lz_msg_publish_parse("8080:80", &p, why, sizeof(why)));
    assert_int_equal(p.addr, 0x7f000001u);
    assert_int_equal(p.host_port, 8080);
    assert_int_equal(p.port, 80);
    assert_true(lz_msg_publish_parse("127.1.2.3:65535:1", &p, why, sizeof(why)));
    assert_int_equal(p.addr, 0x7f010203u);
    assert_int_equal(p.host_port, 65535);
    assert_int_equal(p.port, 1);
    char host[32];
    lz_msg_publish_host(&p, host, sizeof(host));
    assert_string_equal(host, "127.1.2.3:65535");
    static const char *const bad[] = {
        "",
        "8080",
        ":80",
        "8080:",
        "0:80",
        "80:0",
        "65536:80",
        "80:65536",
        "08080:80",
        "+80:80",
        "-1:80",
        "80:8a",
        " 80:80",
        "80:80 ",
        "10.0.0.1:80:80",
        "0.0.0.0:80:80",
        "128.0.0.1:80:80",
        "127.0.0.256:80:80",
        "127.0.0:80:80",
        "127.0.0.01:80:80",
        "127.0.0.1.1:80:80",
        "localhost:80:80",
        "a:127.0.0.1:80:80",
        "::1:80:80",
        "127.0.0.1:80:80:80",
        "99999999999:80",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        lz_msg_publish q = { 1, 2, 3 };
        why[0] = '\0';
        if (lz_msg_publish_parse(bad[i], &q, why, sizeof(why)))
            fail_msg("accepted --publish '%s'", bad[i]);
        assert_true(why[0] != '\0');
        assert_int_equal(q.addr, 1); /* untouched */
    }
}

static void put_run_publish(uint32_t n, const uint32_t (*entries)[3])
{
    lz_msg_run r = { .term = (char *) "", .cwd = (char *) "" };
    /* n_publish = 0 and no -e values: the two counts are the last u32s. */
    lz_msg_run_encode(&wb, &r);
    wb.len -= 8;
    lz_wbuf_u32(&wb, n);
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            lz_wbuf_u32(&wb, entries[i][k]);
    lz_wbuf_u32(&wb, 0);
}

/* run -e values (issue 26): carried as given; a name outside
 * [A-Za-z_][A-Za-z0-9_]*, without '=', or in LAZARET_'s namespace (the
 * escalation capability) makes the RUN malformed. */
static void test_run_user_env(void **state)
{
    (void) state;
    char *good[] = { (char *) "A=1", (char *) "_x9=a=b; $(c)", (char *) "EMPTY=", NULL };
    lz_msg_run r = { .term = (char *) "", .cwd = (char *) "", .user_env = good, .user_envc = 3 };
    lz_msg_run_encode(&wb, &r);
    assert_true(reread(&wb, wb.len));
    lz_msg_run got;
    assert_true(lz_msg_run_decode(&rd, &got));
    assert_int_equal(got.user_envc, 3);
    assert_string_equal(got.user_env[1], "_x9=a=b; $(c)");
    assert_null(got.user_env[3]);
    lz_msg_run_clear(&got);
    static const char *const bad[] = {
        "LAZARET_ESCALATE_CAPABILITY=x", "9A=1", "A-B=1", "=1", "NOEQUALS", "A B=1"
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *one[] = { (char *) bad[i], NULL };
        lz_msg_run b = { .term = (char *) "", .cwd = (char *) "", .user_env = one, .user_envc = 1 };
        lz_msg_run_encode(&wb, &b);
        assert_true(reread(&wb, wb.len));
        if (lz_msg_run_decode(&rd, &got))
            fail_msg("accepted -e '%s'", bad[i]);
        assert_false(lz_msg_user_env_ok(bad[i]));
    }
}

static void test_run_publish_round_trip(void **state)
{
    (void) state;
    lz_msg_run r = { .term = (char *) "",
                     .cwd = (char *) "",
                     .n_publish = 2,
                     .publish = { { 0x7f000001u, 8080, 80 }, { 0x7f000002u, 8080, 3000 } } };
    lz_msg_run_encode(&wb, &r);
    assert_true(reread(&wb, wb.len));
    lz_msg_run got;
    assert_true(lz_msg_run_decode(&rd, &got));
    assert_int_equal(got.n_publish, 2);
    assert_memory_equal(got.publish, r.publish, 2 * sizeof(r.publish[0]));
    lz_msg_run_clear(&got);
    /* What a decoder refuses: not loopback, port 0 or > 65535, a host
     * address and port twice, more than LZ_MSG_MAX_PUBLISH. */
    static const uint32_t bad[][2][3] = {
        { { 0x0a000001u, 8080, 80 }, { 0x7f000001u, 1, 1 } },
        { { 0x7f000001u, 0, 80 }, { 0x7f000001u, 1, 1 } },
        { { 0x7f000001u, 8080, 65536 }, { 0x7f000001u, 1, 1 } },
        { { 0x7f000001u, 8080, 80 }, { 0x7f000001u, 8080, 81 } },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put_run_publish(2, bad[i]);
        assert_true(reread(&wb, wb.len));
        assert_false(lz_msg_run_decode(&rd, &got));
    }
    uint32_t many[LZ_MSG_MAX_PUBLISH + 1][3];
    for (uint32_t i = 0; i <= LZ_MSG_MAX_PUBLISH; i++) {
        many[i][0] = 0x7f000001u;
        many[i][1] = 10000 + i;
        many[i][2] = 80;
    }
    put_run_publish(LZ_MSG_MAX_PUBLISH, many);
    assert_true(reread(&wb, wb.len));
    assert_true(lz_msg_run_decode(&rd, &got));
    lz_msg_run_clear(&got);
    put_run_publish(LZ_MSG_MAX_PUBLISH + 1, many);
    assert_true(reread(&wb, wb.len));
    assert_false(lz_msg_run_decode(&rd, &got));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_types_and_names_unique),
        cmocka_unit_test(test_state_names_match_the_enumerations),
        cmocka_unit_test(test_every_row_admitted_where_allowed),
        cmocka_unit_test(test_every_row_refused_elsewhere),
        cmocka_unit_test(test_unknown_types_refused),
        cmocka_unit_test(test_admit_reason_bounded),
        cmocka_unit_test(test_largest_encodings_fit),
        cmocka_unit_test(test_every_receiver_handles_its_rows),
        cmocka_unit_test(test_handlers_only_for_their_direction),
        cmocka_unit_test(test_unhandled_and_dispatch),
        S(test_recv_admitted),
        S(test_recv_admitted_with_fds),
        S(test_recv_violation_state_closes_fds),
        S(test_recv_violation_fd_count_closes_fds),
        S(test_recv_violation_direction_and_unknown),
        S(test_recv_violation_oversized_row),
        S(test_recv_no_type),
        S(test_recv_larger_than_wire_max),
        S(test_recv_orderly_shutdown),
        S(test_recv_zero_length_record_with_fds),
        cmocka_unit_test(test_empty_round_trip),
        cmocka_unit_test(test_data_round_trip),
        cmocka_unit_test(test_started_round_trip),
        cmocka_unit_test(test_sup_started_round_trip),
        cmocka_unit_test(test_publish_parse),
        cmocka_unit_test(test_run_publish_round_trip),
        cmocka_unit_test(test_run_user_env),
    };
    return cmocka_run_group_tests_name("test_protocol", tests, NULL, NULL);
}
