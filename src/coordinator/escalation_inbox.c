/* SPDX-License-Identifier: Apache-2.0
 *
 * The Escalation Mailbox (escalation.h, docs/escalation.md): the outbox,
 * the credentials and the inbox's mount point prepared in the generation
 * directory; the inbox the supervisor hands over, checked and watched;
 * every entry of it untrusted input, read confined and bounded, its
 * signature checked, decoded strictly, then acted on (a new request, a
 * cancellation, an acknowledgement: escalation.c decides and runs); and
 * every second, each request's client heard from or called silent.
 */
#include "coordinator/escalation_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "common/util.h"
#include "coordinator/freezer.h"
#include "coordinator/log.h"
#include "fs/confined.h"
#include "common/io.h"

typedef enum rec_kind { K_NONE, K_REQUEST, K_CANCEL, K_ACK } rec_kind;

#define SCAN_BATCH 256     /* records handled per round */
#define SCAN_LOOK_MAX 4096 /* entries looked at per round */
#define STALE_TEMP_S 10    /* a temporary file older than this is removed */
#define SWEEP_BUDGET 256   /* junk/ entries removed or lifted per sweep */
#define SWEEP_AGAIN_MS 20  /* the next sweep, while the last one got on */

enum { REMEMBERED, SEEN_BEFORE, GENERATION_FULL, UNBOUND_FULL };

static void on_inbox(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data);
static void on_life(lz_loop *loop, lz_loop_source *src, void *data);
static void scan_inbox(coord *c);

/* ---- preparing the mailbox --------------------------------------------- */

static int write_cred(int dir, const char *name, const void *data, size_t n, lz_error **err)
{
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot create the escalation credential %s", name);
    int r = lz_write_all(fd, data, n);
    close(fd);
    return r < 0 ? lz_error_set(err, errno, "cannot write the escalation credential %s", name) : 0;
}

int escalation_prepare(coord *c, int gen_fd, lz_error **err)
{
    esc_state *st = lz_xcalloc(1, sizeof(*st));
    st->inbox_fd = st->outbox_fd = st->inotify_fd = st->junk_fd = -1;
    c->esc = st;
    const char *t = getenv("LAZARET_ESCALATION_TIMEOUT");
    long secs = t ? strtol(t, NULL, 10) : 0;
    st->prompt_timeout_ms =
        secs > 0 && secs <= 24 * 3600 ? secs * 1000 : ESC_PROMPT_TIMEOUT_MS_DEFAULT;
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
        return lz_error_set(err, errno, "cannot create the escalation mailbox in %s", c->gen_label);
    st->outbox_fd =
        openat(gen_fd, "mailbox/outbox", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (st->outbox_fd < 0)
        return lz_error_set(err, errno, "cannot open the escalation mailbox in %s", c->gen_label);

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
    _cleanup_close_ int creds =
        openat(gen_fd, "credentials", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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
            lz_error_set(err, 0,
                         "the escalation inbox the Runtime Supervisor handed over is not "
                         "a tmpfs of at most %u bytes and %u entries",
                         LZ_MBX_INBOX_MAX_BYTES, LZ_MBX_INBOX_MAX_ENTRIES);
        return lz_error_hint(err, "this is a bug of Lazaret: report it with 'lazaret version'");
    }
    st->inbox_fd = lz_open_confined(root, LZ_MBX_SPOOL_INBOX, O_RDONLY | O_DIRECTORY, 0,
                                    "the escalation inbox", err);
    st->junk_fd = st->inbox_fd < 0
                      ? -1
                      : lz_open_confined(root, LZ_MBX_SPOOL_JUNK, O_RDONLY | O_DIRECTORY, 0,
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
                          IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_MODIFY | IN_ONLYDIR) < 0)
        return lz_error_set(err, errno, "cannot watch the escalation inbox of %s", c->gen_label);
    st->inbox_src = lz_loop_add_fd(c->loop, st->inotify_fd, POLLIN, on_inbox, c);
    return 0;
}

bool escalation_inbox_attached(const coord *c)
{
    return !c->esc || c->esc->inbox_fd >= 0;
}

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

static int cmp_id(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

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

static void on_request(coord *c, const uint8_t *payload, size_t len)
{
    esc_state *st = c->esc;
    lz_mbx_request req;
    if (!lz_mbx_request_decode(payload, len, &req)) {
        esc_refusal(c, "escalation mailbox: a malformed request was refused");
        return;
    }
    session *s = session_of_capability(c, req.capability);
    int seen = remember(st, req.request_id, !s);
    if (seen != REMEMBERED) {
        esc_refusal(c, "escalation %s: refused: %s", req.request_id,
                    seen == SEEN_BEFORE       ? "this request id was used before (a replay)"
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
    esc_decide(e);
    esc_publish(c);
}

/* CANCEL and ACK: from the capability of the request's own session only. */
static void on_control(coord *c, uint16_t type, const uint8_t *payload, size_t len)
{
    lz_mbx_control m;
    if (!lz_mbx_control_decode(payload, len, type, &m)) {
        esc_refusal(c, "escalation mailbox: a malformed %s was refused",
                    type == LZ_MBX_CANCEL ? "cancellation" : "acknowledgement");
        return;
    }
    escalation *e = esc_find(c, m.request_id);
    /* The binding: only the capability the request was made with. */
    if (!e || strcmp(e->req.capability, m.capability) != 0) {
        esc_refusal(c, "escalation %s: refused a %s from another session (or for no request)",
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
        lz_best_effort(esc_chunk_remove(e, name));
    }
    e->acked = m.acked;
    esc_update_flow(e);
}

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
        esc_refusal(c, "escalation mailbox: removed an entry that is not a record");
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
        esc_refusal(c,
                    "escalation mailbox: refused an entry that is not a regular file of at most "
                    "%d bytes",
                    LZ_MBX_MAX_RECORD + LZ_SIG_LEN);
        return true;
    }
    size_t plen = (size_t) len - LZ_SIG_LEN;
    if (!lz_sig_verify(st->sandbox_pub, st->nonce, buf, plen, buf + plen)) {
        esc_refusal(c, "escalation mailbox: refused a record whose signature is not this "
                       "generation's sandbox's");
        return true;
    }
    uint16_t type = lz_mbx_record_type(buf, plen);
    uint16_t want = kind == K_REQUEST  ? LZ_MBX_REQUEST
                    : kind == K_CANCEL ? LZ_MBX_CANCEL
                                       : LZ_MBX_ACK;
    if (type != want) {
        esc_refusal(c, "escalation mailbox: refused a record whose type does not match its name");
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
                esc_refusal(c, "escalation mailbox: refused a request filed under another id");
                return true;
            }
        }
        on_request(c, buf, plen);
    } else {
        lz_mbx_control probe;
        if (lz_mbx_control_decode(buf, plen, type, &probe) &&
            strncmp(probe.request_id, id_in_name, LZ_MBX_ID_LEN) != 0) {
            esc_refusal(c, "escalation mailbox: refused a record filed under another id");
            return true;
        }
        on_control(c, type, buf, plen);
    }
    explicit_bzero(buf, (size_t) len);
    return true;
}

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
        int sub = openat(st->junk_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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
    bool full = (uint64_t) sf.f_bavail * bsize < LZ_MBX_MAX_RECORD + LZ_SIG_LEN || sf.f_ffree < 8;
    if (full && !st->full_logged) {
        st->full_logged = true;
        clog_(c,
              "escalation mailbox: the inbox is full (%llu of %llu bytes, %llu of %llu "
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
            if (names[i] && c->stop_requested) {
                /* An audit failed closed (a host command's start): the
                 * teardown follows, and the records left go with it. */
                free(names[i]);
                names[i] = NULL;
            }
            if (!names[i] || (pass == 0) != (name_kind(names[i]) == K_REQUEST))
                continue;
            if (!inbox_entry(c, names[i]))
                more = true; /* left for the next round */
            free(names[i]);
            names[i] = NULL;
        }
    if (c->stop_requested)
        return;
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
