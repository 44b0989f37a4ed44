/* SPDX-License-Identifier: Apache-2.0
 *
 * Numbers of the x86-64/generic syscalls Lazaret calls through syscall(2)
 * that older libc headers may not name (Debian 12's do; a build against
 * older headers still works). Values from the kernel's unified table.
 */
#ifndef LAZARET_COMMON_SYSCALLS_H
#define LAZARET_COMMON_SYSCALLS_H

#include <sys/syscall.h>

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

#endif
