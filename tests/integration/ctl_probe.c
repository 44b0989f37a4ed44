/* SPDX-License-Identifier: Apache-2.0
 *
 * Test helper for test_security_control.py, built static by the test and run
 * inside the sandbox (and, as the control, on the host as the test user).
 *
 *   ctl_probe connect-file FILE  one socket path a line ("@name" is an abstract
 *                                name); prints "CONNECT <line number> OK" when
 *                                a stream, seqpacket or datagram connect
 *                                succeeds, else "CONNECT <n> ERR <errno>". The
 *                                paths are read from a file so that they
 *                                appear in no command line the sandbox sees.
 *   ctl_probe scan DIR           binds a listening socket of its own
 *                                (/tmp/ctl-probe-self.sock: the control that
 *                                connect works here and that the walk finds
 *                                sockets), walks DIR without following
 *                                symlinks or entering /proc and /sys, and tries
 *                                to connect to every socket found; prints
 *                                "SOCKET <path> OK|ERR <errno>" and
 *                                "SCANNED <entries>"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define SELF "/tmp/ctl-probe-self.sock"

static long entries;

/* 0 when any socket type connects, else the last errno. */
static int try_connect(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    socklen_t len;
    size_t n = strlen(path);
    if (n >= sizeof(sa.sun_path) && path[0] == '/') {
        /* Too long for sun_path: through a descriptor of its directory, as
         * Lazaret itself connects (the directory must be searchable). */
        const char *name = strrchr(path, '/') + 1;
        char *dir = strndup(path, (size_t) (name - path));
        int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int e = errno;
        free(dir);
        if (dfd < 0)
            return e;
        char via[4096];
        snprintf(via, sizeof(via), "/proc/self/fd/%d/%s", dfd, name);
        int r = strlen(via) < sizeof(sa.sun_path) ? try_connect(via) : ENAMETOOLONG;
        close(dfd);
        return r;
    }
    if (n >= sizeof(sa.sun_path))
        return ENAMETOOLONG;
    if (path[0] == '@') { /* abstract: a leading NUL, no terminator */
        memcpy(sa.sun_path + 1, path + 1, n - 1);
        len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        memcpy(sa.sun_path, path, n);
        len = sizeof(sa);
    }
    static const int types[] = { SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM };
    int e = 0;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        int s = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);
        if (s < 0) {
            e = errno;
            continue;
        }
        int r = connect(s, (struct sockaddr *) &sa, len);
        e = r < 0 ? errno : 0;
        close(s);
        if (r == 0)
            return 0;
    }
    return e;
}

static int visit(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void) flag;
    (void) f;
    if (strcmp(path, "/proc") == 0 || strcmp(path, "/sys") == 0)
        return FTW_SKIP_SUBTREE;
    entries++;
    if (S_ISSOCK(st->st_mode)) {
        int e = try_connect(path);
        if (e == 0)
            printf("SOCKET %s OK\n", path);
        else
            printf("SOCKET %s ERR %d\n", path, e);
    }
    return FTW_CONTINUE;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "connect-file") == 0) {
        FILE *f = fopen(argv[2], "re");
        if (!f) {
            perror(argv[2]);
            return 2;
        }
        char line[4096];
        int no = 0;
        while (fgets(line, sizeof(line), f)) {
            line[strcspn(line, "\n")] = '\0';
            no++;
            int e = try_connect(line);
            if (e == 0)
                printf("CONNECT %d OK\n", no);
            else
                printf("CONNECT %d ERR %d\n", no, e);
        }
        fclose(f);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "scan") == 0) {
        unlink(SELF);
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        strcpy(sa.sun_path, SELF);
        if (l < 0 || bind(l, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(l, 8) < 0) {
            perror("own socket");
            return 2;
        }
        nftw(argv[2], visit, 64, FTW_PHYS | FTW_ACTIONRETVAL);
        printf("SCANNED %ld\n", entries);
        close(l);
        unlink(SELF);
        return 0;
    }
    fprintf(stderr, "usage: ctl_probe connect-file FILE | scan DIR\n");
    return 2;
}
