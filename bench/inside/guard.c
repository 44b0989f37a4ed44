/* SPDX-License-Identifier: Apache-2.0
 *
 * lzbench-guard: bench/inside's "+guard" and "+allowall" variants. Installs
 * one seccomp filter, then executes the command, which inherits it:
 *
 *   lzbench-guard -- COMMAND [ARG...]          Lazaret's setuid/setgid guard
 *                                              (src/guest/mode-guard.c, compiled
 *                                              in), and nothing else the
 *                                              launcher lazaret-exec does
 *   lzbench-guard --allow-all -- COMMAND ...   a one-instruction filter that
 *                                              allows every syscall
 *   lzbench-guard --short -- COMMAND ...       a three-instruction filter that
 *                                              reads the syscall number and
 *                                              denies one that does not exist
 *
 * Why: to tell the price of having a seccomp filter at all in gVisor from the
 * price of the guard's length, and a filter gVisor could recognise as
 * allowing everything from one it has to run (docs/performance.md, "The
 * 2024 process-creation gap"). Built static by inside.py, run inside the
 * sandbox.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest/mode-guard.h"

static int install(struct sock_filter *filter, unsigned short len)
{
    struct sock_fprog prog = { .len = len, .filter = filter };
    /* As the guard does: without CAP_SYS_ADMIN a filter needs no_new_privs. */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
        return 0;
    if (errno != EACCES || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return (int) syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

static struct sock_filter allow_all[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };

/* 4095 is no syscall on x86_64 or aarch64: the filter never denies. */
static struct sock_filter short_filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 4095, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

int main(int argc, char **argv)
{
    int i = 1, r;
    const char *mode = i < argc && strncmp(argv[i], "--", 2) == 0 && argv[i][2] ? argv[i++] : "";
    if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc) {
        fputs("usage: lzbench-guard [--allow-all | --short] -- COMMAND [ARG...]\n", stderr);
        return 125;
    }
    if (strcmp(mode, "--allow-all") == 0)
        r = install(allow_all, 1);
    else if (strcmp(mode, "--short") == 0)
        r = install(short_filter, sizeof(short_filter) / sizeof(short_filter[0]));
    else if (!*mode)
        r = lz_mode_guard_install();
    else {
        fprintf(stderr, "lzbench-guard: unknown option %s\n", mode);
        return 125;
    }
    if (r < 0) {
        fprintf(stderr, "lzbench-guard: cannot install the filter: %s\n", strerror(errno));
        return 125;
    }
    execv(argv[i + 1], argv + i + 1);
    fprintf(stderr, "lzbench-guard: cannot execute %s: %s\n", argv[i + 1], strerror(errno));
    return 127;
}
