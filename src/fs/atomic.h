/* SPDX-License-Identifier: Apache-2.0
 *
 * Writing a small file whole or not at all, relative to a directory
 * descriptor: the one way Lazaret replaces a record, a status file or an
 * exported document (docs/errors.md "Durable writes").
 *
 *   1. a fresh temporary name beside the target, ".NAME.tmp-<random>",
 *      created O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC with the given mode — a
 *      name nobody else can have made (writers in other Domains, or another
 *      pid namespace whose pids repeat, may be at the same directory);
 *   2. every byte written, then fsync of the file;
 *   3. renameat over the target — readers see the old file or the new one,
 *      never a part;
 *   4. fsync of the directory, so that the rename itself survives a crash.
 *
 * On any failure the temporary name is removed and the target is untouched.
 * LZ_ATOMIC_NO_SYNC drops both fsyncs where durability across a crash is not
 * wanted (a tmpfs runtime directory, a cache that is rebuilt anyway).
 */
#ifndef LAZARET_FS_ATOMIC_H
#define LAZARET_FS_ATOMIC_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/error.h"

enum {
    LZ_ATOMIC_NO_SYNC = 1u << 0, /* no fsync of file and directory */
};

/* Writes the concatenation of iov[0..n) as dirfd/name (name: one path
 * component). `what` names the file for the user ("the status file");
 * *err says what failed on it. Returns 0 or -1. */
LZ_MUST_CHECK
int lz_write_atomic_iov(int dirfd, const char *name, const struct iovec *iov, size_t n, mode_t mode,
                        unsigned flags, const char *what, lz_error **err);

/* lz_write_atomic_iov of one buffer. */
LZ_MUST_CHECK
int lz_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                    unsigned flags, const char *what, lz_error **err);

#endif
