/* SPDX-License-Identifier: Apache-2.0
 *
 * libFuzzer target for the Session Coordinator's dispatch, in-process and
 * real: session sockets attached with session_attach() (session.h) and a
 * supervisor channel registered exactly as generation_start() does, all
 * served by the coordinator's own loop callbacks (session_message -> the
 * protocol table -> the CLI messages' handlers; supervisor_message -> the
 * table -> the supervisor messages' handlers, which move the generation
 * STARTING -> RUNNING/FAILED and make queued sessions exec, with a real PTY
 * for interactive ones). The fuzzer is both the CLIs and the Runtime
 * Supervisor; it drains every peer end after each step.
 *
 * Sessions come in through session_attach, the supervisor channel through
 * generation_attach_supervisor, as the coordinator's own accept and start
 * paths do.
 *
 * Static init (once): a temporary directory on /dev/shm holding a real
 * Domain Store and status.json; a coord with a zeroed resolved config
 * (profile, workspace label set), no listening socket, the Git Sentry plan
 * empty (LZ_GIT_PLAN_INIT: every audit returns at once, so sentry_failed()
 * and its teardown_and_exit() are unreachable), the generation STARTING;
 * the generation's Trust Anchor, server SSL_CTX and nonce made as
 * trust_begin() (generation.c) makes them, and its publication written and
 * read back the way a CLI reads it; one fixed Ed25519 key for every CLI.
 *
 * The CLIs are real session-channel peers (docs/session-channel.md): a
 * session starts in ENROLL; before the first sealed record on a fresh
 * session its handle enrols (ENROLL with the fixed key, in the clear),
 * accepts ENROLLED's certificate only through lz_tls_client_credential
 * against the published CA, and completes the TLS 1.3 handshake with
 * lz_tls_client_ctx and a client lz_tls_channel, datagram by datagram
 * through the coordinator's own loop; then every record is sealed, one per
 * datagram. A raw step sends its bytes unsealed instead, whatever the
 * session's state (a cleartext ENROLL or garbage before enrolment, a
 * forged handshake datagram, an unsealed record after TLS).
 *
 * Input: a sequence of steps, each [u8 op][u8 arg][u16 len (big endian)]
 * [len bytes] (len is cut to what is left):
 *   op % 8 == 0..3  record for session handle op (attached first when the
 *                   handle has no live session), with (arg & 0x7f) % 5 descriptors
 *                   (memfds: told apart from the runtime's own, below);
 *                   sealed (enrolling first, see above) unless arg & 0x80
 *                   (raw); an empty record is always sent raw (it reads
 *                   as the client's shutdown);
 *            4      record from the supervisor, with arg % 5 descriptors;
 *            5      the CLI of handle arg % 4 disconnects (its end closes);
 *            6      the supervisor dies (its end closes);
 *            7      teardown begins as teardown_and_exit() does it (every
 *                   session refused and closed, state TEARDOWN), without
 *                   its exit: the supervisor's TEARDOWN messages become
 *                   admissible, and no new session is attached.
 * After each step the loop runs (rounds until none has work, at most 8),
 * with relay_update_events() first as the coordinator's main loop does.
 *
 * Invariants (a violation aborts):
 *  - n_active is the number of slots not FREE, after every step;
 *  - an honest CLI's enrolment and handshake always succeed (the session
 *    is then in HELLO, the client channel established);
 *  - a record the table does not admit on a session (or one too short for
 *    a type), sealed after TLS or in the clear during ENROLL, ends that
 *    session only: its peer receives REFUSED (decrypted, resp. in the
 *    clear) and then EOF, and every other slot keeps its state;
 *  - a raw (unsealed) record after TLS is established ends that session
 *    (EOF), so does any datagram with descriptors during the handshake;
 *  - the peer of a live session never sees EOF; a peer whose session is
 *    gone (or orphaned: sock -1) sees EOF;
 *  - nothing the coordinator sends a CLI carries descriptors; before
 *    ENROLLED every datagram is a cleartext record of the table's
 *    coordinator->CLI rows (REFUSED or ENROLLED), after it every datagram
 *    is whole TLS records and nothing in the clear, and once the handle's
 *    TLS is established every datagram opens with its channel to exactly
 *    one coordinator->CLI message within its row's max_len;
 *  - at the end of each input, after session_close() of every slot and a
 *    reset of the generation's state, the process's open descriptors and
 *    lz_loop_count() are back to their baseline: no path leaked a
 *    descriptor (PTY master or slave, passed descriptors, sockets, files
 *    of the Domain's directory) or a loop source. Descriptors the fuzzing
 *    runtime opens meanwhile are not counted (count_open_fds()).
 *
 * Run: build-dir/tests/fuzz/fuzz_dispatch -max_total_time=180
 *          tests/fuzz/corpus/fuzz_dispatch
 */
#include "coordinator/generation.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/util.h"
#include "coordinator/freezer.h"
#include "coordinator/relay.h"
#include "coordinator/session.h"
#include "coordinator/status.h"
#include "store/domain_store.h"
#include "trust/anchor.h"
#include "trust/channel.h"
#include "trust/publication.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NAME "fuzz_dispatch"
#include "fuzz_check.h"

#define N_HANDLES 4
#define ID_HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define FP_HEX "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

/* The fuzzer's end of one session. */
typedef struct handle {
    int peer; /* -1: no session */
    session *s;
    uint32_t no;        /* s->no when attached: the slot may be reused */
    bool eof;           /* the coordinator closed its end */
    uint16_t last_type; /* last record received, 0 when none */
    bool got_refused;   /* a REFUSED arrived since the last step began */
    /* The session channel, as a CLI sees it. */
    bool enrolled; /* ENROLLED arrived (after it: nothing in the clear) */
    char enrolled_id[33];
    uint8_t cert[LZ_MSG_MAX_CERT];
    size_t cert_len;
    SSL_CTX *cctx;       /* this session's client context (its certificate) */
    lz_tls_channel *tls; /* NULL until this handle enrolled itself */
    bool desync;         /* a sealed record was not sent: raw from then on */
} handle;

static coord *C;
static lz_coordinator_args A;
static lz_resolved_config CFG;
static char tmp_path[64];
static int tmp_fd = -1;
static int sup_peer = -1;
static handle H[N_HANDLES];
static int base_ours;
static unsigned base_sources;
static bool trace;        /* LZ_FUZZ_TRACE=1: one line per step on stderr */
static EVP_PKEY *cli_key; /* every CLI's Ed25519 key (fixed) */
static uint8_t cli_pub[LZ_MSG_ENROLL_KEY_LEN];
static X509 *published_ca; /* the CA as the publication names it */

/* The descriptors the code under test could have made: sockets, PTYs,
 * the descriptors this fuzzer passes in records (memfds named "lz-fuzz"),
 * and files of the temporary directory. The fuzzing runtime opens others
 * of its own while it runs (the sanitizer's symbolizer: a pipe and
 * /dev/null, when libFuzzer first prints a NEW_FUNC line): those are
 * counted apart, so that they are not taken for a leak. */
static bool ours(const char *target)
{
    return strncmp(target, "socket:", 7) == 0 || strcmp(target, "/dev/ptmx") == 0 ||
           strncmp(target, "/dev/pts/", 9) == 0 || strncmp(target, "/memfd:lz-fuzz", 14) == 0 ||
           strncmp(target, tmp_path, strlen(tmp_path)) == 0;
}

/* Open descriptors: all of them, and *ret_ours of ours(). */
static int count_open_fds(int *ret_ours)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0, mine = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        n++;
        char path[300], target[256];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, target, sizeof(target) - 1);
        if (k > 0) {
            target[k] = '\0';
            mine += ours(target);
        }
    }
    closedir(d);
    *ret_ours = mine;
    return n;
}

/* What is open (for the report of a leak). */
static void list_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], target[256];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        if (n > 0) {
            target[n] = '\0';
            fprintf(stderr, "  %s -> %s\n", e->d_name, target);
        }
    }
    closedir(d);
}

/* Big buffers on the coordinator's side: its sends block (as in real
 * life), and the fuzzer drains only between steps. */
static void big_sndbuf(int fd)
{
    int sz = 4 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
}

static void sup_channel_open(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    big_sndbuf(sv[0]);
    CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
    C->sup.sock = sv[0];
    C->sup.outer_pid = 0; /* nothing to kill or reap: no process */
    C->sup.init_pid = 0;
    C->sup_stopped = false;
    generation_attach_supervisor(C);
    sup_peer = sv[1];
}

static void sup_channel_close(void)
{
    lz_loop_remove(C->sup_src);
    C->sup_src = NULL;
    if (C->sup.sock >= 0)
        close(C->sup.sock);
    C->sup.sock = -1;
    if (sup_peer >= 0)
        close(sup_peer);
    sup_peer = -1;
    C->sup_alive = false;
}

static void remove_tmp(void)
{
    if (tmp_fd < 0)
        return;
    /* A flat directory: the store's files and status.json. (A crash
     * aborts without this: its directory stays, named in the log.) */
    DIR *d = opendir(tmp_path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(tmp_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void) argc, (void) argv;
    signal(SIGPIPE, SIG_IGN); /* as the coordinator does */
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(tmp_path, sizeof(tmp_path), "%s/lz-fuzz-dispatch-XXXXXX", base);
    CHECK(mkdtemp(tmp_path) != NULL);
    fprintf(stderr, "fuzz_dispatch: Domain directory %s\n", tmp_path);
    tmp_fd = open(tmp_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(tmp_fd >= 0);
    atexit(remove_tmp);

    CFG.profile = lz_xstrdup("fuzz");
    /* The status the coordinator publishes hashes the configuration's parts
     * (digest.c lz_configuration_parts): every string a load sets. */
    CFG.image = lz_xstrdup("oci:/nonexistent/fuzz:latest");
    CFG.storage_root = (lz_path_plan) LZ_PATH_PLAN_INIT;
    CFG.storage_root.label = lz_xstrdup("/nonexistent/fuzz-storage");
    CFG.runtime_root = (lz_path_plan) LZ_PATH_PLAN_INIT;
    CFG.runtime_root.label = lz_xstrdup("/nonexistent/fuzz-runtime");
    CFG.workspace = (lz_path_plan) LZ_PATH_PLAN_INIT;
    CFG.workspace.label = lz_xstrdup("/nonexistent/fuzz-workspace");
    lz_error *err = NULL;
    int store_dir = open(tmp_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(store_dir >= 0);
    if (lz_domain_store_open(store_dir, ID_HEX, CFG.profile, CFG.workspace.label, &A.store, &err) <
        0) {
        fprintf(stderr, "fuzz_dispatch: %s\n", err->message);
        abort();
    }
    close(store_dir);
    A.cfg = &CFG;
    A.listen_fd = -1;
    A.lock_fd = -1;
    A.runtime_dir_fd = tmp_fd;

    C = lz_xcalloc(1, sizeof(*C));
    C->a = &A;
    C->loop = lz_loop_new();
    C->git = (lz_git_plan) LZ_GIT_PLAN_INIT;
    /* As the coordinator has one: SUP_STARTED hands it the sandbox's
     * pidfds (here, whatever descriptors the input carries). */
    C->freezer = lz_freezer_new();
    CHECK(C->git.ws_fd < 0); /* git_audit() returns at once: no teardown path */
    sessions_init(C);
    C->state = G_STARTING;
    snprintf(C->id_hex, sizeof(C->id_hex), "%s", ID_HEX);
    snprintf(C->fp_hex, sizeof(C->fp_hex), "%s", FP_HEX);
    CHECK(lz_store_generation_begin(A.store, C->fp_hex, &C->generation, NULL) == 0);
    snprintf(C->container_id, sizeof(C->container_id), "lazaret-fuzz");
    /* The generation's Trust Anchor, as trust_begin() makes it. */
    snprintf(C->nonce, sizeof(C->nonce), "%s", "00112233445566778899aabbccddeeff");
    char gen[24];
    snprintf(gen, sizeof(gen), "%lld", (long long) C->generation);
    lz_generation_identity gid = { .agent_profile = CFG.profile,
                                   .domain_id = C->id_hex,
                                   .generation_id = gen,
                                   .nonce = C->nonce };
    C->trust = lz_trust_anchor_create(&gid, &err);
    CHECK(C->trust != NULL);
    C->tls_ctx = lz_tls_server_ctx(lz_trust_anchor_ca_cert(C->trust),
                                   lz_trust_anchor_server(C->trust), &err);
    CHECK(C->tls_ctx != NULL);
    CHECK(lz_trust_publish(C->trust, tmp_fd, tmp_path, &err) == 0);
    lz_trust_publication publ;
    CHECK(lz_trust_publication_read(tmp_fd, tmp_path, &publ, &err) == 0);
    published_ca = publ.ca; /* kept for the process's life */
    CHECK(X509_cmp(published_ca, lz_trust_anchor_ca_cert(C->trust)) == 0);
    /* One fixed key: the inputs replay the same way (only the CA, the
     * session ids and the traffic keys are random). */
    static const uint8_t seed[32] = "lazaret fuzz_dispatch CLI key..";
    cli_key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, sizeof(seed));
    CHECK(cli_key != NULL);
    size_t pub_len = sizeof(cli_pub);
    CHECK(EVP_PKEY_get_raw_public_key(cli_key, cli_pub, &pub_len) == 1 &&
          pub_len == sizeof(cli_pub));
    sup_channel_open();
    for (int i = 0; i < N_HANDLES; i++)
        H[i].peer = -1;

    /* Warm up what opens descriptors lazily (SQLite's WAL and shm files,
     * status.json's first write) before the baseline is taken. */
    CHECK(lz_store_session_begin(A.store, C->generation, "00000000000000000000000000000000",
                                 getpid(), false, NULL) == 0);
    CHECK(lz_store_session_end(A.store, C->generation, "00000000000000000000000000000000",
                               "refused", -1, NULL) == 0);
    publish_status(C);
    trace = getenv("LZ_FUZZ_TRACE") != NULL;
    (void) count_open_fds(&base_ours);
    base_sources = lz_loop_count(C->loop);
    return 0;
}

/* ---- the peers ------------------------------------------------------------ */

/* Returns whether the record was queued (the coordinator's queue may be
 * full, or its end closed). */
static bool send_record(int fd, const uint8_t *p, size_t len, size_t nfds)
{
    int fds[LZ_WIRE_MAX_FDS];
    for (size_t i = 0; i < nfds; i++)
        CHECK((fds[i] = memfd_create("lz-fuzz-passed", MFD_CLOEXEC)) >= 0);
    union {
        char buf[CMSG_SPACE(sizeof(int) * LZ_WIRE_MAX_FDS)];
        struct cmsghdr align;
    } ctrl;
    memset(&ctrl, 0, sizeof(ctrl));
    struct iovec iov = { .iov_base = (void *) p, .iov_len = len };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfds) {
        msg.msg_control = ctrl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    /* The coordinator end may be closed already: EPIPE/ECONNRESET. */
    ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    return sent == (ssize_t) len;
}

/* Read everything pending on a peer end. Returns the number of records;
 * *eof when the other end is closed; descriptors received are closed (and
 * counted in *nfds). Sets *last to the last record's type. (The
 * supervisor's end; a CLI's is drain_handle.) A sealed datagram can be
 * larger than a message: LZ_TLS_DATAGRAM_MAX. */
static uint8_t rbuf[LZ_TLS_DATAGRAM_MAX];
static uint8_t plain[LZ_WIRE_MAX];
static uint8_t hs_out[LZ_TLS_DATAGRAM_MAX];

static int drain(int fd, bool *eof, size_t *nfds, uint16_t *last, bool *refused)
{
    int n = 0;
    for (;;) {
        union {
            char buf[CMSG_SPACE(sizeof(int) * 8)];
            struct cmsghdr align;
        } ctrl;
        struct iovec iov = { .iov_base = rbuf, .iov_len = sizeof(rbuf) };
        struct msghdr msg = { .msg_iov = &iov,
                              .msg_iovlen = 1,
                              .msg_control = ctrl.buf,
                              .msg_controllen = sizeof(ctrl.buf) };
        ssize_t r = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r < 0) {
            CHECK(errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNRESET);
            if (errno == ECONNRESET)
                *eof = true;
            return n;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            int got[8];
            memcpy(got, CMSG_DATA(c), k * sizeof(int));
            for (size_t i = 0; i < k; i++)
                close(got[i]);
            *nfds += k;
        }
        if (r == 0) {
            *eof = true; /* the coordinator never sends an empty record */
            return n;
        }
        CHECK(r >= 2);
        uint16_t type = (uint16_t) ((rbuf[0] << 8) | rbuf[1]);
        if (last)
            *last = type;
        if (refused && type == LZ_MSG_REFUSED)
            *refused = true;
        n++;
        if (refused) {
            /* Every record to a CLI is one of the table's for it. */
            const lz_proto_entry *e = lz_proto_find(type);
            CHECK(e && e->dir == LZ_DIR_COORDINATOR_TO_CLI);
            CHECK((size_t) r <= e->max_len);
        }
    }
}

static bool handle_live(const handle *h)
{
    return h->peer >= 0 && h->s->state != S_FREE && h->s->no == h->no && h->s->sock >= 0;
}

/* One message to a CLI (in the clear, or decrypted): a row of the table's
 * coordinator->CLI direction, within its max_len. */
static void cli_message(handle *h, const uint8_t *p, size_t len)
{
    CHECK(len >= 2);
    uint16_t type = (uint16_t) ((p[0] << 8) | p[1]);
    const lz_proto_entry *e = lz_proto_find(type);
    CHECK(e && e->dir == LZ_DIR_COORDINATOR_TO_CLI);
    CHECK(len <= e->max_len);
    h->last_type = type;
    if (type == LZ_MSG_REFUSED)
        h->got_refused = true;
}

/* Whole TLS records (content types 20..23: change_cipher_spec, alert,
 * handshake, application data) and nothing else. */
static bool tls_framed(const uint8_t *d, size_t len)
{
    size_t pos = 0;
    while (pos < len) {
        if (len - pos < 5 || d[pos] < 20 || d[pos] > 23)
            return false;
        pos += 5 + (((size_t) d[pos + 3] << 8) | d[pos + 4]);
    }
    return pos == len;
}

/* Read everything pending on a CLI's end, as that CLI: before ENROLLED in
 * the clear; after it, TLS records only (fed to this handle's handshake
 * when it enrolled itself, its flights sent back at once); once TLS is
 * established, every datagram is opened. */
static void drain_handle(handle *h)
{
    for (;;) {
        union {
            char buf[CMSG_SPACE(sizeof(int) * 8)];
            struct cmsghdr align;
        } ctrl;
        struct iovec iov = { .iov_base = rbuf, .iov_len = sizeof(rbuf) };
        struct msghdr msg = { .msg_iov = &iov,
                              .msg_iovlen = 1,
                              .msg_control = ctrl.buf,
                              .msg_controllen = sizeof(ctrl.buf) };
        ssize_t r = recvmsg(h->peer, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r < 0) {
            CHECK(errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNRESET);
            if (errno == ECONNRESET)
                h->eof = true;
            return;
        }
        CHECK(!(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)));
        /* the coordinator passes no descriptor to a CLI */
        CHECK(CMSG_FIRSTHDR(&msg) == NULL);
        if (r == 0) {
            h->eof = true; /* the coordinator never sends an empty datagram */
            return;
        }
        size_t len = (size_t) r;
        if (h->tls && lz_tls_channel_established(h->tls)) {
            size_t n = 0;
            lz_error *err = NULL;
            if (lz_tls_channel_open(h->tls, rbuf, len, plain, &n, &err) < 0) {
                fprintf(stderr,
                        "fuzz_dispatch: a datagram of the coordinator's does not open: "
                        "%s\n",
                        err->message);
                CHECK(false);
            }
            CHECK(n > 0); /* one message per datagram, never none */
            cli_message(h, plain, n);
        } else if (!h->enrolled) {
            /* In the clear: REFUSED or ENROLLED only (state ENROLLING). */
            char why[160];
            CHECK(len >= 2);
            uint16_t type = (uint16_t) ((rbuf[0] << 8) | rbuf[1]);
            CHECK(lz_proto_admit(LZ_DIR_COORDINATOR_TO_CLI, LZ_PS_CLIENT_ENROLLING, type, len, 0,
                                 why, sizeof(why)) != NULL);
            cli_message(h, rbuf, len);
            if (type == LZ_MSG_ENROLLED) {
                lz_rbuf rb;
                const uint8_t *der;
                CHECK(lz_rbuf_init(&rb, rbuf, len));
                CHECK(lz_msg_enrolled_decode(&rb, h->enrolled_id, &der, &h->cert_len));
                memcpy(h->cert, der, h->cert_len);
                h->enrolled = true;
            }
        } else {
            /* After ENROLLED the coordinator says nothing in the clear. */
            CHECK(tls_framed(rbuf, len));
            if (h->tls) {
                size_t out = 0;
                lz_error *err = NULL;
                if (lz_tls_channel_handshake(h->tls, rbuf, len, hs_out, &out, &err) < 0) {
                    fprintf(stderr, "fuzz_dispatch: an honest CLI's handshake failed: %s\n",
                            err->message);
                    CHECK(false);
                }
                if (out)
                    (void) send_record(h->peer, hs_out, out, 0);
            }
        }
    }
}

static void drain_all(void)
{
    for (int i = 0; i < N_HANDLES; i++) {
        handle *h = &H[i];
        if (h->peer < 0)
            continue;
        drain_handle(h);
        /* EOF exactly when the coordinator has let go of the socket. */
        CHECK(h->eof == !handle_live(h));
    }
    if (sup_peer >= 0) {
        bool eof = false;
        size_t nfds = 0;
        drain(sup_peer, &eof, &nfds, NULL, NULL);
        CHECK(!eof || !C->sup_alive);
    }
}

static void handle_release(handle *h)
{
    if (h->peer >= 0)
        close(h->peer);
    lz_tls_channel_free(h->tls);
    SSL_CTX_free(h->cctx);
    memset(h, 0, sizeof(*h));
    h->peer = -1;
}

static void check_n_active(void)
{
    size_t n = 0;
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        n += C->sessions[i].state != S_FREE;
    CHECK(n == C->n_active);
}

static void run_loop(void)
{
    for (int round = 0; round < 8; round++) {
        /* The main loop's requests between rounds (coordinator.c): a
         * teardown asked for is not run here (step 7 is the fuzzer's),
         * what was asked of sessions is. */
        C->stop_requested = false;
        sessions_settle(C);
        for (size_t i = 0; i < MAX_SESSIONS; i++)
            if (C->sessions[i].state != S_FREE)
                relay_update_events(&C->sessions[i]);
        int ran = lz_loop_run_once(C->loop, 0);
        CHECK(ran >= 0);
        if (ran == 0)
            break;
        /* Drain between rounds: the coordinator's sends block when a peer's
         * queue is full (net.unix.max_dgram_qlen records). */
        drain_all();
    }
    drain_all();
}

/* ---- steps ------------------------------------------------------------ */

static handle *attach(int k)
{
    handle *h = &H[k];
    if (h->peer >= 0 && !h->eof)
        return h;
    handle_release(h);
    if (C->state == G_TEARDOWN)
        return NULL; /* the listening socket is gone during teardown */
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    big_sndbuf(sv[0]);
    CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
    session *s = session_attach(C, sv[0], getpid());
    if (!s) {
        /* Every slot taken (orphaned commands keep theirs). */
        close(sv[0]);
        close(sv[1]);
        return NULL;
    }
    h->peer = sv[1];
    h->s = s;
    h->no = s->no;
    return h;
}

/* An honest CLI's start: ENROLL with the fixed key, ENROLLED's
 * certificate accepted against the published CA, the TLS handshake. Every
 * step must succeed, the session is then in HELLO. */
static void secure(handle *h)
{
    lz_wbuf b;
    lz_msg_enroll_encode(&b, LZ_SESSION_PROTOCOL_VERSION, cli_pub);
    CHECK(send_record(h->peer, b.data, b.len, 0));
    run_loop();
    CHECK(h->enrolled && !h->eof && handle_live(h) && h->s->state == S_TLS);
    lz_error *err = NULL;
    lz_tls_credential *cred =
        lz_tls_client_credential(published_ca, h->enrolled_id, cli_key, h->cert, h->cert_len, &err);
    if (!cred) {
        fprintf(stderr, "fuzz_dispatch: ENROLLED refused: %s\n", err->message);
        CHECK(false);
    }
    h->cctx = lz_tls_client_ctx(published_ca, cred, &err);
    lz_tls_credential_free(cred);
    CHECK(h->cctx != NULL);
    h->tls = lz_tls_channel_new(h->cctx, false, &err);
    CHECK(h->tls != NULL);
    size_t out = 0;
    CHECK(lz_tls_channel_handshake(h->tls, NULL, 0, hs_out, &out, &err) == 0 && out > 0);
    CHECK(send_record(h->peer, hs_out, out, 0));
    run_loop(); /* ClientHello; the server's flight; our last flight (drain_handle) */
    CHECK(lz_tls_channel_established(h->tls));
    CHECK(!h->eof && handle_live(h) && h->s->state == S_HELLO);
}

static void step_session(int k, uint8_t arg, size_t nfds, const uint8_t *p, size_t len)
{
    handle *h = attach(k);
    if (!h)
        return;
    CHECK(handle_live(h));
    session *s = h->s;
    /* Sealed unless asked for raw (or empty: a shutdown); a handle that
     * did not enrol itself cannot seal. */
    bool raw = (arg & 0x80) || len == 0;
    if (!raw && !h->tls && s->state == S_ENROLL)
        secure(h);
    if (!h->tls || h->desync)
        raw = true;
    bool secured = h->tls != NULL, handshaking = s->state == S_TLS;
    /* Does the table admit it in the session's state? Predicted for
     * sealed records, and for raw ones in the clear (ENROLL). */
    bool violation = false, predicted = !raw || s->state == S_ENROLL;
    if (len == 0) {
        predicted = false; /* reads as the client's shutdown */
    } else if (len == 1) {
        violation = true; /* no type */
    } else {
        char why[160];
        uint16_t type = (uint16_t) ((p[0] << 8) | p[1]);
        violation = !lz_proto_admit(LZ_DIR_CLI_TO_COORDINATOR, session_proto_state(s), type, len,
                                    nfds, why, sizeof(why));
    }
    session_state before[MAX_SESSIONS];
    uint32_t before_no[MAX_SESSIONS];
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        before[i] = C->sessions[i].state;
        before_no[i] = C->sessions[i].no;
    }
    /* A session whose typed bytes wait for its PTY is not read (flow
     * control): the record would wait for a later round. */
    bool paused = s->in_pending_len > 0;
    h->got_refused = false;
    h->last_type = 0;
    bool sent;
    if (raw) {
        sent = send_record(h->peer, p, len, nfds);
    } else {
        static uint8_t sealed[LZ_TLS_DATAGRAM_MAX];
        size_t n = 0;
        CHECK(lz_tls_channel_seal(h->tls, p, len, sealed, &n, NULL) == 0);
        sent = send_record(h->peer, sealed, n, nfds);
        /* A sealed record that was not sent leaves a gap in the record
         * numbers: what follows fails TLS, no longer a prediction. */
        h->desync = !sent;
    }
    run_loop();
    check_n_active();
    if (raw && secured && len > 0 && sent && !paused) {
        /* Unsealed bytes after TLS: that session's connection ends. */
        CHECK(h->eof);
        CHECK(s->state == S_FREE || (s->state == S_RUNNING && s->sock < 0 && s->no == h->no));
    }
    if (handshaking && nfds > 0 && sent) {
        /* Descriptors on a handshake datagram end the connection. */
        CHECK(h->eof && s->state == S_FREE);
    }
    if (!predicted || !violation || !sent || paused)
        return;
    /* That session only: REFUSED, then EOF; its slot freed, or kept by a
     * running command that is now orphaned. */
    CHECK(h->got_refused);
    CHECK(h->last_type == LZ_MSG_REFUSED);
    CHECK(h->eof);
    CHECK(s->state == S_FREE || (s->state == S_RUNNING && s->sock < 0 && s->no == h->no));
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        if (&C->sessions[i] == s)
            continue;
        CHECK(C->sessions[i].state == before[i]);
        CHECK(C->sessions[i].no == before_no[i]);
    }
}

static void step_supervisor(size_t nfds, const uint8_t *p, size_t len)
{
    if (sup_peer < 0 || !C->sup_alive)
        return;
    send_record(sup_peer, p, len, nfds);
    run_loop();
    check_n_active();
}

static void step_disconnect(int k)
{
    handle *h = &H[k];
    if (h->peer < 0)
        return;
    close(h->peer);
    h->peer = -1;
    run_loop();
    check_n_active();
    /* The coordinator let go of the socket (slot freed or orphaned). */
    CHECK(h->s->state == S_FREE || h->s->no != h->no || h->s->sock < 0);
    handle_release(h);
}

static void step_supervisor_dies(void)
{
    if (sup_peer < 0 || !C->sup_alive)
        return; /* already lost: nobody listens on the coordinator's end */
    close(sup_peer);
    sup_peer = -1;
    run_loop();
    check_n_active();
    CHECK(!C->sup_alive);
    /* supervisor_lost(): every session ended. */
    CHECK(C->n_active == 0);
}

/* teardown_and_exit()'s first half, before it stops the supervisor. */
static void step_teardown(void)
{
    if (C->state == G_TEARDOWN)
        return;
    C->state = G_TEARDOWN;
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (C->sessions[i].state != S_FREE)
            refuse_and_close(C, &C->sessions[i], LZ_REFUSE_TEARING_DOWN,
                             "the Domain is shutting down", NULL);
    drain_all();
    CHECK(C->n_active == 0);
}

/* ---- one input ------------------------------------------------------------ */

static void reset(void)
{
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        session_close(C, &C->sessions[i]); /* FREE slots: nothing */
    check_n_active();
    CHECK(C->n_active == 0);
    for (int i = 0; i < N_HANDLES; i++)
        handle_release(&H[i]);
    if (sup_peer >= 0) {
        bool eof = false;
        size_t nfds = 0;
        drain(sup_peer, &eof, &nfds, NULL, NULL);
    }
    /* The generation's state back to a fresh start. */
    sup_channel_close();
    sup_channel_open();
    C->state = G_STARTING;
    /* A new generation's freezer: the last one's pidfds go with it. */
    lz_freezer_free(C->freezer);
    C->freezer = lz_freezer_new();
    lz_msg_refused_clear(&C->failure);
    C->next_no = 0; /* session numbers 1, 2, … in every input */
    C->n_ever = 0;
    /* Sources removed in this input are reclaimed between rounds. */
    CHECK(lz_loop_run_once(C->loop, 0) >= 0);
    int mine;
    (void) count_open_fds(&mine);
    if (mine != base_ours) {
        fprintf(stderr,
                "fuzz_dispatch: %d descriptors of the code under test open, %d at the "
                "start:\n",
                mine, base_ours);
        list_fds();
    }
    CHECK(mine == base_ours);
    CHECK(lz_loop_count(C->loop) == base_sources);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t pos = 0;
    while (size - pos >= 4) {
        uint8_t op = data[pos] % 8, arg = data[pos + 1];
        size_t len = (size_t) ((data[pos + 2] << 8) | data[pos + 3]);
        pos += 4;
        if (len > size - pos)
            len = size - pos;
        const uint8_t *p = data + pos;
        pos += len;
        size_t nfds = (arg & 0x7f) % (LZ_WIRE_MAX_FDS + 1); /* bit 7: raw (step_session) */
        switch (op) {
        case 0:
        case 1:
        case 2:
        case 3:
            step_session(op, arg, nfds, p, len);
            break;
        case 4:
            step_supervisor(nfds, p, len);
            break;
        case 5:
            step_disconnect(arg % N_HANDLES);
            break;
        case 6:
            step_supervisor_dies();
            break;
        default:
            step_teardown();
            break;
        }
        if (trace) {
            fprintf(stderr, "step op %u nfds %zu len %zu: generation %s, %zu active:", op, nfds,
                    len, generation_state_name(C->state), C->n_active);
            for (size_t i = 0; i < MAX_SESSIONS; i++)
                if (C->sessions[i].state != S_FREE)
                    fprintf(stderr, " #%u=%s%s", C->sessions[i].no,
                            C->sessions[i].state == S_TLS /* in no row's states */
                                ? "TLS_HANDSHAKE"
                                : lz_proto_state_name(LZ_DIR_CLI_TO_COORDINATOR,
                                                      session_proto_state(&C->sessions[i])),
                            C->sessions[i].sock < 0 ? "(orphan)" : "");
            fputc('\n', stderr);
        }
    }
    reset();
    return 0;
}
