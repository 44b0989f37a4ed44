/* SPDX-License-Identifier: Apache-2.0
 *
 * Sessions in the sandbox: the environment of a command, `runsc exec`
 * with its process spec in a memory file, the stderr relay that keeps
 * runsc's own words out of the user's stderr, signals to a command by
 * its pid inside the sandbox.
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/text.h"
#include "common/timing.h"

/* The environment of sandbox processes, later entries winning: the
 * image's, HOME and PATH defaults, the profile's plain `environment`
 * values, its resolved `env` references, then the session's extras (TERM,
 * the client's locale, `run -e` values, the escalation capability: the
 * coordinator refuses -e names starting with LAZARET_). An earlier entry of
 * a name set again later is dropped, so each name appears once whatever
 * the reader (glibc's getenv takes the first). */
static char **session_env(sup *s, char *const *extra, size_t n_extra)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    size_t n_img = 0;
    while (s->sc->image->env && s->sc->image->env[n_img])
        n_img++;
    size_t cap = n_img + cfg->n_environment + cfg->n_env + n_extra + 4;
    char **env = lz_xcalloc(cap, sizeof(char *));
    size_t n = 0;
    bool have_path = false, have_home = false;
    for (size_t i = 0; i < n_img; i++) {
        env[n++] = lz_xstrdup(s->sc->image->env[i]);
        have_path |= strncmp(s->sc->image->env[i], "PATH=", 5) == 0;
        have_home |= strncmp(s->sc->image->env[i], "HOME=", 5) == 0;
    }
    if (!have_path)
        env[n++] = lz_xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    if (!have_home)
        env[n++] = lz_xstrdup("HOME=/root");
    for (size_t i = 0; i < cfg->n_environment; i++)
        env[n++] = lz_xasprintf("%s=%s", cfg->environment[i].name, cfg->environment[i].value);
    for (size_t i = 0; i < cfg->n_env; i++)
        env[n++] = lz_xasprintf("%s=%s", cfg->env[i].sandbox_name, cfg->env[i].value);
    for (size_t i = 0; i < n_extra; i++)
        env[n++] = lz_xstrdup(extra[i]);
    /* Keep the last entry of each name. */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        size_t name_len = strcspn(env[i], "=");
        bool later = false;
        for (size_t j = i + 1; j < n && !later; j++)
            later = strncmp(env[j], env[i], name_len + 1) == 0;
        if (later) {
            explicit_bzero(env[i], strlen(env[i])); /* may hold a secret */
            free(env[i]);
        } else {
            env[kept++] = env[i];
        }
    }
    n = kept;
    /* lazaret-escalate on every command's PATH, after the image's own
     * directories (whatever PATH ended up, the profile's included). */
    for (size_t i = 0; i < n; i++)
        if (strncmp(env[i], "PATH=", 5) == 0) {
            char *p = lz_xasprintf("%s%s" LZ_GUEST_BIN_DIR, env[i], env[i][5] ? ":" : "");
            free(env[i]);
            env[i] = p;
        }
    if (s->statx_fix)
        env[n++] = lz_xstrdup("LD_PRELOAD=" LZ_GUEST_STATX_FIX);
    env[n] = NULL;
    return env;
}

/* jansson frees its strings without wiping them: overwrite the process
 * spec's environment (which holds the profile's secrets) in place first. */
static void wipe_json_env(json_t *proc)
{
    json_t *env = json_object_get(proc, "env");
    size_t i;
    json_t *v;
    json_array_foreach(env, i, v)
    {
        if (json_is_string(v))
            explicit_bzero((char *) json_string_value(v), json_string_length(v));
    }
}

void sup_free_strv(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++) {
        explicit_bzero(*p, strlen(*p)); /* may hold secrets */
        free(*p);
    }
    free(v);
}

/* A non-interactive session's stderr, with runsc's own words taken out.
 * runsc exec hands its fds 0-2 to the command and writes its own failures
 * ("waiting on pid 4: ... urpc method ... failed: EOF" when the sandbox
 * dies) to the same fd 2 (runsc/cmd/util/util.go, Errorf). So the command's
 * stderr is a socket instead: the kernel tags every chunk written to a unix
 * socket with its writer's pid (SO_PASSCRED) and never merges two writers'
 * chunks in one read, so what the sandbox process (the gVisor kernel, which
 * performs the command's writes) wrote goes to the user's stderr and what
 * any other process wrote - runsc exec - goes to the log (docs/runtime.md
 * "When the sandbox dies"). The relay is a child of the supervisor holding
 * only the socket, the user's stderr and the log; it ends at EOF (every
 * writer gone) or with the supervisor's pid namespace. Returns the
 * sandbox's end, or -1 when no relay can be made (the caller then passes
 * the user's stderr as it is). */
static void stderr_relay(int sock, int out, pid_t sandbox, uint32_t session_no)
{
    static char buf[65536];
    union {
        char space[CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } ctl;
    for (;;) {
        struct iovec iov = { buf, sizeof(buf) - 1 };
        struct msghdr mh = { .msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = ctl.space,
                             .msg_controllen = sizeof(ctl.space) };
        ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        pid_t from = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                c->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
                struct ucred uc;
                memcpy(&uc, CMSG_DATA(c), sizeof(uc));
                from = uc.pid;
            }
        if (from == sandbox) {
            /* A user's stderr that went away (EPIPE): the rest is dropped,
             * as a closed pipe would. */
            for (ssize_t off = 0; off < n;) {
                ssize_t w = write(out, buf + off, (size_t) (n - off));
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0)
                    break;
                off += w;
            }
        } else {
            buf[n] = '\0';
            char *line = lz_text_printable(buf);
            fprintf(stderr, "lz-supervisor: session #%u: runsc (pid %d) wrote: %s\n", session_no,
                    (int) from, line);
            free(line);
        }
    }
}

typedef struct relay_job {
    int sock, user_err;
    pid_t sandbox;
    uint32_t session_no;
} relay_job;

static int relay_child(void *arg, int channel, lz_error **err)
{
    (void) err;
    const relay_job *j = arg;
    if (lz_fork_ready(channel) < 0)
        return 1;
    /* Keep the socket, the user's stderr and the log (fd 2) only. */
    int a = j->sock < j->user_err ? j->sock : j->user_err;
    int b = j->sock < j->user_err ? j->user_err : j->sock;
    close_range(3, (unsigned) a - 1, 0);
    close_range((unsigned) a + 1, (unsigned) b - 1, 0);
    close_range((unsigned) b + 1, ~0U, 0);
    signal(SIGPIPE, SIG_IGN);
    stderr_relay(j->sock, j->user_err, j->sandbox, j->session_no);
    return 0;
}

static int stderr_relay_start(sup *s, int user_err, uint32_t session_no)
{
    if (s->sandbox_pid <= 0 || user_err < 3)
        return -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    int one = 1;
    /* Nothing flows back into the sandbox: its end only writes. */
    if (setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0 ||
        shutdown(sv[0], SHUT_WR) < 0 || shutdown(sv[1], SHUT_RD) < 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    relay_job j = {
        .sock = sv[0], .user_err = user_err, .sandbox = s->sandbox_pid, .session_no = session_no
    };
    lz_fork_options opt = { .what = "the stderr relay", .name = "lz-stderr-relay" };
    lz_child child;
    int r = lz_fork_call(relay_child, &j, &opt, &child, NULL);
    close(sv[0]);
    if (r < 0) {
        close(sv[1]);
        return -1;
    }
    lz_child_release(&child); /* the supervisor's reaper collects it by pid */
    return sv[1];
}

int sup_exec(sup *s, const lz_msg_exec *m, const int *fds, lz_error **err)
{
    size_t slot = MAX_EXECS;
    for (size_t i = 0; i < MAX_EXECS; i++)
        if (s->execs[i].pid == 0) {
            slot = i;
            break;
        }
    if (slot == MAX_EXECS)
        return lz_error_set(err, EAGAIN, "too many sessions in this Domain");
    char **env = session_env(s, m->env, m->envc);
    json_t *proc =
        lz_spec_process(m->argv, m->argc, m->cwd, env, m->interactive, &s->sc->image->user);
    sup_free_strv(env);
    /* The process spec holds resolved env values: it goes to runsc through
     * an anonymous memory file, never through the file system. */
    _cleanup_close_ int mfd = memfd_create("lazaret-process", MFD_CLOEXEC);
    int r = mfd >= 0 ? json_dumpfd(proc, mfd, 0) : -1;
    wipe_json_env(proc);
    json_decref(proc);
    if (r < 0)
        return lz_error_set(err, errno, "cannot write the process specification");
    /* The command's pid inside the sandbox, for SIGKILL (runsc exec
     * forwards catchable signals itself, but SIGKILL would only kill it). */
    _cleanup_free_ char *pidfile =
        lz_xasprintf("%s/exec-%u.pid", s->sc->generation_dir, m->session_no);
    char *const args[] = { (char *) "exec",
                           (char *) "--internal-pid-file",
                           pidfile,
                           (char *) "--process",
                           (char *) "/proc/self/fd/3",
                           (char *) s->sc->container_id,
                           NULL };
    _cleanup_close_ int relay = m->interactive ? -1 : stderr_relay_start(s, fds[2], m->session_no);
    int pid = sup_runsc_run_tty(s, args, fds[0], fds[1], relay >= 0 ? relay : fds[2], mfd,
                                m->interactive, err);
    lz_timing_mark("supervisor: runsc exec spawned");
    lz_timing_flush(stderr, NULL);
    if (pid < 0)
        return -1;
    s->execs[slot].pid = pid;
    s->execs[slot].session_no = m->session_no;
    return 0;
}

void sup_signal(sup *s, uint32_t session_no, uint32_t sig)
{
    for (size_t i = 0; i < MAX_EXECS; i++) {
        if (s->execs[i].pid == 0 || s->execs[i].session_no != session_no)
            continue;
        /* The guest command, by its pid inside the sandbox: `runsc kill
         * --pid`, started and not waited for (the supervisor never blocks
         * on one session; the reaper collects it). Every signal goes this
         * way: runsc 20221219's `runsc exec` does not forward SIGHUP to a
         * non-interactive command, it dies of it, and the command ran on
         * unseen in the sandbox with its session already reported ended
         * (tests/integration/test_protocol.py, the running-session case). */
        const char *sname = sig == SIGHUP    ? "HUP"
                            : sig == SIGTERM ? "TERM"
                            : sig == SIGINT  ? "INT"
                            : sig == SIGQUIT ? "QUIT"
                                             : "KILL";
        char name[64];
        snprintf(name, sizeof(name), "exec-%u.pid", session_no);
        _cleanup_free_ char *line = sup_last_line_of(s->gen_fd, name);
        char *end = NULL;
        long guest = line ? strtol(line, &end, 10) : 0;
        bool sent = false;
        if (guest > 0 && end && *end == '\0') {
            char spid[32];
            snprintf(spid, sizeof(spid), "%ld", guest);
            char *const args[] = { (char *) "kill",
                                   (char *) "--pid",
                                   spid,
                                   (char *) s->sc->container_id,
                                   (char *) sname,
                                   NULL };
            sent = sup_runsc_run(s, args, -1, -1, -1, -1, NULL) > 0;
        }
        /* SIGKILL: the session's runsc exec too, so the session ends now
         * whatever the guest does; a guest process that survived is the
         * sandbox's until teardown. Another signal reaches runsc exec only
         * when the guest pid is not known (yet). */
        if (sig == SIGKILL || !sent)
            kill(s->execs[i].pid, (int) sig); /* pid > 0: checked by the loop above */
        return;
    }
}
