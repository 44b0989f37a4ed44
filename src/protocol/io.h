/* SPDX-License-Identifier: Apache-2.0
 *
 * Byte I/O shared by the host binaries and the static guest binaries (this
 * directory is libc-only; see table.h).
 */
#ifndef LAZARET_PROTOCOL_IO_H
#define LAZARET_PROTOCOL_IO_H

#include <stddef.h>
#include <sys/types.h>

/* Write all n bytes, retrying EINTR and short writes. Returns n, or -1 with
 * errno set (EAGAIN on a non-blocking fd that filled up: the caller's
 * business; what was written before is lost to it). */
ssize_t lz_write_all(int fd, const void *p, size_t n);

#endif
