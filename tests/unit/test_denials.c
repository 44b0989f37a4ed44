/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/store/denials.c, the Domain's denial log: the record
 * format, the rate limit under a flood (sizes, not time), folding of
 * identical records, the dropped-count record, rotation at the cap, the
 * readers' totals, and names the sandbox chose printed harmlessly.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "store/denials.h"
#include "unit_fds.h"

static char dir[64];
static int dir_fd = -1;
static int fds_before;

static int setup(void **state)
{
    (void) state;
    snprintf(dir, sizeof(dir), "/tmp/lz-denials-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    fds_before = count_open_fds();
    return dir_fd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void) state;
    assert_int_equal(count_open_fds(), fds_before);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
    close(dir_fd);
    return rmdir(dir);
}

static char *slurp(const char *name)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char *buf = lz_xmalloc((size_t) st.st_size + 1);
    assert_int_equal(read(fd, buf, (size_t) st.st_size), st.st_size);
    buf[st.st_size] = '\0';
    close(fd);
    return buf;
}

static off_t size_of(const char *name)
{
    struct stat st;
    return fstatat(dir_fd, name, &st, 0) == 0 ? st.st_size : 0;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

/* The flags (fdinfo, octal) that all of our descriptors whose path ends in
 * suffix have (and-ed); -1 when none. */
static long flags_of_fds_to(const char *suffix)
{
    long all = -1;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char link[300], target[512] = "", info[300];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        size_t ls = strlen(suffix);
        if (n < (ssize_t) ls || strcmp(target + n - ls, suffix) != 0)
            continue;
        snprintf(info, sizeof info, "/proc/self/fdinfo/%s", e->d_name);
        FILE *f = fopen(info, "re");
        char line[128];
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "flags:", 6) == 0)
                all = all < 0 ? strtol(line + 6, NULL, 8) : all & strtol(line + 6, NULL, 8);
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return all;
}

static lz_denial_log *open_log(size_t cap)
{
    lz_denial_log *log = NULL;
    lz_error *err = NULL;
    assert_int_equal(lz_denial_log_open(dir_fd, cap, &log, &err), 0);
    assert_null(err);
    return log;
}

static lz_denial dns_denial(const char *name)
{
    return (lz_denial){ .kind = LZ_DENIAL_DNS,
                        .time_ms = 1700000000123,
                        .name = name,
                        .qtype = "TXT",
                        .rule = "not in allow_hosts (strict DNS)",
                        .allow = "allow_hosts = [\"evil.example\"]" };
}

static lz_denial tcp_denial(uint16_t port)
{
    return (lz_denial){ .kind = LZ_DENIAL_TCP,
                        .has_addr = true,
                        .addr = { 203, 0, 113, 9 },
                        .port = port,
                        .rule = "default deny",
                        .allow = "allow_egress = [\"203.0.113.9/32\"]" };
}

static void test_format(void **state)
{
    (void) state;
    mode_t old = umask(0);
    lz_denial_log *log = open_log(0);
    umask(old);
    lz_denial d = dns_denial("evil.example");
    lz_denial_log_record(log, &d);
    lz_denial t = tcp_denial(443);
    t.time_ms = 1700000001000;
    t.name = "api.example";
    lz_denial_log_record(log, &t);
    /* The writer's descriptors: close-on-exec, appending. */
    long flags = flags_of_fds_to("/" LZ_DENIALS_FILE);
    assert_true(flags > 0);
    assert_true((flags & O_CLOEXEC) && (flags & O_APPEND));
    long dflags = flags_of_fds_to(dir);
    assert_true(dflags > 0 && (dflags & O_CLOEXEC));
    /* Control: a descriptor without the flag is seen. */
    int plain = openat(dir_fd, LZ_DENIALS_FILE, O_RDONLY);
    assert_true(plain >= 0);
    assert_false(flags_of_fds_to("/" LZ_DENIALS_FILE) & O_CLOEXEC);
    close(plain);
    lz_denial o = { .kind = LZ_DENIAL_OTHER,
                    .time_ms = 1700000002005,
                    .has_addr = true,
                    .addr = { 10, 1, 2, 3 },
                    .proto = 47,
                    .rule = "never routed: private" };
    lz_denial_log_record(log, &o);
    lz_denial_log_close(log);
    _cleanup_free_ char *s = slurp(LZ_DENIALS_FILE);
    assert_string_equal(
        s, "{\"time\":\"2023-11-14T22:13:20.123Z\",\"kind\":\"dns\",\"addr\":null,\"port\":null,"
           "\"name\":\"evil.example\",\"qtype\":\"TXT\",\"rule\":\"not in allow_hosts (strict "
           "DNS)\",\"allow\":\"allow_hosts = [\\\"evil.example\\\"]\"}\n"
           "{\"time\":\"2023-11-14T22:13:21.000Z\",\"kind\":\"tcp\",\"addr\":\"203.0.113.9\","
           "\"port\":443,\"name\":\"api.example\",\"qtype\":null,\"rule\":\"default deny\","
           "\"allow\":\"allow_egress = [\\\"203.0.113.9/32\\\"]\"}\n"
           "{\"time\":\"2023-11-14T22:13:22.005Z\",\"kind\":\"other\",\"addr\":\"10.1.2.3\","
           "\"port\":null,\"proto\":47,\"name\":null,\"qtype\":null,\"rule\":\"never routed: "
           "private\",\"allow\":null}\n");
    struct stat st;
    assert_int_equal(fstatat(dir_fd, LZ_DENIALS_FILE, &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0600);

    /* The terminal lines say what, the rule and the fix. */
    lz_denial_summary sum;
    lz_error *err = NULL;
    assert_int_equal(lz_denial_summary_read(dir_fd, 10, &sum, &err), 0);
    assert_int_equal(sum.total, 3);
    assert_int_equal(sum.n_last, 3);
    assert_string_equal(sum.last[0], "2023-11-14T22:13:20.123Z  denied  DNS query evil.example "
                                     "TXT  rule: not in allow_hosts (strict DNS)  allow with: "
                                     "allow_hosts = [\"evil.example\"]");
    assert_string_equal(sum.last[1], "2023-11-14T22:13:21.000Z  denied  TCP 203.0.113.9:443 "
                                     "(api.example)  rule: default deny  allow with: "
                                     "allow_egress = [\"203.0.113.9/32\"]");
    assert_string_equal(sum.last[2], "2023-11-14T22:13:22.005Z  denied  IP protocol 47 to "
                                     "10.1.2.3  rule: never routed: private");
    lz_denial_summary_clear(&sum);
}

/* Records the time when it is not given (time_ms 0): now, in UTC. */
static void test_time_now(void **state)
{
    (void) state;
    lz_denial_log *log = open_log(0);
    lz_denial t = tcp_denial(80);
    time_t before = time(NULL);
    lz_denial_log_record(log, &t);
    lz_denial_log_close(log);
    _cleanup_free_ char *s = slurp(LZ_DENIALS_FILE);
    struct tm tm;
    gmtime_r(&before, &tm);
    char year[16];
    snprintf(year, sizeof year, "%04d-", tm.tm_year + 1900);
    assert_memory_equal(s, "{\"time\":\"", 9);
    assert_memory_equal(s + 9, year, 5);
    assert_non_null(strstr(s, "Z\",\"kind\":\"tcp\""));
}

/* A flood of distinct records: at most the burst and the sustained rate
 * are written, the rest counted; the kept files stay under twice the cap
 * even when it is small. */
static void test_flood_rate_limit_and_cap(void **state)
{
    (void) state;
    const size_t cap = 4096;
    lz_denial_log *log = open_log(cap);
    for (unsigned i = 0; i < 100000; i++) {
        lz_denial t = tcp_denial((uint16_t) (i % 60000 + 1));
        t.addr[3] = (uint8_t) (i / 60000);
        lz_denial_log_record(log, &t);
        if (i % 20000 == 0)
            lz_denial_log_tick(log);
    }
    lz_denial_log_close(log);
    /* The burst alone (100 lines of about 190 bytes) is more than four
     * caps: the files were rotated, and neither is over the cap. */
    assert_true(size_of(LZ_DENIALS_FILE) <= (off_t) cap);
    assert_true(size_of(LZ_DENIALS_OLD_FILE) > 0);
    assert_true(size_of(LZ_DENIALS_OLD_FILE) <= (off_t) cap);
}

static void test_flood_totals(void **state)
{
    (void) state;
    lz_denial_log *log = open_log(0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (unsigned i = 0; i < 100000; i++) {
        lz_denial t = tcp_denial((uint16_t) (i % 60000 + 1));
        t.addr[3] = (uint8_t) (i / 60000);
        lz_denial_log_record(log, &t);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    lz_denial_log_tick(log);
    /* The dropped count is said in a record of its own at the tick. */
    _cleanup_free_ char *s = slurp(LZ_DENIALS_FILE);
    const char *dropped = strstr(s, "\"dropped\":");
    assert_non_null(dropped);
    unsigned long long n = strtoull(dropped + 10, NULL, 10);
    size_t lines = count_lines(s);
    double secs = (double) (b.tv_sec - a.tv_sec) + (double) (b.tv_nsec - a.tv_nsec) / 1e9;
    /* Every record is either a line or in the dropped count. */
    assert_int_equal(n + (lines - 1), 100000);
    assert_true(lines - 1 <= 100 + (size_t) (20 * (secs + 1)));
    assert_true(lines - 1 >= 100);
    lz_denial_log_close(log);
    lz_denial_summary sum;
    lz_error *err = NULL;
    assert_int_equal(lz_denial_summary_read(dir_fd, 3, &sum, &err), 0);
    assert_int_equal(sum.total, 100000);
    assert_int_equal(sum.n_last, 3);
    assert_non_null(strstr(sum.last[2], "more denials not recorded (rate limit)"));
    lz_denial_summary_clear(&sum);
    assert_true(size_of(LZ_DENIALS_FILE) < 64 * 1024);
}

/* Identical records within a second are one line and a count. */
static void test_folding(void **state)
{
    (void) state;
    lz_denial_log *log = open_log(0);
    for (int i = 0; i < 1000; i++) {
        lz_denial d = dns_denial("telemetry.example");
        lz_denial_log_record(log, &d);
    }
    /* A different record is not folded into it. */
    lz_denial other = dns_denial("other.example");
    lz_denial_log_record(log, &other);
    lz_denial_log_close(log);
    _cleanup_free_ char *s = slurp(LZ_DENIALS_FILE);
    size_t lines = count_lines(s);
    /* 1 + the folded 999 (a loop slower than a second makes a few more). */
    assert_true(lines >= 3 && lines <= 8);
    assert_non_null(strstr(s, "\"count\":"));
    assert_null(strstr(s, "dropped"));
    lz_denial_summary sum;
    lz_error *err = NULL;
    assert_int_equal(lz_denial_summary_read(dir_fd, 10, &sum, &err), 0);
    assert_int_equal(sum.total, 1001);
    bool times = false;
    for (size_t i = 0; i < sum.n_last; i++)
        times |= strstr(sum.last[i], " times)") != NULL;
    assert_true(times);
    lz_denial_summary_clear(&sum);
}

/* At the cap the current file becomes the one older file; a third
 * generation replaces the oldest; each file stays under the cap. */
static void test_rotation(void **state)
{
    (void) state;
    const size_t cap = 1024;
    lz_denial_log *log = open_log(cap);
    for (uint16_t i = 1; i <= 40; i++) {
        lz_denial t = tcp_denial(i);
        lz_denial_log_record(log, &t);
    }
    lz_denial_log_close(log);
    assert_true(size_of(LZ_DENIALS_FILE) > 0);
    assert_true(size_of(LZ_DENIALS_FILE) <= (off_t) cap);
    assert_true(size_of(LZ_DENIALS_OLD_FILE) > (off_t) cap / 2);
    assert_true(size_of(LZ_DENIALS_OLD_FILE) <= (off_t) cap);
    struct stat st;
    assert_int_equal(fstatat(dir_fd, LZ_DENIALS_OLD_FILE, &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* The newest record is in the current file, the kept ones in order. */
    _cleanup_free_ char *cur = slurp(LZ_DENIALS_FILE);
    assert_non_null(strstr(cur, "\"port\":40,"));
    lz_denial_summary sum;
    lz_error *err = NULL;
    assert_int_equal(lz_denial_summary_read(dir_fd, 1000, &sum, &err), 0);
    _cleanup_free_ char *old = slurp(LZ_DENIALS_OLD_FILE);
    assert_int_equal(sum.total, count_lines(old) + count_lines(cur));
    assert_true(sum.total < 40);
    assert_int_equal(sum.n_last, sum.total);
    assert_non_null(strstr(sum.last[sum.n_last - 1], "203.0.113.9:40 "));
    assert_non_null(strstr(sum.last[sum.n_last - 2], "203.0.113.9:39 "));
    lz_denial_summary_clear(&sum);
}

/* A record that could never fit under the cap is dropped (and counted),
 * not written over it. */
static void test_line_over_cap_dropped(void **state)
{
    (void) state;
    lz_denial_log *log = open_log(200);
    lz_denial t = tcp_denial(1);
    t.rule = "a rule long enough that the line is longer than the cap of two hundred bytes, "
             "which no record may cross";
    lz_denial_log_record(log, &t);
    lz_denial_log_close(log);
    _cleanup_free_ char *s = slurp(LZ_DENIALS_FILE);
    assert_true(strlen(s) <= 200);
    assert_non_null(strstr(s, "\"dropped\":1}"));
}

/* Names, types, rules chosen by the sandbox: escape sequences, controls,
 * bidi overrides, invalid UTF-8 and a huge name reach a terminal escaped
 * and cut; the file is valid JSON lines. */
static void test_hostile_names(void **state)
{
    (void) state;
    lz_denial_log *log = open_log(0);
    lz_denial d = dns_denial("\x1b]0;pwned\x07\x1b[2J\r\nfake.line\xe2\x80\xae"
                             "moc.\xff\x7f");
    d.qtype = "\x1b[31mA\x7f";
    lz_denial_log_record(log, &d);
    char *huge = lz_xmalloc(100001);
    memset(huge, 'a', 100000);
    huge[100000] = '\0';
    lz_denial h = dns_denial(huge);
    lz_denial_log_record(log, &h);
    free(huge);
    lz_denial_log_close(log);
    _cleanup_free_ char *s = slurp(LZ_DENIALS_FILE);
    assert_int_equal(count_lines(s), 2);
    assert_true(strlen(s) < 2000);
    for (const char *p = s; *p; p++)
        assert_true(*p == '\n' || (*p >= 0x20 && *p < 0x7f) || *p == 0x7f);
    lz_denial_summary sum;
    lz_error *err = NULL;
    assert_int_equal(lz_denial_summary_read(dir_fd, 10, &sum, &err), 0);
    assert_int_equal(sum.n_last, 2);
    for (size_t i = 0; i < sum.n_last; i++) {
        for (const char *p = sum.last[i]; *p; p++)
            assert_true((unsigned char) *p >= 0x20 && *p != 0x7f);
        assert_true(strlen(sum.last[i]) < 1200);
    }
    assert_non_null(strstr(sum.last[0], "\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x0afake.line"));
    assert_non_null(strstr(sum.last[0], "\\x1b[31mA\\x7f"));
    assert_null(strstr(sum.last[0], "\xe2\x80\xae"));
    assert_non_null(strstr(sum.last[1], "more bytes)"));
    /* The JSON form is ASCII too, DEL included. */
    _cleanup_free_ char *first = lz_xstrndup(s, (size_t) (strchr(s, '\n') - s));
    _cleanup_free_ char *json = lz_denial_line_json(first, strlen(first));
    assert_non_null(json);
    for (const char *p = json; *p; p++)
        assert_true(*p >= 0x20 && *p < 0x7f);
    assert_non_null(strstr(json, "\\u001B[31mA\\u007F"));
    lz_denial_summary_clear(&sum);
}

/* Lines that are not records (torn, foreign) are skipped by the readers;
 * a missing log is an empty summary. */
static void test_reader_skips_garbage(void **state)
{
    (void) state;
    lz_denial_summary sum;
    lz_error *err = NULL;
    assert_int_equal(lz_denial_summary_read(dir_fd, 3, &sum, &err), 0);
    assert_int_equal(sum.total, 0);
    assert_int_equal(sum.n_last, 0);
    lz_denial_summary_clear(&sum);
    int fd = openat(dir_fd, LZ_DENIALS_OLD_FILE, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    const char text[] =
        "not json\n[1,2]\n{\"kind\":\"tcp\",\"addr\":\"1.2.3.4\",\"port\":5,\"count\":"
        "7}\n{\"time\":\"x\",\"dropped\":5}\n{\"kind\":\"dn";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t) sizeof text - 1);
    close(fd);
    assert_int_equal(lz_denial_summary_read(dir_fd, 3, &sum, &err), 0);
    assert_int_equal(sum.total, 12);
    assert_int_equal(sum.n_last, 2);
    assert_non_null(strstr(sum.last[0], "TCP 1.2.3.4:5  rule: ?  (7 times)"));
    lz_denial_summary_clear(&sum);
}

/* The log is never written through a link planted at its name. Control: a
 * regular file at the name is appended to. */
static void test_symlink_refused(void **state)
{
    (void) state;
    assert_int_equal(symlinkat("/tmp/lz-denials-target-never", dir_fd, LZ_DENIALS_FILE), 0);
    lz_denial_log *log = NULL;
    lz_error *err = NULL;
    assert_int_equal(lz_denial_log_open(dir_fd, 0, &log, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err->message, LZ_DENIALS_FILE));
    lz_error_free(err);
    err = NULL;
    assert_int_equal(access("/tmp/lz-denials-target-never", F_OK), -1);
    lz_denial_summary sum;
    assert_int_equal(lz_denial_summary_read(dir_fd, 3, &sum, &err), -1);
    lz_error_free(err);
    err = NULL;
    assert_int_equal(unlinkat(dir_fd, LZ_DENIALS_FILE, 0), 0);
    int fd = openat(dir_fd, LZ_DENIALS_FILE, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x\n", 2), 2);
    close(fd);
    assert_int_equal(lz_denial_log_open(dir_fd, 0, &log, &err), 0);
    lz_denial t = tcp_denial(1);
    lz_denial_log_record(log, &t);
    lz_denial_log_close(log);
    _cleanup_free_ char *s = slurp(LZ_DENIALS_FILE);
    assert_memory_equal(s, "x\n{", 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_now, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flood_rate_limit_and_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flood_totals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_folding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_line_over_cap_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_skips_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
