/* SPDX-License-Identifier: Apache-2.0
 *
 * The setuid/setgid guard (docs/limits.md, issue 9 item 4).
 *
 * Why a filter inside the sandbox: the workspace, the volumes and the
 * persistent directories' uppers are host directories, and the sandbox's
 * root is the developer's uid on the host. A sandboxed `chmod 4755
 * /workspace/x` would leave a setuid-developer program that any other local
 * user could run. Mount options do not help (nosuid stops execution through
 * one mount, not the mode stored on the inode, which the host sees through
 * its own path), and Linux lets a file's owner set S_ISUID without any
 * capability. So every way for a sandboxed process to put S_ISUID or S_ISGID
 * into a mode is refused with EPERM:
 *
 *   open/creat/openat (O_CREAT, O_TMPFILE), mkdir/mkdirat, mknod/mknodat,
 *   chmod/fchmod/fchmodat/fchmodat2: the mode argument is tested with
 *   (mode & 06000) != 0. cp -p, install -m, tar and cpio extraction, dpkg
 *   all end in one of these.
 *   openat2: its mode lives in a struct in guest memory, which a filter
 *   cannot read (and a second thread could change after the check), so it
 *   answers ENOSYS, as on a kernel without openat2; callers fall back to
 *   openat, which is checked. (runsc 2022-12-19 has no openat2 anyway.)
 *   ptrace PTRACE_POKEUSER/SETREGS/SETREGSET (and PTRACE_SET_SYSCALL on
 *   arm64): gVisor checks seccomp before the syscall-enter ptrace stop and
 *   does not check again after it (pkg/sentry/kernel/task_syscall.go,
 *   release-20221219.0), so a tracer could rewrite an allowed chmod(0755)
 *   into chmod(04755) at that stop. Tracing itself (strace) still works.
 *
 * Why the launcher installs it rather than the OCI spec: runsc 2022-12-19
 * applies an OCI `linux.seccomp` (with --oci-seccomp) to the container's
 * first process only (runsc/boot/loader.go createContainerProcess), not to
 * `runsc exec` processes, and every Lazaret session is a runsc exec. Every
 * process of the sandbox is the init or a session, both started as
 * lazaret-exec, which installs this filter before anything else; children
 * inherit it and nothing can remove it. gVisor implements seccomp(2) for
 * sandboxed tasks itself (pkg/sentry/kernel/seccomp.go), with the mode
 * argument as a register value: no time-of-check race.
 *
 * Not covered here (docs/limits.md): a persistent directory's overlay
 * copy-up keeps the mode of a setuid file of the image.
 */
#include "mode-guard.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define GUARD_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define GUARD_ARCH AUDIT_ARCH_AARCH64
#else
#error "the mode guard knows x86_64 and aarch64 only"
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the mode guard reads the low word of an argument at the little-endian offset"
#endif

/* Syscalls that did not exist in older headers: the numbers are the same on
 * x86_64 and aarch64 (the unified table from 424 on). */
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif

#define ARG_LO(i) ((unsigned int) (offsetof(struct seccomp_data, args) + 8 * (i)))
#define DENY(e) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((e) &SECCOMP_RET_DATA))
#define ALLOW BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/* One block per syscall whose argument `idx` is a mode: EPERM when it has
 * S_ISUID or S_ISGID, allowed otherwise. Five instructions; a different
 * syscall number skips the four after the comparison. */
#define MODE_RULE(nr, idx)                                                                         \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 4),                                               \
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(idx)),                                           \
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, S_ISUID | S_ISGID, 0, 1), DENY(EPERM), ALLOW

#ifdef __aarch64__
#define SET_SYSCALL_REQ 23 /* PTRACE_SET_SYSCALL (arm64) */
#else
#define SET_SYSCALL_REQ PTRACE_SETREGS
#endif

static struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, GUARD_ARCH, 1, 0),
    DENY(ENOSYS), /* a foreign syscall ABI: numbers below would mean other calls */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
    /* x32 calls carry the same AUDIT_ARCH with bit 30 set in the number. */
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),
    DENY(ENOSYS),
    MODE_RULE(__NR_open, 2),
    MODE_RULE(__NR_creat, 1),
    MODE_RULE(__NR_mkdir, 1),
    MODE_RULE(__NR_mknod, 1),
    MODE_RULE(__NR_chmod, 1),
#endif
    MODE_RULE(__NR_openat, 3),
    MODE_RULE(__NR_mkdirat, 2),
    MODE_RULE(__NR_mknodat, 2),
    MODE_RULE(__NR_fchmod, 1),
    MODE_RULE(__NR_fchmodat, 2),
    MODE_RULE(__NR_fchmodat2, 2),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat2, 0, 1),
    DENY(ENOSYS),
    /* ptrace requests that rewrite a stopped tracee's registers. */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ptrace, 0, 7),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PTRACE_POKEUSER, 4, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PTRACE_SETREGS, 3, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x4205 /* PTRACE_SETREGSET */, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SET_SYSCALL_REQ, 1, 0),
    ALLOW,
    DENY(EPERM),
    ALLOW,
};

int lz_mode_guard_install(void)
{
    struct sock_fprog prog = {
        .len = (unsigned short) (sizeof(filter) / sizeof(filter[0])),
        .filter = filter,
    };
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
        return 0;
    if (errno != EACCES)
        return -1;
    /* Linux (and a gVisor that follows it) accepts a filter from a task
     * without CAP_SYS_ADMIN only under no_new_privs. runsc 2022-12-19 does
     * not ask for it, so this path is for newer runsc releases. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return (int) syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}
