/* SPDX-License-Identifier: Apache-2.0
 *
 * A full-screen or inline program for tests/integration/test_term_screen.py
 * (docs/testing.md "The terminal after a prompt"): it sets the modes agents
 * set, draws a known screen, runs lazaret-escalate (argv[2]...; "-" runs
 * nothing) with its output to /dev/null, and then never draws again: what
 * the terminal shows afterwards is Lazaret's repaint or nothing. It writes
 * /workspace/term-probe-ready and /workspace/term-probe-done (the request's
 * status) as events for the test (it waits for a key before the request),
 * then copies every byte it reads to
 * /workspace/term-probe-input until it reads 'q'.
 *
 * Usage: term_probe alt|inline CMD ARGS... | term_probe alt|inline -
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static void out(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, s, n);
        if (w <= 0)
            exit(3);
        s += w;
        n -= (size_t) w;
    }
}

static void event(const char *path, const char *text)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) < 0 || close(fd) < 0 || rename(tmp, path) < 0)
        exit(4);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    bool alt = strcmp(argv[1], "alt") == 0;
    struct termios t;
    if (tcgetattr(STDIN_FILENO, &t) == 0) {
        cfmakeraw(&t);
        tcsetattr(STDIN_FILENO, TCSANOW, &t);
    }
    /* Cursor hidden, bracketed paste, button mouse with SGR encoding,
     * focus reporting, application cursor keys. */
    out("\x1b[?25l\x1b[?2004h\x1b[?1002h\x1b[?1006h\x1b[?1004h\x1b[?1h");
    if (alt) {
        out("\x1b[?1049h\x1b[H\x1b[2J");
        for (int r = 1; r <= 20; r++) {
            char line[128];
            snprintf(line, sizeof(line), "\x1b[%d;%dH\x1b[%dmrow %02d of the probe\x1b[0m |%s|", r,
                     r, 31 + r % 7, r, r % 3 ? "plain" : "\x1b[1;7mbold-reverse\x1b[0m");
            out(line);
        }
        out("\x1b[22;1H\x1b[44mblue background to the end\x1b[K\x1b[0m");
        out("\x1b[24;1HPROBE READY (alt)\x1b[12;40H");
    } else {
        /* Ink's way: lines on the normal screen, the cursor left in the
         * middle of the last one. */
        out("\r\ninline one\r\n\x1b[32minline two (green)\x1b[0m\r\ninline three: PROBE READY");
        out("\x1b[11D");
    }
    event("/workspace/term-probe-ready", "ready\n");
    int status = 0;
    if (strcmp(argv[2], "-") != 0) {
        /* The test has captured the screen: it types a key to go on. */
        char go;
        if (read(STDIN_FILENO, &go, 1) != 1)
            return 6;
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_RDWR);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            execvp(argv[2], argv + 2);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    char done[32];
    snprintf(done, sizeof(done), "%d\n", status);
    event("/workspace/term-probe-done", done);
    int in = open("/workspace/term-probe-input", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    for (;;) {
        char buf[256];
        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
        if (n <= 0)
            return 0;
        if (in >= 0 && write(in, buf, (size_t) n) < 0)
            return 5;
        if (memchr(buf, 'q', (size_t) n))
            break;
    }
    out(alt ? "\x1b[?1049l" : "\r\n");
    out("\x1b[?25h\x1b[?2004l\x1b[?1002l\x1b[?1006l\x1b[?1004l\x1b[?1l");
    return 0;
}
