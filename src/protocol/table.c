/* SPDX-License-Identifier: Apache-2.0 */
#include "protocol/table.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "protocol/messages.h"

#define S(x) LZ_PROTO_STATE(LZ_PS_##x)
#define FDS(n) LZ_PROTO_FDS(n)

/* Largest encodings: u16 type, u32 per number, u32 length + bytes per
 * string (the decoders' own bounds, messages.h). */
#define TEXT_MAX (4 + LZ_MSG_MAX_TEXT)
#define LEN_REFUSED (2 + 4 + 2 * TEXT_MAX)

const lz_proto_entry lz_proto_table[] = {
    /* Session channel, CLI -> coordinator. ENROLL is the one message in the
     * clear; every other one is TLS application data (trust/channel.h). */
    { LZ_MSG_ENROLL, "ENROLL", LZ_DIR_CLI_TO_COORDINATOR, S(SESSION_ENROLL), FDS(0),
      2 + 4 + 4 + LZ_MSG_ENROLL_KEY_LEN },
    { LZ_MSG_HELLO, "HELLO", LZ_DIR_CLI_TO_COORDINATOR, S(SESSION_HELLO), FDS(0),
      2 + 4 + 2 * (4 + 64) },
    /* Interactive: no descriptors; otherwise stdin, stdout, stderr (the
     * handler checks that the count matches the flag). */
    { LZ_MSG_RUN, "RUN", LZ_DIR_CLI_TO_COORDINATOR, S(SESSION_RUN), FDS(0) | FDS(3), LZ_WIRE_MAX },
    { LZ_MSG_INPUT, "INPUT", LZ_DIR_CLI_TO_COORDINATOR, S(SESSION_RUNNING_TTY), FDS(0),
      2 + 4 + LZ_MSG_MAX_DATA },
    /* `lazaret stop`, on a connection of its own after the TLS handshake. */
    { LZ_MSG_STOP, "STOP", LZ_DIR_CLI_TO_COORDINATOR, S(SESSION_HELLO), FDS(0), 2 + 4 + 64 },
    /* Non-interactive only: an interactive session's signals are bytes for
     * its PTY's line discipline. */
    { LZ_MSG_SIGNAL, "SIGNAL", LZ_DIR_CLI_TO_COORDINATOR, S(SESSION_RUNNING_PIPES), FDS(0), 2 + 4 },
    { LZ_MSG_RESIZE, "RESIZE", LZ_DIR_CLI_TO_COORDINATOR, S(SESSION_RUNNING_TTY), FDS(0),
      2 + 4 + 4 },
    { LZ_MSG_CLOSE, "CLOSE", LZ_DIR_CLI_TO_COORDINATOR,
      S(SESSION_QUEUED) | S(SESSION_RUNNING_TTY) | S(SESSION_RUNNING_PIPES), FDS(0), 2 },
    /* The developer's answer to a PROMPT (only a terminal session gets one). */
    { LZ_MSG_DECISION, "DECISION", LZ_DIR_CLI_TO_COORDINATOR, S(SESSION_RUNNING_TTY), FDS(0),
      2 + 4 + 4 },

    /* Session channel, coordinator -> CLI. ENROLLED and a REFUSED before it
     * are in the clear. */
    { LZ_MSG_ENROLLED, "ENROLLED", LZ_DIR_COORDINATOR_TO_CLI, S(CLIENT_ENROLLING), FDS(0),
      2 + 4 + 32 + 4 + LZ_MSG_MAX_CERT },
    { LZ_MSG_PROGRESS, "PROGRESS", LZ_DIR_COORDINATOR_TO_CLI,
      S(CLIENT_WAITING) | S(CLIENT_RUNNING_TTY) | S(CLIENT_RUNNING_PIPES), FDS(0), 2 + TEXT_MAX },
    /* Also while running: the sandbox ended under the session. */
    { LZ_MSG_REFUSED, "REFUSED", LZ_DIR_COORDINATOR_TO_CLI,
      S(CLIENT_ENROLLING) | S(CLIENT_WAITING) | S(CLIENT_RUNNING_TTY) | S(CLIENT_RUNNING_PIPES),
      FDS(0), LEN_REFUSED },
    { LZ_MSG_STARTED, "STARTED", LZ_DIR_COORDINATOR_TO_CLI, S(CLIENT_WAITING), FDS(0), 2 + 4 + 64 },
    { LZ_MSG_OUTPUT, "OUTPUT", LZ_DIR_COORDINATOR_TO_CLI, S(CLIENT_RUNNING_TTY), FDS(0),
      2 + 4 + LZ_MSG_MAX_DATA },
    { LZ_MSG_PROMPT, "PROMPT", LZ_DIR_COORDINATOR_TO_CLI, S(CLIENT_RUNNING_TTY), FDS(0),
      2 + 4 + 4 + LZ_MSG_MAX_PROMPT },
    { LZ_MSG_PROMPT_CLOSED, "PROMPT_CLOSED", LZ_DIR_COORDINATOR_TO_CLI, S(CLIENT_RUNNING_TTY),
      FDS(0), 2 + 4 + TEXT_MAX },
    { LZ_MSG_EXIT, "EXIT", LZ_DIR_COORDINATOR_TO_CLI,
      S(CLIENT_RUNNING_TTY) | S(CLIENT_RUNNING_PIPES), FDS(0), 2 + 4 + 4 },

    /* Supervisor channel, coordinator -> supervisor. */
    { LZ_SUP_START, "SUP_START", LZ_DIR_COORDINATOR_TO_SUPERVISOR, S(SUPERVISOR_IDLE), FDS(0), 2 },
    { LZ_SUP_EXEC, "SUP_EXEC", LZ_DIR_COORDINATOR_TO_SUPERVISOR, S(SUPERVISOR_RUNNING), FDS(3),
      LZ_WIRE_MAX },
    { LZ_SUP_SIGNAL, "SUP_SIGNAL", LZ_DIR_COORDINATOR_TO_SUPERVISOR, S(SUPERVISOR_RUNNING), FDS(0),
      2 + 4 + 4 },
    /* One listening socket, right before the SUP_EXEC of its session. */
    { LZ_SUP_PUBLISH, "SUP_PUBLISH", LZ_DIR_COORDINATOR_TO_SUPERVISOR, S(SUPERVISOR_RUNNING),
      FDS(1), 2 + 4 + 4 },
    { LZ_SUP_STOP, "SUP_STOP", LZ_DIR_COORDINATOR_TO_SUPERVISOR,
      S(SUPERVISOR_IDLE) | S(SUPERVISOR_RUNNING), FDS(0), 2 },

    /* Supervisor channel, supervisor -> coordinator. */
    /* The escalation inbox (a size- and inode-bounded tmpfs mounted in the
     * supervisor's mount namespace), before SUP_STARTED. */
    { LZ_SUP_MAILBOX, "SUP_MAILBOX", LZ_DIR_SUPERVISOR_TO_COORDINATOR, S(GENERATION_STARTING),
      FDS(1), 2 },
    /* With two pidfds: the sandbox process and the gofer, for the Git
     * Sentry's freezer (coordinator/freezer.h). */
    { LZ_SUP_STARTED, "SUP_STARTED", LZ_DIR_SUPERVISOR_TO_COORDINATOR, S(GENERATION_STARTING),
      FDS(2), 2 + 4 },
    /* Starting: the start failed. Running: the sandbox died under the
     * generation (supervisor.c, sandbox_lost); it may race the teardown. */
    { LZ_SUP_FAILED, "SUP_FAILED", LZ_DIR_SUPERVISOR_TO_COORDINATOR,
      S(GENERATION_STARTING) | S(GENERATION_RUNNING) | S(GENERATION_TEARDOWN), FDS(0),
      LEN_REFUSED },
    /* Commands end while the generation runs; during teardown the
     * coordinator still reads them while it waits for SUP_STOPPED. */
    { LZ_SUP_EXEC_EXITED, "SUP_EXEC_EXITED", LZ_DIR_SUPERVISOR_TO_COORDINATOR,
      S(GENERATION_RUNNING) | S(GENERATION_TEARDOWN), FDS(0), 2 + 4 + 4 },
    { LZ_SUP_STOPPED, "SUP_STOPPED", LZ_DIR_SUPERVISOR_TO_COORDINATOR, S(GENERATION_TEARDOWN),
      FDS(0), 2 },
};
const size_t lz_proto_table_len = sizeof(lz_proto_table) / sizeof(lz_proto_table[0]);

const lz_proto_entry *lz_proto_find(uint16_t type)
{
    for (size_t i = 0; i < lz_proto_table_len; i++)
        if (lz_proto_table[i].type == type)
            return &lz_proto_table[i];
    return NULL;
}

const char *lz_proto_name(uint16_t type)
{
    const lz_proto_entry *e = lz_proto_find(type);
    return e ? e->name : "unknown";
}

const char *lz_proto_state_name(lz_proto_dir dir, unsigned state)
{
    static const char *const session[] = { "HELLO",       "RUN",           "QUEUED",
                                           "RUNNING_TTY", "RUNNING_PIPES", "ENROLL" };
    static const char *const client[] = { "WAITING", "RUNNING_TTY", "RUNNING_PIPES", "ENROLLING" };
    static const char *const supervisor[] = { "IDLE", "RUNNING" };
    static const char *const generation[] = { "STARTING", "RUNNING", "FAILED", "TEARDOWN" };
    const char *const *names = NULL;
    size_t n = 0;
    switch (dir) {
    case LZ_DIR_CLI_TO_COORDINATOR:
        names = session, n = sizeof(session) / sizeof(session[0]);
        break;
    case LZ_DIR_COORDINATOR_TO_CLI:
        names = client, n = sizeof(client) / sizeof(client[0]);
        break;
    case LZ_DIR_COORDINATOR_TO_SUPERVISOR:
        names = supervisor, n = sizeof(supervisor) / sizeof(supervisor[0]);
        break;
    case LZ_DIR_SUPERVISOR_TO_COORDINATOR:
        names = generation, n = sizeof(generation) / sizeof(generation[0]);
        break;
    case LZ_DIR_COUNT:
    default:
        break;
    }
    return state < n ? names[state] : "unknown";
}

static const char *sender_of(lz_proto_dir dir)
{
    switch (dir) {
    case LZ_DIR_CLI_TO_COORDINATOR:
        return "the CLI";
    case LZ_DIR_COORDINATOR_TO_CLI:
    case LZ_DIR_COORDINATOR_TO_SUPERVISOR:
        return "the coordinator";
    case LZ_DIR_SUPERVISOR_TO_COORDINATOR:
        return "the supervisor";
    case LZ_DIR_COUNT:
    default:
        return "nobody";
    }
}

const lz_proto_entry *lz_proto_admit(lz_proto_dir dir, unsigned state, uint16_t type, size_t len,
                                     size_t nfds, char *why, size_t why_len)
{
    const lz_proto_entry *e = lz_proto_find(type);
    if (!e) {
        snprintf(why, why_len, "unknown message type %u", (unsigned) type);
        return NULL;
    }
    if (e->dir != dir) {
        snprintf(why, why_len, "%s is sent by %s, not by %s", e->name, sender_of(e->dir),
                 sender_of(dir));
        return NULL;
    }
    if (state >= 32 || !(e->states & LZ_PROTO_STATE(state))) {
        snprintf(why, why_len, "%s is not allowed in state %s", e->name,
                 lz_proto_state_name(dir, state));
        return NULL;
    }
    if (nfds >= 8 || !(e->fd_counts & LZ_PROTO_FDS(nfds))) {
        snprintf(why, why_len, "%s with %zu descriptors", e->name, nfds);
        return NULL;
    }
    if (len > e->max_len) {
        snprintf(why, why_len, "%s of %zu bytes (at most %u)", e->name, len, (unsigned) e->max_len);
        return NULL;
    }
    return e;
}

void lz_proto_msg_clear(lz_proto_msg *m)
{
    for (size_t i = 0; i < m->nfds; i++)
        if (m->fds[i] >= 0)
            close(m->fds[i]);
    m->nfds = 0;
}

int lz_proto_recv(int sock, lz_proto_dir dir, unsigned state, lz_proto_msg *m, lz_error **err)
{
    m->nfds = 0;
    m->entry = NULL;
    ssize_t n = lz_wire_recv(sock, m->buf, m->fds, LZ_WIRE_MAX_FDS, &m->nfds, err);
    if (n <= 0) {
        m->nfds = 0; /* lz_wire_recv closed what it refused */
        return (int) n;
    }
    m->len = (size_t) n;
    return lz_proto_admit_msg(dir, state, m, err);
}

int lz_proto_admit_msg(lz_proto_dir dir, unsigned state, lz_proto_msg *m, lz_error **err)
{
    m->entry = NULL;
    if (!lz_rbuf_init(&m->r, m->buf, m->len)) {
        lz_proto_msg_clear(m);
        lz_error_set(err, EPROTO, "a message of %zu bytes has no type", m->len);
        return -1;
    }
    char why[160];
    m->entry = lz_proto_admit(dir, state, m->r.type, m->len, m->nfds, why, sizeof(why));
    if (!m->entry) {
        lz_proto_msg_clear(m);
        lz_error_set(err, EPROTO, "%s", why);
        return -1;
    }
    return 1;
}

int lz_proto_dispatch(const lz_proto_handler_row *rows, size_t n, void *ctx, lz_proto_msg *m)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].type == m->r.type)
            return rows[i].fn(ctx, m);
    errno = ENOSYS;
    return -1;
}

uint16_t lz_proto_unhandled(lz_proto_dir dir, const lz_proto_handler_row *rows, size_t n)
{
    for (size_t i = 0; i < lz_proto_table_len; i++) {
        if (lz_proto_table[i].dir != dir)
            continue;
        bool found = false;
        for (size_t j = 0; j < n && !found; j++)
            found = rows[j].type == lz_proto_table[i].type && rows[j].fn;
        if (!found)
            return lz_proto_table[i].type;
    }
    return 0;
}
