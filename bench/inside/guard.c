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
 *
 * Why: to tell the price of having a seccomp filter at all in gVisor from the
 * price of the guard's length (docs/performance.md, "The 2024
 * process-creation gap"). Built static by inside.py, run inside the sandbox.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest/mode-guard.h"

static int allow_all(void)
{
    struct sock_filter one[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
    struct sock_fprog prog = { .len = 1, .filter = one };
    /* As the guard does: without CAP_SYS_ADMIN a filter needs no_new_privs. */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
        return 0;
    if (errno != EACCES || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return (int) syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

int main(int argc, char **argv)
{
    int i = 1;
    bool all = i < argc && strcmp(argv[i], "--allow-all") == 0;
    if (all)
        i++;
    if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc) {
        fputs("usage: lzbench-guard [--allow-all] -- COMMAND [ARG...]\n", stderr);
        return 125;
    }
    if ((all ? allow_all() : lz_mode_guard_install()) < 0) {
        fprintf(stderr, "lzbench-guard: cannot install the filter: %s\n", strerror(errno));
        return 125;
    }
    execv(argv[i + 1], argv + i + 1);
    fprintf(stderr, "lzbench-guard: cannot execute %s: %s\n", argv[i + 1], strerror(errno));
    return 127;
}
