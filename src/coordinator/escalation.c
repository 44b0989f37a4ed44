/* SPDX-License-Identifier: Apache-2.0
 *
 * Host escalation: the mailbox, the decision, the prompt's routing, the
 * execution and the outcome (escalation.h; docs/escalation.md).
 *
 * A request's life: accepted (its outbox directory is created: the client
 * sees it was taken) → decided (Denied at once; a rule; or a prompt in the
 * owning session, queued one visible per terminal) → waiting for a run slot
 * → running (its own session and process group, output streamed as signed
 * chunk files) → ended: exactly one RESULT, one log line, one Domain Store
 * outcome. The structure is kept afterwards only until the client has taken
 * the result (its last ACK, or its silence), so that its outbox directory
 * can go.
 */
#include "coordinator/escalation.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "common/spawn.h"
#include "common/syscalls.h"
#include "common/text.h"
#include "common/util.h"
#include "coordinator/approval.h"
#include "coordinator/freezer.h"
#include "coordinator/git_audit.h"
#include "coordinator/keeper.h"
#include "coordinator/log.h"
#include "coordinator/prompt.h"
#include "coordinator/relay.h"
#include "coordinator/session.h"
#include "coordinator/status.h"
#include "fs/confined.h"
#include "fs/executable.h"
#include "fs/remove.h"
#include "protocol/io.h"
#include "protocol/mailbox.h"
#include "trust/signature.h"

typedef enum esc_phase {
    E_NEW,           /* accepted, not decided yet */
    E_PROMPT_QUEUED, /* waits for its session's terminal */
    E_PROMPTING,     /* its prompt is on the terminal */
    E_WAIT_RUN,      /* approved; waits for a run slot */
    E_RUNNING,       /* the host command runs */
    E_DONE,          /* the outcome is written; the client may still read */
} esc_phase;

typedef struct escalation {
    struct escalation *next;
    coord *c;
    session *s;              /* NULL once its session is gone */
    char session_id[33];
    lz_mbx_request req;
    esc_phase phase;
    bool open_counted;       /* counted in s->esc_open */
    bool prompt_counted;     /* counted in s->esc_prompts */
    bool recorded;           /* its Domain Store row exists */
    char *decision;          /* the rule or the developer, for the records */
    /* The executable: the rule's plan, or one made for this request. */
    const lz_path_plan *plan;
    lz_path_plan own_plan;
    lz_identity approved;    /* the object the decision is bound to */
    lz_identity cwd_id;      /* the host working directory it was decided for */
    bool have_approved;
    uint32_t prompt_no;
    bool unbound;            /* counted in unbound: no session holds it */
    bool has_dir;            /* outbox/<id> exists (opened by name per write: a
                              * request holds no descriptor while it waits) */
    /* Running. */
    lz_child child;
    lz_loop_source *child_src;
    int out[2];              /* read ends of stdout, stderr; -1 at EOF */
    lz_loop_source *out_src[2];
    bool main_exited;
    int status;
    uint64_t out_total;
    uint32_t seq, acked;
    lz_loop_source *timer;   /* prompt timeout, drain limit */
    lz_loop_source *life;    /* the client's heartbeat check, every second */
    int64_t last_heard_ms;
    bool froze;              /* holds the sandbox frozen while its command runs */
} escalation;

typedef struct esc_state {
    /* O_RDONLY directories. The inbox and junk/ are on the inbox's bounded
     * tmpfs, which only the supervisor's mount namespace has: -1 until its
     * SUP_MAILBOX (escalation_attach_inbox). */
    int inbox_fd, outbox_fd;
    int inotify_fd;
    int junk_fd;             /* junk/ beside the inbox: what left the inbox */
    unsigned junk_serial;
    bool junk_left;          /* junk/ may hold something: sweep it */
    bool full_logged;        /* "the inbox is full" said for this filling */
    lz_loop_source *inbox_src;
    lz_loop_source *rescan;
    lz_loop_source *sweep;   /* junk_sweep again soon */
    lz_loop_source *publish;  /* status.json due (esc_publish) */
    uint8_t coord_seed[LZ_SIG_KEY_LEN];
    uint8_t sandbox_pub[LZ_SIG_KEY_LEN];
    char nonce[LZ_SIG_NONCE_LEN + 1];
    escalation *head;
    unsigned running;
    uint32_t next_prompt_no;
    int64_t prompt_timeout_ms;
    char **seen;             /* accepted request ids, sorted */
    size_t n_seen;
    char *home;              /* the user's home, for the commands' HOME */
    unsigned long long refusals; /* records refused in this generation */
    unsigned unbound;        /* requests alive that no session holds */
} esc_state;

static void esc_finish(escalation *e, lz_mbx_outcome outcome, int status, const char *message);
static void esc_publish(coord *c);
static void show_next_prompt(coord *c, session *s);
static void try_run_waiting(coord *c);

static const char *outcome_name(lz_mbx_outcome o)
{
    switch (o) {
    case LZ_MBX_COMPLETED: return "Completed";
    case LZ_MBX_DENIED: return "Denied";
    case LZ_MBX_TIMED_OUT: return "TimedOut";
    case LZ_MBX_CANCELLED: return "Cancelled";
    case LZ_MBX_FAILED: return "Failed";
    default: return "Failed";
    }
}

static void hex(char *out, const uint8_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", in[i]);
}

/* ---- preparing the mailbox --------------------------------------------- */

static int write_cred(int dir, const char *name, const void *data, size_t n, lz_error **err)
{
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot create the escalation credential %s", name);
    int r = lz_write_all(fd, data, n);
    close(fd);
    return r < 0 ? lz_error_set(err, errno, "cannot write the escalation credential %s", name)
                 : 0;
}

static void on_inbox(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data);

int escalation_prepare(coord *c, int gen_fd, lz_error **err)
{
    esc_state *st = lz_xcalloc(1, sizeof(*st));
    st->inbox_fd = st->outbox_fd = st->inotify_fd = st->junk_fd = -1;
    c->esc = st;
    const char *t = getenv("LAZARET_ESCALATION_TIMEOUT");
    long secs = t ? strtol(t, NULL, 10) : 0;
    st->prompt_timeout_ms = secs > 0 && secs <= 24 * 3600 ? secs * 1000
                                                          : ESC_PROMPT_TIMEOUT_MS_DEFAULT;
    /* Descriptors: each running host command holds three, each session
     * a few; raise the soft limit to the hard one so that a busy Domain
     * does not meet the usual 1024 (the limit still binds). */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        lz_best_effort(setrlimit(RLIMIT_NOFILE, &nofile));
    }
    struct passwd *pw = getpwuid(getuid());
    st->home = lz_xstrdup(pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : "/");

    /* The inbox is not made here: it is a tmpfs bounded in bytes and
     * entries that the supervisor mounts on the empty mailbox/spool in its
     * own mount namespace and hands over (escalation_attach_inbox); a
     * directory here, in $XDG_RUNTIME_DIR (RAM), would hold whatever the
     * sandbox wrote. The outbox and the credentials are read-only binds. */
    if (mkdirat(gen_fd, "mailbox", 0755) < 0 || mkdirat(gen_fd, LZ_MBX_HOST_SPOOL, 0700) < 0 ||
        mkdirat(gen_fd, "mailbox/outbox", 0755) < 0 || mkdirat(gen_fd, "credentials", 0755) < 0)
        return lz_error_set(err, errno, "cannot create the escalation mailbox in %s",
                            c->gen_label);
    st->outbox_fd = openat(gen_fd, "mailbox/outbox", O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                                         O_CLOEXEC);
    if (st->outbox_fd < 0)
        return lz_error_set(err, errno, "cannot open the escalation mailbox in %s",
                            c->gen_label);

    /* This generation's keys: the coordinator signs the outbox, the sandbox
     * the inbox; the nonce makes a record of another generation fail. */
    uint8_t coord_pub[LZ_SIG_KEY_LEN], sandbox_seed[LZ_SIG_KEY_LEN];
    if (lz_sig_keygen(st->coord_seed, coord_pub) < 0 ||
        lz_sig_keygen(sandbox_seed, st->sandbox_pub) < 0)
        return lz_error_set(err, errno ? errno : EIO, "cannot create the escalation keys");
    /* The generation's nonce (generation_begin), which its Trust Anchor's
     * certificates carry too. */
    _Static_assert(LZ_SIG_NONCE_LEN == LZ_TRUST_NONCE_LEN, "one nonce per generation");
    memcpy(st->nonce, c->nonce, sizeof(st->nonce));
    _cleanup_close_ int creds = openat(gen_fd, "credentials", O_PATH | O_DIRECTORY |
                                                                  O_NOFOLLOW | O_CLOEXEC);
    /* One file for the client (mailbox.h): seed, coordinator's key, nonce. */
    _Static_assert(LZ_MBX_CRED_LEN == 2 * LZ_SIG_KEY_LEN + LZ_SIG_NONCE_LEN, "credential size");
    uint8_t cred[LZ_MBX_CRED_LEN];
    memcpy(cred, sandbox_seed, LZ_SIG_KEY_LEN);
    memcpy(cred + LZ_SIG_KEY_LEN, coord_pub, LZ_SIG_KEY_LEN);
    memcpy(cred + 2 * LZ_SIG_KEY_LEN, st->nonce, LZ_SIG_NONCE_LEN);
    explicit_bzero(sandbox_seed, sizeof(sandbox_seed));
    int r = creds < 0 ? lz_error_set(err, errno, "cannot open %s/credentials", c->gen_label)
                      : write_cred(creds, LZ_MBX_CRED_FILE, cred, sizeof(cred), err);
    explicit_bzero(cred, sizeof(cred));
    return r;
}

int escalation_attach_inbox(coord *c, int root, lz_error **err)
{
    esc_state *st = c->esc;
    if (!st) { /* no mailbox was prepared (the dispatch fuzzer's coordinator) */
        close(root);
        return 0;
    }
    /* The bound is the supervisor's mount; checked here again, so that an
     * inbox without it is never served (and a second one never replaces
     * the first). */
    struct stat sb;
    struct statfs sf;
    bool bounded = fstat(root, &sb) == 0 && S_ISDIR(sb.st_mode) && fstatfs(root, &sf) == 0 &&
                   sf.f_type == TMPFS_MAGIC && sf.f_blocks > 0 &&
                   (uint64_t) sf.f_blocks * (uint64_t) sf.f_bsize <= LZ_MBX_INBOX_MAX_BYTES &&
                   sf.f_files > 0 && sf.f_files <= LZ_MBX_INBOX_MAX_ENTRIES;
    if (st->inbox_fd >= 0 || !bounded) {
        close(root);
        if (st->inbox_fd >= 0)
            lz_error_set(err, 0, "the Runtime Supervisor handed over a second escalation inbox");
        else
            lz_error_set(err, 0, "the escalation inbox the Runtime Supervisor handed over is not "
                         "a tmpfs of at most %u bytes and %u entries",
                         LZ_MBX_INBOX_MAX_BYTES, LZ_MBX_INBOX_MAX_ENTRIES);
        return lz_error_hint(err, "this is a bug of Lazaret: report it with 'lazaret version'");
    }
    st->inbox_fd = lz_open_confined(root, LZ_MBX_SPOOL_INBOX, O_RDONLY | O_DIRECTORY, 0,
                                    "the escalation inbox", err);
    st->junk_fd = st->inbox_fd < 0 ? -1
                                   : lz_open_confined(root, LZ_MBX_SPOOL_JUNK,
                                                      O_RDONLY | O_DIRECTORY, 0,
                                                      "the escalation inbox's junk/", err);
    close(root);
    if (st->junk_fd < 0)
        return -1;
    /* Every kind of entry and every write prompts a scan, so that a full
     * inbox is seen and said whatever filled it: IN_CREATE (a directory or
     * symlink is never written), IN_MODIFY (the gofer keeps its host file
     * open after the sandbox's close, so IN_CLOSE_WRITE may never come).
     * Queued events are read together and followed by one scan, which is
     * bounded work. */
    st->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", st->inbox_fd);
    if (st->inotify_fd < 0 ||
        inotify_add_watch(st->inotify_fd, path,
                          IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_MODIFY |
                              IN_ONLYDIR) < 0)
        return lz_error_set(err, errno, "cannot watch the escalation inbox of %s", c->gen_label);
    st->inbox_src = lz_loop_add_fd(c->loop, st->inotify_fd, POLLIN, on_inbox, c);
    return 0;
}

bool escalation_inbox_attached(const coord *c)
{
    return !c->esc || c->esc->inbox_fd >= 0;
}

char *escalation_session_env(coord *c, session *s)
{
    (void) c;
    uint8_t cap[16];
    if (lz_random_bytes(cap, sizeof(cap)) < 0)
        return NULL;
    hex(s->capability, cap, sizeof(cap));
    return lz_xasprintf("%s=%s", LZ_MBX_CAPABILITY_ENV, s->capability);
}

/* ---- the outbox --------------------------------------------------------- */

/* Write one signed record as outbox/<id>/<name>, whole, by rename. */
static int outbox_write(escalation *e, const char *name, const lz_wbuf *b)
{
    esc_state *st = e->c->esc;
    uint8_t sig[LZ_SIG_LEN];
    if (!e->has_dir || lz_sig_sign(st->coord_seed, st->nonce, b->data, b->len, sig) < 0)
        return -1;
    /* The outbox is read-only inside: its entries are the coordinator's. */
    _cleanup_close_ int dir = openat(st->outbox_fd, e->req.request_id,
                                     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return -1;
    char tmp[64];
    snprintf(tmp, sizeof(tmp), ".%s", name);
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (fd < 0)
        return -1;
    bool ok = lz_write_all(fd, b->data, b->len) >= 0 && lz_write_all(fd, sig, sizeof(sig)) >= 0;
    close(fd);
    if (!ok || renameat(dir, tmp, dir, name) < 0) {
        unlinkat(dir, tmp, 0);
        return -1;
    }
    return 0;
}

static void write_result(escalation *e, lz_mbx_outcome outcome, int status, const char *message)
{
    lz_mbx_result r = { .outcome = (uint32_t) outcome,
                        .status = outcome == LZ_MBX_COMPLETED ? (uint32_t) status : 0,
                        .n_chunks = e->seq, .message = (char *) message };
    memcpy(r.request_id, e->req.request_id, sizeof(r.request_id));
    lz_wbuf b;
    lz_mbx_result_encode(&b, &r);
    if (outbox_write(e, "result", &b) < 0)
        clog_(e->c, "escalation %.8s: cannot write its result: %s", e->req.request_id,
              strerror(errno));
}

/* ---- records ------------------------------------------------------------ */

/* A refused record: the sandbox can send them as fast as it can write
 * files, so the log gets the first REFUSALS_LOGGED of a generation and
 * then one line per REFUSALS_EVERY (with the count): the log stays small
 * whatever the sandbox does (attack round i11b, B4). */
#define REFUSALS_LOGGED 100
#define REFUSALS_EVERY 1000

__attribute__((format(printf, 2, 3)))
static void refusal(coord *c, const char *fmt, ...)
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

/* What the records keep of an argv: JSON, cut (visibly) after
 * RECORD_ARGV_MAX bytes, so a row or a log line is bounded whatever the
 * request holds (the whole request is at most 64 KiB, but escaped it could
 * be six times that). */
#define RECORD_ARGV_MAX 8192
#define LOG_ARGV_MAX 1024

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
static void record_begin(escalation *e, const char *decision)
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
    clog_(c, "escalation %s: requested by session %s: %s", e->req.request_id, e->session_id,
          safe);
    free(safe);
    free(argv);
}

/* ---- the requests' list ------------------------------------------------- */

static escalation *find(coord *c, const char *id)
{
    for (escalation *e = c->esc->head; e; e = e->next)
        if (strcmp(e->req.request_id, id) == 0)
            return e;
    return NULL;
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

enum { REMEMBERED, SEEN_BEFORE, GENERATION_FULL, UNBOUND_FULL };

/* Remember id, unless it was seen before (a replay), the generation has
 * taken its limit, or (unbound: no session holds the request) too many
 * such requests are alive: each costs a directory and a timer until its
 * client has read the refusal (attack round i11b, B19). */
static int remember(esc_state *st, const char *id, bool unbound)
{
    const char *key = id;
    if (st->n_seen && bsearch(&key, st->seen, st->n_seen, sizeof(char *), cmp_id))
        return SEEN_BEFORE;
    if (st->n_seen >= ESC_MAX_PER_GENERATION)
        return GENERATION_FULL;
    if (unbound && st->unbound >= ESC_MAX_UNBOUND)
        return UNBOUND_FULL;
    size_t at = 0;
    while (at < st->n_seen && strcmp(st->seen[at], id) < 0) /* keeps the array sorted */
        at++;
    st->seen = lz_xrealloc(st->seen, st->n_seen + 1, sizeof(char *));
    memmove(st->seen + at + 1, st->seen + at, (st->n_seen - at) * sizeof(char *));
    st->seen[at] = lz_xstrdup(id);
    st->n_seen++;
    return REMEMBERED;
}

static void esc_free(escalation *e)
{
    esc_state *st = e->c->esc;
    if (e->unbound)
        st->unbound--;
    for (escalation **p = &st->head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    lz_loop_remove(e->timer);
    lz_loop_remove(e->life);
    lz_loop_remove(e->child_src);
    for (int i = 0; i < 2; i++) {
        lz_loop_remove(e->out_src[i]);
        if (e->out[i] >= 0)
            close(e->out[i]);
    }
    if (e->child.pid > 0)
        lz_child_release(&e->child);
    if (e->has_dir) {
        lz_best_effort(lz_remove_tree_at(st->outbox_fd, e->req.request_id, "outbox", NULL));
    }
    lz_plan_clear(&e->own_plan);
    lz_mbx_request_clear(&e->req);
    free(e->decision);
    free(e);
}

/* ---- ending ------------------------------------------------------------- */

static void on_publish(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    coord *c = data;
    c->esc->publish = NULL;
    if (c->state != G_TEARDOWN)
        publish_status(c);
}

/* status.json lists pending requests; rewriting it is a file creation and
 * a rename, so a burst of requests rewrites it once per 100 ms, not twice
 * per request. */
static void esc_publish(coord *c)
{
    if (c->esc && !c->esc->publish && c->state != G_TEARDOWN)
        c->esc->publish = lz_loop_add_timer(c->loop, 100, on_publish, c);
}

/* End the host command and everything it started: its keeper (below)
 * kills the command's process group and every descendant, then exits. */
static void kill_group(escalation *e)
{
    if (e->child.pid > 0)
        lz_best_effort(syscall(SYS_pidfd_send_signal, e->child.pidfd, SIGTERM, NULL, 0) == 0 ? 0
                                                                                          : -1);
}

/* The request is no prompt any more (decided, or ending): its session's
 * count drops, and a visible prompt leaves its terminal (the output held
 * back meanwhile flows again). */
static void leave_prompt(escalation *e)
{
    session *s = e->s;
    if (s && e->prompt_counted)
        s->esc_prompts--;
    e->prompt_counted = false;
    if (s && e->phase == E_PROMPTING) {
        s->prompt_visible = false;
        relay_update_events(s);
    }
}

static void esc_finish(escalation *e, lz_mbx_outcome outcome, int status, const char *message)
{
    coord *c = e->c;
    if (e->phase == E_DONE)
        return;
    bool was_visible = e->phase == E_PROMPTING;
    bool was_running = e->phase == E_RUNNING;
    if (was_running)
        kill_group(e);
    if (e->froze) {
        e->froze = false;
        lz_freezer_release(c->freezer);
        /* No client could speak while the sandbox was frozen: silence
         * counts from now (on_life). */
        for (escalation *x = c->esc->head; x; x = x->next)
            x->last_heard_ms = lz_loop_now_ms();
    }
    session *s = e->s;
    leave_prompt(e);
    if (s && e->open_counted)
        s->esc_open--;
    e->open_counted = false;
    e->phase = E_DONE;
    lz_loop_remove(e->timer);
    e->timer = NULL;
    for (int i = 0; i < 2; i++) {
        lz_loop_remove(e->out_src[i]);
        e->out_src[i] = NULL;
        if (e->out[i] >= 0)
            close(e->out[i]);
        e->out[i] = -1;
    }
    write_result(e, outcome, status, message);
    record_begin(e, NULL);
    lz_error *err = NULL;
    if (lz_store_escalation_end(c->a->store, c->generation, e->req.request_id,
                                outcome_name(outcome), e->decision, status, message, &err) < 0) {
        log_error(c, "cannot record an escalation outcome", err);
        lz_error_free(err);
    }
    char *safe = lz_text_printable(message);
    clog_(c, "escalation %s: %s%s%s (status %d; %s)", e->req.request_id, outcome_name(outcome),
          *safe ? ": " : "", safe, status, e->decision ? e->decision : "not decided");
    free(safe);
    if (s && was_visible && s->state == S_RUNNING) {
        if (s->sock >= 0) {
            lz_wbuf b;
            lz_msg_prompt_encode(&b, LZ_MSG_PROMPT_CLOSED, e->prompt_no, message);
            session_send(c, s, &b);
        }
        show_next_prompt(c, s);
    }
    if (was_running) {
        c->esc->running--;
        try_run_waiting(c);
    }
    esc_publish(c);
}

/* ---- running ------------------------------------------------------------ */

static void on_output(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data);

static void update_flow(escalation *e)
{
    bool full = e->seq - e->acked >= LZ_MBX_MAX_UNACKED;
    for (int i = 0; i < 2; i++)
        if (e->out_src[i])
            lz_loop_set_paused(e->out_src[i], full);
}

static void complete_if_done(escalation *e)
{
    if (e->phase == E_RUNNING && e->main_exited && e->out[0] < 0 && e->out[1] < 0)
        esc_finish(e, LZ_MBX_COMPLETED, e->status, "");
}

static void pipe_closed(escalation *e, int i)
{
    lz_loop_remove(e->out_src[i]);
    e->out_src[i] = NULL;
    close(e->out[i]);
    e->out[i] = -1;
    complete_if_done(e);
}

static void on_output(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) revents;
    escalation *e = data;
    int i = src == e->out_src[0] ? 0 : 1;
    uint8_t buf[LZ_MBX_MAX_CHUNK];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        pipe_closed(e, i);
        return;
    }
    e->out_total += (uint64_t) n;
    if (e->out_total > ESC_OUTPUT_MAX) {
        esc_finish(e, LZ_MBX_FAILED, -1, "the command wrote more than 64 MiB of output: killed");
        return;
    }
    lz_mbx_chunk ch = { .seq = e->seq, .stream = i == 0 ? LZ_MBX_STDOUT : LZ_MBX_STDERR,
                        .data = buf, .len = (size_t) n };
    memcpy(ch.request_id, e->req.request_id, sizeof(ch.request_id));
    lz_wbuf b;
    lz_mbx_chunk_encode(&b, &ch);
    char name[32];
    snprintf(name, sizeof(name), "chunk-%u", e->seq);
    if (outbox_write(e, name, &b) < 0) {
        esc_finish(e, LZ_MBX_FAILED, -1, "cannot write the command's output to the mailbox");
        return;
    }
    e->seq++;
    update_flow(e);
}

static void on_drain_over(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    escalation *e = data;
    e->timer = NULL;
    /* Something outside the process group holds the pipes open: the
     * command itself has ended, its output so far is what it gave. */
    for (int i = 0; i < 2; i++)
        if (e->out[i] >= 0)
            pipe_closed(e, i);
}

static void on_child(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) fd, (void) revents;
    escalation *e = data;
    /* The keeper ended: it killed the command's group and every
     * descendant before it did, so nothing of the command runs on. */
    lz_error *err = NULL;
    int status = lz_child_wait(&e->child, 0, &err);
    lz_error_free(err);
    lz_loop_remove(e->child_src);
    e->child_src = NULL;
    if (e->phase != E_RUNNING)
        return; /* ended meanwhile (cancelled): reaped now, freed by on_life */
    e->main_exited = true;
    e->status = status < 0 ? 255 : status;
    if (e->out[0] >= 0 || e->out[1] >= 0)
        e->timer = lz_loop_add_timer(e->c->loop, ESC_DRAIN_MS, on_drain_over, e);
    complete_if_done(e);
}

/* The host directory for the request's working directory: the same place
 * in the workspace when it lies there (a plain directory, reached without
 * a symlink), else the workspace root. expect: the identity it had when
 * the request was decided; another object now (the sandbox swapped the
 * directory, attack round i11d, D1: a command approved for
 * /workspace/scratch ran in the workspace root and copied the host's
 * git-ignored .env) fails. *ret_id: its identity. -1 with *err. */
static int open_cwd(coord *c, const char *cwd, const lz_identity *expect, lz_identity *ret_id,
                    lz_error **err)
{
    int ws = lz_plan_open(&c->a->cfg->workspace, O_PATH | O_DIRECTORY, true, err);
    if (ws < 0)
        return -1;
    const char *rel = strncmp(cwd, "/workspace/", 11) == 0 ? cwd + 11 : NULL;
    int d = ws;
    if (rel && *rel) {
        d = lz_open_confined(ws, rel, O_PATH | O_DIRECTORY, 0, "working directory", err);
        close(ws);
        if (d < 0)
            return lz_error_prefix(err, "the working directory %s is not a plain directory of "
                                        "the workspace on this machine", cwd);
    }
    lz_identity id;
    if (lz_identity_of(d, &id, err) < 0) {
        close(d);
        return -1;
    }
    if (expect && (id.dev != expect->dev || id.ino != expect->ino)) {
        close(d);
        return lz_error_set(err, ESTALE, "the working directory %s is another directory than "
                                         "when the request was decided", cwd);
    }
    if (ret_id)
        *ret_id = id;
    return d;
}

/* Where the sandbox can write on the host: a program there is refused
 * whatever the decision (attack round i11, A5: an approved workspace script
 * was rewritten in place after the check, and its interpreter read the new
 * text). Its workspace, its read-write volumes, and the storage and runtime
 * trees (state uppers, ignored copies, the mailbox). A file elsewhere with
 * one hard link is out of the sandbox's reach: its mounts are the only way
 * it writes, and a rename cannot leave a mount. NULL or what it is. */
static const char *sandbox_writable(const lz_resolved_config *cfg, const char *label)
{
    if (cfg->workspace.label && lz_path_overlaps(label, cfg->workspace.label))
        return "the workspace";
    for (size_t i = 0; i < cfg->n_volumes; i++)
        if (cfg->volumes[i].access == LZ_ACCESS_READ_WRITE && cfg->volumes[i].source.label &&
            lz_path_overlaps(label, cfg->volumes[i].source.label))
            return "a read-write volume";
    if (cfg->storage_root.label && lz_path_overlaps(label, cfg->storage_root.label))
        return "Lazaret's storage (the sandboxes' state)";
    if (cfg->runtime_root.label && lz_path_overlaps(label, cfg->runtime_root.label))
        return "Lazaret's runtime directory";
    return NULL;
}

/* Is the object open at fd a "#!" script? Its interpreter needs the
 * descriptor after the exec (spawn.h, exec_fd_keep). */
static bool is_script(int fd)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int r = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (r < 0)
        return false;
    char head[2] = { 0 };
    bool script = read(r, head, 2) == 2 && head[0] == '#' && head[1] == '!';
    close(r);
    return script;
}

/* What a keeper's copy of the coordinator's memory must not keep: the
 * outbox signing seed and the profile's environment values. */
static void wipe_for_keeper(void *arg)
{
    coord *c = arg;
    explicit_bzero(c->esc->coord_seed, sizeof(c->esc->coord_seed));
    lz_resolved_config *cfg = (lz_resolved_config *) c->a->cfg;
    for (size_t i = 0; i < cfg->n_env; i++)
        if (cfg->env[i].value)
            explicit_bzero(cfg->env[i].value, strlen(cfg->env[i].value));
}

/* Is this name Git (git, or one of its git-* programs)? */
static bool names_git(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strcmp(base, "git") == 0 || strncmp(base, "git-", 4) == 0;
}

/* Does the request run Git: the executable Lazaret runs (its canonical
 * path), or a wrapper that runs it (`env git status`, `timeout 60 git
 * fetch`, `nice git …`: any argument that names Git; attack round i23b ran
 * `/usr/bin/env git status`)? A program that runs Git on its own (`make`,
 * `gh`) cannot be told; docs/escalation.md says what holds for it. */
static bool runs_git(const escalation *e)
{
    if (names_git(e->plan->label))
        return true;
    for (size_t i = 0; i < e->req.argc; i++)
        if (names_git(e->req.argv[i]))
            return true;
    return false;
}

void escalation_session_interrupt(coord *c, session *s)
{
    if (!c->esc)
        return;
    for (escalation *e = c->esc->head; e; e = e->next)
        if (e->s == s && e->froze && e->phase == E_RUNNING)
            esc_finish(e, LZ_MBX_CANCELLED, -1,
                       "cancelled by Ctrl-C in its terminal (the sandbox, and the client with it, "
                       "was paused while host Git ran)");
}

static void esc_run(escalation *e)
{
    coord *c = e->c;
    esc_state *st = c->esc;
    lz_error *err = NULL;
    /* Immediately before running: the executable again, through its plan,
     * rechecked; and the same object the decision was about. */
    const char *where = sandbox_writable(c->a->cfg, e->plan->label);
    if (where) {
        char *msg = lz_xasprintf("%s lies in %s, which the sandbox can change: Lazaret does "
                                 "not run programs from there", e->plan->label, where);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    lz_identity now;
    _cleanup_close_ int exe = lz_executable_pin(e->plan, &now, &err);
    if (exe < 0) {
        char *msg = lz_xasprintf("cannot run %s: %s", e->plan->label, err->message);
        lz_error_free(err);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    if (e->have_approved &&
        (!lz_identity_same_object(&now, &e->approved) || now.size != e->approved.size ||
         now.ctime.tv_sec != e->approved.ctime.tv_sec ||
         now.ctime.tv_nsec != e->approved.ctime.tv_nsec)) {
        char *msg = lz_xasprintf("%s changed after it was approved: nothing ran",
                                 e->plan->label);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    /* The sandbox chooses the moment a host command starts: whatever it
     * changed in the workspace until now is audited first (the Git
     * Sentry's pending events, synchronously), so that an approved host
     * git never reads a configuration the sandbox made before it asked
     * (attack round i11, A1: the inbox's work had been ordered before the
     * Sentry's in one loop round). An audit that cannot neutralise
     * something stops the Domain and does not return. */
    /* And a host Git runs with the sandbox frozen from here until it has
     * ended (coordinator/freezer.h): with the audit current and nothing of
     * the sandbox's running, Git — recursing into submodules, running
     * filters, reading any repository's configuration — can meet nothing
     * the sandbox makes meanwhile (attack round i23: a submodule's gitdir
     * file re-created during a rename storm). Other programs run with the
     * sandbox running, so that their output streams and the client can
     * cancel them; the audit keeps within its lag bound of the sandbox
     * then (docs/escalation.md "What the sandbox can change while a host
     * command runs"). Released in esc_finish, after the process group was
     * killed. */
    if (!e->froze && runs_git(e)) {
        lz_freezer_hold(c->freezer);
        e->froze = true;
    }
    git_audit(c, "a host command starts", false);
    /* Not from inside a Git directory (attack round i11b, B2: a bare
     * repository the sandbox built in .git/objects/…, its HEAD written just
     * after the audit, was used by an auto-approved host git). */
    if (strstr(e->req.cwd, "/.git/") || (strlen(e->req.cwd) >= 5 &&
                                         strcmp(e->req.cwd + strlen(e->req.cwd) - 5, "/.git") == 0)) {
        esc_finish(e, LZ_MBX_FAILED, -1,
                   "the working directory lies inside a Git directory: Lazaret does not run host "
                   "commands there");
        return;
    }
    _cleanup_close_ int cwd = open_cwd(c, e->req.cwd, &e->cwd_id, NULL, &err);
    if (cwd < 0) {
        char *msg = lz_xasprintf("%s: nothing ran", err->message);
        lz_error_free(err);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0)
                close(po[i]);
        }
        esc_finish(e, LZ_MBX_FAILED, -1, "cannot create pipes for the command's output");
        return;
    }
    /* A fixed, minimal environment: nothing of the sandbox's or of the
     * coordinator's own (no LD_*, GIT_*, PAGER, BASH_ENV, ...). */
    struct passwd *pw = getpwuid(getuid());
    char *env_home = lz_xasprintf("HOME=%s", st->home);
    char *env_user = lz_xasprintf("USER=%s", pw && pw->pw_name ? pw->pw_name : "");
    char *env_logname = lz_xasprintf("LOGNAME=%s", pw && pw->pw_name ? pw->pw_name : "");
    /* Git: a host git (or a program that runs one, such as gh) uses the
     * workspace's validated repository and discovers none: a repository
     * the sandbox makes under the working directory — after any audit, at a
     * moment it chooses (i11b, B2) — is never read. Without a .git
     * directory in the workspace, no repository at all. Bare-repository
     * discovery and fsmonitor are off in any case. */
    const char *ws = c->a->cfg->workspace.label;
    struct stat gsb;
    bool has_git = c->git.ws_fd >= 0 &&
                   fstatat(c->git.ws_fd, ".git", &gsb, AT_SYMLINK_NOFOLLOW) == 0 &&
                   S_ISDIR(gsb.st_mode);
    char *env_gitdir = has_git ? lz_xasprintf("GIT_DIR=%s/.git", ws)
                               : lz_xstrdup("GIT_DIR=/nonexistent/lazaret-no-repository");
    char *env_worktree = lz_xasprintf("GIT_WORK_TREE=%s", ws);
    char *envp[] = { (char *) "PATH=/usr/local/bin:/usr/bin:/bin", env_home, env_user,
                     env_logname, (char *) "LANG=C.UTF-8", (char *) "TERM=dumb", env_gitdir,
                     env_worktree, (char *) "GIT_CONFIG_COUNT=2",
                     (char *) "GIT_CONFIG_KEY_0=safe.bareRepository",
                     (char *) "GIT_CONFIG_VALUE_0=explicit",
                     (char *) "GIT_CONFIG_KEY_1=core.fsmonitor",
                     (char *) "GIT_CONFIG_VALUE_1=false", NULL };
    lz_spawn_fd fds[] = { { po[1], 1 }, { pe[1], 2 } };
    lz_spawn_async opt = { .envp = envp, .fds = fds, .n_fds = 2, .new_session = true,
                           .exec_from_fd = true, .exec_fd = exe,
                           .exec_fd_keep = is_script(exe), .chdir_to_fd = true,
                           .cwd_fd = cwd };
    int r = keeper_start(e->plan->label, e->req.argv, &opt, wipe_for_keeper, c, &e->child, &err);
    free(env_home);
    free(env_user);
    free(env_logname);
    free(env_gitdir);
    free(env_worktree);
    close(po[1]);
    close(pe[1]);
    if (r < 0) {
        close(po[0]);
        close(pe[0]);
        char *msg = lz_xasprintf("%s", err->message);
        lz_error_free(err);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    e->phase = E_RUNNING;
    st->running++;
    e->out[0] = po[0];
    e->out[1] = pe[0];
    for (int i = 0; i < 2; i++) {
        fcntl(e->out[i], F_SETFL, O_NONBLOCK);
        e->out_src[i] = lz_loop_add_fd(c->loop, e->out[i], POLLIN, on_output, e);
    }
    e->child_src = lz_loop_add_fd(c->loop, e->child.pidfd, POLLIN, on_child, e);
    if (!e->recorded) {
        record_begin(e, e->decision);
    } else if (lz_store_escalation_decided(c->a->store, c->generation, e->req.request_id,
                                           e->decision, &err) < 0) {
        log_error(c, "cannot record an escalation decision", err);
        lz_error_free(err);
    }
    clog_(c, "escalation %s: running %s (pid %d; %s)", e->req.request_id, e->plan->label,
          (int) e->child.pid, e->decision);
}

static void try_run_waiting(coord *c)
{
    esc_state *st = c->esc;
    for (escalation *e = st->head; e && st->running < ESC_MAX_RUNNING; e = e->next)
        if (e->phase == E_WAIT_RUN)
            esc_run(e);
}

static void approve(escalation *e, const char *decision)
{
    free(e->decision);
    e->decision = lz_xstrdup(decision);
    leave_prompt(e);
    e->phase = E_WAIT_RUN;
    if (e->c->esc->running < ESC_MAX_RUNNING)
        esc_run(e);
}

/* ---- the prompt --------------------------------------------------------- */

static void on_prompt_timeout(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    escalation *e = data;
    e->timer = NULL;
    free(e->decision);
    e->decision = lz_xstrdup("nobody decided in time");
    esc_finish(e, LZ_MBX_TIMED_OUT, -1, "nobody answered the prompt in time");
}

static char *prompt_text(escalation *e)
{
    coord *c = e->c;
    const char *ws = c->a->cfg->workspace.label;
    /* The host directory, said: the workspace's own place, or its root
     * for a directory outside it (open_cwd; bound to the decision). */
    char *host_cwd = strncmp(e->req.cwd, "/workspace/", 11) == 0
                         ? lz_xasprintf("%s/%s", ws, e->req.cwd + 11)
                     : strcmp(e->req.cwd, "/workspace") == 0
                         ? lz_xstrdup(ws)
                         : lz_xasprintf("%s (the workspace: %s is not in it)", ws, e->req.cwd);
    lz_prompt_fields f = { .number = e->prompt_no, .profile = c->a->cfg->profile,
                           .session_id = e->session_id, .cwd = e->req.cwd, .argv = e->req.argv,
                           .argc = e->req.argc, .why = e->req.why,
                           .resolved = strcmp(e->plan->label, e->req.argv[0]) != 0
                                           ? e->plan->label
                                           : NULL,
                           .host_cwd = host_cwd };
    char *text = lz_prompt_text(&f);
    free(host_cwd);
    return text;
}

static void show_next_prompt(coord *c, session *s)
{
    if (s->prompt_visible || s->sock < 0 || s->esc_closing)
        return;
    for (escalation *e = c->esc->head; e; e = e->next) {
        if (e->s != s || e->phase != E_PROMPT_QUEUED)
            continue;
        e->prompt_no = ++c->esc->next_prompt_no;
        char *text = prompt_text(e);
        e->phase = E_PROMPTING;
        s->prompt_visible = true;
        relay_update_events(s); /* the session's output waits meanwhile */
        lz_wbuf b;
        lz_msg_prompt_encode(&b, LZ_MSG_PROMPT, e->prompt_no, text);
        free(text);
        clog_(c, "escalation %s: asking the developer in session %s", e->req.request_id,
              s->id);
        session_send(c, s, &b);
        return;
    }
}

int escalation_on_decision(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    coord *c = s->c;
    uint32_t no, yes;
    if (!lz_msg_pair_decode(&pm->r, &no, &yes) || yes > 1)
        return -1;
    if (!c->esc)
        return 0;
    for (escalation *e = c->esc->head; e; e = e->next) {
        if (e->s != s || e->phase != E_PROMPTING || e->prompt_no != no)
            continue;
        /* Only the prompt this session shows: a late answer to a prompt
         * that timed out or was withdrawn finds nothing. */
        lz_loop_remove(e->timer);
        e->timer = NULL;
        if (yes) {
            char *d = lz_xasprintf("approved by the developer in session %s", s->id);
            approve(e, d);
            free(d);
        } else {
            free(e->decision);
            e->decision = lz_xasprintf("denied by the developer in session %s", s->id);
            leave_prompt(e);
            e->phase = E_NEW; /* answered: no PROMPT_CLOSED for it */
            esc_finish(e, LZ_MBX_DENIED, -1, "the developer denied it");
        }
        show_next_prompt(c, s);
        return 0;
    }
    return 0;
}

/* ---- a new request ------------------------------------------------------ */

static session *session_of_capability(coord *c, const char *cap)
{
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        session *s = &c->sessions[i];
        if (s->state == S_RUNNING && !s->exited && s->capability[0] &&
            strcmp(s->capability, cap) == 0)
            return s;
    }
    return NULL;
}

static void on_life(lz_loop *loop, lz_loop_source *src, void *data);

static void decide(escalation *e)
{
    coord *c = e->c;
    session *s = e->s;
    const lz_resolved_config *cfg = c->a->cfg;
    if (s->esc_open >= ESC_MAX_OPEN_PER_SESSION) {
        esc_finish(e, LZ_MBX_FAILED, -1,
                   "too many requests: this session already has 64 open; wait for them to end");
        return;
    }
    s->esc_open++;
    e->open_counted = true;
    if (!cfg->escalation_enabled) {
        e->decision = lz_xasprintf("escalation is disabled for profile '%s'", cfg->profile);
        esc_finish(e, LZ_MBX_DENIED, -1, e->decision);
        return;
    }
    /* Where it would run, now: the run must be there (open_cwd). */
    lz_error *cerr = NULL;
    int cfd = open_cwd(c, e->req.cwd, NULL, &e->cwd_id, &cerr);
    if (cfd < 0) {
        char *msg = lz_xasprintf("%s: nothing ran", cerr->message);
        lz_error_free(cerr);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    close(cfd);
    const lz_resolved_rule *rule = lz_rules_match(cfg, e->req.argv, e->req.argc);
    if (rule) {
        e->plan = &rule->executable;
        size_t idx = (size_t) (rule - cfg->rules) + 1;
        char *d = lz_xasprintf("auto-approved by rule %zu (%s)", idx, rule->executable.label);
        approve(e, d);
        free(d);
        return;
    }
    /* The developer decides: about a file pinned now. The prompt names the
     * file the request's path reaches; the run needs that same object. */
    lz_error *err = NULL;
    char *canonical = lz_canonicalize(e->req.argv[0], &err);
    if (!canonical || lz_plan_existing(canonical, &e->own_plan, &err) < 0) {
        char *msg = lz_xasprintf("cannot run %s: %s", e->req.argv[0], err->message);
        lz_error_free(err);
        free(canonical);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    free(canonical);
    e->plan = &e->own_plan;
    const char *where = sandbox_writable(cfg, e->plan->label);
    if (where) {
        char *msg = lz_xasprintf("%s lies in %s, which the sandbox can change: Lazaret does "
                                 "not run programs from there (install a copy elsewhere, "
                                 "e.g. ~/bin, and ask for that)", e->plan->label, where);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    int fd = lz_executable_pin(e->plan, &e->approved, &err);
    if (fd < 0) {
        char *msg = lz_xasprintf("cannot run %s: %s", e->req.argv[0], err->message);
        lz_error_free(err);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    close(fd);
    e->have_approved = true;
    if (!s->run.interactive || s->sock < 0) {
        e->decision = lz_xstrdup("no terminal to ask the developer in");
        esc_finish(e, LZ_MBX_DENIED, -1,
                   "the session has no terminal to ask the developer in (only an auto_approve "
                   "rule can approve requests of a session without one)");
        return;
    }
    if (s->esc_prompts >= ESC_MAX_PROMPTS_PER_SESSION) {
        esc_finish(e, LZ_MBX_FAILED, -1,
                   "too many requests: this session already has 8 waiting for the developer");
        return;
    }
    char *text = prompt_text(e);
    bool too_long = strlen(text) > LZ_MSG_MAX_PROMPT;
    free(text);
    if (too_long) {
        esc_finish(e, LZ_MBX_FAILED, -1,
                   "the request is too long to be shown in full on a terminal");
        return;
    }
    record_begin(e, NULL);
    s->esc_prompts++;
    e->prompt_counted = true;
    e->phase = E_PROMPT_QUEUED;
    e->timer = lz_loop_add_timer(c->loop, c->esc->prompt_timeout_ms, on_prompt_timeout, e);
    show_next_prompt(c, s);
}

static void on_request(coord *c, const uint8_t *payload, size_t len)
{
    esc_state *st = c->esc;
    lz_mbx_request req;
    if (!lz_mbx_request_decode(payload, len, &req)) {
        refusal(c, "escalation mailbox: a malformed request was refused");
        return;
    }
    session *s = session_of_capability(c, req.capability);
    int seen = remember(st, req.request_id, !s);
    if (seen != REMEMBERED) {
        refusal(c, "escalation %s: refused: %s", req.request_id,
                seen == SEEN_BEFORE ? "this request id was used before (a replay)"
                : seen == GENERATION_FULL ? "this generation has taken its "
                                            "10000 requests (start the Domain again)"
                                          : "too many requests of no session at once");
        lz_mbx_request_clear(&req);
        return;
    }
    escalation *e = lz_xcalloc(1, sizeof(*e));
    e->c = c;
    e->req = req;
    e->out[0] = e->out[1] = -1;
    e->own_plan = (lz_path_plan) LZ_PATH_PLAN_INIT;
    e->phase = E_NEW;
    e->last_heard_ms = lz_loop_now_ms();
    e->next = st->head;
    st->head = e;
    if (mkdirat(st->outbox_fd, req.request_id, 0755) < 0) {
        clog_(c, "escalation %s: cannot create its outbox directory: %s", req.request_id,
              strerror(errno));
        esc_free(e);
        return;
    }
    e->has_dir = true;
    e->life = lz_loop_add_timer(c->loop, LZ_MBX_HEARTBEAT_MS, on_life, e);
    if (!s) {
        e->unbound = true;
        st->unbound++;
        snprintf(e->session_id, sizeof(e->session_id), "unknown");
        e->decision = lz_xstrdup("no session of this Domain holds its capability");
        esc_finish(e, LZ_MBX_FAILED, -1,
                   "not from a running session of this Domain (unknown capability)");
        return;
    }
    e->s = s;
    memcpy(e->session_id, s->id, sizeof(e->session_id));
    decide(e);
    esc_publish(c);
}

static int chunk_remove(escalation *e, const char *name)
{
    _cleanup_close_ int dir = openat(e->c->esc->outbox_fd, e->req.request_id,
                                     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return dir >= 0 && unlinkat(dir, name, 0) == 0 ? 0 : -1;
}

/* CANCEL and ACK: from the capability of the request's own session only. */
static void on_control(coord *c, uint16_t type, const uint8_t *payload, size_t len)
{
    lz_mbx_control m;
    if (!lz_mbx_control_decode(payload, len, type, &m)) {
        refusal(c, "escalation mailbox: a malformed %s was refused",
              type == LZ_MBX_CANCEL ? "cancellation" : "acknowledgement");
        return;
    }
    escalation *e = find(c, m.request_id);
    /* The binding: only the capability the request was made with. */
    if (!e || strcmp(e->req.capability, m.capability) != 0) {
        refusal(c, "escalation %s: refused a %s from another session (or for no request)",
              m.request_id, type == LZ_MBX_CANCEL ? "cancellation" : "acknowledgement");
        return;
    }
    e->last_heard_ms = lz_loop_now_ms();
    if (type == LZ_MBX_CANCEL) {
        if (e->phase != E_DONE) {
            if (!e->decision)
                e->decision = lz_xstrdup("cancelled before a decision");
            esc_finish(e, LZ_MBX_CANCELLED, -1, "cancelled by the client");
        }
        return;
    }
    if (m.acked > e->seq || m.acked < e->acked)
        return; /* not a count this request has had */
    for (uint32_t i = e->acked; i < m.acked; i++) {
        char name[32];
        snprintf(name, sizeof(name), "chunk-%u", i);
        lz_best_effort(chunk_remove(e, name));
    }
    e->acked = m.acked;
    update_flow(e);
}

static void scan_inbox(coord *c);

static bool still_there(coord *c, const escalation *e)
{
    for (escalation *x = c->esc->head; x; x = x->next)
        if (x == e)
            return true;
    return false;
}

/* Every second: a client silent for LZ_MBX_SILENCE_MS has died (SIGKILL
 * leaves it no chance to cancel); a finished request whose client is gone
 * can go. */
static void on_life(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) src;
    escalation *e = data;
    /* A frozen sandbox's clients cannot send heartbeats (esc_run). */
    if (lz_freezer_frozen(e->c->freezer))
        e->last_heard_ms = lz_loop_now_ms();
    bool silent = lz_loop_now_ms() - e->last_heard_ms > LZ_MBX_SILENCE_MS;
    if (silent && e->phase != E_DONE && e->c->state == G_RUNNING) {
        /* Timers run before descriptors in a loop round: after a long
         * round the client's heartbeat may be waiting in the inbox. Read
         * it before calling the client silent. The scan may end this very
         * request (a CANCEL): the timer is then gone with it. */
        lz_loop_source *self = e->life;
        e->life = NULL;
        coord *c = e->c;
        scan_inbox(c);
        if (!still_there(c, e)) {
            lz_loop_remove(self);
            return;
        }
        e->life = self;
        silent = lz_loop_now_ms() - e->last_heard_ms > LZ_MBX_SILENCE_MS;
    }
    if (silent && e->phase != E_DONE)
        esc_finish(e, LZ_MBX_CANCELLED, -1, "the client stopped answering (it ended)");
    if (e->phase == E_DONE && (silent || e->acked >= e->seq)) {
        /* Result taken, or nobody left to take it. */
        bool reaped = e->child.pid == 0;
        if (reaped && (silent || lz_loop_now_ms() - e->last_heard_ms > LZ_MBX_HEARTBEAT_MS * 3)) {
            e->life = NULL;
            lz_loop_remove(src);
            esc_free(e);
            return;
        }
    }
    lz_loop_timer_set(e->life, LZ_MBX_HEARTBEAT_MS);
    (void) loop;
}

/* ---- the inbox ---------------------------------------------------------- */

typedef enum rec_kind { K_NONE, K_REQUEST, K_CANCEL, K_ACK } rec_kind;

/* <32 hex>.request | .cancel | .ack-<1..10 digits>; anything else is not a
 * record (a name starting with '.' is the client's temporary file). */
static rec_kind name_kind(const char *name)
{
    char id[LZ_MBX_ID_LEN + 1];
    if (strlen(name) < LZ_MBX_ID_LEN + 2 || name[LZ_MBX_ID_LEN] != '.')
        return K_NONE;
    memcpy(id, name, LZ_MBX_ID_LEN);
    id[LZ_MBX_ID_LEN] = '\0';
    if (!lz_mbx_id_ok(id))
        return K_NONE;
    const char *k = name + LZ_MBX_ID_LEN + 1;
    if (strcmp(k, "request") == 0)
        return K_REQUEST;
    if (strcmp(k, "cancel") == 0)
        return K_CANCEL;
    if (strncmp(k, "ack-", 4) == 0) {
        size_t n = strspn(k + 4, "0123456789");
        if (n >= 1 && n <= 10 && k[4 + n] == '\0')
            return K_ACK;
    }
    return K_NONE;
}

/* Take an entry out of the inbox in O(1): a file is unlinked, anything
 * else (a directory tree of any size or depth the sandbox built) is renamed
 * into the generation's junk directory, out of the sandbox's sight, and
 * goes with the generation directory at teardown. Never a tree walk here:
 * the loop must not be held up by what the sandbox made (attack round i11,
 * A1). */
static void inbox_discard(esc_state *st, const char *name)
{
    if (unlinkat(st->inbox_fd, name, 0) == 0 || errno == ENOENT)
        return;
    char fresh[64];
    snprintf(fresh, sizeof(fresh), "j%u", st->junk_serial++);
    if (renameat(st->inbox_fd, name, st->junk_fd, fresh) == 0)
        st->junk_left = true; /* swept after the scan (junk_sweep): it counts in the bound */
}

/* Read one inbox entry (then remove it) and act on it. False when it
 * could not even be opened for lack of descriptors: it stays for a later
 * round (a record is never thrown away for the coordinator's own want). */
static bool inbox_entry(coord *c, const char *name)
{
    esc_state *st = c->esc;
    rec_kind kind = name_kind(name);
    if (kind == K_NONE) {
        inbox_discard(st, name);
        refusal(c, "escalation mailbox: removed an entry that is not a record");
        return true;
    }
    static uint8_t buf[LZ_MBX_MAX_RECORD + LZ_SIG_LEN + 1];
    lz_error *err = NULL;
    int fd = lz_open_confined(st->inbox_fd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0,
                              "inbox record", &err);
    bool no_fds = fd < 0 && err && (err->errnum == EMFILE || err->errnum == ENFILE);
    lz_error_free(err);
    if (no_fds)
        return false;
    struct stat sb;
    ssize_t len = -1;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
        sb.st_size <= (off_t) (LZ_MBX_MAX_RECORD + LZ_SIG_LEN)) {
        size_t got = 0;
        for (;;) {
            ssize_t n = read(fd, buf + got, sizeof(buf) - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                len = n < 0 ? -1 : (ssize_t) got;
                break;
            }
            got += (size_t) n;
            if (got == sizeof(buf)) { /* grew past the bound while read */
                len = -1;
                break;
            }
        }
    }
    if (fd >= 0)
        close(fd);
    inbox_discard(st, name);
    if (len < LZ_SIG_LEN) {
        refusal(c, "escalation mailbox: refused an entry that is not a regular file of at most "
                 "%d bytes",
              LZ_MBX_MAX_RECORD + LZ_SIG_LEN);
        return true;
    }
    size_t plen = (size_t) len - LZ_SIG_LEN;
    if (!lz_sig_verify(st->sandbox_pub, st->nonce, buf, plen, buf + plen)) {
        refusal(c, "escalation mailbox: refused a record whose signature is not this "
                 "generation's sandbox's");
        return true;
    }
    uint16_t type = lz_mbx_record_type(buf, plen);
    uint16_t want = kind == K_REQUEST ? LZ_MBX_REQUEST : kind == K_CANCEL ? LZ_MBX_CANCEL
                                                                          : LZ_MBX_ACK;
    if (type != want) {
        refusal(c, "escalation mailbox: refused a record whose type does not match its name");
        return true;
    }
    /* The id in the name must be the record's. */
    const char *id_in_name = name;
    if (kind == K_REQUEST) {
        lz_mbx_request probe;
        if (lz_mbx_request_decode(buf, plen, &probe)) {
            bool same = strncmp(probe.request_id, id_in_name, LZ_MBX_ID_LEN) == 0;
            lz_mbx_request_clear(&probe);
            if (!same) {
                refusal(c, "escalation mailbox: refused a request filed under another id");
                return true;
            }
        }
        on_request(c, buf, plen);
    } else {
        lz_mbx_control probe;
        if (lz_mbx_control_decode(buf, plen, type, &probe) &&
            strncmp(probe.request_id, id_in_name, LZ_MBX_ID_LEN) != 0) {
            refusal(c, "escalation mailbox: refused a record filed under another id");
            return true;
        }
        on_control(c, type, buf, plen);
    }
    explicit_bzero(buf, (size_t) len);
    return true;
}

#define SCAN_BATCH 256     /* records handled per round */
#define SCAN_LOOK_MAX 4096 /* entries looked at per round */
#define STALE_TEMP_S 10    /* a temporary file older than this is removed */
#define SWEEP_BUDGET 256   /* junk/ entries removed or lifted per sweep */
#define SWEEP_AGAIN_MS 20  /* the next sweep, while the last one got on */

/* Give back what junk/ holds, a bounded amount of work per call: each
 * entry is unlinked, or removed as an empty directory, or - a directory
 * with entries - has its entries renamed up into junk/ (one rename each,
 * no recursion, no depth), so that it is empty at a later sweep. A tree is
 * at most LZ_MBX_INBOX_MAX_ENTRIES entries (the tmpfs's bound), so it goes
 * in a few sweeps; a sandbox process still working in a directory it had
 * in the inbox (its cwd) can add to it, but never beyond the bound. True
 * when something was removed or moved (another sweep may get further). */
static bool junk_sweep(esc_state *st)
{
    int d = openat(st->junk_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = d >= 0 ? fdopendir(d) : NULL;
    if (!dir) {
        if (d >= 0)
            close(d);
        return false;
    }
    unsigned budget = SWEEP_BUDGET;
    bool progress = false, left = false;
    struct dirent *de;
    while (budget > 0 && (de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        budget--;
        if (unlinkat(st->junk_fd, de->d_name, 0) == 0 ||
            unlinkat(st->junk_fd, de->d_name, AT_REMOVEDIR) == 0) {
            progress = true;
            continue;
        }
        if (errno == ENOENT)
            continue;
        left = true;
        if (errno != ENOTEMPTY && errno != EEXIST)
            continue; /* not ours to remove (another user's directory): it stays, bounded */
        /* A single component read from junk/: O_NOFOLLOW is the whole
         * confinement (the sandbox cannot mount anything on the tmpfs). */
        int sub = openat(st->junk_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                                      O_CLOEXEC);
        DIR *sd = sub >= 0 ? fdopendir(sub) : NULL;
        if (!sd) {
            if (sub >= 0)
                close(sub);
            continue;
        }
        struct dirent *e;
        while (budget > 0 && (e = readdir(sd))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            budget--;
            char fresh[32];
            snprintf(fresh, sizeof(fresh), "j%u", st->junk_serial++);
            if (renameat(dirfd(sd), e->d_name, st->junk_fd, fresh) == 0)
                progress = true;
        }
        closedir(sd);
    }
    if (budget == 0)
        left = true;
    closedir(dir);
    st->junk_left = left;
    return progress && left;
}

static void on_sweep(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop;
    esc_state *st = data;
    if (junk_sweep(st))
        lz_loop_timer_set(src, SWEEP_AGAIN_MS);
    else
        st->sweep = NULL;
}

/* The inbox's fill, after each scan. A full inbox (no room for one record
 * of the maximal size, or almost no entries left) makes the sandbox's
 * writes fail with ENOSPC - lazaret-escalate says "the mailbox is full" -
 * and is logged once per filling: again only after it had room again (at
 * most half used), so a sandbox that keeps it full costs one line. */
static void check_full(coord *c)
{
    esc_state *st = c->esc;
    struct statfs sf;
    if (fstatfs(st->inbox_fd, &sf) < 0 || sf.f_blocks == 0 || sf.f_files == 0)
        return;
    uint64_t bsize = (uint64_t) sf.f_bsize;
    uint64_t used_b = ((uint64_t) sf.f_blocks - sf.f_bfree) * bsize;
    uint64_t used_f = (uint64_t) sf.f_files - sf.f_ffree;
    bool full = (uint64_t) sf.f_bavail * bsize < LZ_MBX_MAX_RECORD + LZ_SIG_LEN ||
                sf.f_ffree < 8;
    if (full && !st->full_logged) {
        st->full_logged = true;
        clog_(c, "escalation mailbox: the inbox is full (%llu of %llu bytes, %llu of %llu "
                 "entries); the sandbox's writes into it fail (ENOSPC) and lazaret-escalate "
                 "reports 'the mailbox is full' until what fills it is removed",
              (unsigned long long) used_b, (unsigned long long) sf.f_blocks * bsize,
              (unsigned long long) used_f, (unsigned long long) sf.f_files);
    } else if (!full && st->full_logged && 2 * used_b <= (uint64_t) sf.f_blocks * bsize &&
               2 * used_f <= (uint64_t) sf.f_files) {
        st->full_logged = false;
        clog_(c, "escalation mailbox: the inbox has room again (%llu bytes, %llu entries used)",
              (unsigned long long) used_b, (unsigned long long) used_f);
    }
}


static void on_rescan(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    coord *c = data;
    c->esc->rescan = NULL;
    scan_inbox(c);
}

static void scan_inbox(coord *c)
{
    esc_state *st = c->esc;
    if (st->inbox_fd < 0)
        return; /* not handed over yet (SUP_MAILBOX) */
    int d = openat(st->inbox_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = d >= 0 ? fdopendir(d) : NULL;
    if (!dir) {
        if (d >= 0)
            close(d);
        /* Out of descriptors, say: try again soon rather than wait for the
         * next record (which may never come). */
        if (!st->rescan)
            st->rescan = lz_loop_add_timer(c->loop, 100, on_rescan, c);
        return;
    }
    /* Names first, then the work: entries are removed while handled. */
    char *names[SCAN_BATCH];
    size_t n = 0;
    struct dirent *de;
    bool more = false;
    unsigned looked = 0;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    while ((de = readdir(dir))) {
        /* Every round does bounded work, whatever the sandbox put here. */
        if (++looked > SCAN_LOOK_MAX || n == SCAN_BATCH) {
            more = true;
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (de->d_name[0] == '.') {
            /* A client's temporary file lives for the moment between its
             * write and its rename; one left for long is litter. */
            struct stat sb;
            if (fstatat(st->inbox_fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
                now.tv_sec - sb.st_mtim.tv_sec > STALE_TEMP_S)
                inbox_discard(st, de->d_name);
            continue;
        }
        names[n++] = lz_xstrdup(de->d_name);
    }
    closedir(dir);
    /* Requests before their cancellations and acknowledgements. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            if (!names[i] || (pass == 0) != (name_kind(names[i]) == K_REQUEST))
                continue;
            if (!inbox_entry(c, names[i]))
                more = true; /* left for the next round */
            free(names[i]);
            names[i] = NULL;
        }
    /* A flood is handled in rounds, so that sessions keep being served. */
    if (more && !st->rescan)
        st->rescan = lz_loop_add_timer(c->loop, 10, on_rescan, c);
    if (st->junk_left && !st->sweep && junk_sweep(st))
        st->sweep = lz_loop_add_timer(c->loop, SWEEP_AGAIN_MS, on_sweep, st);
    check_full(c);
}

static void on_inbox(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) revents;
    coord *c = data;
    char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (read(fd, ev, sizeof(ev)) > 0) {
        /* Which names does not matter: the directory is read whole. */
    }
    if (c->state == G_RUNNING)
        scan_inbox(c);
}

/* ---- sessions and teardown ---------------------------------------------- */

void escalation_session_ended(coord *c, session *s)
{
    if (!c->esc)
        return;
    s->esc_closing = true; /* no further prompt for it */
    for (escalation *e = c->esc->head; e; e = e->next) {
        if (e->s != s)
            continue;
        if (e->phase == E_PROMPT_QUEUED || e->phase == E_PROMPTING) {
            /* Nobody can answer any more: a prompt whose terminal is gone
             * denies (FR-5), as a session without one does. */
            if (!e->decision)
                e->decision = lz_xstrdup("its session's terminal is gone");
            esc_finish(e, LZ_MBX_DENIED, -1, "the session's terminal is gone");
        } else if (e->phase != E_DONE) {
            if (!e->decision)
                e->decision = lz_xstrdup("its session ended");
            esc_finish(e, LZ_MBX_CANCELLED, -1, "its session ended");
        }
        e->s = NULL;
    }
    s->capability[0] = '\0';
    s->esc_open = s->esc_prompts = 0;
}

void escalation_teardown(coord *c)
{
    esc_state *st = c->esc;
    if (!st)
        return;
    for (escalation *e = st->head; e; e = e->next)
        if (e->phase != E_DONE) {
            if (!e->decision)
                e->decision = lz_xstrdup("the Domain stopped");
            esc_finish(e, LZ_MBX_CANCELLED, -1, "the Domain is stopping");
        }
    while (st->head) {
        escalation *e = st->head;
        kill_group(e);
        if (e->child.pid > 0) {
            lz_error *err = NULL;
            lz_best_effort(lz_child_wait(&e->child, 1000, &err));
            lz_error_free(err);
        }
        esc_free(e);
    }
    lz_loop_remove(st->inbox_src);
    lz_loop_remove(st->rescan);
    lz_loop_remove(st->sweep);
    lz_loop_remove(st->publish);
    if (st->inotify_fd >= 0)
        close(st->inotify_fd);
    if (st->inbox_fd >= 0)
        close(st->inbox_fd);
    if (st->outbox_fd >= 0)
        close(st->outbox_fd);
    if (st->junk_fd >= 0)
        close(st->junk_fd);
    for (size_t i = 0; i < st->n_seen; i++)
        free(st->seen[i]);
    free(st->seen);
    free(st->home);
    explicit_bzero(st->coord_seed, sizeof(st->coord_seed));
    free(st);
    c->esc = NULL;
}

json_t *escalation_status(coord *c)
{
    json_t *a = json_array();
    if (!c->esc)
        return a;
    for (escalation *e = c->esc->head; e; e = e->next) {
        if (e->phase == E_DONE)
            continue;
        static const char *const names[] = { "accepted", "waiting for the developer", "prompting",
                                             "waiting to run", "running", "done" };
        json_t *argv = json_array();
        for (size_t i = 0; i < e->req.argc; i++)
            json_array_append_new(argv, json_stringn(e->req.argv[i], strlen(e->req.argv[i])));
        json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:s}", "request_id",
                                           e->req.request_id, "session_id", e->session_id,
                                           "argv", argv, "state", names[e->phase]));
    }
    return a;
}
