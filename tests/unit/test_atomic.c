/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/fs/atomic.c: a file is replaced whole or not at all,
 * relative to a directory descriptor (O_PATH ones included), and a failed
 * write leaves neither a temporary name nor a changed target behind.
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
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "fs/atomic.h"
#include "unit_fds.h"

static char dir[64];
static int dir_fd = -1;
static int fds_before;

static int setup(void **state)
{
    (void) state;
    snprintf(dir, sizeof(dir), "/tmp/lz-atomic-XXXXXX");
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

/* The contents of dir/name, NUL-terminated (NULL if absent). */
static char *slurp(const char *name)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    static char buf[256];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n < 0 ? 0 : n] = '\0';
    return buf;
}

/* Number of entries of dir besides . and .. */
static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void writes_and_replaces_with_mode(void **state)
{
    (void) state;
    lz_error *err = NULL;
    assert_int_equal(lz_write_atomic(dir_fd, "rec", "one\n", 4, 0640, 0, "the record", &err), 0);
    assert_string_equal(slurp("rec"), "one\n");
    struct stat st;
    assert_int_equal(fstatat(dir_fd, "rec", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0640); /* umask 022 (main) */
    assert_int_equal(
        lz_write_atomic(dir_fd, "rec", "two", 3, 0600, LZ_ATOMIC_NO_SYNC, "the record", &err), 0);
    assert_string_equal(slurp("rec"), "two");
    assert_int_equal(entries(), 1); /* no temporary name left */
}

static void concatenates_iovecs(void **state)
{
    (void) state;
    char ab[] = "ab", none[] = "", cd[] = "cd";
    struct iovec iov[3] = { { ab, 2 }, { none, 0 }, { cd, 2 } };
    lz_error *err = NULL;
    assert_int_equal(lz_write_atomic_iov(dir_fd, "x", iov, 3, 0600, 0, "x", &err), 0);
    assert_string_equal(slurp("x"), "abcd");
}

static void refuses_names_that_are_not_one_component(void **state)
{
    (void) state;
    const char *bad[] = { "", ".", "..", "a/b", "/abs" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        lz_error *err = NULL;
        assert_int_equal(lz_write_atomic(dir_fd, bad[i], "z", 1, 0600, 0, "the file", &err), -1);
        assert_non_null(err);
        assert_int_equal(err->errnum, EINVAL);
        lz_error_free(err);
    }
    assert_int_equal(entries(), 0);
}

/* A target that cannot be replaced (a non-empty directory of that name):
 * the error names the object, the temporary file is gone, the directory
 * stays as it was. */
static void failed_replace_leaves_nothing(void **state)
{
    (void) state;
    assert_int_equal(mkdirat(dir_fd, "busy", 0700), 0);
    int sub = openat(dir_fd, "busy", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(sub >= 0);
    int f = openat(sub, "inside", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(f >= 0);
    close(f);
    lz_error *err = NULL;
    assert_int_equal(lz_write_atomic(dir_fd, "busy", "z", 1, 0600, 0, "the status file", &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err->message, "the status file"));
    assert_non_null(strstr(err->message, "busy"));
    lz_error_free(err);
    assert_int_equal(entries(), 1);
    unlinkat(sub, "inside", 0);
    close(sub);
    unlinkat(dir_fd, "busy", AT_REMOVEDIR);
}

/* A symlink planted at the target is replaced, never followed. */
static void symlink_target_is_replaced_not_followed(void **state)
{
    (void) state;
    assert_int_equal(symlinkat("/tmp/lz-atomic-must-not-exist", dir_fd, "link"), 0);
    lz_error *err = NULL;
    assert_int_equal(lz_write_atomic(dir_fd, "link", "v", 1, 0600, 0, "the file", &err), 0);
    struct stat st;
    assert_int_equal(fstatat(dir_fd, "link", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(access("/tmp/lz-atomic-must-not-exist", F_OK), -1);
}

int main(void)
{
    umask(022);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(writes_and_replaces_with_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(concatenates_iovecs, setup, teardown),
        cmocka_unit_test_setup_teardown(refuses_names_that_are_not_one_component, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_replace_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(symlink_target_is_replaced_not_followed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
