/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/coordinator.h"

#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/nodump.h"
#include "common/procid.h"
#include "config/policy.h"
#include "coordinator/git_sentry.h"
#include "supervisor/network.h"
#include "common/util.h"
#include "fs/remove.h"
#include "protocol/messages.h"
#include "supervisor/supervisor.h"

#define MAX_SESSIONS 128
/* A generation nobody joins (its bootstrapping CLI died) ends after this. */
#define EMPTY_START_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 30000
/* A command whose client left gets SIGHUP (as a closed terminal would
 * send), then SIGKILL after this long. */
#define ORPHAN_GRACE_MS 3000
/* After an interactive command ends, output still in the PTY is forwarded
 * for at most this long (a background process may keep the slave open). */
#define DRAIN_MS 1000

typedef enum session_state {
    S_FREE = 0,
    S_HELLO,      /* connected; HELLO expected */
    S_RUN,        /* HELLO accepted; RUN expected */
    S_QUEUED,     /* RUN received; waiting for the sandbox */
    S_RUNNING,    /* command running */
} session_state;

typedef struct session {
    session_state state;
    int sock;                /* -1 once the CLI is gone */
    uint32_t no;
    char id[33];
    pid_t cli_pid;
    lz_msg_run run;
    int fds[3];
    struct timespec orphaned;  /* when the CLI of a running command left */
    bool killed;               /* SIGKILL already requested */
    /* Interactive sessions: the coordinator owns the PTY master; the slave
     * is the guest side of the session's runsc exec. */
    int master;                /* -1 when none or drained */
    lz_wbuf *out_pending;      /* an OUTPUT the client could not take yet */
    char in_pending[LZ_MSG_MAX_DATA];
    size_t in_pending_len;     /* typed bytes the PTY could not take yet */
    bool exited;               /* the command ended; EXIT follows the drain */
    uint32_t exit_outcome, exit_code;
    struct timespec exit_at;
} session;

typedef enum gen_state { G_STARTING, G_RUNNING, G_FAILED, G_TEARDOWN } gen_state;

typedef struct coord {
    lz_coordinator_args *a;
    FILE *log;
    char id_hex[65], fp_hex[65];
    int64_t generation;
    char gen_name[32];
    char *gen_label;
    char container_id[64];
    lz_supervisor_handle sup;
    bool sup_alive;
    gen_state state;
    session sessions[MAX_SESSIONS];
    size_t n_active;         /* sessions not FREE */
    size_t n_ever;           /* sessions accepted so far */
    uint32_t next_no;
    lz_msg_refused failure;  /* why the start failed */
    struct timespec started;
    lz_git_plan git;         /* Git Sentry: mounts, watches and audit state */
    bool sentry_failed;      /* the audit could not neutralise something: stopping */
} coord;

static void clog_(coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void clog_(coord *c, const char *fmt, ...)
{
    if (!c->log)
        return;
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char ts[32];
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(c->log, "%s [%d] ", ts, (int) getpid());
    va_list ap;
    va_start(ap, fmt);
    /* One line per entry, whatever names the sandbox chose. */
    char *line = lz_vprintable(fmt, ap);
    va_end(ap);
    fputs(line, c->log);
    free(line);
    fputc('\n', c->log);
    fflush(c->log);
}

static void log_error(coord *c, const char *what, lz_error *e)
{
    if (e)
        clog_(c, "%s: %s%s%s", what, e->message, e->errnum ? ": " : "",
              e->errnum ? strerror(e->errnum) : "");
}

static int64_t ms_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t) (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* ---- sessions ---------------------------------------------------------- */

static void git_audit(coord *c, const char *when, bool full);
static void publish_status(coord *c);
static void teardown_and_exit(coord *c, int status) __attribute__((noreturn));

static void send_refused(int sock, uint32_t code, const char *msg, const char *hint)
{
    lz_wbuf b;
    lz_msg_refused m = { code, (char *) msg, (char *) hint };
    lz_msg_refused_encode(&b, LZ_MSG_REFUSED, &m);
    lz_wire_send(sock, &b, NULL, 0, NULL);
}

static void session_close(coord *c, session *s)
{
    if (s->state == S_FREE)
        return;
    if (s->sock >= 0)
        close(s->sock);
    for (int i = 0; i < 3; i++)
        if (s->fds[i] >= 0)
            close(s->fds[i]);
    if (s->master >= 0)
        close(s->master);
    free(s->out_pending);
    lz_msg_run_clear(&s->run);
    if (s->id[0])
        lz_store_session_end(c->a->store, c->generation, s->id,
                             s->state == S_RUNNING ? "ended" : "refused", -1, NULL);
    memset(s, 0, sizeof(*s));
    s->sock = -1;
    s->master = -1;
    s->fds[0] = s->fds[1] = s->fds[2] = -1;
    s->state = S_FREE;
    c->n_active--;
    if (c->state != G_TEARDOWN)
        publish_status(c);
}

static void refuse_and_close(coord *c, session *s, uint32_t code, const char *msg,
                             const char *hint)
{
    if (s->sock >= 0)
        send_refused(s->sock, code, msg, hint);
    session_close(c, s);
}

/* A normalized relative path (no "", ".", ".." components) or "". */
static bool rel_path_ok(const char *p)
{
    if (!*p)
        return true;
    if (p[0] == '/')
        return false;
    for (const char *q = p;;) {
        const char *sl = strchr(q, '/');
        size_t n = sl ? (size_t) (sl - q) : strlen(q);
        if (n == 0 || (n == 1 && q[0] == '.') || (n == 2 && q[0] == '.' && q[1] == '.'))
            return false;
        if (!sl)
            return true;
        q = sl + 1;
    }
}

/* A host PTY pair for an interactive session: the master stays here, the
 * slave becomes the stdio of the session's runsc exec. */
static int open_pty(session *s, int *ret_slave, lz_error **err)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return lz_error_set(err, errno, "cannot allocate a pseudo-terminal");
    char name[128];
    int sl = -1;
    if (grantpt(m) == 0 && unlockpt(m) == 0 && ptsname_r(m, name, sizeof(name)) == 0)
        sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (sl < 0) {
        int e = errno;
        close(m);
        return lz_error_set(err, e, "cannot open a pseudo-terminal");
    }
    /* The host side is a transparent pipe for bytes: raw, so that Ctrl-C
     * and friends reach the sandbox as bytes, where the session's own
     * pseudo-terminal interprets them. */
    struct termios t;
    if (tcgetattr(sl, &t) == 0) {
        cfmakeraw(&t);
        tcsetattr(sl, TCSANOW, &t);
    }
    struct winsize ws = { .ws_row = (unsigned short) (s->run.rows ? s->run.rows : 24),
                          .ws_col = (unsigned short) (s->run.cols ? s->run.cols : 80) };
    ioctl(m, TIOCSWINSZ, &ws);
    fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK);
    s->master = m;
    *ret_slave = sl;
    return 0;
}

static void session_exec(coord *c, session *s)
{
    git_audit(c, "session start", false);
    if (c->git.start_report && s->sock >= 0) {
        /* What this generation's start set aside: every session hears it. */
        char *line = lz_xasprintf("Git Sentry: at this Domain's start, set aside what an earlier "
                                  "session had left: %s",
                                  c->git.start_report);
        lz_wbuf b;
        lz_msg_text_encode(&b, LZ_MSG_PROGRESS, line);
        lz_wire_send(s->sock, &b, NULL, 0, NULL);
        free(line);
    }
    char *cwd = s->run.cwd[0] ? lz_xasprintf("/workspace/%s", s->run.cwd)
                              : lz_xstrdup("/workspace");
    size_t cap = 2 + s->run.envc;
    char **env = lz_xcalloc(cap, sizeof(char *));
    size_t n = 0;
    if (s->run.term[0])
        env[n++] = lz_xasprintf("TERM=%s", s->run.term);
    else if (s->run.interactive)
        env[n++] = lz_xstrdup("TERM=xterm");
    for (size_t i = 0; i < s->run.envc; i++)
        env[n++] = lz_xstrdup(s->run.env[i]);
    env[n] = NULL;
    lz_error *err = NULL;
    int slave = -1;
    if (s->run.interactive && open_pty(s, &slave, &err) < 0) {
        log_error(c, "cannot allocate a PTY", err);
        refuse_and_close(c, s, LZ_REFUSE_EXEC_FAILED, err->message,
                         "check /dev/ptmx and the pseudo-terminal limit (kernel.pty.max)");
        lz_error_free(err);
        goto out;
    }
    lz_msg_exec m = { .session_no = s->no, .interactive = s->run.interactive, .cwd = cwd,
                      .argv = s->run.argv, .argc = s->run.argc, .env = env, .envc = n };
    lz_wbuf b;
    lz_msg_exec_encode(&b, &m);
    int stdio[3] = { slave, slave, slave };
    if (lz_wire_send(c->sup.sock, &b, s->run.interactive ? stdio : s->fds, 3, &err) < 0) {
        log_error(c, "cannot send a session to the supervisor", err);
        lz_error_free(err);
        refuse_and_close(c, s, LZ_REFUSE_EXEC_FAILED, "the Runtime Supervisor is not responding",
                         "run the command again; see the Domain's logs/coordinator.log");
    } else {
        for (int i = 0; i < 3; i++) {
            if (s->fds[i] >= 0)
                close(s->fds[i]);
            s->fds[i] = -1;
        }
        s->state = S_RUNNING;
        lz_wbuf_init(&b, LZ_MSG_STARTED);
        lz_wbuf_str(&b, s->id);
        lz_wire_send(s->sock, &b, NULL, 0, NULL);
        clog_(c, "session %s (#%u) started%s", s->id, s->no,
              s->run.interactive ? " with a terminal" : "");
        publish_status(c);
    }
out:
    if (slave >= 0)
        close(slave);
    for (size_t i = 0; i < n; i++)
        free(env[i]);
    free(env);
    free(cwd);
}

/* The client of a running session is gone (or closed it): hang up its
 * command, as closing a terminal window would. */
static void session_orphan(coord *c, session *s)
{
    if (s->sock >= 0)
        close(s->sock);
    s->sock = -1;
    free(s->out_pending);
    s->out_pending = NULL;
    clock_gettime(CLOCK_MONOTONIC, &s->orphaned);
    lz_wbuf b;
    lz_msg_pair_encode(&b, LZ_SUP_SIGNAL, s->no, SIGHUP);
    if (c->sup_alive)
        lz_wire_send(c->sup.sock, &b, NULL, 0, NULL);
}

/* Send EXIT once the command ended and its output has been forwarded. */
static void session_finish_if_done(coord *c, session *s)
{
    if (!s->exited || s->out_pending || (s->master >= 0 && ms_since(&s->exit_at) < DRAIN_MS))
        return;
    if (s->sock >= 0) {
        lz_wbuf b;
        lz_msg_pair_encode(&b, LZ_MSG_EXIT, s->exit_outcome, s->exit_code);
        lz_wire_send(s->sock, &b, NULL, 0, NULL);
    }
    lz_store_session_end(c->a->store, c->generation, s->id,
                         s->exit_outcome ? "terminated" : "exited", (int) s->exit_code, NULL);
    s->id[0] = '\0';
    git_audit(c, "session end", false);
    session_close(c, s);
}

/* PTY master readable: forward one chunk as OUTPUT (flow control: when the
 * client cannot take it, keep it and stop reading until it can). */
static void session_pty_output(coord *c, session *s)
{
    static uint8_t data[LZ_MSG_MAX_DATA];
    ssize_t n = read(s->master, data, sizeof(data));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        /* EIO: every slave holder is gone. */
        close(s->master);
        s->master = -1;
        session_finish_if_done(c, s);
        return;
    }
    if (s->sock < 0)
        return; /* nobody to show it to */
    lz_wbuf *b = lz_xmalloc(sizeof(*b));
    lz_wbuf_init(b, LZ_MSG_OUTPUT);
    lz_wbuf_bytes(b, data, (size_t) n);
    lz_error *err = NULL;
    int r = lz_wire_try_send(s->sock, b, &err);
    if (r == 1)
        s->out_pending = b;
    else
        free(b);
    if (r < 0) {
        log_error(c, "session output", err);
        lz_error_free(err);
        session_orphan(c, s);
    }
}

static void session_flush_output(coord *c, session *s)
{
    lz_error *err = NULL;
    int r = lz_wire_try_send(s->sock, s->out_pending, &err);
    if (r < 0)
        log_error(c, "session output", err);
    lz_error_free(err);
    if (r == 1)
        return;
    free(s->out_pending);
    s->out_pending = NULL;
    if (r < 0)
        session_orphan(c, s);
    else
        session_finish_if_done(c, s);
}

static void session_pty_input(session *s)
{
    ssize_t w = write(s->master, s->in_pending, s->in_pending_len);
    if (w > 0) {
        memmove(s->in_pending, s->in_pending + w, s->in_pending_len - (size_t) w);
        s->in_pending_len -= (size_t) w;
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        s->in_pending_len = 0; /* the terminal is gone; EXIT will follow */
    }
}

/* INPUT, RESIZE, CLOSE from the client of a running session. */
static bool session_terminal_message(coord *c, session *s, lz_rbuf *r)
{
    if (r->type == LZ_MSG_CLOSE && lz_rbuf_done(r)) {
        clog_(c, "session #%u: closed by its client", s->no);
        session_orphan(c, s);
        return true;
    }
    if (!s->run.interactive)
        return false;
    if (r->type == LZ_MSG_INPUT) {
        const uint8_t *p;
        size_t n;
        if (!lz_rbuf_bytes(r, &p, &n, LZ_MSG_MAX_DATA) || !lz_rbuf_done(r) ||
            s->in_pending_len + n > sizeof(s->in_pending))
            return false;
        if (s->master >= 0 && !s->exited) {
            memcpy(s->in_pending + s->in_pending_len, p, n);
            s->in_pending_len += n;
            session_pty_input(s);
        }
        return true;
    }
    if (r->type == LZ_MSG_RESIZE) {
        uint32_t rows, cols;
        if (!lz_msg_pair_decode(r, &rows, &cols) || rows > 65535 || cols > 65535)
            return false;
        struct winsize ws = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };
        if (s->master >= 0)
            ioctl(s->master, TIOCSWINSZ, &ws); /* the guest gets SIGWINCH */
        return true;
    }
    return false;
}

static void session_message(coord *c, session *s)
{
    static uint8_t buf[LZ_WIRE_MAX];
    int fds[LZ_WIRE_MAX_FDS];
    size_t nfds = 0;
    ssize_t n = lz_wire_recv(s->sock, buf, fds, LZ_WIRE_MAX_FDS, &nfds, NULL);
    if (n <= 0) {
        /* The CLI is gone. A running command keeps its slot until the
         * supervisor reports its exit (its stdio pipes are closed now). */
        clog_(c, "session #%u: client disconnected", s->no);
        if (s->state == S_RUNNING) {
            session_orphan(c, s);
        } else {
            session_close(c, s);
        }
        return;
    }
    lz_rbuf r;
    lz_rbuf_init(&r, buf, (size_t) n);
    if (s->state == S_HELLO && r.type == LZ_MSG_HELLO && nfds == 0) {
        lz_msg_hello h;
        if (!lz_msg_hello_decode(&r, &h) || h.version != LZ_SESSION_PROTOCOL_VERSION) {
            if (h.domain_id)
                lz_msg_hello_clear(&h);
            refuse_and_close(c, s, LZ_REFUSE_PROTOCOL, "protocol error (HELLO)",
                             "use the same Lazaret version for every terminal of a Domain");
            return;
        }
        bool same_domain = strcmp(h.domain_id, c->id_hex) == 0;
        bool same_fp = strcmp(h.fingerprint, c->fp_hex) == 0;
        lz_msg_hello_clear(&h);
        if (!same_domain) {
            refuse_and_close(c, s, LZ_REFUSE_PROTOCOL, "this coordinator serves another Domain",
                             NULL);
            return;
        }
        if (!same_fp) {
            char *msg = lz_xasprintf(
                "Domain %.16s… (profile '%s', workspace %s) is running with another "
                "configuration (fingerprint %.16s…); your configuration differs from it",
                c->id_hex, c->a->cfg->profile, c->a->cfg->workspace.label, c->fp_hex);
            char *hint = lz_xasprintf(
                "finish the running sessions of this Domain (exit their shells) to stop it, "
                "or stop it at once with: kill %d; then run the command again",
                (int) getpid());
            refuse_and_close(c, s, LZ_REFUSE_MISMATCH, msg, hint);
            free(msg);
            free(hint);
            return;
        }
        if (c->state == G_TEARDOWN) {
            refuse_and_close(c, s, LZ_REFUSE_TEARING_DOWN, "the Domain is shutting down", NULL);
            return;
        }
        s->state = S_RUN;
        return;
    }
    if (s->state == S_RUNNING && nfds == 0 && session_terminal_message(c, s, &r))
        return;
    if (s->state == S_RUN && r.type == LZ_MSG_RUN && (nfds == 3 || nfds == 0)) {
        if (!lz_msg_run_decode(&r, &s->run) || !rel_path_ok(s->run.cwd) ||
            (s->run.interactive ? nfds != 0 : nfds != 3)) {
            for (size_t i = 0; i < nfds; i++)
                close(fds[i]);
            refuse_and_close(c, s, LZ_REFUSE_PROTOCOL, "protocol error (RUN)", NULL);
            return;
        }
        /* Interactive sessions send no descriptors: never copy what the
         * array holds beyond what was received. */
        for (int i = 0; i < 3; i++)
            s->fds[i] = (size_t) i < nfds ? fds[i] : -1;
        uint8_t rnd[16];
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
            memset(rnd, 0, sizeof(rnd));
        for (int i = 0; i < 16; i++)
            snprintf(s->id + 2 * i, 3, "%02x", rnd[i]);
        lz_store_session_begin(c->a->store, c->generation, s->id, s->cli_pid, false, NULL);
        if (c->state == G_RUNNING) {
            session_exec(c, s);
        } else if (c->state == G_FAILED) {
            refuse_and_close(c, s, LZ_REFUSE_START_FAILED, c->failure.message, c->failure.hint);
        } else {
            s->state = S_QUEUED;
        }
        return;
    }
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    refuse_and_close(c, s, LZ_REFUSE_PROTOCOL, "protocol error: unexpected message", NULL);
}

static void tell_sessions(coord *c, const char *line)
{
    lz_wbuf b;
    lz_msg_text_encode(&b, LZ_MSG_PROGRESS, line);
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (c->sessions[i].state != S_FREE && c->sessions[i].sock >= 0)
            lz_wire_send(c->sessions[i].sock, &b, NULL, 0, NULL);
}

/* The audit could not neutralise what the sandbox made (or could not audit
 * at all): fail closed. The sandbox is stopped at once, every session is
 * told why, and the Domain Root records what was left so that the next
 * start is refused while it exists (git_sentry.h). */
static void sentry_failed(coord *c, const char *when, lz_error *err)
{
    c->sentry_failed = true;
    log_error(c, "Git Sentry audit failed", err);
    lz_error *e2 = NULL;
    if (lz_git_sentry_mark_unsafe(c->a->cfg, c->git.failed_rel, &e2) < 0)
        log_error(c, "cannot record the unsafe workspace", e2);
    lz_error_free(e2);
    char *line = lz_xasprintf("Git Sentry (%s): %s%s%s. The host's Git could obey what the "
                              "sandbox made, so the sandbox is stopped now; Lazaret will not "
                              "start this Domain again while %s exists. Do not run git in %s "
                              "before you have inspected it.",
                              when, err ? err->message : "the audit failed",
                              err && err->errnum ? ": " : "",
                              err && err->errnum ? strerror(err->errnum) : "",
                              c->git.failed_rel ? c->git.failed_rel : "it",
                              c->a->cfg->workspace.label);
    tell_sessions(c, line);
    free(line);
    teardown_and_exit(c, 1);
}

/* Git Sentry audit: move forbidden new entries aside and tell every
 * connected session (and the log). full: walk the whole tree; otherwise
 * handle the pending inotify events. */
static void git_audit(coord *c, const char *when, bool full)
{
    if (c->git.ws_fd < 0 || c->sentry_failed)
        return;
    char *report = NULL;
    lz_error *err = NULL;
    int n = lz_git_sentry_audit(&c->git, full, &report, &err);
    if (n < 0) {
        sentry_failed(c, when, err); /* does not return */
    }
    if (n == 0)
        return;
    clog_(c, "Git Sentry (%s): %s", when, report);
    char *line = lz_xasprintf("Git Sentry: the sandbox created what could make the host's Git run "
                              "its commands; quarantined: %s",
                              report);
    tell_sessions(c, line);
    free(line);
    free(report);
}

static void accept_session(coord *c)
{
    int fd = accept4(c->a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    /* SR-10: only the invoking user may talk to the coordinator (the
     * directory is 0700 too; this is the second lock on the door). */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid()) {
        clog_(c, "refused a connection from uid %d", (int) cred.uid);
        close(fd);
        return;
    }
    if (c->state == G_TEARDOWN) {
        send_refused(fd, LZ_REFUSE_TEARING_DOWN, "the Domain is shutting down", NULL);
        close(fd);
        return;
    }
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        session *s = &c->sessions[i];
        if (s->state != S_FREE)
            continue;
        memset(s, 0, sizeof(*s));
        s->state = S_HELLO;
        s->sock = fd;
        s->no = ++c->next_no;
        s->cli_pid = cred.pid;
        s->master = -1;
        s->fds[0] = s->fds[1] = s->fds[2] = -1;
        c->n_active++;
        c->n_ever++;
        return;
    }
    send_refused(fd, LZ_REFUSE_EXEC_FAILED, "too many sessions in this Domain",
                 "end some sessions first");
    close(fd);
}

/* ---- supervisor events ------------------------------------------------- */

static void start_failed(coord *c, const char *msg, const char *hint)
{
    c->state = G_FAILED;
    free(c->failure.message);
    free(c->failure.hint);
    c->failure.code = LZ_REFUSE_START_FAILED;
    c->failure.message = lz_xstrdup(msg);
    c->failure.hint = hint && *hint ? lz_xstrdup(hint) : NULL;
    clog_(c, "start failed: %s", msg);
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        session *s = &c->sessions[i];
        if (s->state == S_QUEUED || s->state == S_RUN || s->state == S_HELLO)
            refuse_and_close(c, s, LZ_REFUSE_START_FAILED, msg, hint);
    }
}

static session *session_by_no(coord *c, uint32_t no)
{
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (c->sessions[i].state == S_RUNNING && c->sessions[i].no == no)
            return &c->sessions[i];
    return NULL;
}

static void supervisor_message(coord *c)
{
    static uint8_t buf[LZ_WIRE_MAX];
    ssize_t n = lz_wire_recv(c->sup.sock, buf, NULL, 0, NULL, NULL);
    if (n <= 0) {
        clog_(c, "the Runtime Supervisor is gone");
        c->sup_alive = false;
        if (c->state == G_STARTING)
            start_failed(c, "the Runtime Supervisor ended while starting the sandbox",
                         "see the Domain's logs/ directory; run 'lazaret doctor'");
        /* Every running session ends with a Lazaret failure. */
        for (size_t i = 0; i < MAX_SESSIONS; i++) {
            session *s = &c->sessions[i];
            if (s->state == S_RUNNING && s->sock >= 0)
                send_refused(s->sock, LZ_REFUSE_EXEC_FAILED,
                             "the Runtime Supervisor ended unexpectedly; the sandbox is gone",
                             "run the command again; the Domain's logs/coordinator.log says why");
            if (s->state != S_FREE)
                session_close(c, s);
        }
        c->state = c->state == G_TEARDOWN ? G_TEARDOWN : G_FAILED;
        return;
    }
    lz_rbuf r;
    lz_rbuf_init(&r, buf, (size_t) n);
    if (r.type == LZ_SUP_STARTED && c->state == G_STARTING) {
        uint32_t statx_fix = lz_rbuf_u32(&r);
        c->state = G_RUNNING;
        lz_store_participant_held(c->a->store, c->generation, LZ_ROLE_SANDBOX, NULL, NULL);
        lz_store_generation_set_state(c->a->store, c->generation, "running", NULL);
        clog_(c, "sandbox %s running%s", c->container_id,
              statx_fix ? " (statx AT_NO_AUTOMOUNT shim preloaded: old runsc)" : "");
        publish_status(c);
        for (size_t i = 0; i < MAX_SESSIONS; i++)
            if (c->sessions[i].state == S_QUEUED)
                session_exec(c, &c->sessions[i]);
    } else if (r.type == LZ_SUP_FAILED && c->state == G_STARTING) {
        lz_msg_refused m;
        if (lz_msg_refused_decode(&r, &m)) {
            start_failed(c, m.message, m.hint);
            lz_msg_refused_clear(&m);
        } else {
            start_failed(c, "the sandbox could not be started", NULL);
        }
    } else if (r.type == LZ_SUP_EXEC_EXITED) {
        uint32_t no, status;
        if (!lz_msg_pair_decode(&r, &no, &status))
            return;
        session *s = session_by_no(c, no);
        if (!s)
            return;
        /* runsc exec exits with the command's status, 128+N for a signal. */
        int st = (int) status;
        uint32_t outcome = LZ_EXIT_OUTCOME_EXITED, code;
        if (WIFEXITED(st)) {
            code = (uint32_t) WEXITSTATUS(st);
        } else {
            outcome = LZ_EXIT_OUTCOME_TERMINATED;
            code = 128 + (uint32_t) WTERMSIG(st);
        }
        clog_(c, "session #%u ended: %s %u", s->no, outcome ? "signal" : "status", code);
        s->exited = true;
        s->exit_outcome = outcome;
        s->exit_code = code;
        clock_gettime(CLOCK_MONOTONIC, &s->exit_at);
        session_finish_if_done(c, s);
    }
}

/* ---- status ------------------------------------------------------------ */

static const char *state_name(gen_state st)
{
    switch (st) {
    case G_STARTING: return "starting";
    case G_RUNNING: return "running";
    case G_FAILED: return "failed";
    case G_TEARDOWN: return "tearing_down";
    }
    return "unknown";
}

/* <runtime domain>/status.json, replaced atomically on every change: what
 * `lazaret status` shows. It holds no secret (environment names only are in
 * the configuration; none of it is copied here). */
static void publish_status(coord *c)
{
    json_t *sessions = json_array();
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        session *s = &c->sessions[i];
        if (s->state == S_RUNNING || s->state == S_QUEUED)
            json_array_append_new(sessions, json_pack("{s:s, s:b, s:i, s:s}", "session_id", s->id,
                                                      "interactive", s->run.interactive,
                                                      "client_pid", (int) s->cli_pid, "state",
                                                      s->state == S_RUNNING ? "running" : "queued"));
    }
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:i, s:s, s:o, s:o}", "domain_id",
                          c->id_hex, "profile", c->a->cfg->profile, "workspace",
                          c->a->cfg->workspace.label, "configuration_fingerprint", c->fp_hex,
                          "generation", (json_int_t) c->generation, "state", state_name(c->state),
                          "coordinator_pid", (int) getpid(), "container_id", c->container_id,
                          "sessions", sessions, "network_policy",
                          lz_derived_network_policy(c->a->cfg, LZ_NET_RESOLVER));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!text)
        return;
    int fd = openat(c->a->runtime_dir_fd, "status.json.tmp",
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        size_t n = strlen(text);
        bool ok = write(fd, text, n) == (ssize_t) n;
        close(fd);
        if (ok)
            renameat(c->a->runtime_dir_fd, "status.json.tmp", c->a->runtime_dir_fd,
                     "status.json");
    }
    free(text);
}

/* ---- lifecycle --------------------------------------------------------- */

static int copy_file(const char *src, int dirfd, const char *name, mode_t mode, lz_error **err)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return lz_error_set(err, errno, "cannot open %s", src);
    struct stat st;
    int out = -1;
    if (fstat(in, &st) == 0)
        out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    int r = 0;
    if (out < 0) {
        r = lz_error_set(err, errno, "cannot copy %s", src);
    } else {
        off_t left = st.st_size;
        while (left > 0) {
            ssize_t k = sendfile(out, in, NULL, (size_t) left);
            if (k <= 0) {
                r = lz_error_set(err, errno, "cannot copy %s", src);
                break;
            }
            left -= k;
        }
        close(out);
    }
    close(in);
    return r;
}

/* The generation's runtime directory: runsc state, the bundle, and a
 * private copy of the guest binaries that is bind-mounted read-only. */
static int make_generation_dir(coord *c, char **ret_bin, char **ret_lib, lz_error **err)
{
    int rt = c->a->runtime_dir_fd;
    if (lz_store_participant_intent(c->a->store, c->generation, LZ_ROLE_RUNTIME_FILES, c->gen_name,
                                    err) < 0)
        return -1;
    lz_remove_tree_at(rt, c->gen_name, c->a->cfg->runtime_domain_root.label, NULL);
    if (mkdirat(rt, c->gen_name, 0700) < 0)
        return lz_error_set(err, errno, "cannot create %s", c->gen_label);
    _cleanup_close_ int g = openat(rt, c->gen_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (g < 0)
        return lz_error_set(err, errno, "cannot open %s", c->gen_label);
    if (mkdirat(g, "guest", 0755) < 0 || mkdirat(g, "guest/bin", 0755) < 0 ||
        mkdirat(g, "guest/lib", 0755) < 0)
        return lz_error_set(err, errno, "cannot create %s/guest", c->gen_label);
    _cleanup_close_ int bin = openat(g, "guest/bin", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int lib = openat(g, "guest/lib", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bin < 0 || lib < 0)
        return lz_error_set(err, errno, "cannot open %s/guest", c->gen_label);
    if (copy_file(c->a->guest_exec, bin, "lazaret-exec", 0555, err) < 0)
        return -1;
    if (c->a->guest_statx_fix &&
        copy_file(c->a->guest_statx_fix, lib, "lazaret-statx-fix.so", 0444, err) < 0)
        return -1;
    if (lz_store_participant_held(c->a->store, c->generation, LZ_ROLE_RUNTIME_FILES, NULL, err) < 0)
        return -1;
    *ret_bin = lz_xasprintf("%s/guest/bin", c->gen_label);
    *ret_lib = c->a->guest_statx_fix ? lz_xasprintf("%s/guest/lib", c->gen_label) : NULL;
    return 0;
}

static void teardown_and_exit(coord *c, int status)
{
    lz_domain_store *st = c->a->store;
    c->state = G_TEARDOWN;
    clog_(c, "teardown of generation %lld", (long long) c->generation);
    /* New CLIs must not find us any more: they wait for the lock instead
     * and start the next generation. */
    unlinkat(c->a->runtime_dir_fd, LZ_COORDINATOR_SOCKET, 0);
    unlinkat(c->a->runtime_dir_fd, "status.json", 0);
    close(c->a->listen_fd);
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (c->sessions[i].state != S_FREE)
            refuse_and_close(c, &c->sessions[i], LZ_REFUSE_TEARING_DOWN,
                             "the Domain is shutting down", NULL);
    lz_store_generation_set_state(st, c->generation, "tearing_down", NULL);

    if (c->sup_alive) {
        lz_wbuf b;
        lz_wbuf_init(&b, LZ_SUP_STOP);
        if (lz_wire_send(c->sup.sock, &b, NULL, 0, NULL) == 0) {
            struct pollfd p = { .fd = c->sup.sock, .events = POLLIN };
            static uint8_t buf[LZ_WIRE_MAX];
            for (;;) {
                if (poll(&p, 1, STOP_TIMEOUT_MS) <= 0)
                    break;
                ssize_t n = lz_wire_recv(c->sup.sock, buf, NULL, 0, NULL, NULL);
                if (n <= 0)
                    break;
                if (n >= 2 && ((buf[0] << 8) | buf[1]) == LZ_SUP_STOPPED)
                    break;
            }
        }
    }
    if (c->sup.outer_pid > 0) {
        /* Whatever state it is in, the supervisor's pid namespace ends now:
         * killing its init kills every runsc process in it. */
        kill(c->sup.init_pid, SIGKILL);
        kill(c->sup.outer_pid, SIGKILL);
        waitpid(c->sup.outer_pid, NULL, 0);
        lz_store_participant_released(st, c->generation, LZ_ROLE_SANDBOX, NULL);
        lz_store_participant_released(st, c->generation, LZ_ROLE_SUPERVISOR, NULL);
    }
    if (c->sup.sock >= 0)
        close(c->sup.sock);
    /* The last audit runs when no sandbox process is left to race it. */
    if (c->git.ws_fd >= 0 && !c->sentry_failed) {
        char *report = NULL;
        lz_error *e = NULL;
        c->git.final = true;
        int n = lz_git_sentry_audit(&c->git, true, &report, &e);
        if (n < 0) {
            log_error(c, "Git Sentry audit at teardown failed", e);
            lz_error *e2 = NULL;
            if (lz_git_sentry_mark_unsafe(c->a->cfg, c->git.failed_rel, &e2) < 0)
                log_error(c, "cannot record the unsafe workspace", e2);
            lz_error_free(e2);
        } else if (n > 0) {
            clog_(c, "Git Sentry (teardown): %s", report);
        }
        if (n >= 0)
            lz_git_sentry_done(&c->git);
        lz_error_free(e);
        free(report);
    }
    lz_git_plan_clear(&c->git);
    lz_error *err = NULL;
    if (lz_remove_tree_at(c->a->runtime_dir_fd, c->gen_name, c->a->cfg->runtime_domain_root.label,
                          &err) == 0)
        lz_store_participant_released(st, c->generation, LZ_ROLE_RUNTIME_FILES, NULL);
    else
        log_error(c, "cannot remove the generation directory", err);
    lz_error_free(err);
    lz_store_generation_set_state(st, c->generation, "ended", NULL);
    lz_store_participant_released(st, c->generation, LZ_ROLE_COORDINATOR, NULL);
    clog_(c, "generation %lld ended", (long long) c->generation);
    lz_domain_store_close(st);
    if (c->log)
        fclose(c->log);
    /* Exiting releases the Domain lock. */
    _exit(status);
}

void lz_coordinator_main(lz_coordinator_args *a)
{
    /* On the heap: every session carries a PTY input buffer. */
    coord *c = lz_xcalloc(1, sizeof(*c));
    c->a = a;
    c->git = (lz_git_plan) LZ_GIT_PLAN_INIT;
    c->sup.sock = -1;
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        c->sessions[i].sock = -1;
        c->sessions[i].master = -1;
        c->sessions[i].fds[0] = c->sessions[i].fds[1] = c->sessions[i].fds[2] = -1;
    }
    prctl(PR_SET_NAME, "lz-coordinator");
    lz_nodump_reassert(); /* inherited already; this process holds the secrets */
    lz_digest_hex(a->cfg->domain_id, c->id_hex);
    lz_digest_hex(a->cfg->fingerprint, c->fp_hex);
    clock_gettime(CLOCK_MONOTONIC, &c->started);

    /* logs/ in the Domain Root. */
    {
        lz_error *e = NULL;
        int root = lz_plan_open(&a->cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, &e);
        lz_error_free(e);
        if (root >= 0) {
            mkdirat(root, "logs", 0700);
            int fd = openat(root, "logs/coordinator.log",
                            O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
            if (fd >= 0) {
                /* stderr too: whatever a library or a sanitizer prints
                 * lands in the log, not in /dev/null. */
                dup2(fd, STDERR_FILENO);
                c->log = fdopen(fd, "a");
            }
            close(root);
        }
    }

    lz_error *err = NULL;
    if (lz_store_generation_begin(a->store, c->fp_hex, &c->generation, &err) < 0) {
        log_error(c, "cannot begin a generation", err);
        _exit(1);
    }
    lz_process_identity me;
    if (lz_store_participant_intent(a->store, c->generation, LZ_ROLE_COORDINATOR, NULL, &err) < 0 ||
        lz_process_identity_of(getpid(), &me, &err) < 0 ||
        lz_store_participant_held(a->store, c->generation, LZ_ROLE_COORDINATOR, &me, &err) < 0) {
        log_error(c, "cannot record the coordinator", err);
        _exit(1);
    }
    snprintf(c->gen_name, sizeof(c->gen_name), "gen-%lld", (long long) c->generation);
    c->gen_label = lz_xasprintf("%s/%s", a->cfg->runtime_domain_root.label, c->gen_name);
    snprintf(c->container_id, sizeof(c->container_id), "lazaret-%.16s-%lld", c->id_hex,
             (long long) c->generation);
    {
        json_t *pol = lz_derived_network_policy(a->cfg, LZ_NET_RESOLVER);
        char *text = json_dumps(pol, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(pol);
        if (text)
            lz_store_network_policy(a->store, c->generation, text, NULL);
        free(text);
    }
    publish_status(c);
    clog_(c, "generation %lld of Domain %s (profile %s, workspace %s) starting",
          (long long) c->generation, c->id_hex, a->cfg->profile, a->cfg->workspace.label);

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);

    /* Start the supervisor and ask it for the sandbox; sessions connect and
     * queue meanwhile. */
    char *bin = NULL, *lib = NULL;
    _cleanup_free_ char *log_path = NULL;
    if (make_generation_dir(c, &bin, &lib, &err) < 0) {
        log_error(c, "cannot prepare the generation directory", err);
        start_failed(c, err ? err->message : "cannot prepare the generation directory",
                     err ? err->hint : NULL);
        lz_error_free(lz_error_take(&err));
    } else {
        log_path = lz_xasprintf("%s/runsc.log", c->gen_label);
        if (lz_git_sentry_plan(a->cfg, &c->git, &err) < 0) {
            log_error(c, "Git Sentry", err);
            start_failed(c, err->message, err->hint);
            lz_error_free(lz_error_take(&err));
            goto started;
        }
        if (c->git.start_report)
            clog_(c, "Git Sentry (start): %s", c->git.start_report);
        /* Watches are in place before the sandbox exists: nothing it
         * makes goes unseen. */
        {
            char *report = NULL;
            int n = lz_git_sentry_watch(&c->git, &report, &err);
            if (n < 0) {
                log_error(c, "Git Sentry", err);
                start_failed(c, err->message, err->hint);
                lz_error_free(lz_error_take(&err));
                goto started;
            }
            if (n > 0)
                clog_(c, "Git Sentry (start): %s", report);
            free(report);
        }
        clog_(c, "Git Sentry: %zu mounts (%zu ignored paths isolated), %zu watched directories",
              c->git.n_mounts, c->git.n_ignored, c->git.n_watches);
        lz_supervisor_config sc = {
            .cfg = a->cfg, .image = a->image, .generation = c->generation,
            .generation_dir = c->gen_label, .container_id = c->container_id, .runsc = a->runsc,
            .guest_bin_dir = bin, .guest_lib_dir = lib, .log_path = log_path,
            .workspace_mounts = c->git.mounts, .n_workspace_mounts = c->git.n_mounts,
        };
        lz_store_participant_intent(a->store, c->generation, LZ_ROLE_SUPERVISOR, NULL, NULL);
        lz_store_participant_intent(a->store, c->generation, LZ_ROLE_SANDBOX, c->container_id, NULL);
        int spawned = lz_supervisor_spawn(&sc, &c->sup, &err);
        /* The supervisor (forked) has its own copy of the resolved env
         * values and is the only process that uses them; this generation
         * never starts another one, so ours are wiped now. */
        lz_resolved_config_forget_env_values((lz_resolved_config *) a->cfg);
        if (spawned < 0) {
            log_error(c, "cannot start the supervisor", err);
            start_failed(c, err->message, err->hint);
            lz_error_free(lz_error_take(&err));
        } else {
            c->sup_alive = true;
            lz_process_identity sid;
            if (lz_process_identity_of(c->sup.init_pid, &sid, NULL) == 0)
                lz_store_participant_held(a->store, c->generation, LZ_ROLE_SUPERVISOR, &sid, NULL);
            clog_(c, "supervisor pid %d (namespace init %d)", (int) c->sup.outer_pid,
                  (int) c->sup.init_pid);
            lz_wbuf b;
            lz_wbuf_init(&b, LZ_SUP_START);
            if (lz_wire_send(c->sup.sock, &b, NULL, 0, &err) < 0) {
                start_failed(c, "cannot talk to the Runtime Supervisor", NULL);
                lz_error_free(lz_error_take(&err));
            }
        }
    }
started:
    free(bin);
    free(lib);
    /* The empty-start limit counts from here: the synchronous start above
     * (the Git Sentry's plan, say) may take long, and the CLI waiting in
     * the listen queue must still be accepted and told the outcome. */
    clock_gettime(CLOCK_MONOTONIC, &c->started);

    for (;;) {
        if (c->n_active == 0 &&
            (c->n_ever > 0 || ms_since(&c->started) > EMPTY_START_TIMEOUT_MS))
            teardown_and_exit(c, c->state == G_FAILED ? 1 : 0);

        /* Per session up to two fds: its socket and its PTY master. */
        struct pollfd p[4 + 2 * MAX_SESSIONS];
        session *owner[4 + 2 * MAX_SESSIONS];
        bool is_master[4 + 2 * MAX_SESSIONS];
        size_t np = 0;
        p[np] = (struct pollfd) { .fd = sfd, .events = POLLIN };
        is_master[np] = false;
        owner[np++] = NULL;
        p[np] = (struct pollfd) { .fd = a->listen_fd, .events = POLLIN };
        is_master[np] = false;
        owner[np++] = NULL;
        p[np] = (struct pollfd) { .fd = c->sup_alive ? c->sup.sock : -1, .events = POLLIN };
        is_master[np] = false;
        owner[np++] = NULL;
        p[np] = (struct pollfd) { .fd = c->git.inotify_fd, .events = POLLIN };
        is_master[np] = false;
        owner[np++] = NULL;
        for (size_t i = 0; i < MAX_SESSIONS; i++) {
            session *s = &c->sessions[i];
            if (s->state == S_FREE)
                continue;
            if (s->sock >= 0) {
                short ev = 0;
                /* While typed bytes wait for the PTY, read no more input. */
                if (s->in_pending_len == 0)
                    ev |= POLLIN;
                if (s->out_pending)
                    ev |= POLLOUT;
                p[np] = (struct pollfd) { .fd = s->sock, .events = ev };
                is_master[np] = false;
                owner[np++] = s;
            }
            if (s->master >= 0) {
                short ev = 0;
                if (!s->out_pending)
                    ev |= POLLIN;
                if (s->in_pending_len)
                    ev |= POLLOUT;
                p[np] = (struct pollfd) { .fd = s->master, .events = ev };
                is_master[np] = true;
                owner[np++] = s;
            }
        }
        int timeout = c->n_ever == 0 ? 1000 : -1;
        /* Interactive commands that ended: bound the drain of their PTY. */
        for (size_t i = 0; i < MAX_SESSIONS; i++) {
            session *s = &c->sessions[i];
            if (s->state != S_RUNNING || !s->exited)
                continue;
            session_finish_if_done(c, s);
            if (s->state == S_RUNNING && s->exited) {
                int64_t left = DRAIN_MS - ms_since(&s->exit_at);
                if (left < 10)
                    left = 10;
                if (timeout < 0 || left < timeout)
                    timeout = (int) left;
            }
        }
        /* Escalate to SIGKILL for commands whose client left. */
        for (size_t i = 0; i < MAX_SESSIONS; i++) {
            session *s = &c->sessions[i];
            if (s->state != S_RUNNING || s->sock >= 0 || s->killed)
                continue;
            int64_t left = ORPHAN_GRACE_MS - ms_since(&s->orphaned);
            if (left <= 0) {
                lz_wbuf b;
                lz_msg_pair_encode(&b, LZ_SUP_SIGNAL, s->no, SIGKILL);
                if (c->sup_alive)
                    lz_wire_send(c->sup.sock, &b, NULL, 0, NULL);
                s->killed = true;
            } else if (timeout < 0 || left < timeout) {
                timeout = (int) left;
            }
        }
        if (poll(p, np, timeout) < 0) {
            if (errno == EINTR)
                continue;
            teardown_and_exit(c, 1);
        }
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo != SIGCHLD) {
                clog_(c, "signal %d: ending the Domain", (int) si.ssi_signo);
                teardown_and_exit(c, 0);
            }
            if (c->sup.outer_pid > 0 && waitpid(c->sup.outer_pid, NULL, WNOHANG) == c->sup.outer_pid) {
                c->sup.outer_pid = 0;
                lz_store_participant_released(a->store, c->generation, LZ_ROLE_SUPERVISOR, NULL);
            }
        }
        if (p[2].revents & (POLLIN | POLLHUP | POLLERR))
            supervisor_message(c);
        if (p[1].revents & POLLIN)
            accept_session(c);
        if (p[3].revents & POLLIN)
            git_audit(c, "change in the workspace", false);
        for (size_t i = 4; i < np; i++) {
            session *s = owner[i];
            if (s->state == S_FREE || !p[i].revents)
                continue;
            if (is_master[i]) {
                if (s->master != p[i].fd)
                    continue;
                if (p[i].revents & POLLOUT)
                    session_pty_input(s);
                if (s->master >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
                    !s->out_pending)
                    session_pty_output(c, s);
            } else {
                if (s->sock != p[i].fd)
                    continue;
                if ((p[i].revents & POLLOUT) && s->out_pending)
                    session_flush_output(c, s);
                if (s->state != S_FREE && s->sock == p[i].fd &&
                    (p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                    session_message(c, s);
            }
        }
    }
}
