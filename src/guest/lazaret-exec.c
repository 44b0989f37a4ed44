/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret-exec: the in-sandbox launcher, a small static binary bind-mounted
 * read-only at /run/lazaret/bin/lazaret-exec. It runs *inside* the Agent
 * Sandbox with the sandbox's authority only, and has two jobs:
 *
 *   lazaret-exec --init
 *       The container's first process: reaps orphans (every session's
 *       processes end up re-parented to it) and otherwise waits. The sandbox
 *       lives as long as the Domain generation, not as long as one command.
 *
 *   lazaret-exec --probe-statx
 *       Exit 0 when statx(2) with AT_NO_AUTOMOUNT works in this sandbox,
 *       1 when it fails (old runsc): Lazaret then preloads
 *       lazaret-statx-fix.so into session processes.
 *
 *   lazaret-exec -- COMMAND [ARG...]
 *   lazaret-exec --login-shell
 *       Executes COMMAND (PATH lookup as a shell does) for a Client Session
 *       and turns exec failures into the container-tool exit statuses that
 *       `lazaret run` promises: 127 "command not found", 126 "not
 *       executable". runsc exec itself reports every such failure as 128,
 *       which a user cannot tell apart from a signal. --login-shell runs the
 *       login shell of the sandbox's root user from /etc/passwd (or /bin/sh)
 *       as a login shell.
 *
 * It is deliberately tiny: no NSS, no locale, no allocation beyond the
 * stack, so that it works in any image whatever its libc.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *a, const char *b, const char *c)
{
    /* One write(2) per message so that lines from concurrent sessions do not
     * interleave mid-line. */
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "lazaret: %s%s%s\n", a, b, c);
    if (n > 0)
        (void) !write(STDERR_FILENO, buf, (size_t) n < sizeof(buf) ? (size_t) n : sizeof(buf));
}

static int run_init(void)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        int sig = 0;
        sigwait(&all, &sig);
        if (sig == SIGCHLD) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
        } else if (sig == SIGTERM || sig == SIGINT) {
            return 0;
        }
    }
}

/* The root user's login shell from /etc/passwd, or /bin/sh. */
static void login_shell(char *out, size_t len)
{
    snprintf(out, len, "/bin/sh");
    int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[16384];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    for (char *line = buf; line && *line; ) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        /* name:pw:uid:gid:gecos:home:shell */
        char *f[7] = { 0 };
        int k = 0;
        for (char *p = line; k < 7; k++) {
            f[k] = p;
            p = strchr(p, ':');
            if (!p)
                break;
            *p++ = '\0';
        }
        if (k == 6 && strcmp(f[2], "0") == 0 && f[6][0] == '/' && access(f[6], X_OK) == 0) {
            snprintf(out, len, "%s", f[6]);
            return;
        }
        line = next;
    }
}

static int exec_failed(const char *cmd, int err)
{
    if (err == ENOENT || err == ENOTDIR) {
        say(cmd, ": command not found", "");
        return 127;
    }
    say(cmd, ": cannot execute: ", strerror(err));
    return 126;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--init") == 0)
        return run_init();

    if (argc == 2 && strcmp(argv[1], "--probe-statx") == 0) {
        struct statx stx;
        return statx(AT_FDCWD, "/", AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &stx) == 0 ? 0 : 1;
    }

    if (argc == 2 && strcmp(argv[1], "--login-shell") == 0) {
        char shell[4096];
        login_shell(shell, sizeof(shell));
        const char *base = strrchr(shell, '/');
        char arg0[4096 + 2];
        snprintf(arg0, sizeof(arg0), "-%s", base ? base + 1 : shell);
        char *const args[] = { arg0, NULL };
        execv(shell, args);
        return exec_failed(shell, errno);
    }

    int i = 1;
    if (i < argc && strcmp(argv[i], "--") == 0)
        i++;
    if (i >= argc) {
        say("usage: lazaret-exec --init | --login-shell | -- COMMAND [ARG...]", "", "");
        return 125;
    }
    execvp(argv[i], argv + i);
    return exec_failed(argv[i], errno);
}
