/* SPDX-License-Identifier: Apache-2.0
 *
 * A test hook (tests/integration/test_log.py): writes denial records into a
 * logs directory with the real writer (src/store/denials.c), as the
 * Network Sidecar's keeper does, so that `lazaret log` and `lazaret status`
 * are tested against files it made.
 *
 *   denial_writer LOGS_DIR CAP_BYTES < RECORDS
 *
 * One record a line, tab-separated: kind (dns, tcp, udp, other, name),
 * address (A.B.C.D or -), port, name, qtype, rule, allow (- for none),
 * repeat count, time in ms since the epoch (0: now). In text fields \xNN
 * is the byte NN and \\ a backslash (names with control bytes). A line
 * "tick" calls lz_denial_log_tick.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "store/denials.h"

static char *unescape(char *s)
{
    if (strcmp(s, "-") == 0)
        return NULL;
    char *w = s;
    for (char *r = s; *r;) {
        if (r[0] == '\\' && r[1] == 'x' && r[2] && r[3]) {
            char hex[3] = { r[2], r[3], 0 };
            *w++ = (char) strtoul(hex, NULL, 16);
            r += 4;
        } else if (r[0] == '\\' && r[1] == '\\') {
            *w++ = '\\';
            r += 2;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return s;
}

static lz_denial_kind kind_of(const char *k)
{
    if (strcmp(k, "dns") == 0)
        return LZ_DENIAL_DNS;
    if (strcmp(k, "tcp") == 0)
        return LZ_DENIAL_TCP;
    if (strcmp(k, "udp") == 0)
        return LZ_DENIAL_UDP;
    if (strcmp(k, "name") == 0)
        return LZ_DENIAL_NAME;
    return LZ_DENIAL_OTHER;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: denial_writer LOGS_DIR CAP_BYTES < RECORDS\n");
        return 2;
    }
    int dir = open(argv[1], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) {
        perror(argv[1]);
        return 1;
    }
    lz_denial_log *log = NULL;
    lz_error *err = NULL;
    if (lz_denial_log_open(dir, strtoull(argv[2], NULL, 10), &log, &err) < 0) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        return 1;
    }
    close(dir);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        if (line[n - 1] == '\n')
            line[n - 1] = '\0';
        if (strcmp(line, "tick") == 0) {
            lz_denial_log_tick(log);
            continue;
        }
        char *f[9];
        char *save = NULL, *p = line;
        int k = 0;
        for (; k < 9 && (f[k] = strtok_r(p, "\t", &save)); k++)
            p = NULL;
        if (k != 9) {
            fprintf(stderr, "denial_writer: a record has 9 tab-separated fields\n");
            return 2;
        }
        lz_denial d = { .kind = kind_of(f[0]),
                        .port = (uint16_t) strtoul(f[2], NULL, 10),
                        .proto = 47,
                        .name = unescape(f[3]),
                        .qtype = unescape(f[4]),
                        .rule = unescape(f[5]),
                        .allow = unescape(f[6]),
                        .time_ms = strtoll(f[8], NULL, 10) };
        unsigned a[4];
        if (strcmp(f[1], "-") != 0 &&
            sscanf(f[1], "%u.%u.%u.%u", &a[0], &a[1], &a[2], &a[3]) == 4) {
            d.has_addr = true;
            for (int i = 0; i < 4; i++)
                d.addr[i] = (uint8_t) a[i];
        }
        for (unsigned long r = strtoul(f[7], NULL, 10); r > 0; r--)
            lz_denial_log_record(log, &d);
    }
    free(line);
    lz_denial_log_close(log);
    return 0;
}
