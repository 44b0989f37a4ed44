/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/fs/cache_record.c (one-line cache records) and the
 * runsc facts kept in one (src/supervisor/runsc_info.c). A record is only a
 * hint: every malformed, foreign or stale one must be a miss, never a wrong
 * answer; each rule has an accepting and a refusing case.
 */
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
#include <sys/utsname.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit_tmpdir.h"

#include "common/util.h"
#include "fs/cache_record.h"
#include "supervisor/runsc_info.h"

static int setup(void **state)
{
    (void) state;
    return unit_tmpdir_setup("/tmp/lz-cache-", O_PATH);
}
#define teardown unit_tmpdir_teardown

static void test_parse_exact_record_only(void **state)
{
    (void) state;
    char v[64];
    const char *key = "k1 version=2";
    const char ok[] = "k1 version=2 date=20221219,statx=0\n";
    assert_true(lz_cache_record_parse(ok, strlen(ok), key, v, sizeof(v)));
    assert_string_equal(v, "date=20221219,statx=0");
    /* Another key, a missing newline, two spaces, a value with a space or a
     * control byte, an empty value, a NUL inside, trailing bytes: misses. */
    const char *bad[] = {
        "k2 version=2 date=1\n",    "k1 version=2 date=1",      "k1 version=2  date=1\n",
        "k1 version=2 da te=1\n",   "k1 version=2 date=\x01\n", "k1 version=2 \n",
        "k1 version=2 date=1\nx\n", "k1 version=3 date=1\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(lz_cache_record_parse(bad[i], strlen(bad[i]), key, v, sizeof(v)));
    const char nul[] = "k1 version=2 da\0te\n";
    assert_false(lz_cache_record_parse(nul, sizeof(nul) - 1, key, v, sizeof(v)));
    /* A value longer than the caller's buffer is a miss, not a truncation. */
    assert_false(lz_cache_record_parse(ok, strlen(ok), key, v, 8));
}

static void test_store_then_load(void **state)
{
    (void) state;
    char v[80];
    assert_int_equal(lz_cache_record_load(dir_fd, "rec", "key one", v, sizeof(v)), -1);
    lz_cache_record_store(dir_fd, "rec", "key one", "abc:1.2-3");
    assert_int_equal(lz_cache_record_load(dir_fd, "rec", "key one", v, sizeof(v)), 0);
    assert_string_equal(v, "abc:1.2-3");
    /* Under another key (another runsc, another source identity): a miss. */
    assert_int_equal(lz_cache_record_load(dir_fd, "rec", "key two", v, sizeof(v)), -1);
    /* Replaced, not appended; no temporary file left beside it. */
    lz_cache_record_store(dir_fd, "rec", "key two", "x");
    assert_int_equal(lz_cache_record_load(dir_fd, "rec", "key two", v, sizeof(v)), 0);
    assert_string_equal(v, "x");
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "test \"$(ls -A '%s')\" = rec", dir);
    assert_int_equal(system(cmd), 0);
    /* Not stored: a value that is not a token, a key with a newline, a name
     * with a slash. */
    lz_cache_record_store(dir_fd, "rec", "key two", "a b");
    lz_cache_record_store(dir_fd, "rec", "key\ntwo", "y");
    assert_int_equal(lz_cache_record_load(dir_fd, "rec", "key two", v, sizeof(v)), 0);
    assert_string_equal(v, "x");
    lz_cache_record_store(dir_fd, "sub/rec", "k", "y");
    assert_int_equal(lz_cache_record_load(dir_fd, "sub/rec", "k", v, sizeof(v)), -1);
}

static void test_load_refuses_what_is_not_a_plain_record(void **state)
{
    (void) state;
    char v[64];
    /* Control: the plain file is a hit. */
    write_file("real", "k v\n");
    assert_int_equal(lz_cache_record_load(dir_fd, "real", "k", v, sizeof(v)), 0);
    /* A symlink to it: a miss (never followed). */
    assert_int_equal(symlinkat("real", dir_fd, "link"), 0);
    assert_int_equal(lz_cache_record_load(dir_fd, "link", "k", v, sizeof(v)), -1);
    /* A directory, a FIFO: misses, and the FIFO does not block the load. */
    assert_int_equal(mkdirat(dir_fd, "d", 0700), 0);
    assert_int_equal(lz_cache_record_load(dir_fd, "d", "k", v, sizeof(v)), -1);
    char fifo[128];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(lz_cache_record_load(dir_fd, "fifo", "k", v, sizeof(v)), -1);
    /* Longer than a record can be: a miss. */
    char *big = lz_xmalloc(LZ_CACHE_RECORD_MAX + 16);
    memset(big, 'a', LZ_CACHE_RECORD_MAX + 8);
    memcpy(big, "k ", 2);
    big[LZ_CACHE_RECORD_MAX + 8] = '\0';
    write_file("big", big);
    free(big);
    assert_int_equal(lz_cache_record_load(dir_fd, "big", "k", v, sizeof(v)), -1);
    /* Another owner's file (as root: chowned away): a miss. */
    if (geteuid() == 0) {
        write_file("foreign", "k v\n");
        assert_int_equal(fchownat(dir_fd, "foreign", 65534, 65534, 0), 0);
        assert_int_equal(lz_cache_record_load(dir_fd, "foreign", "k", v, sizeof(v)), -1);
    }
}

static void test_runsc_facts_round_trip_and_strictness(void **state)
{
    (void) state;
    char key[256];
    assert_int_equal(lz_runsc_facts_key("/bin/sh", key, sizeof(key)), 0);
    assert_int_equal(lz_runsc_facts_key("/nonexistent/runsc", key, sizeof(key)), -1);
    assert_int_equal(lz_runsc_facts_key("/bin/sh", key, 16), -1); /* does not fit */
    assert_int_equal(lz_runsc_facts_key("/bin/sh", key, sizeof(key)), 0);
    /* The kernel is part of the key: a new kernel asks again. */
    struct utsname u;
    assert_int_equal(uname(&u), 0);
    assert_non_null(strstr(key, " kernel="));
    assert_non_null(strstr(key, u.release));
    lz_runsc_facts f = { 20221219, false, true, true }, g = { 0, true, false, false };
    assert_int_equal(lz_runsc_facts_load(dir_fd, key, &g), -1);
    lz_runsc_facts_store(dir_fd, key, &f);
    assert_int_equal(lz_runsc_facts_load(dir_fd, key, &g), 0);
    assert_int_equal(g.release_date, 20221219);
    assert_false(g.statx_ok);
    assert_true(g.netstack_cover);
    assert_true(g.has_directfs);
    /* Only the canonical value: */
    lz_runsc_facts h;
    assert_true(lz_runsc_facts_parse_value("date=20230214,statx=1,netcover=0,directfs=0", &h));
    assert_int_equal(h.release_date, 20230214);
    assert_true(h.statx_ok);
    assert_false(h.netstack_cover);
    assert_true(lz_runsc_facts_parse_value("date=0,statx=0,netcover=1,directfs=1", &h));
    assert_true(h.netstack_cover);
    assert_true(h.has_directfs);
    const char *bad[] = { "date=20230214,statx=2,netcover=0,directfs=0",
                          "date=020230214,statx=1,netcover=0,directfs=0",
                          "date=20230214,statx=1,netcover=0,directfs=0x",
                          "date=+2023021,statx=1,netcover=0,directfs=0",
                          "date=-1,statx=0,netcover=0,directfs=0",
                          "statx=1,date=20230214,netcover=0,directfs=0",
                          "date=2023 0214,statx=1,netcover=0,directfs=0",
                          "date=20230214,statx=01,netcover=0,directfs=0",
                          "date=20230214,statx=1,netcover=0",
                          "date=20230214,statx=1,netcover=2,directfs=0",
                          "date=20230214,statx=1,netcover=0,directfs=",
                          "" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(lz_runsc_facts_parse_value(bad[i], &h));
}

/* `runsc flags` as the 2022 and 2024 releases print it (abridged). */
static void test_runsc_flags_parsing(void **state)
{
    (void) state;
    static const char out2022[] =
        "  -ignore-cgroups\n"
        "    \tdon't configure cgroups.\n"
        "  -network value\n"
        "    \tspecifies which network to use: sandbox (default), host, none.\n"
        "  -overlay2 value\n"
        "    \twrap mounts with overlayfs.\n"
        "  -platform string\n"
        "    \tspecifies which platform to use: ptrace (default), kvm. (default \"ptrace\")\n"
        "  -platform_device_path string\n"
        "    \tpath to a platform-specific device file (e.g. /dev/kvm for KVM platform). If "
        "unset, will use a sane platform-specific default.\n";
    static const char out2024[] =
        "  -platform string\n"
        "    \tspecifies which platform to use: systrap (default), ptrace, kvm. (default "
        "\"systrap\")\n"
        "  -network value\n";
    static const char no_default[] = "  -platform string\n    \tthe platform\n"
                                     "  -other string\n    \t(default \"x\")\n";
    char p[32];
    assert_true(lz_runsc_flags_has(out2022, "network"));
    assert_true(lz_runsc_flags_has(out2022, "ignore-cgroups"));
    assert_true(lz_runsc_flags_has(out2022, "platform"));
    assert_false(lz_runsc_flags_has(out2022, "netw"));    /* a prefix is not the flag */
    assert_false(lz_runsc_flags_has(out2022, "log"));     /* absent */
    assert_false(lz_runsc_flags_has(out2022, "cgroups")); /* a suffix neither */
    assert_true(lz_runsc_flags_default_platform(out2022, p, sizeof(p)));
    assert_string_equal(p, "ptrace");
    assert_true(lz_runsc_flags_default_platform(out2024, p, sizeof(p)));
    assert_string_equal(p, "systrap");
    /* Another flag's default is not the platform's. */
    assert_false(lz_runsc_flags_default_platform(no_default, p, sizeof(p)));
    assert_false(lz_runsc_flags_default_platform("", p, sizeof(p)));
    assert_false(lz_runsc_flags_default_platform(out2024, p, 4)); /* does not fit */
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_parse_exact_record_only),
        T(test_runsc_flags_parsing),
        T(test_store_then_load),
        T(test_load_refuses_what_is_not_a_plain_record),
        T(test_runsc_facts_round_trip_and_strictness),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
