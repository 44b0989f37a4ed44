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
 *   lazaret-exec [--pty] -- COMMAND [ARG...]
 *   lazaret-exec [--pty] --login-shell
 *   lazaret-exec --login-shell
 *       Executes COMMAND (PATH lookup as a shell does) for a Client Session
 *       and turns exec failures into the container-tool exit statuses that
 *       `lazaret run` promises: 127 "command not found", 126 "not
 *       executable". runsc exec itself reports every such failure as 128,
 *       which a user cannot tell apart from a signal. --login-shell runs the
 *       login shell of the sandbox's root user from /etc/passwd (or /bin/sh)
 *       as a login shell.
 *
 *   --pty: an interactive session. runsc hands the session's terminal to the
 *   guest as a host file ("host:[N]"), which is a TTY for isatty() but has
 *   no name (tty(1) says "not a tty") and no job control. So the launcher
 *   allocates a real pseudo-terminal inside the sandbox (/dev/ptmx), runs
 *   the command as a session leader on its slave, puts the host terminal in
 *   raw mode and relays bytes both ways; the window size follows SIGWINCH.
 *   runsc 2022 does not generate signals from its pseudo-terminals' line
 *   discipline (writing ^C to a master does not SIGINT the foreground
 *   process group, unlike Linux), so the launcher does that part itself, by
 *   the inner terminal's own settings: with ISIG set, the VINTR, VQUIT and
 *   VSUSP characters become SIGINT, SIGQUIT and SIGTSTP for the terminal's
 *   foreground process group, echoed as ^C when ECHOCTL asks for it. Only a
 *   member of the terminal's session can ask it for its foreground group,
 *   so a small "session keeper" process leads the session, runs the command
 *   in its own foreground process group, and sends the signals:
 *
 *     relay (raw outer terminal <-> inner master) --ctl pipe--> keeper
 *     (session leader, ctty = inner slave) --> command (foreground group)
 *
 * It is deliberately tiny: no NSS, no locale, no allocation beyond the
 * stack, so that it works in any image whatever its libc.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "common/io.h"
#include "mode-guard.h"

static void say(const char *a, const char *b, const char *c)
{
    /* One write(2) per message so that lines from concurrent sessions do not
     * interleave mid-line. */
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "lazaret: %s%s%s\n", a, b, c);
    if (n > 0)
        (void) !write(STDERR_FILENO, buf, (size_t) n < sizeof(buf) ? (size_t) n : sizeof(buf));
}

/* Start in dir (below /workspace), or, when the sandbox has no such
 * directory — it lies in a git-ignored directory, whose copy is the
 * sandbox's own and may not have it — in its nearest existing parent,
 * saying so. */
static void enter_cwd(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int) sizeof(path))
        snprintf(path, sizeof(path), "/workspace");
    while (chdir(path) != 0) {
        char *slash = strrchr(path, '/');
        if (!slash || slash == path || strcmp(path, "/workspace") == 0) {
            (void) !chdir("/workspace");
            snprintf(path, sizeof(path), "/workspace");
            break;
        }
        *slash = '\0';
    }
    if (strcmp(path, dir) != 0)
        say(dir,
            " does not exist in the sandbox (inside a git-ignored directory, the copy is "
            "the sandbox's own); starting in ",
            path);
    setenv("PWD", path, 1);
}

static _Noreturn void run_init(void)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        int sig = 0;
        sigwait(&all, &sig);
        /* Nothing else ends it: any process of the sandbox may signal
         * pid 1, and its end ends every session of the Domain (attack
         * round i12b, F2: `kill 1`). Lazaret stops the sandbox with
         * `runsc kill KILL`; a SIGKILL from inside (gVisor delivers it to
         * pid 1, Linux would not) is the sandbox's death (docs/runtime.md
         * "When the sandbox dies"). */
        if (sig == SIGCHLD) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
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
    for (char *line = buf; line && *line;) {
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

/* exec the command (or the login shell); never returns. The command starts
 * with every signal at its default disposition and unblocked, whatever the
 * launcher inherited from runsc (an ignored SIGINT would survive exec and
 * make Ctrl-C do nothing). */
static void exec_command(bool login, char **cmd) __attribute__((noreturn));
static void exec_command(bool login, char **cmd)
{
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (login) {
        char shell[4096];
        login_shell(shell, sizeof(shell));
        const char *base = strrchr(shell, '/');
        char arg0[4096 + 2];
        snprintf(arg0, sizeof(arg0), "-%s", base ? base + 1 : shell);
        char *const args[] = { arg0, NULL };
        execv(shell, args);
        _exit(exec_failed(shell, errno));
    }
    execvp(cmd[0], cmd);
    _exit(exec_failed(cmd[0], errno));
}

static int status_of(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void copy_winsize(int from, int to)
{
    struct winsize ws;
    if (ioctl(from, TIOCGWINSZ, &ws) == 0)
        ioctl(to, TIOCSWINSZ, &ws);
}

/* Forward typed bytes to the inner terminal, turning its signal characters
 * into requests to the session keeper (see the header comment). */
static void forward_input(int master, int ctl, const char *buf, size_t n)
{
    struct termios t;
    if (tcgetattr(master, &t) < 0 || !(t.c_lflag & ISIG)) {
        lz_write_all(master, buf, n);
        return;
    }
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char) buf[i];
        unsigned char sig = 0;
        if (ch == t.c_cc[VINTR] && t.c_cc[VINTR] != _POSIX_VDISABLE)
            sig = SIGINT;
        else if (ch == t.c_cc[VQUIT] && t.c_cc[VQUIT] != _POSIX_VDISABLE)
            sig = SIGQUIT;
        else if (ch == t.c_cc[VSUSP] && t.c_cc[VSUSP] != _POSIX_VDISABLE)
            sig = SIGTSTP;
        if (!sig)
            continue;
        if (i > start)
            lz_write_all(master, buf + start, i - start);
        start = i + 1;
        if ((t.c_lflag & ECHO) && (t.c_lflag & ECHOCTL)) {
            char echo[2] = { '^', (char) (ch ^ 0x40) };
            lz_write_all(STDOUT_FILENO, echo, 2);
        }
        if (!(t.c_lflag & NOFLSH))
            tcflush(master, TCIFLUSH);
        lz_write_all(ctl, (const char *) &sig, 1);
    }
    if (n > start)
        lz_write_all(master, buf + start, n - start);
}

/* The session keeper: leader of the command's session, with the inner
 * terminal as controlling terminal, so that it can ask the terminal for its
 * foreground process group (only members of the session may) and signal it
 * on behalf of the relay. Exits with the command's status. */
static int session_keeper(const char *name, int ctl, bool login, char **cmd)
{
    setsid();
    int tty = open(name, O_RDWR | O_CLOEXEC);
    if (tty < 0)
        return 125;
    /* Opened by a session leader, the slave became the controlling terminal
     * already (gVisor then refuses TIOCSCTTY with EINVAL). */
    if (tcgetpgrp(tty) != getpid())
        ioctl(tty, TIOCSCTTY, 0);
    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0)
        return 125;
    pid_t c = fork();
    if (c < 0)
        return 125;
    if (c == 0) {
        /* The command: its own process group, in the foreground. */
        close(ctl);
        close(go[1]);
        setpgid(0, 0);
        char x;
        (void) !read(go[0], &x, 1);
        dup2(tty, 0);
        dup2(tty, 1);
        dup2(tty, 2);
        exec_command(login, cmd);
    }
    close(go[0]);
    setpgid(c, c);
    tcsetpgrp(tty, c);
    close(go[1]);

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    for (;;) {
        struct pollfd p[2] = { { .fd = ctl, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return 125;
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            (void) !read(sfd, &si, sizeof(si));
            int st;
            pid_t r;
            while ((r = waitpid(-1, &st, WNOHANG)) > 0)
                if (r == c)
                    return status_of(st);
        }
        if (p[0].revents & (POLLIN | POLLHUP)) {
            unsigned char sig;
            if (read(ctl, &sig, 1) != 1) {
                /* The relay is gone: hang up the session, as a closed
                 * terminal would. */
                sig = SIGHUP;
            }
            pid_t fg = tcgetpgrp(tty);
            if (sig == SIGHUP) {
                kill(-c, SIGHUP);
                kill(-c, SIGCONT);
            }
            if (fg > 0 && fg != getpgrp()) {
                kill(-fg, sig);
                if (sig == SIGHUP)
                    kill(-fg, SIGCONT);
            }
            if (sig == SIGHUP && p[0].revents & POLLHUP) {
                close(ctl);
                ctl = -1;
            }
        }
    }
}

static int run_pty(bool login, char **cmd)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char name[64];
    if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
        ptsname_r(master, name, sizeof(name)) != 0) {
        /* No devpts: run on the terminal we were given. */
        if (master >= 0)
            close(master);
        exec_command(login, cmd);
    }
    copy_winsize(STDIN_FILENO, master);
    struct termios outer;
    bool have_outer = tcgetattr(STDIN_FILENO, &outer) == 0;

    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGWINCH);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGQUIT);
    sigprocmask(SIG_BLOCK, &mask, &old);

    int ctl[2];
    if (pipe2(ctl, O_CLOEXEC) < 0) {
        say("cannot create a pipe: ", strerror(errno), "");
        return 125;
    }
    /* The relay holds the slave open itself until the keeper has ended: a
     * master whose slave no process has open reports POLLHUP and reads EIO
     * (Linux does, and so does runsc from 2023 on; runsc 2022 did not), and
     * the keeper opens the slave only after the fork - the relay would take
     * that for the end of the session and stop relaying while the command
     * runs (issue 27: no prompt on runsc 2024-07-29). Without a controlling
     * terminal of ours (O_NOCTTY); closed when the keeper is reaped, so that
     * the end of the last holder still ends the relay. */
    int hold = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    pid_t keeper = fork();
    if (keeper < 0) {
        say("cannot fork: ", strerror(errno), "");
        return 125;
    }
    if (keeper == 0) {
        close(ctl[1]);
        close(master);
        if (hold >= 0)
            close(hold);
        signal(SIGPIPE, SIG_IGN);
        _exit(session_keeper(name, ctl[0], login, cmd));
    }
    close(ctl[0]);
    signal(SIGPIPE, SIG_IGN);
    if (have_outer) {
        struct termios raw = outer;
        cfmakeraw(&raw);
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }

    /* Signals stay blocked and arrive through a signalfd. */
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    int status = -1;
    bool in_open = true;
    char buf[16384];
    for (;;) {
        struct pollfd p[3] = { { .fd = in_open ? STDIN_FILENO : -1, .events = POLLIN },
                               { .fd = master, .events = POLLIN },
                               { .fd = sfd, .events = POLLIN } };
        /* After the command ended, forward what is left for a moment: a
         * background process may keep the terminal open. */
        int r = poll(p, 3, status >= 0 ? 200 : -1);
        if (r < 0 && errno != EINTR)
            break;
        if (r == 0 && status >= 0)
            break;
        if (r <= 0)
            continue;
        if (p[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                unsigned char sig = (unsigned char) si.ssi_signo;
                if (sig == SIGCHLD) {
                    int st;
                    if (waitpid(keeper, &st, WNOHANG) == keeper) {
                        status = status_of(st);
                        if (hold >= 0)
                            close(hold);
                        hold = -1;
                    }
                } else if (sig == SIGWINCH) {
                    copy_winsize(STDIN_FILENO, master);
                    lz_write_all(ctl[1], (const char *) &sig, 1);
                } else {
                    /* Hung up or terminated (runsc forwards what the host
                     * sends us): the whole session gets SIGHUP. */
                    sig = SIGHUP;
                    lz_write_all(ctl[1], (const char *) &sig, 1);
                }
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
            if (n <= 0)
                in_open = false;
            else
                forward_input(master, ctl[1], buf, (size_t) n);
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(master, buf, sizeof(buf));
            if (n <= 0) {
                /* EIO: every slave holder is gone. */
                if (status < 0) {
                    int st;
                    if (waitpid(keeper, &st, 0) == keeper)
                        status = status_of(st);
                }
                break;
            }
            lz_write_all(STDOUT_FILENO, buf, (size_t) n);
        }
    }
    close(ctl[1]);
    if (hold >= 0)
        close(hold);
    if (status < 0) {
        int st;
        if (waitpid(keeper, &st, 0) == keeper)
            status = status_of(st);
    }
    if (have_outer)
        tcsetattr(STDIN_FILENO, TCSANOW, &outer);
    return status < 0 ? 125 : status;
}

int main(int argc, char **argv)
{
    /* Our environment holds the profile's secrets, and in --pty mode this
     * process relays for the session's whole life: no core of it, nor of
     * the command, may reach a file (a core lands in the command's working
     * directory, the host's workspace). Not dumpable (the command's execve
     * resets that for the command); a core limit of 0, soft and hard, that
     * the command inherits and cannot raise. docs/runtime.md, "Secrets in
     * memory and core dumps". */
    {
        struct rlimit no_core = { 0, 0 };
        if (setrlimit(RLIMIT_CORE, &no_core) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
            say("cannot disable core dumps in the sandbox: ", strerror(errno),
                "; the session does not run");
            return 125;
        }
    }
    /* First, before any mode: the setuid/setgid guard (mode-guard.c) is
     * inherited by everything this process becomes or starts. Without it a
     * session could leave setuid files on the host, so none runs. */
    if (lz_mode_guard_install() < 0) {
        say("cannot install the setuid/setgid guard in the sandbox: ", strerror(errno),
            "; the session does not run (see docs/limits.md)");
        return 125;
    }
    if (argc == 2 && strcmp(argv[1], "--init") == 0)
        run_init();

    if (argc == 3 && strcmp(argv[1], "--resolv-conf") == 0) {
        /* The resolver the Network Sidecar provides. */
        char line[128];
        int n = snprintf(line, sizeof(line), "nameserver %s\n", argv[2]);
        unlink("/etc/resolv.conf"); /* a symlink (systemd images) is replaced */
        int fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, line, (size_t) n) != n)
            return 1;
        close(fd);
        return 0;
    }

    if (argc == 2 && strcmp(argv[1], "--probe-statx") == 0) {
        struct statx stx;
        return statx(AT_FDCWD, "/", AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &stx) == 0 ? 0 : 1;
    }

    int i = 1;
    bool pty = false, login = false;
    if (i + 1 < argc && strcmp(argv[i], "--cwd") == 0) {
        enter_cwd(argv[i + 1]);
        i += 2;
    }
    if (i < argc && strcmp(argv[i], "--pty") == 0) {
        pty = true;
        i++;
    }
    if (i < argc && strcmp(argv[i], "--login-shell") == 0 && i + 1 == argc) {
        login = true;
    } else {
        if (i < argc && strcmp(argv[i], "--") == 0)
            i++;
        if (i >= argc) {
            say("usage: lazaret-exec --init | --probe-statx | [--pty] (--login-shell | -- "
                "COMMAND [ARG...])",
                "", "");
            return 125;
        }
    }
    if (pty && isatty(STDIN_FILENO))
        return run_pty(login, argv + i);
    exec_command(login, argv + i);
}
