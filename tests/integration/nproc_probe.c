/* SPDX-License-Identifier: Apache-2.0
 *
 * Test helper for test_security_nproc.py (docs/limits.md, "resource
 * limits"), built static by the test and run inside the sandbox.
 *
 *   nproc_probe uids NUIDS CEIL HOLD
 *       A fork bomb spread over NUIDS guest uids (2000, 2001, ...), bounded
 *       by itself: one leader per uid, started one after the other, becomes
 *       that uid (setresuid: the sandbox's root has CAP_SETUID) and forks up
 *       to CEIL children that wait. Each leader reports "UID u FORKED n ERR e"
 *       (e: the errno that stopped it, 0 when it reached CEIL); the parent
 *       stops starting leaders when one fails. Then "TOTAL t UIDS k ERR e"
 *       and "HOLDING": every process stays alive HOLD seconds (the test
 *       measures the host side meanwhile), then all exit.
 *
 * At most NUIDS * CEIL + NUIDS + 1 guest processes: the test chooses a
 * ceiling that cannot exhaust the machine even without any bound.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void wait_for_eof(int fd)
{
    char b;
    while (read(fd, &b, 1) < 0 && errno == EINTR)
        ;
}

/* One uid's share: become `uid`, fork up to `ceil` waiting children, report
 * on `res`, wait for the end (EOF on `hold`), reap. */
static int leader(unsigned uid, long ceil, int hold, int res)
{
    long n = 0;
    int e = 0;
    if (setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0) {
        e = errno;
        ceil = 0;
    }
    for (; n < ceil; n++) {
        pid_t c = fork();
        if (c < 0) {
            e = errno;
            break;
        }
        if (c == 0) {
            close(res);
            wait_for_eof(hold);
            _exit(0);
        }
    }
    char line[96];
    int len = snprintf(line, sizeof(line), "UID %u FORKED %ld ERR %d\n", uid, n, e);
    (void) !write(res, line, (size_t) len);
    close(res);
    wait_for_eof(hold);
    while (wait(NULL) > 0 || errno == EINTR)
        ;
    return 0;
}

static int uids(long nuids, long ceil, int hold_s)
{
    int hold[2];
    if (pipe(hold) < 0)
        return 2;
    long total = 0, k = 0;
    int first_err = 0;
    while (k < nuids && first_err == 0) {
        /* A report pipe per leader: EOF without a line means it died. */
        int res[2];
        if (pipe(res) < 0)
            return 2;
        pid_t c = fork();
        if (c < 0) {
            first_err = errno;
            printf("LEADER %ld FORK ERR %d\n", k, errno);
            close(res[0]);
            close(res[1]);
            break;
        }
        if (c == 0) {
            close(hold[1]);
            close(res[0]);
            _exit(leader(2000 + (unsigned) k, ceil, hold[0], res[1]));
        }
        close(res[1]);
        k++;
        char line[96];
        ssize_t got = 0, r;
        while (got < (ssize_t) sizeof(line) - 1 &&
               ((r = read(res[0], line + got, sizeof(line) - 1 - (size_t) got)) > 0 ||
                (r < 0 && errno == EINTR)))
            got += r > 0 ? r : 0;
        close(res[0]);
        line[got] = '\0';
        unsigned u;
        long n;
        int e;
        if (sscanf(line, "UID %u FORKED %ld ERR %d", &u, &n, &e) != 3) {
            first_err = -1;
            printf("LEADER %ld NO REPORT\n", k - 1);
            break;
        }
        fputs(line, stdout);
        total += n;
        first_err = e;
    }
    printf("TOTAL %ld UIDS %ld ERR %d\nHOLDING\n", total, k, first_err);
    fflush(stdout);
    sleep((unsigned) hold_s);
    close(hold[1]);
    while (wait(NULL) > 0 || errno == EINTR)
        ;
    printf("DONE\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 5 && strcmp(argv[1], "uids") == 0)
        return uids(atol(argv[2]), atol(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: nproc_probe uids NUIDS CEIL HOLD\n");
    return 2;
}
