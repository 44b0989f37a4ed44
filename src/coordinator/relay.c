/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "common/util.h"
#include "coordinator/log.h"
#include "coordinator/session_send.h"

static void pty_input(session *s)
{
    ssize_t w = write(s->master, s->in_pending, s->in_pending_len);
    if (w > 0) {
        memmove(s->in_pending, s->in_pending + w, s->in_pending_len - (size_t) w);
        s->in_pending_len -= (size_t) w;
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        s->in_pending_len = 0; /* the terminal is gone; EXIT will follow */
    }
}

/* Master readable: forward what it holds as one OUTPUT (kept when the
 * client cannot take it now). A PTY hands out a few KiB per read; what
 * is there is drained, up to one message, so that bulk output costs one
 * TLS record and one send per 64 KiB rather than per read (issue 13,
 * item 4). The master is non-blocking: the drain ends with EAGAIN. */
static void pty_output(coord *c, session *s)
{
    static uint8_t data[LZ_MSG_MAX_DATA];
    size_t len = 0;
    bool ended = false;
    while (len < sizeof(data)) {
        ssize_t n = read(s->master, data + len, sizeof(data) - len);
        if (n > 0) {
            len += (size_t) n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            /* EIO: every slave holder is gone. */
            ended = !(n < 0 && errno == EAGAIN);
            break;
        }
    }
    if (len && s->sock >= 0) {
        static lz_wbuf b;
        lz_msg_data_encode(&b, LZ_MSG_OUTPUT, data, len);
        /* Queued if the client cannot take it now; the master is then not
         * read until the queue is empty (relay_update_events). */
        session_send(c, s, &b);
        explicit_bzero(b.data, b.len);
    }
    /* With no client, nobody is shown it. */
    explicit_bzero(data, len);
    if (ended) {
        relay_close(s);
        session_request_finish(s); /* EXIT once the command has ended too */
    }
}

static void on_master(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) fd;
    session *s = data;
    if (revents & POLLOUT)
        pty_input(s);
    if (s->master >= 0 && (revents & (POLLIN | POLLHUP | POLLERR)) && !s->q_head)
        pty_output(s->c, s);
}

int relay_open_pty(session *s, int *ret_slave, lz_error **err)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return lz_error_set(err, errno, "cannot allocate a pseudo-terminal");
    char name[128];
    int sl = -1;
    if (grantpt(m) == 0 && unlockpt(m) == 0 && ptsname_r(m, name, sizeof(name)) == 0)
        sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (sl < 0) {
        int e = errno;
        close(m);
        return lz_error_set(err, e, "cannot open a pseudo-terminal");
    }
    /* The host side is a transparent pipe for bytes: raw, so that Ctrl-C
     * and friends reach the sandbox as bytes, where the session's own
     * pseudo-terminal interprets them. */
    struct termios t;
    if (tcgetattr(sl, &t) == 0) {
        cfmakeraw(&t);
        tcsetattr(sl, TCSANOW, &t);
    }
    struct winsize ws = { .ws_row = (unsigned short) (s->run.rows ? s->run.rows : 24),
                          .ws_col = (unsigned short) (s->run.cols ? s->run.cols : 80) };
    ioctl(m, TIOCSWINSZ, &ws);
    fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK);
    s->master = m;
    s->master_src = lz_loop_add_fd(s->c->loop, m, POLLIN, on_master, s);
    *ret_slave = sl;
    return 0;
}

void relay_update_events(session *s)
{
    short ev = 0;
    /* While typed bytes wait for the PTY, read no more input. */
    if (s->in_pending_len == 0)
        ev |= POLLIN;
    if (s->q_head)
        ev |= POLLOUT;
    lz_loop_set_events(s->sock_src, ev);
    ev = 0;
    if (s->in_pending_len)
        ev |= POLLOUT;
    if (!s->q_head)
        ev |= POLLIN;
    lz_loop_set_events(s->master_src, ev);
    /* While output waits for the client, the master is not even polled: a
     * hung-up PTY reports POLLHUP whatever it is asked, and would spin. */
    /* Output waits while the client has not taken what was sent, and while
     * an escalation prompt is on its terminal (FR-5: nothing the sandbox
     * writes appears around the prompt; it follows the decision). */
    lz_loop_set_paused(s->master_src, s->q_head != NULL || s->prompt_visible);
}

bool relay_input(session *s, const uint8_t *p, size_t n)
{
    if (s->in_pending_len + n > sizeof(s->in_pending))
        return false;
    if (s->master >= 0 && !s->exited) {
        memcpy(s->in_pending + s->in_pending_len, p, n);
        s->in_pending_len += n;
        if (s->in_pending_len > s->in_pending_hwm)
            s->in_pending_hwm = s->in_pending_len;
        pty_input(s);
    }
    return true;
}

void relay_resize(session *s, uint32_t rows, uint32_t cols)
{
    struct winsize ws = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };
    if (s->master >= 0)
        ioctl(s->master, TIOCSWINSZ, &ws); /* the guest gets SIGWINCH */
}

void relay_close(session *s)
{
    lz_loop_remove(s->master_src);
    s->master_src = NULL;
    if (s->master >= 0)
        close(s->master);
    s->master = -1;
}
