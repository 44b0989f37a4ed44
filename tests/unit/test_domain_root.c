/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/store/domain_root.c: the names of persistent
 * directories in the Domain Root's state/ (escaping round trips, names
 * Lazaret never writes refused), Domain IDs, and the Domain lock (held
 * or not, taken, refused while another holds it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmocka.h>

#include <fcntl.h>

#include "common/util.h"
#include "store/domain_root.h"

static void test_state_name_round_trip(void **state)
{
    (void) state;
    static const struct {
        const char *path, *name;
    } cases[] = {
        { "/usr/local", "usr%2Flocal" },
        { "/root", "root" },
        { "/home/agent/.cache", "home%2Fagent%2F.cache" },
        { "/opt/50%", "opt%2F50%25" }, /* '%' itself is escaped */
        { "/a%2Fb", "a%252Fb" },       /* an escape-looking path stays itself */
        { "/x y/ü", "x y%2Fü" },       /* other bytes as they are */
        { "/", "" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        _cleanup_free_ char *esc = lz_state_name_escape(cases[i].path);
        assert_string_equal(esc, cases[i].name);
        assert_null(strchr(esc, '/')); /* one flat name */
        _cleanup_free_ char *back = lz_state_name_unescape(esc);
        assert_non_null(back);
        assert_string_equal(back, cases[i].path);
    }
    /* Escapes in lowercase hex are read too. */
    _cleanup_free_ char *lower = lz_state_name_unescape("usr%2flocal");
    assert_string_equal(lower, "/usr/local");
}

static void test_state_name_refused(void **state)
{
    (void) state;
    /* Names Lazaret never writes: a bare '/' or '%', an escape of another
     * byte, a truncated or invalid escape. */
    static const char *const bad[] = { "a/b", "50%", "a%2", "a%41", "%zz", "%", "%2", "a%%25" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        char *got = lz_state_name_unescape(bad[i]);
        if (got)
            print_error("\"%s\" unescaped to \"%s\"\n", bad[i], got);
        assert_null(got);
    }
}

static void test_domain_id_valid(void **state)
{
    (void) state;
    char id[65];
    memset(id, 'a', 64);
    id[64] = '\0';
    assert_true(lz_domain_id_valid(id));
    id[3] = 'A';
    assert_false(lz_domain_id_valid(id)); /* lowercase only */
    id[3] = '0';
    id[63] = '\0';
    assert_false(lz_domain_id_valid(id)); /* 63 digits */
    assert_false(lz_domain_id_valid(""));
}

static void test_domain_lock(void **state)
{
    (void) state;
    char rt[] = "/tmp/lz-test-droot-XXXXXX";
    assert_non_null(mkdtemp(rt));
    char id[65];
    memset(id, 'b', 64);
    id[64] = '\0';
    lz_error *err = NULL;
    int fd = lz_domain_lock_take(rt, id, 0, &err);
    assert_true(fd >= 0);
    _cleanup_free_ char *dir = lz_xasprintf("%s/lazaret/domains/%s", rt, id);
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    assert_true(lz_domain_lock_held(dfd));
    /* Another holder is refused, naming the Domain as running. */
    assert_int_equal(lz_domain_lock_take(rt, id, 100, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err->message, "is running"));
    lz_error_free(lz_error_take(&err));
    close(fd);
    assert_false(lz_domain_lock_held(dfd));
    fd = lz_domain_lock_take(rt, id, 0, &err);
    assert_true(fd >= 0);
    close(fd);
    close(dfd);
    _cleanup_free_ char *lock = lz_xasprintf("%s/%s", dir, LZ_DOMAIN_LOCK);
    assert_int_equal(unlink(lock), 0);
    assert_int_equal(rmdir(dir), 0);
    _cleanup_free_ char *d1 = lz_xasprintf("%s/lazaret/domains", rt);
    _cleanup_free_ char *d2 = lz_xasprintf("%s/lazaret", rt);
    assert_int_equal(rmdir(d1), 0);
    assert_int_equal(rmdir(d2), 0);
    assert_int_equal(rmdir(rt), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_name_round_trip),
        cmocka_unit_test(test_state_name_refused),
        cmocka_unit_test(test_domain_id_valid),
        cmocka_unit_test(test_domain_lock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
