/* SPDX-License-Identifier: Apache-2.0
 *
 * Byte I/O shared by the host binaries and the static guest binaries: libc
 * only, built into the protocol library (src/protocol/meson.build), which
 * the guest binaries link. Here, below every layer, so that src/fs and the
 * others need not reach up into src/protocol for it.
 */
#ifndef LAZARET_COMMON_IO_H
#define LAZARET_COMMON_IO_H

#include <stddef.h>
#include <sys/types.h>

/* Write all n bytes, retrying EINTR and short writes. Returns n, or -1 with
 * errno set (EAGAIN on a non-blocking fd that filled up: the caller's
 * business; what was written before is lost to it). */
ssize_t lz_write_all(int fd, const void *p, size_t n);

#endif
