/* SPDX-License-Identifier: Apache-2.0 */
#include "protocol/wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"

void lz_wbuf_init(lz_wbuf *b, uint16_t type)
{
    b->len = 0;
    b->overflow = false;
    uint8_t h[2] = { (uint8_t) (type >> 8), (uint8_t) type };
    memcpy(b->data, h, 2);
    b->len = 2;
}

static void put(lz_wbuf *b, const void *p, size_t n)
{
    if (b->overflow || n > sizeof(b->data) - b->len) {
        b->overflow = true;
        return;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

void lz_wbuf_u32(lz_wbuf *b, uint32_t v)
{
    uint8_t x[4] = { (uint8_t) (v >> 24), (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v };
    put(b, x, 4);
}

void lz_wbuf_bytes(lz_wbuf *b, const void *p, size_t n)
{
    if (n > UINT32_MAX) {
        b->overflow = true;
        return;
    }
    lz_wbuf_u32(b, (uint32_t) n);
    put(b, p, n);
}

void lz_wbuf_str(lz_wbuf *b, const char *s)
{
    lz_wbuf_bytes(b, s, strlen(s));
}

bool lz_rbuf_init(lz_rbuf *r, const void *data, size_t len)
{
    r->data = data;
    r->len = len;
    r->pos = 2;
    r->bad = len < 2;
    r->type = len < 2 ? 0 : (uint16_t) ((r->data[0] << 8) | r->data[1]);
    return !r->bad;
}

uint32_t lz_rbuf_u32(lz_rbuf *r)
{
    if (r->bad || r->len - r->pos < 4) {
        r->bad = true;
        return 0;
    }
    const uint8_t *p = r->data + r->pos;
    r->pos += 4;
    return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3];
}

bool lz_rbuf_bytes(lz_rbuf *r, const uint8_t **ret, size_t *ret_len, size_t max)
{
    uint32_t n = lz_rbuf_u32(r);
    if (r->bad || n > max || r->len - r->pos < n) {
        r->bad = true;
        return false;
    }
    *ret = r->data + r->pos;
    *ret_len = n;
    r->pos += n;
    return true;
}

char *lz_rbuf_str(lz_rbuf *r, size_t max)
{
    const uint8_t *p;
    size_t n;
    if (!lz_rbuf_bytes(r, &p, &n, max))
        return NULL;
    if (n && memchr(p, '\0', n)) {
        r->bad = true;
        return NULL;
    }
    return lz_xstrndup((const char *) p, n);
}

bool lz_rbuf_done(const lz_rbuf *r)
{
    return !r->bad && r->pos == r->len;
}

int lz_wire_send(int sock, const lz_wbuf *b, const int *fds, size_t n_fds, lz_error **err)
{
    if (b->overflow)
        return lz_error_set(err, EMSGSIZE, "cannot send a control message: it is too large");
    return lz_wire_send_bytes(sock, b->data, b->len, fds, n_fds, err);
}

int lz_wire_send_bytes(int sock, const void *data, size_t len, const int *fds, size_t n_fds,
                       lz_error **err)
{
    if (n_fds > LZ_WIRE_MAX_FDS)
        return lz_error_set(err, EINVAL, "cannot send %zu descriptors in one message", n_fds);
    struct iovec iov = { .iov_base = (void *) data, .iov_len = len };
    union {
        char buf[CMSG_SPACE(sizeof(int) * LZ_WIRE_MAX_FDS)];
        struct cmsghdr align;
    } ctrl;
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (n_fds) {
        memset(&ctrl, 0, sizeof(ctrl));
        msg.msg_control = ctrl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
    }
    for (;;) {
        ssize_t r = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (r >= 0)
            return 0;
        if (errno != EINTR)
            return lz_error_set(err, errno, "cannot send a control message");
    }
}

int lz_wire_try_send(int sock, const lz_wbuf *b, lz_error **err)
{
    if (b->overflow)
        return lz_error_set(err, EMSGSIZE, "cannot send a control message: it is too large");
    return lz_wire_try_send_bytes(sock, b->data, b->len, err);
}

int lz_wire_try_send_bytes(int sock, const void *data, size_t len, lz_error **err)
{
    for (;;) {
        ssize_t r = send(sock, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r >= 0)
            return 0;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 1;
        if (errno != EINTR)
            return lz_error_set(err, errno, "cannot send a control message");
    }
}

ssize_t lz_wire_recv(int sock, void *buf, int *fds, size_t max_fds, size_t *ret_n_fds,
                     lz_error **err)
{
    return lz_wire_recv_bytes(sock, buf, LZ_WIRE_MAX, fds, max_fds, ret_n_fds, err);
}

ssize_t lz_wire_recv_bytes(int sock, void *buf, size_t cap, int *fds, size_t max_fds,
                           size_t *ret_n_fds, lz_error **err)
{
    struct iovec iov = { .iov_base = buf, .iov_len = cap };
    union {
        char buf[CMSG_SPACE(sizeof(int) * LZ_WIRE_MAX_FDS)];
        struct cmsghdr align;
    } ctrl;
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = ctrl.buf,
                          .msg_controllen = sizeof(ctrl.buf) };
    ssize_t n;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return lz_error_set(err, errno, "cannot receive a control message");

    size_t got = 0;
    bool excess = false;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int tmp[LZ_WIRE_MAX_FDS * 2];
        if (k > LZ_ARRAY_SIZE(tmp))
            k = LZ_ARRAY_SIZE(tmp);
        memcpy(tmp, CMSG_DATA(c), k * sizeof(int));
        for (size_t i = 0; i < k; i++) {
            if (got < max_fds && fds)
                fds[got++] = tmp[i];
            else {
                close(tmp[i]);
                excess = true;
            }
        }
    }
    if (excess || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        for (size_t i = 0; i < got; i++)
            close(fds[i]);
        return lz_error_set(err, EPROTO,
                            "refusing a truncated control message or one with "
                            "unexpected descriptors");
    }
    if (n == 0) {
        /* A zero-length SEQPACKET record reads as the peer's shutdown, but
         * it can carry SCM_RIGHTS: close what came with it, or every
         * connection could leave descriptors behind in the receiver. */
        for (size_t i = 0; i < got; i++)
            close(fds[i]);
        got = 0;
    }
    if (ret_n_fds)
        *ret_n_fds = got;
    return n;
}

void lz_wire_post(int sock, const lz_wbuf *b)
{
    lz_best_effort(lz_wire_send(sock, b, NULL, 0, NULL));
}
