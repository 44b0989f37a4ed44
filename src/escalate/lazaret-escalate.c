/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret-escalate: the in-sandbox escalation client (docs/escalation.md
 * "The client"), a small static binary on the PATH of every session's
 * command (/run/lazaret/bin). It asks the coordinator, through the
 * Escalation Mailbox (protocol/mailbox.h "the mailbox's places"), to run one
 * host command, and then behaves like that command: its output arrives on
 * our stdout/stderr as it is produced, its exit status is ours.
 *
 *   lazaret-escalate [--why TEXT] -- /ABSOLUTE/EXECUTABLE [ARG...]
 *
 * It runs with the sandbox's authority only and trusts nothing it reads:
 * the outbox is read-only inside, but a record is still opened without
 * following symlinks, must be a regular file of bounded size, must carry
 * the coordinator's signature for this generation, must decode strictly,
 * and must name our request id and the expected sequence number. Anything
 * else ends the client with LZ_ESC_EXIT_FAILED and a message.
 *
 * Replies are found by polling with a short back-off, not inotify: gVisor
 * does not report host-side changes on bind mounts to the sandbox.
 *
 * Signals (SIGINT, SIGTERM, SIGHUP) arrive through a signalfd, so the
 * cancellation path runs in normal context, not in a handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/io.h"
#include "common/text.h"
#include "common/util.h"
#include "protocol/mailbox.h"
#include "protocol/wire.h"
#include "trust/signature.h"

#define PROG "lazaret-escalate"

/* The back-off of the poll loop: short at first (an auto-approved /bin/true
 * answers within milliseconds; the round-trip target is p50 <= 20 ms), then
 * growing by half up to a cap that bounds both the added latency of a
 * streaming command and the cost of waiting minutes for a prompt. */
#define POLL_MIN_NS 200000L   /* 0.2 ms */
#define POLL_MAX_NS 10000000L /* 10 ms */
/* How long a cancelled client keeps waiting for the coordinator's result. */
#define CANCEL_WAIT_MS 5000
/* ACK after this many consumed chunks (well under LZ_MBX_MAX_UNACKED, so
 * the coordinator never stalls on flow control while we keep reading). */
#define ACK_EVERY 16
/* Largest write to stdout/stderr after poll() said writable: PIPE_BUF, so
 * that a pipe with room does not block us (the heartbeat must go on while a
 * slow reader holds our output). */
#define WRITE_STEP 4096

static const char usage_text[] =
    "Usage: " PROG " [--why TEXT] -- /ABSOLUTE/EXECUTABLE [ARG...]\n"
    "\n"
    "Ask the Lazaret session this command runs in to run one command on the\n"
    "host, outside the sandbox. Its output appears here as it is produced and\n"
    "its exit status becomes this program's.\n"
    "\n"
    "  --why TEXT   why the command is needed; the developer is shown it,\n"
    "               labelled as the agent's words (at most 1024 bytes)\n"
    "  -h, --help   show this help\n"
    "\n"
    "The command is an argument vector, never a command line: no shell and no\n"
    "PATH lookup happen anywhere. The program must be an absolute path (write\n"
    "/usr/bin/git, not git), and ';', '&&', '|', '$(...)' or quotes inside an\n"
    "argument are literal bytes of that argument. At most 256 arguments of at\n"
    "most 4096 bytes each (32768 together).\n"
    "\n"
    "It runs only when the developer approves it in this session's terminal\n"
    "(the prompt shows the program, every argument and --why; type y then\n"
    "Enter; anything else denies), or when an auto_approve rule of the host\n"
    "profile matches it exactly (the same absolute program, the same\n"
    "arguments). The working directory is this one, mapped to the host when it\n"
    "lies in the workspace. Standard input is not forwarded (the host command\n"
    "reads /dev/null).\n"
    "\n"
    "Exit status:\n"
    "  0-255  the host command's own (128+N when signal N ended it)\n"
    "  250    denied (by the developer, or escalation is disabled)\n"
    "  251    timed out (nobody decided in time)\n"
    "  252    cancelled\n"
    "  253    failed (refused or could not run on the host, or no valid\n"
    "         answer from the Lazaret coordinator)\n"
    "  254    not sent (usage error, a relative program, not started by a\n"
    "         Lazaret session)\n"
    "Outcomes other than a completed command are explained on stderr.\n"
    "\n"
    "SIGINT (Ctrl-C), SIGTERM or SIGHUP cancel the request: the host command\n"
    "and everything it started are killed, and " PROG " exits 252. A\n"
    "second signal exits at once. If this program dies, the request is\n"
    "cancelled within a few seconds. If standard output or error can no\n"
    "longer be written (a closed pipe), the request is cancelled too.\n";

/* ---- messages and exits ------------------------------------------------ */

/* One write(2) per message, so that lines do not interleave with the host
 * command's output written by others to the same terminal. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    /* Room for an outcome's whole message, escaped (4 bytes per byte). */
    char buf[4 * LZ_MBX_MAX_MESSAGE + 256];
    int n = snprintf(buf, sizeof(buf), PROG ": ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t) n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    size_t len =
        (size_t) n +
        ((size_t) m < sizeof(buf) - (size_t) n - 1 ? (size_t) m : sizeof(buf) - (size_t) n - 2);
    buf[len++] = '\n';
    (void) !write(STDERR_FILENO, buf, len);
}

static void __attribute__((noreturn)) die(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void die(int status, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    say("%s", msg);
    _exit(status);
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- the client's state ------------------------------------------------ */

typedef struct client {
    uint8_t key[LZ_SIG_KEY_LEN];      /* the sandbox's signing seed */
    uint8_t coord[LZ_SIG_KEY_LEN];    /* the coordinator's public key */
    char nonce[LZ_SIG_NONCE_LEN + 1]; /* the generation nonce */
    char capability[LZ_MBX_ID_LEN + 1];
    char id[LZ_MBX_ID_LEN + 1];
    int inbox;           /* LZ_MBX_GUEST_INBOX */
    int outbox;          /* LZ_MBX_GUEST_OUTBOX */
    int reply;           /* outbox/<id>, once the request was accepted */
    int sfd;             /* signalfd: SIGINT, SIGTERM, SIGHUP */
    unsigned n_records;  /* records written (for diagnostics) */
    unsigned n_acks;     /* for unique ACK names */
    uint32_t consumed;   /* chunks written to our stdout/stderr */
    uint32_t acked;      /* the count in the last ACK */
    int64_t sent_at;     /* when the request was renamed in */
    int64_t last_ack_ok; /* when an ACK (or the request) last got in */
    int64_t next_heartbeat;
    bool cancelling;
    int64_t cancel_deadline;
    bool out_broken[3]; /* fd 1 or 2 could not be written */
} client;

/* Records read (one more byte than the bound, to see an overlong file) and
 * records written: separate, because a chunk's bytes (pointing into the
 * first) are still being written out when a heartbeat uses the second. */
static uint8_t in_record[LZ_MBX_MAX_RECORD + LZ_SIG_LEN + 1];
static uint8_t out_record[LZ_MBX_MAX_RECORD + LZ_SIG_LEN];
static lz_wbuf wbuf;

/* ---- writing records into the inbox ------------------------------------ */

/* payload || signature, written whole under a temporary name (a name
 * starting with '.' is never read by the coordinator) and renamed to its
 * final name: the coordinator only ever sees complete records. 0 or -1
 * (errno). */
static int put_record(client *c, const lz_wbuf *b, const char *name)
{
    if (b->overflow || b->len > LZ_MBX_MAX_RECORD) {
        errno = EMSGSIZE;
        return -1;
    }
    memcpy(out_record, b->data, b->len);
    if (lz_sig_sign(c->key, c->nonce, b->data, b->len, out_record + b->len) < 0)
        return -1;
    /* A random temporary name: every sandbox process can write the inbox,
     * and a predictable name (it used to hold the request id) let another
     * one make this client's writes fail (attack round i11b, B10) or learn
     * the id before the request was in. A name taken already: another. */
    char tmp[40];
    int fd = -1;
    for (int tries = 0; tries < 16 && fd < 0; tries++) {
        uint8_t r[12];
        if (lz_random_bytes(r, sizeof(r)) < 0)
            return -1;
        static const char hexd[] = "0123456789abcdef";
        tmp[0] = '.';
        for (size_t i = 0; i < sizeof(r); i++) {
            tmp[1 + 2 * i] = hexd[r[i] >> 4];
            tmp[2 + 2 * i] = hexd[r[i] & 15];
        }
        tmp[1 + 2 * sizeof(r)] = '\0';
        fd = openat(c->inbox, tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 && errno != EEXIST)
            return -1;
    }
    if (fd < 0)
        return -1;
    c->n_records++;
    ssize_t w = lz_write_all(fd, out_record, b->len + LZ_SIG_LEN);
    int saved = errno;
    int closed = close(fd);
    if (w < 0 || closed < 0 || renameat(c->inbox, tmp, c->inbox, name) < 0) {
        if (w >= 0)
            saved = errno; /* from close() or renameat() */
        unlinkat(c->inbox, tmp, 0);
        errno = saved;
        return -1;
    }
    return 0;
}

/* The inbox is a tmpfs bounded in bytes and entries per Domain (mailbox.h
 * LZ_MBX_INBOX_MAX_*): when something in the sandbox has filled it, the
 * kernel refuses our file (ENOSPC at its creation or while writing it). */
static bool mailbox_full(int e)
{
    return e == ENOSPC || e == EDQUOT;
}

#define MAILBOX_FULL_FMT                                                                           \
    "the mailbox is full: " LZ_MBX_GUEST_INBOX " holds at most %u KiB in %u entries per "          \
    "Domain, and something in the sandbox filled it"
#define MAILBOX_FULL_ARGS LZ_MBX_INBOX_MAX_BYTES / 1024, LZ_MBX_INBOX_MAX_ENTRIES

static void send_control(client *c, uint16_t type, const char *name)
{
    lz_mbx_control m = { .acked = c->consumed };
    memcpy(m.capability, c->capability, sizeof(m.capability));
    memcpy(m.request_id, c->id, sizeof(m.request_id));
    lz_mbx_control_encode(&wbuf, type, &m);
    if (put_record(c, &wbuf, name) < 0) {
        if (type == LZ_MBX_CANCEL)
            /* The coordinator still notices: without heartbeats it
             * cancels the request after LZ_MBX_SILENCE_MS. */
            die(LZ_ESC_EXIT_CANCELLED, "cancelled; the cancellation could not be written to %s: %s",
                LZ_MBX_GUEST_INBOX, strerror(errno));
        die(LZ_ESC_EXIT_FAILED, "cannot write to the mailbox %s: %s", LZ_MBX_GUEST_INBOX,
            strerror(errno));
    }
}

/* The ACK is both flow control (chunks below the count may be removed and
 * more may be written) and the heartbeat that tells the coordinator we are
 * alive. */
static void send_ack(client *c)
{
    /* A final name another process has put something under (the id is
     * public once the request is in: outbox/<id>/) is skipped for the next
     * one; only repeated failure ends the client. */
    for (int tries = 0;; tries++) {
        char name[LZ_MBX_ID_LEN + 32];
        snprintf(name, sizeof(name), "%s.ack-%u", c->id, c->n_acks++);
        lz_mbx_control m = { .acked = c->consumed };
        memcpy(m.capability, c->capability, sizeof(m.capability));
        memcpy(m.request_id, c->id, sizeof(m.request_id));
        lz_mbx_control_encode(&wbuf, LZ_MBX_ACK, &m);
        if (put_record(c, &wbuf, name) == 0)
            break;
        if (mailbox_full(errno)) {
            /* Full maybe only for a moment: try again soon. Only a mailbox
             * full for most of the silence the coordinator allows ends the
             * request here (the coordinator cancels it when that passes). */
            int64_t now = now_ms();
            if (now - c->last_ack_ok < LZ_MBX_SILENCE_MS - 2000) {
                c->next_heartbeat = now + 100;
                return;
            }
            die(LZ_ESC_EXIT_FAILED,
                "failed: " MAILBOX_FULL_FMT "; the request could not be "
                "kept alive and the host will cancel it",
                MAILBOX_FULL_ARGS);
        }
        if (tries == 8)
            die(LZ_ESC_EXIT_FAILED, "cannot write to the mailbox %s: %s", LZ_MBX_GUEST_INBOX,
                strerror(errno));
    }
    c->acked = c->consumed;
    c->last_ack_ok = now_ms();
    c->next_heartbeat = c->last_ack_ok + LZ_MBX_HEARTBEAT_MS;
}

static void start_cancel(client *c)
{
    if (c->cancelling)
        return;
    char name[LZ_MBX_ID_LEN + 16];
    snprintf(name, sizeof(name), "%s.cancel", c->id);
    send_control(c, LZ_MBX_CANCEL, name);
    c->cancelling = true;
    c->cancel_deadline = now_ms() + CANCEL_WAIT_MS;
}

/* Read every pending signal: the first one cancels, a second one ends the
 * client at once (the user insists; the coordinator still cancels on
 * silence). */
static void check_signals(client *c)
{
    struct signalfd_siginfo si;
    while (read(c->sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
        if (c->cancelling)
            die(LZ_ESC_EXIT_CANCELLED, "cancelled (%s again; not waiting for the host)",
                strsignal((int) si.ssi_signo));
        start_cancel(c);
    }
}

/* Heartbeats and the cancellation deadline: called from every wait. */
static void keep_alive(client *c)
{
    int64_t now = now_ms();
    if (c->cancelling && now >= c->cancel_deadline)
        die(LZ_ESC_EXIT_CANCELLED,
            "cancelled (the Lazaret coordinator did not confirm within %d s)",
            CANCEL_WAIT_MS / 1000);
    if (now >= c->next_heartbeat)
        send_ack(c);
}

/* Milliseconds until keep_alive() has something to do. */
static int next_due_ms(const client *c)
{
    int64_t due = c->next_heartbeat;
    if (c->cancelling && c->cancel_deadline < due)
        due = c->cancel_deadline;
    int64_t d = due - now_ms();
    return d < 0 ? 0 : (int) d;
}

/* ---- writing the host command's output --------------------------------- */

/* Write a chunk's bytes to fd 1 or 2, whole. poll() first, so that a
 * reader who is slow (or stopped) does not stop our heartbeats and signal
 * handling; at most WRITE_STEP bytes per write. A stream that cannot be
 * written (EPIPE: SIGPIPE is ignored, EBADF, EIO...) cancels the request,
 * as a closed pipe ends a command in a pipeline, and its further output is
 * dropped. */
static void emit(client *c, int fd, const uint8_t *p, size_t n)
{
    while (n > 0 && !c->out_broken[fd]) {
        struct pollfd pf[2] = { { .fd = fd, .events = POLLOUT },
                                { .fd = c->sfd, .events = POLLIN } };
        int r = poll(pf, 2, next_due_ms(c));
        if (r < 0 && errno != EINTR)
            die(LZ_ESC_EXIT_FAILED, "poll: %s", strerror(errno));
        check_signals(c);
        keep_alive(c);
        if (r <= 0 || !(pf[0].revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)))
            continue;
        ssize_t w = write(fd, p, n < WRITE_STEP ? n : WRITE_STEP);
        if (w > 0) {
            p += w;
            n -= (size_t) w;
        } else if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        } else {
            c->out_broken[fd] = true;
            if (fd == STDOUT_FILENO)
                say("standard output cannot be written (%s); cancelling the request",
                    w < 0 ? strerror(errno) : "nothing written");
            start_cancel(c);
        }
    }
}

/* ---- reading the outbox ------------------------------------------------ */

/* Open dir/name as a record: a regular file (no symlink followed) of at
 * most LZ_MBX_MAX_RECORD + LZ_SIG_LEN bytes whose signature by the
 * coordinator for this generation is valid. Returns the payload length, 0
 * when the file does not exist (yet); any other problem ends the client. */
static size_t get_record(client *c, int dir, const char *name)
{
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        die(LZ_ESC_EXIT_FAILED, "cannot open %s/%s/%s: %s", LZ_MBX_GUEST_OUTBOX, c->id, name,
            strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        die(LZ_ESC_EXIT_FAILED, "%s/%s/%s is not a regular file", LZ_MBX_GUEST_OUTBOX, c->id, name);
    /* Read to the end (at most one byte over the bound), whatever fstat
     * said: the size is checked on what was read. */
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, in_record + len, sizeof(in_record) - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die(LZ_ESC_EXIT_FAILED, "cannot read %s/%s/%s: %s", LZ_MBX_GUEST_OUTBOX, c->id, name,
                strerror(errno));
        if (r == 0)
            break;
        len += (size_t) r;
        if (len == sizeof(in_record))
            break;
    }
    close(fd);
    if (len > LZ_MBX_MAX_RECORD + LZ_SIG_LEN || len <= LZ_SIG_LEN)
        die(LZ_ESC_EXIT_FAILED, "%s/%s/%s has an impossible size (%zu bytes)", LZ_MBX_GUEST_OUTBOX,
            c->id, name, len);
    size_t plen = len - LZ_SIG_LEN;
    if (!lz_sig_verify(c->coord, c->nonce, in_record, plen, in_record + plen))
        die(LZ_ESC_EXIT_FAILED,
            "%s/%s/%s is not signed by this session's Lazaret coordinator; ignoring the "
            "reply",
            LZ_MBX_GUEST_OUTBOX, c->id, name);
    return plen;
}

/* Consume chunk number c->consumed if it is there. true when it was. */
static bool take_chunk(client *c)
{
    char name[32];
    snprintf(name, sizeof(name), "chunk-%" PRIu32, c->consumed);
    size_t len = get_record(c, c->reply, name);
    if (len == 0)
        return false;
    lz_mbx_chunk ch;
    if (!lz_mbx_chunk_decode(in_record, len, &ch))
        die(LZ_ESC_EXIT_FAILED, "%s/%s/%s is not a valid chunk record", LZ_MBX_GUEST_OUTBOX, c->id,
            name);
    if (strcmp(ch.request_id, c->id) != 0 || ch.seq != c->consumed)
        die(LZ_ESC_EXIT_FAILED, "%s/%s/%s belongs to another request or place (seq %" PRIu32 ")",
            LZ_MBX_GUEST_OUTBOX, c->id, name, ch.seq);
    /* The decoder checked the stream: 1 or 2. */
    emit(c, (int) ch.stream, ch.data, ch.len);
    c->consumed++;
    if (c->consumed - c->acked >= ACK_EVERY)
        send_ack(c);
    return true;
}

/* Read the result if it is there. true when it was. */
static bool take_result(client *c, lz_mbx_result *res)
{
    size_t len = get_record(c, c->reply, "result");
    if (len == 0)
        return false;
    if (!lz_mbx_result_decode(in_record, len, res))
        die(LZ_ESC_EXIT_FAILED, "%s/%s/result is not a valid result record", LZ_MBX_GUEST_OUTBOX,
            c->id);
    if (strcmp(res->request_id, c->id) != 0)
        die(LZ_ESC_EXIT_FAILED, "%s/%s/result belongs to another request", LZ_MBX_GUEST_OUTBOX,
            c->id);
    if (res->n_chunks < c->consumed)
        die(LZ_ESC_EXIT_FAILED, "%s/%s/result counts %" PRIu32 " chunks, %" PRIu32 " were read",
            LZ_MBX_GUEST_OUTBOX, c->id, res->n_chunks, c->consumed);
    return true;
}

/* The exit for a result whose chunks were all consumed. */
static void __attribute__((noreturn)) finish(const lz_mbx_result *res)
{
    const char *what;
    int status;
    switch ((lz_mbx_outcome) res->outcome) {
    case LZ_MBX_COMPLETED:
        /* 128+N for a signal: N < 128, so at most 255 when the host is
         * sane; the codec admits up to 383, which no exit status can say. */
        if (res->status > 255)
            die(LZ_ESC_EXIT_FAILED,
                "the host command's status %" PRIu32 " cannot be an exit status", res->status);
        _exit((int) res->status);
    case LZ_MBX_DENIED:
        what = "denied";
        status = LZ_ESC_EXIT_DENIED;
        break;
    case LZ_MBX_TIMED_OUT:
        what = "timed out";
        status = LZ_ESC_EXIT_TIMED_OUT;
        break;
    case LZ_MBX_CANCELLED:
        what = "cancelled";
        status = LZ_ESC_EXIT_CANCELLED;
        break;
    case LZ_MBX_FAILED:
        what = "failed";
        status = LZ_ESC_EXIT_FAILED;
        break;
    default:
        what = "failed";
        status = LZ_ESC_EXIT_FAILED;
        break;
    }
    /* The message comes from the host but names things the sandbox chose
     * (paths, arguments): escaped, so that no control character, escape
     * sequence or bidi override reaches the terminal. */
    char *msg = lz_text_printable(res->message);
    if (msg[0])
        say("%s: %s", what, msg);
    else
        say("%s", what);
    _exit(status);
}

/* Sleep up to ns, waking early for a signal. */
static void nap(client *c, long ns)
{
    int64_t due = next_due_ms(c);
    if (due * 1000000 < ns)
        ns = (long) (due * 1000000);
    struct timespec t = { .tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L };
    struct pollfd pf = { .fd = c->sfd, .events = POLLIN };
    if (ppoll(&pf, 1, &t, NULL) < 0 && errno != EINTR)
        die(LZ_ESC_EXIT_FAILED, "ppoll: %s", strerror(errno));
}

/* From the request's rename until exit. */
static void __attribute__((noreturn)) wait_for_reply(client *c)
{
    lz_mbx_result res = { 0 };
    bool have_result = false;
    long backoff = POLL_MIN_NS;
    for (;;) {
        check_signals(c);
        keep_alive(c);
        bool progress = false;
        if (c->reply < 0) {
            c->reply = openat(c->outbox, c->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (c->reply >= 0) {
                progress = true;
            } else if (errno != ENOENT) {
                die(LZ_ESC_EXIT_FAILED, "cannot open %s/%s: %s", LZ_MBX_GUEST_OUTBOX, c->id,
                    strerror(errno));
            } else if (!c->cancelling && now_ms() - c->sent_at >= LZ_MBX_ACCEPT_WAIT_MS) {
                die(LZ_ESC_EXIT_FAILED,
                    "no answer from the Lazaret coordinator within %d s "
                    "(is the session still running?)",
                    LZ_MBX_ACCEPT_WAIT_MS / 1000);
            }
        }
        if (c->reply >= 0) {
            if (take_chunk(c)) {
                progress = true;
            } else if (have_result) {
                /* The result is renamed in after every chunk it counts. */
                if (c->consumed == res.n_chunks)
                    finish(&res);
                die(LZ_ESC_EXIT_FAILED,
                    "%s/%s/chunk-%" PRIu32 " is missing although the "
                    "result counts %" PRIu32 " chunks",
                    LZ_MBX_GUEST_OUTBOX, c->id, c->consumed, res.n_chunks);
            } else if (take_result(c, &res)) {
                if (c->consumed == res.n_chunks)
                    finish(&res);
                /* Look for chunks again first: they may have arrived
                 * between our look for the chunk and the result. */
                have_result = true;
                progress = true;
            }
        }
        if (progress) {
            backoff = POLL_MIN_NS;
            continue;
        }
        nap(c, backoff);
        backoff += backoff / 2;
        if (backoff > POLL_MAX_NS)
            backoff = POLL_MAX_NS;
    }
}

/* ---- setting up -------------------------------------------------------- */

/* Read credential file name of exactly len bytes from the credentials
 * directory. */
static void read_credential(int dir, const char *name, void *out, size_t len)
{
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        die(LZ_ESC_EXIT_NOT_SENT, "cannot open %s/%s: %s (not started by a Lazaret session?)",
            LZ_MBX_GUEST_CREDS, name, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        die(LZ_ESC_EXIT_NOT_SENT, "%s/%s is not a regular file", LZ_MBX_GUEST_CREDS, name);
    uint8_t buf[LZ_MBX_CRED_LEN + 2];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die(LZ_ESC_EXIT_NOT_SENT, "cannot read %s/%s: %s", LZ_MBX_GUEST_CREDS, name,
                strerror(errno));
        if (r == 0 || (got += (size_t) r) == sizeof(buf))
            break;
    }
    close(fd);
    if (got != len)
        die(LZ_ESC_EXIT_NOT_SENT, "%s/%s has %s%zu bytes, not %zu", LZ_MBX_GUEST_CREDS, name,
            got == sizeof(buf) ? "more than " : "", got == sizeof(buf) ? got - 1 : got, len);
    memcpy(out, buf, len);
    explicit_bzero(buf, sizeof(buf));
}

static void load_credentials(client *c)
{
    int dir = open(LZ_MBX_GUEST_CREDS, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        die(LZ_ESC_EXIT_NOT_SENT, "cannot open %s: %s (not started by a Lazaret session?)",
            LZ_MBX_GUEST_CREDS, strerror(errno));
    _Static_assert(LZ_SIG_KEY_LEN == 32 && LZ_SIG_NONCE_LEN == LZ_MBX_ID_LEN &&
                       LZ_MBX_CRED_LEN == 2 * LZ_SIG_KEY_LEN + LZ_SIG_NONCE_LEN,
                   "credential sizes");
    /* One file: seed || coordinator's public key || nonce (mailbox.h). */
    uint8_t cred[LZ_MBX_CRED_LEN];
    read_credential(dir, LZ_MBX_CRED_FILE, cred, sizeof(cred));
    memcpy(c->key, cred, LZ_SIG_KEY_LEN);
    memcpy(c->coord, cred + LZ_SIG_KEY_LEN, LZ_SIG_KEY_LEN);
    memcpy(c->nonce, cred + 2 * LZ_SIG_KEY_LEN, LZ_SIG_NONCE_LEN);
    explicit_bzero(cred, sizeof(cred));
    c->nonce[LZ_SIG_NONCE_LEN] = '\0';
    close(dir);
    /* The nonce has the form of an id: 32 lowercase hex digits. */
    if (!lz_mbx_id_ok(c->nonce))
        die(LZ_ESC_EXIT_NOT_SENT, "%s/%s: its generation nonce is not 32 lowercase hex digits",
            LZ_MBX_GUEST_CREDS, LZ_MBX_CRED_FILE);
}

/* 128 random bits as 32 lowercase hex digits: never reused, so the
 * coordinator can refuse a replayed request id. */
static void random_id(char out[LZ_MBX_ID_LEN + 1])
{
    uint8_t r[LZ_MBX_ID_LEN / 2];
    if (lz_random_bytes(r, sizeof(r)) < 0)
        die(LZ_ESC_EXIT_NOT_SENT, "getrandom: %s", strerror(errno));
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof(r); i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[LZ_MBX_ID_LEN] = '\0';
}

static void __attribute__((noreturn)) usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    die(LZ_ESC_EXIT_NOT_SENT,
        "%s\nUsage: " PROG " [--why TEXT] -- /ABSOLUTE/EXECUTABLE "
        "[ARG...] (see " PROG " --help)",
        msg);
}

int main(int argc, char **argv)
{
    /* Static libcrypto: no configuration file (OPENSSL_CONF is the
     * sandbox's to set, and a config could ask for providers that a static
     * binary cannot load). Only built-in Ed25519 is used. */
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);

    /* ---- the command line: nothing is touched before it is valid ---- */
    const char *why = "";
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage_text, stdout);
            return fflush(stdout) == 0 ? 0 : LZ_ESC_EXIT_NOT_SENT;
        }
        if (strcmp(a, "--why") == 0) {
            if (++i == argc)
                usage_error("--why needs a value");
            why = argv[i];
        } else if (strncmp(a, "--why=", 6) == 0) {
            why = a + 6;
        } else {
            char *shown = lz_text_printable(a);
            usage_error(a[0] == '-' ? "unknown option '%s'"
                                    : "'%s' before '--': the command follows '--'",
                        shown);
        }
    }
    if (i == argc)
        usage_error("missing '--' before the command");
    char **cmd = argv + i + 1;
    size_t n_cmd = (size_t) (argc - i - 1);
    if (n_cmd == 0)
        usage_error("no command after '--'");
    if (cmd[0][0] != '/') {
        char *shown = lz_text_printable(cmd[0]);
        die(LZ_ESC_EXIT_NOT_SENT,
            "CommandRequiresShell: '%s' is not an absolute path; " PROG
            " runs no shell and does no PATH lookup (name the program as /usr/bin/...)",
            shown);
    }

    client c = { .inbox = -1, .outbox = -1, .reply = -1, .sfd = -1 };
    const char *cap = getenv(LZ_MBX_CAPABILITY_ENV);
    if (!cap || !lz_mbx_id_ok(cap))
        die(LZ_ESC_EXIT_NOT_SENT,
            "not started by a Lazaret session (%s is %s); " PROG
            " works only in the command of a Lazaret session",
            LZ_MBX_CAPABILITY_ENV, cap ? "malformed" : "not set");
    memcpy(c.capability, cap, sizeof(c.capability));
    random_id(c.id);

    char cwd[LZ_MBX_MAX_CWD + 2];
    if (!getcwd(cwd, sizeof(cwd)))
        die(LZ_ESC_EXIT_NOT_SENT, "cannot determine the working directory: %s", strerror(errno));
    lz_mbx_request req = {
        .cwd = cwd,
        .argv = cmd,
        .argc = n_cmd,
        .why = (char *) why,
    };
    memcpy(req.capability, c.capability, sizeof(req.capability));
    memcpy(req.request_id, c.id, sizeof(req.request_id));
    const char *problem = lz_mbx_request_problem(&req);
    if (problem) {
        if (strstr(problem, "working directory"))
            die(LZ_ESC_EXIT_NOT_SENT, "cannot send the request: %s ('%s')", problem,
                lz_text_printable(cwd));
        die(LZ_ESC_EXIT_NOT_SENT, "cannot send the request: %s", problem);
    }

    /* ---- the mailbox ---- */
    load_credentials(&c);
    c.inbox = open(LZ_MBX_GUEST_INBOX, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    c.outbox = open(LZ_MBX_GUEST_OUTBOX, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c.inbox < 0 || c.outbox < 0)
        die(LZ_ESC_EXIT_NOT_SENT, "cannot open %s: %s",
            c.inbox < 0 ? LZ_MBX_GUEST_INBOX : LZ_MBX_GUEST_OUTBOX, strerror(errno));

    /* From here on a signal cancels rather than kills: blocked, read from
     * a signalfd in the wait loops. A write to a closed stdout reports
     * EPIPE instead of killing us before we could cancel (emit()). */
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
        (c.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
        die(LZ_ESC_EXIT_NOT_SENT, "signalfd: %s", strerror(errno));
    /* A signal that came while we set up: nothing was sent, nothing to
     * cancel. */
    struct signalfd_siginfo si;
    if (read(c.sfd, &si, sizeof(si)) == (ssize_t) sizeof(si))
        die(LZ_ESC_EXIT_CANCELLED, "cancelled (%s) before the request was sent",
            strsignal((int) si.ssi_signo));

    lz_mbx_request_encode(&wbuf, &req);
    char name[LZ_MBX_ID_LEN + 16];
    snprintf(name, sizeof(name), "%s.request", c.id);
    if (put_record(&c, &wbuf, name) < 0) {
        if (mailbox_full(errno))
            die(LZ_ESC_EXIT_NOT_SENT,
                MAILBOX_FULL_FMT "; the request was not sent (remove what "
                                 "is not a request from " LZ_MBX_GUEST_INBOX
                                 ", or wait, then ask again)",
                MAILBOX_FULL_ARGS);
        die(LZ_ESC_EXIT_NOT_SENT, "cannot write the request to %s: %s", LZ_MBX_GUEST_INBOX,
            strerror(errno));
    }
    c.sent_at = c.last_ack_ok = now_ms();
    c.next_heartbeat = c.sent_at + LZ_MBX_HEARTBEAT_MS;
    wait_for_reply(&c);
}
