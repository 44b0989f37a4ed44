/* SPDX-License-Identifier: Apache-2.0
 *
 * Test helper for test_security_res.py, built static by the test and run
 * inside the sandbox (and, as the control, on the host as the test user).
 *
 *   res_probe modes DIR      every mode-setting syscall with S_ISUID/S_ISGID
 *                            on new files in DIR; prints "NAME OK" or
 *                            "NAME ERR <errno>" per call
 *   res_probe ptrace         PTRACE_GETREGS then PTRACE_SETREGS on a stopped
 *                            child: prints "SETREGS OK" or "SETREGS ERR <errno>"
 *   res_probe fork CEIL      forks children that wait, until CEIL of them or
 *                            fork fails; prints "FORKED n ERR e", then kills
 *                            them all
 *   res_probe alloc MIB      touches 16 MiB chunks until MIB; prints
 *                            "ALLOC n" after each chunk, "ALLOC-DONE n" at the
 *                            end, "ALLOC-FAIL n" when malloc refuses
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char *name, long r)
{
    if (r < 0)
        printf("%s ERR %d\n", name, errno);
    else
        printf("%s OK\n", name);
    fflush(stdout);
}

static int modes(const char *dir)
{
    if (chdir(dir) < 0)
        return 2;
    umask(0);
    long r;
    r = syscall(SYS_open, "open-suid", O_CREAT | O_WRONLY | O_CLOEXEC, 04755);
    report("open", r);
    if (r >= 0)
        close((int) r);
    r = syscall(SYS_openat, AT_FDCWD, "openat-sgid", O_CREAT | O_WRONLY | O_CLOEXEC, 02755);
    report("openat", r);
    if (r >= 0)
        close((int) r);
    r = syscall(SYS_creat, "creat-suid", 04755);
    report("creat", r);
    if (r >= 0)
        close((int) r);
    report("mkdir", syscall(SYS_mkdir, "mkdir-sgid", 02755));
    report("mkdirat", syscall(SYS_mkdirat, AT_FDCWD, "mkdirat-suid", 04755));
    report("mknod", syscall(SYS_mknod, "mknod-suid", S_IFREG | 04755, 0));
    report("mknodat", syscall(SYS_mknodat, AT_FDCWD, "mknodat-sgid", S_IFREG | 02755, 0));
    /* openat2 with mode 04755 in its struct open_how. */
    struct {
        unsigned long long flags, mode, resolve;
    } how = { O_CREAT | O_WRONLY | O_CLOEXEC, 04755, 0 };
    r = syscall(437, AT_FDCWD, "openat2-suid", &how, sizeof(how));
    report("openat2", r);
    if (r >= 0)
        close((int) r);
    /* Plain files, then the chmod family on them. */
    const char *plain[] = { "chmod-target", "fchmod-target", "fchmodat-target",
                            "chown-chmod-target" };
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        int fd = open(plain[i], O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
        if (fd >= 0)
            close(fd);
    }
    report("chmod", syscall(SYS_chmod, "chmod-target", 04755));
    int fd = open("fchmod-target", O_RDONLY | O_CLOEXEC);
    report("fchmod", syscall(SYS_fchmod, fd, 06755));
    close(fd);
    report("fchmodat", syscall(SYS_fchmodat, AT_FDCWD, "fchmodat-target", 02755));
    report("fchmodat2", syscall(452, AT_FDCWD, "fchmodat-target", 04755, 0));
    report("chown", syscall(SYS_chown, "chown-chmod-target", getuid(), getgid()));
    report("chown-chmod", syscall(SYS_chmod, "chown-chmod-target", 04755));
    return 0;
}

static int ptrace_setregs(void)
{
    pid_t c = fork();
    if (c == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        raise(SIGSTOP);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    struct user_regs_struct regs;
    report("GETREGS", ptrace(PTRACE_GETREGS, c, 0, &regs));
    report("SETREGS", ptrace(PTRACE_SETREGS, c, 0, &regs));
    kill(c, SIGKILL);
    waitpid(c, &st, 0);
    return 0;
}

static int forker(long ceil)
{
    int p[2];
    if (pipe(p) < 0)
        return 2;
    pid_t *kids = calloc((size_t) ceil, sizeof(pid_t));
    long n = 0;
    int e = 0;
    for (; n < ceil; n++) {
        pid_t c = fork();
        if (c < 0) {
            e = errno;
            break;
        }
        if (c == 0) {
            /* Wait until the parent closes the pipe (or dies). */
            close(p[1]);
            char b;
            (void) !read(p[0], &b, 1);
            _exit(0);
        }
        kids[n] = c;
    }
    printf("FORKED %ld ERR %d\n", n, e);
    fflush(stdout);
    close(p[1]);
    for (long i = 0; i < n; i++)
        waitpid(kids[i], NULL, 0);
    return 0;
}

static int alloc(long mib)
{
    long n = 0;
    while (n + 16 <= mib) {
        char *m = malloc(16UL << 20);
        if (!m) {
            printf("ALLOC-FAIL %ld\n", n);
            return 1;
        }
        memset(m, 0x5a, 16UL << 20);
        n += 16;
        printf("ALLOC %ld\n", n);
        fflush(stdout);
    }
    printf("ALLOC-DONE %ld\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "modes") == 0)
        return modes(argv[2]);
    if (argc == 2 && strcmp(argv[1], "ptrace") == 0)
        return ptrace_setregs();
    if (argc == 3 && strcmp(argv[1], "fork") == 0)
        return forker(atol(argv[2]));
    if (argc == 3 && strcmp(argv[1], "alloc") == 0)
        return alloc(atol(argv[2]));
    fprintf(stderr, "usage: res_probe modes DIR | ptrace | fork CEIL | alloc MIB\n");
    return 2;
}
