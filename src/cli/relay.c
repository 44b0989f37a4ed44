/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/terminal.h"
#include "client/screen.h"
#include "common/util.h"

/* A non-interactive command still running this long after a signal was
 * forwarded to it is killed (docs/runtime.md "Signals"). */
#define FORWARD_KILL_AFTER_MS 10000

/* End the session: the coordinator hangs up the command. */
static void send_close(lz_client *cl)
{
    lz_wbuf b;
    lz_msg_empty_encode(&b, LZ_MSG_CLOSE);
    lz_client_post(cl, &b);
}

/* The terminal's answer to the session's first question (where is the
 * cursor: client/screen.h) is the CLI's, not the program's: taken out of
 * the input. True when nothing else was read. */
static bool take_cursor_report(lz_client *cl, uint8_t *data, ssize_t *n)
{
    size_t len = (size_t) *n;
    if (lz_screen_take_cursor_report(cl->screen, data, &len)) {
        cl->awaiting_cursor = false;
        *n = (ssize_t) len;
    }
    return len == 0;
}

lz_attempt_result lz_cli_relay_terminal(lz_client *cl)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGWINCH);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGQUIT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    bool stdin_open = true;
    *cl->status = LZ_EXIT_RUN_LAZARET_FAILED;

    bool output_waiting = false;
    for (;;) {
        /* While the screen's emulator is behind (client/screen.h
         * lz_screen_queue), it works in slices between which keys, signals
         * and more output are read. */
        bool behind = lz_client_screen_work(cl, output_waiting);
        struct pollfd p[3] = {
            { .fd = cl->sock, .events = POLLIN },
            { .fd = cl->started && stdin_open ? STDIN_FILENO : -1, .events = POLLIN },
            { .fd = sfd, .events = POLLIN },
        };
        if (poll(p, 3, behind ? 0 : -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        output_waiting = p[0].revents & POLLIN;
        if (p[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGWINCH) {
                    if (cl->started)
                        lz_cli_send_resize(cl);
                } else {
                    /* The terminal went away or we were asked to stop: end
                     * the session; the coordinator hangs up the command. */
                    send_close(cl);
                    lz_client_reset_screen(cl);
                    lz_cli_terminal_restore();
                    *cl->status = 128 + (int) si.ssi_signo;
                    break;
                }
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            uint8_t data[LZ_MSG_MAX_DATA];
            ssize_t n = read(STDIN_FILENO, data, sizeof(data));
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                /* nothing yet */
            } else if (n <= 0) {
                /* In raw mode ^D is a byte: 0 or an error is a hang-up. */
                stdin_open = false;
                cl->terminal_gone = true;
            } else if (cl->awaiting_cursor && cl->screen && take_cursor_report(cl, data, &n)) {
                /* the terminal's answer was all this read held */
            } else if (cl->prompting) {
                lz_client_prompt_keys(cl, data, (size_t) n);
                explicit_bzero(data, (size_t) n);
            } else {
                lz_wbuf b;
                lz_msg_data_encode(&b, LZ_MSG_INPUT, data, (size_t) n);
                lz_client_post(cl, &b);
                /* Keystrokes (a password typed into the session): RELAY_WIPE. */
                explicit_bzero(b.data, b.len);
                explicit_bzero(data, (size_t) n);
            }
        }
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && (lz_client_receive(cl), cl->ended))
            break;
        if (cl->terminal_gone) {
            /* As for SIGHUP: end the session, the coordinator hangs up
             * the command (docs/runtime.md "A command whose terminal went
             * away"). */
            send_close(cl);
            *cl->status = 128 + SIGHUP;
            break;
        }
    }
    lz_client_drop_screen(cl); /* a terminal gone gets no reset */
    lz_cli_terminal_restore();
    lz_client_clear(cl);
    if (sfd >= 0)
        close(sfd);
    sigprocmask(SIG_UNBLOCK, &mask, NULL);
    return cl->result;
}

static int64_t ms_between(const struct timespec *from, const struct timespec *to)
{
    return (to->tv_sec - from->tv_sec) * 1000 + (to->tv_nsec - from->tv_nsec) / 1000000;
}

lz_attempt_result lz_cli_relay_pipes(lz_client *cl, int in_w, int out_r, int err_r)
{
    lz_wbuf b;
    fcntl(in_w, F_SETFL, O_NONBLOCK);
    /* Signals to this CLI are the command's, as with `docker run`
     * (docs/runtime.md "Signals"): forwarded; a second SIGINT, or the
     * command still running FORWARD_KILL_AFTER_MS after a forwarded
     * signal, kills it. */
    sigset_t sigs, old_sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGQUIT);
    sigprocmask(SIG_BLOCK, &sigs, &old_sigs);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    bool forwarded_int = false;
    struct timespec kill_at = { 0, 0 };
    bool stdin_open = true, out_open = true, err_open = true;
    char pending[65536];
    size_t pending_len = 0;
    struct timespec exit_at = { 0, 0 };
    *cl->status = LZ_EXIT_RUN_LAZARET_FAILED;

    for (;;) {
        if (cl->exited && !out_open && !err_open)
            break;
        if (cl->ended && !cl->exited)
            break;
        struct pollfd p[6];
        int np = 0;
        int i_stdin = -1, i_inw = -1, i_out = -1, i_err = -1, i_sock = -1, i_sig = -1;
        if (sfd >= 0) {
            i_sig = np;
            p[np++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
        }
        if (stdin_open && pending_len == 0 && cl->started) {
            i_stdin = np;
            p[np++] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
        }
        if (in_w >= 0 && pending_len > 0) {
            i_inw = np;
            p[np++] = (struct pollfd){ .fd = in_w, .events = POLLOUT };
        }
        if (out_open) {
            i_out = np;
            p[np++] = (struct pollfd){ .fd = out_r, .events = POLLIN };
        }
        if (err_open) {
            i_err = np;
            p[np++] = (struct pollfd){ .fd = err_r, .events = POLLIN };
        }
        if (!cl->ended) {
            i_sock = np;
            p[np++] = (struct pollfd){ .fd = cl->sock, .events = POLLIN };
        }
        /* After EXIT, drain what the command wrote; a background process
         * that keeps the pipes open does not keep us waiting for long. */
        int timeout = -1;
        if (cl->exited) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t ms = ms_between(&exit_at, &now);
            if (ms >= 500)
                break;
            timeout = (int) (500 - ms);
        } else if (kill_at.tv_sec) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t ms = ms_between(&now, &kill_at);
            if (ms <= 0) {
                lz_msg_signal_encode(&b, SIGKILL);
                lz_client_post(cl, &b);
                kill_at = (struct timespec){ 0, 0 };
                continue;
            }
            timeout = (int) ms;
        }
        int r = poll(p, (nfds_t) np, timeout);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (r == 0)
            continue;
        if (i_sig >= 0 && (p[i_sig].revents & POLLIN)) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                int sig = (int) si.ssi_signo;
                if (!cl->started) {
                    /* No command yet: the session ends, as before. */
                    send_close(cl);
                    *cl->status = 128 + sig;
                    break;
                }
                if (!cl->exited) {
                    int fwd = sig == SIGINT && forwarded_int ? SIGKILL : sig;
                    forwarded_int = forwarded_int || sig == SIGINT;
                    lz_msg_signal_encode(&b, (uint32_t) fwd);
                    lz_client_post(cl, &b);
                    if (fwd == SIGKILL) {
                        kill_at = (struct timespec){ 0, 0 };
                    } else if (!kill_at.tv_sec) {
                        clock_gettime(CLOCK_MONOTONIC, &kill_at);
                        kill_at.tv_sec += FORWARD_KILL_AFTER_MS / 1000;
                    }
                }
            }
        }
        if (i_stdin >= 0 && (p[i_stdin].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = read(STDIN_FILENO, pending, sizeof(pending));
            if (n <= 0) {
                stdin_open = false;
                close(in_w);
                in_w = -1;
            } else {
                pending_len = (size_t) n;
            }
        }
        if (i_inw >= 0 && (p[i_inw].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(in_w, pending, pending_len);
            if (w < 0 && errno != EAGAIN && errno != EINTR) {
                /* The command stopped reading its stdin. */
                explicit_bzero(pending, pending_len);
                pending_len = 0;
                stdin_open = false;
                close(in_w);
                in_w = -1;
            } else if (w > 0) {
                memmove(pending, pending + w, pending_len - (size_t) w);
                pending_len -= (size_t) w;
                explicit_bzero(pending + pending_len, (size_t) w); /* the tail memmove left */
            }
        }
        for (int k = 0; k < 2; k++) {
            int idx = k == 0 ? i_out : i_err;
            if (idx < 0 || !(p[idx].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char data[65536];
            ssize_t n = read(p[idx].fd, data, sizeof(data));
            if (n <= 0) {
                if (k == 0)
                    out_open = false;
                else
                    err_open = false;
            } else {
                lz_write_all(k == 0 ? STDOUT_FILENO : STDERR_FILENO, data, (size_t) n);
                explicit_bzero(data, (size_t) n); /* session bytes: RELAY_WIPE */
            }
        }
        if (i_sock >= 0 && (p[i_sock].revents & (POLLIN | POLLHUP | POLLERR))) {
            bool was_exited = cl->exited;
            lz_client_receive(cl);
            if (!was_exited && cl->exited)
                clock_gettime(CLOCK_MONOTONIC, &exit_at);
        }
    }
    explicit_bzero(pending, pending_len); /* stdin the command never read */
    if (sfd >= 0) {
        /* What arrived after the command ended is dropped, not turned into
         * this CLI's death by the unblocking below. */
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == sizeof(si))
            ;
        close(sfd);
    }
    sigprocmask(SIG_SETMASK, &old_sigs, NULL);
    if (in_w >= 0)
        close(in_w);
    close(out_r);
    close(err_r);
    lz_client_clear(cl);
    return cl->result;
}
