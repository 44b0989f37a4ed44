/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/fs/remove.c: removing a Lazaret-owned tree through
 * descriptors. Every rule has an accepting and a refusing case. Each test
 * works in its own mkdtemp() directory and runs its body in a forked child:
 *
 *  - "as owner" bodies run without the privilege to ignore permissions
 *    (as root the child drops to uid/gid 65534, which owns the test
 *    directory), so that 0500 directories and read-only files are real
 *    obstacles;
 *  - mount bodies run in a private mount namespace (plus a user namespace
 *    when not root); main() leaves them out, with a "# SKIP" line, where no
 *    mount namespace can be made.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "fs/remove.h"
#include "unit_fds.h"

#define NOBODY 65534

/* Checks inside a forked child: report and exit 1. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "# %s:%d: check failed: %s%s%s (errno %d)\n", __FILE__, __LINE__,      \
                    #cond, err ? " -- " : "", err ? err->message : "", err ? err->errnum : errno); \
            fflush(stderr);                                                                        \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)
#define CHECK_ERR(errnum_)                                                                         \
    do {                                                                                           \
        CHECK(err != NULL && err->errnum == (errnum_));                                            \
        lz_error_free(lz_error_take(&err));                                                        \
    } while (0)

typedef struct {
    char *dir; /* canonical path of this test's temporary directory */
} fixture;

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void) st;
    (void) ftw;
    if (type == FTW_DP)
        return rmdir(path) < 0 ? -1 : 0;
    return unlink(path) < 0 ? -1 : 0;
}

static int open_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void) ftw;
    if (type == FTW_D && (st->st_mode & 0700) != 0700)
        (void) chmod(path, 0700);
    return 0;
}

static int setup(void **state)
{
    char tmpl[] = "/tmp/lz-test-remove-XXXXXX";
    if (!mkdtemp(tmpl))
        return -1;
    fixture *f = lz_xcalloc(1, sizeof(*f));
    f->dir = realpath(tmpl, NULL);
    if (!f->dir)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    /* 0000 directories a failed test left behind must not break cleanup */
    for (int i = 0; i < 4; i++)
        (void) nftw(f->dir, open_entry, 16, FTW_PHYS);
    (void) nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f->dir);
    free(f);
    return 0;
}

/* ---- helpers for the child ---------------------------------------------- */

static lz_error *err; /* the child's current error, shown by CHECK */

static int open_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(fd >= 0);
    return fd;
}

static void mk(int dfd, const char *rel, mode_t mode)
{
    CHECK(mkdirat(dfd, rel, 0700) == 0);
    CHECK(fchmodat(dfd, rel, mode, 0) == 0);
}

static void put(int dfd, const char *rel, mode_t mode)
{
    int fd = openat(dfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "data\n", 5) == 5);
    CHECK(fchmod(fd, mode) == 0);
    close(fd);
}

static bool exists(int dfd, const char *rel)
{
    struct stat st;
    return fstatat(dfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool write_proc(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = write(fd, s, strlen(s)) == (ssize_t) strlen(s);
    close(fd);
    return ok;
}

/* Enter a private mount namespace (and a user namespace when not root). */
static bool enter_mount_namespace(void)
{
    if (geteuid() == 0)
        return unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
        return false;
    char map[64];
    snprintf(map, sizeof(map), "0 %u 1\n", (unsigned) uid);
    if (!write_proc("/proc/self/uid_map", map))
        return false;
    (void) write_proc("/proc/self/setgroups", "deny\n");
    snprintf(map, sizeof(map), "0 %u 1\n", (unsigned) gid);
    if (!write_proc("/proc/self/gid_map", map))
        return false;
    return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
}

/* Drop the power to ignore file permissions: as root become 65534, the
 * owner of the test directory. */
static void become_owner(const char *dir)
{
    if (geteuid() != 0)
        return;
    CHECK(chown(dir, NOBODY, NOBODY) == 0);
    CHECK(setgroups(0, NULL) == 0);
    CHECK(setresgid(NOBODY, NOBODY, NOBODY) == 0);
    CHECK(setresuid(NOBODY, NOBODY, NOBODY) == 0);
    CHECK(geteuid() == NOBODY);
}

enum mode { AS_ROOT_OR_SELF, AS_OWNER, IN_MOUNT_NS };

/* Run body(dir) in a child; it fails the test by exiting non-zero. The
 * child must not leak a descriptor. */
static void run_child(const fixture *f, enum mode mode, void (*body)(const char *dir))
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (mode == AS_OWNER)
            become_owner(f->dir);
        if (mode == IN_MOUNT_NS)
            CHECK(enter_mount_namespace());
        int before = count_open_fds();
        body(f->dir);
        CHECK(count_open_fds() == before);
        CHECK(err == NULL);
        fflush(NULL);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- bodies ------------------------------------------------------------- */

/* t/ a/b/c/file, ro (0400), d500 (0500: f, s (0500: f)), d000 (0000: f,
 * sub), d300 (0300: f), fifo, link -> nowhere, empty/ */
static void build_tree(int dfd, const char *name)
{
    mk(dfd, name, 0700);
    int t = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(t >= 0);
    mk(t, "a", 0755);
    mk(t, "a/b", 0755);
    mk(t, "a/b/c", 0755);
    put(t, "a/b/c/file", 0644);
    put(t, "ro", 0400);
    mk(t, "d500", 0700);
    put(t, "d500/f", 0400);
    mk(t, "d500/s", 0700);
    put(t, "d500/s/f", 0400);
    CHECK(fchmodat(t, "d500/s", 0500, 0) == 0);
    CHECK(fchmodat(t, "d500", 0500, 0) == 0);
    mk(t, "d000", 0700);
    put(t, "d000/f", 0600);
    mk(t, "d000/sub", 0700);
    CHECK(fchmodat(t, "d000", 0000, 0) == 0);
    mk(t, "d300", 0700);
    put(t, "d300/f", 0600);
    CHECK(fchmodat(t, "d300", 0300, 0) == 0);
    CHECK(mkfifoat(t, "fifo", 0600) == 0);
    CHECK(symlinkat("nowhere", t, "link") == 0);
    mk(t, "empty", 0700);
    close(t);
}

static void body_nested_tree(const char *dir)
{
    int dfd = open_dir(dir);
    build_tree(dfd, "t");
    CHECK(lz_remove_tree_at(dfd, "t", "TEST", &err) == 0);
    CHECK(!exists(dfd, "t"));
    /* a plain file as the name */
    put(dfd, "file", 0400);
    CHECK(lz_remove_tree_at(dfd, "file", "TEST", &err) == 0);
    CHECK(!exists(dfd, "file"));
    close(dfd);
}

static void body_nested_tree_o_path(const char *dir)
{
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(dfd >= 0);
    build_tree(dfd, "t");
    CHECK(lz_remove_tree_at(dfd, "t", "TEST", &err) == 0);
    CHECK(!exists(dfd, "t"));
    close(dfd);
}

static void body_top_level_0500(const char *dir)
{
    int dfd = open_dir(dir);
    mk(dfd, "t", 0700);
    put(dfd, "t/f", 0400);
    mk(dfd, "t/s", 0700);
    CHECK(fchmodat(dfd, "t", 0500, 0) == 0);
    CHECK(lz_remove_tree_at(dfd, "t", "TEST", &err) == 0);
    CHECK(!exists(dfd, "t"));
    close(dfd);
}

static void body_refuses_unwritable_parent(const char *dir)
{
    /* the name cannot be unlinked from a parent without write permission:
     * refused (EACCES) and the name stays */
    int dfd = open_dir(dir);
    mk(dfd, "p", 0700);
    mk(dfd, "p/t", 0700);
    put(dfd, "p/t/f", 0600);
    CHECK(fchmodat(dfd, "p", 0500, 0) == 0);
    int p = openat(dfd, "p", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(p >= 0);
    CHECK(lz_remove_tree_at(p, "t", "TEST", &err) == -1);
    CHECK_ERR(EACCES);
    CHECK(exists(p, "t"));
    close(p);
    CHECK(fchmodat(dfd, "p", 0700, 0) == 0);
    close(dfd);
}

static void body_symlinks(const char *dir)
{
    int dfd = open_dir(dir);
    mk(dfd, "outside", 0700);
    put(dfd, "outside/keep", 0600);
    mk(dfd, "outside/sub", 0700);
    put(dfd, "outside/sub/deep", 0600);
    mk(dfd, "t", 0700);
    mk(dfd, "t/in", 0700);
    CHECK(symlinkat("../outside", dfd, "t/rel") == 0);
    _cleanup_free_ char *abs = lz_xasprintf("%s/outside", dir);
    CHECK(symlinkat(abs, dfd, "t/in/abs") == 0);
    CHECK(symlinkat("../outside/keep", dfd, "t/file") == 0);
    CHECK(symlinkat("/", dfd, "t/root") == 0);
    CHECK(lz_remove_tree_at(dfd, "t", "TEST", &err) == 0);
    CHECK(!exists(dfd, "t"));
    CHECK(exists(dfd, "outside/keep"));
    CHECK(exists(dfd, "outside/sub/deep"));

    /* the name itself a symlink to a directory: only the link goes */
    CHECK(symlinkat("outside", dfd, "l") == 0);
    CHECK(lz_remove_tree_at(dfd, "l", "TEST", &err) == 0);
    CHECK(!exists(dfd, "l"));
    CHECK(exists(dfd, "outside/keep"));
    CHECK(exists(dfd, "outside/sub/deep"));
    close(dfd);
}

static void body_missing(const char *dir)
{
    int dfd = open_dir(dir);
    CHECK(lz_remove_tree_at(dfd, "nothing-here", "TEST", &err) == 0);
    /* refused: a bad descriptor, a path through a file */
    CHECK(lz_remove_tree_at(-1, "nothing-here", "TEST", &err) == -1);
    CHECK_ERR(EBADF);
    put(dfd, "file", 0600);
    CHECK(lz_remove_tree_at(dfd, "file/x", "TEST", &err) == -1);
    CHECK_ERR(ENOTDIR);
    CHECK(exists(dfd, "file"));
    close(dfd);
}

static void make_chain(int dfd, const char *name, int depth)
{
    mk(dfd, name, 0700);
    int cur = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(cur >= 0);
    for (int i = 0; i < depth; i++) {
        mk(cur, "d", 0700);
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(next >= 0);
        close(cur);
        cur = next;
    }
    put(cur, "leaf", 0600);
    close(cur);
}

static void body_depth(const char *dir)
{
    int dfd = open_dir(dir);
    make_chain(dfd, "ok", 200);
    CHECK(lz_remove_tree_at(dfd, "ok", "TEST", &err) == 0);
    CHECK(!exists(dfd, "ok"));
    /* Deeper than the recursion goes (a tree the sandbox built in its
     * inbox, attack round i11): deep parts are moved up and removed too. */
    make_chain(dfd, "deep", 300);
    CHECK(lz_remove_tree_at(dfd, "deep", "TEST", &err) == 0);
    CHECK(!exists(dfd, "deep"));
    make_chain(dfd, "deeper", 1500);
    CHECK(lz_remove_tree_at(dfd, "deeper", "TEST", &err) == 0);
    CHECK(!exists(dfd, "deeper"));
    close(dfd);
}

static void body_mount_point(const char *dir)
{
    int dfd = open_dir(dir);
    mk(dfd, "t", 0700);
    mk(dfd, "t/sub", 0700);
    mk(dfd, "t/sub/m", 0700);
    _cleanup_free_ char *m = lz_xasprintf("%s/t/sub/m", dir);
    CHECK(mount("tmpfs", m, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") == 0);
    put(dfd, "t/sub/m/keep", 0600);

    /* a mount point inside the tree */
    CHECK(lz_remove_tree_at(dfd, "t", "TEST", &err) == -1);
    CHECK(err && strstr(err->message, "mount point"));
    CHECK_ERR(EXDEV);
    CHECK(exists(dfd, "t/sub/m/keep"));
    /* the name itself a mount point */
    int sub = openat(dfd, "t/sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(sub >= 0);
    CHECK(lz_remove_tree_at(sub, "m", "TEST", &err) == -1);
    CHECK_ERR(EXDEV);
    CHECK(exists(dfd, "t/sub/m/keep"));
    close(sub);

    /* without the mount: removed */
    CHECK(umount2(m, MNT_DETACH) == 0);
    CHECK(lz_remove_tree_at(dfd, "t", "TEST", &err) == 0);
    CHECK(!exists(dfd, "t"));
    close(dfd);
}

static void body_bind_mount_same_fs(const char *dir)
{
    /* A bind mount of a directory of the same file system has the same
     * st_dev as its parent: "never crosses a mount" must still hold. The
     * test mounts its own tmpfs first so both sides are on one file
     * system. */
    CHECK(mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") == 0);
    int dfd = open_dir(dir);
    mk(dfd, "outside", 0700);
    put(dfd, "outside/keep", 0600);
    mk(dfd, "t", 0700);
    mk(dfd, "t/m", 0700);
    _cleanup_free_ char *src = lz_xasprintf("%s/outside", dir);
    _cleanup_free_ char *m = lz_xasprintf("%s/t/m", dir);
    CHECK(mount(src, m, NULL, MS_BIND, NULL) == 0);
    int r = lz_remove_tree_at(dfd, "t", "TEST", &err);
    if (!exists(dfd, "outside/keep"))
        fprintf(stderr,
                "# lz_remove_tree_at deleted outside/keep through a bind mount "
                "(returned %d%s%s)\n",
                r, err ? ": " : "", err ? err->message : "");
    CHECK(exists(dfd, "outside/keep"));
    CHECK(r == -1);
    lz_error_free(lz_error_take(&err));
    close(dfd);
}

/* ---- tests -------------------------------------------------------------- */

static void test_removes_nested_tree(void **state)
{
    run_child(*state, AS_ROOT_OR_SELF, body_nested_tree);
}

static void test_removes_nested_tree_as_owner(void **state)
{
    run_child(*state, AS_OWNER, body_nested_tree);
}

static void test_removes_nested_tree_o_path(void **state)
{
    run_child(*state, AS_OWNER, body_nested_tree_o_path);
}

static void test_removes_top_level_0500(void **state)
{
    run_child(*state, AS_OWNER, body_top_level_0500);
}

static void test_refuses_unwritable_parent(void **state)
{
    run_child(*state, AS_OWNER, body_refuses_unwritable_parent);
}

static void test_never_follows_symlinks(void **state)
{
    run_child(*state, AS_ROOT_OR_SELF, body_symlinks);
}

static void test_missing_is_success(void **state)
{
    run_child(*state, AS_ROOT_OR_SELF, body_missing);
}

static void test_depth_limit(void **state)
{
    run_child(*state, AS_ROOT_OR_SELF, body_depth);
}

static void test_refuses_mount_point(void **state)
{
    run_child(*state, IN_MOUNT_NS, body_mount_point);
}

static void test_refuses_bind_mount_same_fs(void **state)
{
    run_child(*state, IN_MOUNT_NS, body_bind_mount_same_fs);
}

static bool probe_mount_namespace(void)
{
    char tmpl[] = "/tmp/lz-test-remove-probe-XXXXXX";
    if (!mkdtemp(tmpl))
        return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(enter_mount_namespace() && mount("tmpfs", tmpl, "tmpfs", 0, "mode=0700") == 0 ? 0
                                                                                            : 1);
    int status = 0;
    bool ok =
        pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    (void) rmdir(tmpl);
    return ok;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    static const struct {
        struct CMUnitTest test;
        bool needs_mount_ns;
    } all[] = {
        { T(test_removes_nested_tree), false },
        { T(test_removes_nested_tree_as_owner), false },
        { T(test_removes_nested_tree_o_path), false },
        { T(test_removes_top_level_0500), false },
        { T(test_refuses_unwritable_parent), false },
        { T(test_never_follows_symlinks), false },
        { T(test_missing_is_success), false },
        { T(test_depth_limit), false },
        { T(test_refuses_mount_point), true },
        { T(test_refuses_bind_mount_same_fs), true },
    };
    bool have_mount_ns = probe_mount_namespace();
    struct CMUnitTest run[LZ_ARRAY_SIZE(all)];
    size_t n = 0;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(all); i++) {
        if (all[i].needs_mount_ns && !have_mount_ns) {
            printf("# SKIP %s: no mount namespace (unshare) available\n", all[i].test.name);
            continue;
        }
        run[n++] = all[i].test;
    }
    fflush(stdout);
    return _cmocka_run_group_tests("test_remove", run, n, NULL, NULL);
}
