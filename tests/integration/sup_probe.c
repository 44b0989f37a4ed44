/* SPDX-License-Identifier: Apache-2.0
 *
 * Test hook for tests/integration/test_protocol.py: plays the Session
 * Coordinator's side of the supervisor channel (protocol/table.h) against a
 * real Runtime Supervisor, then breaks the protocol once. Built by meson into
 * the build tree only (tests/integration/meson.build, install: false): no
 * production binary has it.
 *
 *   sup_probe MODE PROFILE WORKSPACE GENDIR LAZARET_EXEC
 *
 * Runs as the Domain's user with its environment (HOME, XDG_*). Loads the
 * configuration as the CLI does (lz_config_load), prepares the image
 * (lz_image_prepare, cached), creates GENDIR (0700, like a generation
 * directory: runsc state, bundle, a copy of LAZARET_EXEC under guest/bin),
 * spawns the supervisor with lz_supervisor_spawn(), sends SUP_START and waits
 * for SUP_STARTED. Then, by MODE:
 *
 *   unknown       a message of type 999
 *   direction     SUP_EXEC_EXITED (the supervisor's message)
 *   state         SUP_START again (only allowed while IDLE)
 *   fds           SUP_SIGNAL with a descriptor
 *   oversized     SUP_SIGNAL of 30 bytes (its row allows 10)
 *   truncated     a record of more than LZ_WIRE_MAX bytes
 *   malformed     SUP_SIGNAL for signal 9999
 *   control       the legal SUP_SIGNAL (SIGHUP for a session that does
 *                 not exist: no reply), then SUP_STOP, which must be
 *                 answered by SUP_STOPPED
 *
 * and prints, one per line on stdout:
 *
 *   started                         SUP_STARTED arrived
 *   runsc-before N                  runsc processes of GENDIR's container
 *   channel eof|open|TYPE-NAME      after the message: EOF within 30 s, no
 *                                   EOF for 2 s (control), or a message
 *   stopped                         (control) SUP_STOPPED arrived
 *   supervisor-exit N               the supervisor's exit status
 *   runsc-after N                   runsc processes left 10 s later at most
 *   state-before N, state-entries N entries of GENDIR/runsc naming the
 *                                   container, before and after (runsc
 *                                   delete removes them: the sandbox was
 *                                   stopped, not just orphaned)
 *   ready                           then waits for stdin to end, so the
 *                                   test can look at the host's processes
 *                                   while this process (which would take
 *                                   the supervisor with it) still lives
 *
 * The supervisor's stderr (its "lz-supervisor: ..." lines) is this
 * process's stderr. Exit 0 when the probe ran, 2 when it could not.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/spawn.h"
#include "common/util.h"
#include "config/resolve.h"
#include "oci/image.h"
#include "oci/layout.h"
#include "protocol/mailbox.h"
#include "protocol/messages.h"
#include "protocol/table.h"
#include "protocol/wire.h"
#include "supervisor/supervisor.h"

static FILE *report;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(report, fmt, ap);
    va_end(ap);
    fputc('\n', report);
    fflush(report);
}

static int fail(const char *what, lz_error *err)
{
    fprintf(stderr, "sup_probe: %s\n", what);
    if (err)
        lz_error_report(err, stderr);
    lz_error_free(err);
    return 2;
}

static int copy_file(const char *src, const char *dst, mode_t mode)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    struct stat st;
    int out = fstat(in, &st) == 0
                  ? open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
                  : -1;
    int r = out < 0 ? -1 : 0;
    for (off_t left = st.st_size; r == 0 && left > 0;) {
        ssize_t k = sendfile(out, in, NULL, (size_t) left);
        if (k <= 0)
            r = -1;
        left -= k;
    }
    if (out >= 0)
        close(out);
    close(in);
    return r;
}

/* Host processes whose command line names GENDIR/runsc: every runsc
 * process of the container (runsc --root=GENDIR/runsc ..., the sandbox and
 * the gofer included). */
static int count_runsc(const char *gendir)
{
    char key[4096];
    snprintf(key, sizeof(key), "%s/runsc", gendir);
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], buf[8192];
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0)
            continue;
        for (ssize_t i = 0; i < k; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[k] = '\0';
        if (strstr(buf, key))
            n++;
    }
    closedir(d);
    return n;
}

/* Entries of runsc's state directory that name the container (runsc
 * delete removes them: the sandbox was stopped, not just orphaned). */
static int count_state(const char *gendir, const char *container)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/runsc", gendir);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, container))
            n++;
    closedir(d);
    return n;
}

/* 1 readable, 0 timeout. */
static int wait_readable(int fd, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
}

/* The next message of the supervisor, admitted in generation state `state`:
 * 1 with *type, 0 at EOF, -1 on a violation by the supervisor, -2 timeout. */
static int next_message(int sock, unsigned state, int ms, uint16_t *type)
{
    static lz_proto_msg m;
    if (!wait_readable(sock, ms))
        return -2;
    lz_error *err = NULL;
    int r = lz_proto_recv(sock, LZ_DIR_SUPERVISOR_TO_COORDINATOR, state, &m, &err);
    if (r < 0) {
        fprintf(stderr, "sup_probe: from the supervisor: %s\n", err->message);
        lz_error_free(err);
        return -1;
    }
    if (r > 0) {
        *type = m.r.type;
        lz_proto_msg_clear(&m);
    }
    return r;
}

static int send_raw(int sock, const void *p, size_t n, const int *fds, size_t nfds)
{
    struct iovec iov = { .iov_base = (void *) p, .iov_len = n };
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctrl;
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfds == 1) {
        memset(&ctrl, 0, sizeof(ctrl));
        msg.msg_control = ctrl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), fds, sizeof(int));
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static int send_violation(int sock, const char *mode)
{
    lz_wbuf b;
    if (strcmp(mode, "unknown") == 0) {
        lz_wbuf_init(&b, 999);
        lz_wbuf_u32(&b, 7);
    } else if (strcmp(mode, "direction") == 0) {
        lz_msg_pair_encode(&b, LZ_SUP_EXEC_EXITED, 1, 0);
    } else if (strcmp(mode, "state") == 0) {
        lz_msg_empty_encode(&b, LZ_SUP_START);
    } else if (strcmp(mode, "fds") == 0) {
        lz_msg_pair_encode(&b, LZ_SUP_SIGNAL, 1, SIGHUP);
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int r = send_raw(sock, b.data, b.len, &fd, 1);
        close(fd);
        return r;
    } else if (strcmp(mode, "oversized") == 0) {
        lz_msg_pair_encode(&b, LZ_SUP_SIGNAL, 1, SIGHUP);
        for (int i = 0; i < 5; i++)
            lz_wbuf_u32(&b, 0);
    } else if (strcmp(mode, "truncated") == 0) {
        /* More than LZ_WIRE_MAX: the receiver's recvmsg sees MSG_TRUNC. */
        size_t n = LZ_WIRE_MAX + 4000;
        uint8_t *big = lz_xcalloc(n, 1);
        big[0] = LZ_SUP_SIGNAL >> 8;
        big[1] = LZ_SUP_SIGNAL & 0xff;
        int sz = (int) (2 * n);
        setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        int r = send_raw(sock, big, n, NULL, 0);
        free(big);
        return r;
    } else if (strcmp(mode, "malformed") == 0) {
        lz_msg_pair_encode(&b, LZ_SUP_SIGNAL, 1, 9999);
    } else if (strcmp(mode, "control") == 0) {
        lz_msg_pair_encode(&b, LZ_SUP_SIGNAL, 1, SIGHUP);
    } else {
        fprintf(stderr, "sup_probe: unknown mode %s\n", mode);
        return -1;
    }
    return send_raw(sock, b.data, b.len, NULL, 0);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: sup_probe MODE PROFILE WORKSPACE GENDIR LAZARET_EXEC\n");
        return 2;
    }
    const char *mode = argv[1], *gendir = argv[4];
    signal(SIGPIPE, SIG_IGN);
    /* Reports go to our stdout only: the supervisor inherits fds 0-2, so
     * it gets /dev/null and our stderr instead (the test reads stdout to
     * its end, which the supervisor must not hold open). */
    int out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    int in = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (out < 0 || in < 0 || devnull < 0 || dup2(devnull, STDIN_FILENO) < 0 ||
        dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
        return fail("cannot set up stdio", NULL);
    report = fdopen(out, "w");

    lz_error *err = NULL;
    lz_resolved_config *cfg = NULL;
    lz_load_request req = { .config_path = NULL,
                            .profile = argv[2],
                            .workspace = argv[3],
                            .layout = lz_sandbox_layout_production() };
    if (lz_config_load(&req, &cfg, &err) < 0)
        return fail("cannot load the configuration", err);
    lz_prepared_image image = { .bundle = LZ_PATH_PLAN_INIT };
    if (lz_image_prepare(&cfg->storage_root, cfg->image, NULL, NULL, &image, &err) < 0)
        return fail("cannot prepare the image", err);
    _cleanup_free_ char *runsc = NULL;
    if (lz_spawn_find_program("runsc", LZ_SPAWN_SYSTEM_PATH, &runsc, &err) < 0)
        return fail("no runsc", err);

    /* The generation directory, as generation.c's make_generation_dir. */
    _cleanup_free_ char *bin = lz_xasprintf("%s/guest/bin", gendir);
    _cleanup_free_ char *guest = lz_xasprintf("%s/guest", gendir);
    _cleanup_free_ char *exec_copy = lz_xasprintf("%s/lazaret-exec", bin);
    /* The supervisor binds guest/bin/lazaret-escalate on the login PATH;
     * the probe never escalates, so any file stands in for the client. */
    _cleanup_free_ char *client_copy = lz_xasprintf("%s/lazaret-escalate", bin);
    _cleanup_free_ char *log_path = lz_xasprintf("%s/runsc.log", gendir);
    /* The escalation mailbox and credentials directories (escalation.c
     * makes them for a real generation; the probe never escalates). */
    _cleanup_free_ char *mailbox = lz_xasprintf("%s/mailbox", gendir);
    _cleanup_free_ char *spool = lz_xasprintf("%s/" LZ_MBX_HOST_SPOOL, gendir);
    _cleanup_free_ char *outbox = lz_xasprintf("%s/mailbox/outbox", gendir);
    _cleanup_free_ char *creds = lz_xasprintf("%s/credentials", gendir);
    if (mkdir(gendir, 0700) < 0 || mkdir(guest, 0755) < 0 || mkdir(bin, 0755) < 0 ||
        mkdir(mailbox, 0755) < 0 || mkdir(spool, 0700) < 0 || mkdir(outbox, 0755) < 0 ||
        mkdir(creds, 0755) < 0 || copy_file(argv[5], exec_copy, 0555) < 0 ||
        copy_file(argv[5], client_copy, 0555) < 0)
        return fail("cannot make the generation directory", NULL);
    char container[64];
    snprintf(container, sizeof(container), "lzprobe-%d", (int) getpid());

    lz_supervisor_config sc = {
        .cfg = cfg,
        .image = &image,
        .generation = 1,
        .generation_dir = gendir,
        .container_id = container,
        .runsc = runsc,
        .guest_bin_dir = bin,
        .guest_lib_dir = NULL,
        .log_path = log_path,
        .workspace_mounts = NULL,
        .n_workspace_mounts = 0,
        .denial_logs_fd = -1,
    };
    lz_supervisor_handle h;
    if (lz_supervisor_spawn(&sc, &h, &err) < 0)
        return fail("cannot spawn the supervisor", err);

    lz_wbuf b;
    lz_msg_empty_encode(&b, LZ_SUP_START);
    if (lz_wire_send(h.sock, &b, NULL, 0, &err) < 0)
        return fail("cannot send SUP_START", err);
    uint16_t type = 0;
    int r = next_message(h.sock, LZ_PS_GENERATION_STARTING, 120000, &type);
    if (r == 1 && type == LZ_SUP_MAILBOX) /* the inbox's tmpfs, then SUP_STARTED */
        r = next_message(h.sock, LZ_PS_GENERATION_STARTING, 120000, &type);
    if (r != 1 || type != LZ_SUP_STARTED) {
        fprintf(stderr, "sup_probe: no SUP_STARTED (%d, %s)\n", r, lz_proto_name(type));
        kill(h.outer_pid, SIGKILL);
        return 2;
    }
    say("started");
    say("runsc-before %d", count_runsc(gendir));
    say("state-before %d", count_state(gendir, container));

    if (send_violation(h.sock, mode) < 0) {
        fprintf(stderr, "sup_probe: cannot send the %s message: %s\n", mode, strerror(errno));
        kill(h.outer_pid, SIGKILL);
        return 2;
    }
    bool control = strcmp(mode, "control") == 0;
    r = next_message(h.sock, LZ_PS_GENERATION_RUNNING, control ? 2000 : 30000, &type);
    if (r == 0)
        say("channel eof");
    else if (r == -2)
        say("channel open");
    else if (r == 1)
        say("channel %s", lz_proto_name(type));
    else
        say("channel bad");
    if (control && r == -2) {
        lz_msg_empty_encode(&b, LZ_SUP_STOP);
        if (lz_wire_send(h.sock, &b, NULL, 0, &err) < 0)
            return fail("cannot send SUP_STOP", err);
        r = next_message(h.sock, LZ_PS_GENERATION_TEARDOWN, 60000, &type);
        if (r == 1 && type == LZ_SUP_STOPPED)
            say("stopped");
        else
            say("stop-answer %d %s", r, r == 1 ? lz_proto_name(type) : "-");
    }

    /* The supervisor's end: its outer process exits with its status. */
    int status = -1;
    for (int i = 0; i < 300; i++) {
        pid_t w = waitpid(h.outer_pid, &status, WNOHANG);
        if (w == h.outer_pid)
            break;
        status = -1;
        struct timespec d = { 0, 100 * 1000 * 1000 };
        nanosleep(&d, NULL);
    }
    if (status == -1)
        say("supervisor-exit running");
    else
        say("supervisor-exit %d", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));

    int left = count_runsc(gendir);
    for (int i = 0; i < 100 && left > 0; i++) {
        struct timespec d = { 0, 100 * 1000 * 1000 };
        nanosleep(&d, NULL);
        left = count_runsc(gendir);
    }
    say("runsc-after %d", left);
    say("state-entries %d", count_state(gendir, container));
    say("ready");

    char c;
    while (read(in, &c, 1) > 0)
        ;
    if (status == -1) {
        kill(h.outer_pid, SIGKILL);
        waitpid(h.outer_pid, NULL, 0);
    }
    close(h.sock);
    lz_prepared_image_clear(&image);
    lz_resolved_config_free(cfg);
    return 0;
}
