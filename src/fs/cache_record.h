/* SPDX-License-Identifier: Apache-2.0
 *
 * One-line cache records in Lazaret's own directories (the Storage Root,
 * the Storage Catalog): "KEY VALUE\n", where KEY says exactly what the value
 * was learned for (versions, file identities) and VALUE is a short token.
 * Used where a cold start would otherwise ask a slow program the same
 * question every time (docs/performance.md "Where a cold start goes").
 *
 * A record is only ever a hint that saves the asking: a missing, foreign,
 * malformed or stale one is a miss, and the caller asks again. Nothing the
 * sandbox can write is a cache directory.
 */
#ifndef LAZARET_FS_CACHE_RECORD_H
#define LAZARET_FS_CACHE_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#define LZ_CACHE_RECORD_MAX 8192 /* bytes of a whole record */

struct stat;

/* A file's identity as part of a key: "DEV:INO:SIZE:MTIME:CTIME" (times to
 * the nanosecond). Any rewrite or replacement of the file changes it, and
 * nobody but root can set a change time. */
#define LZ_CACHE_IDENTITY_MAX 128
void lz_cache_file_identity(const struct stat *st, char buf[static LZ_CACHE_IDENTITY_MAX]);

/* Is value a token a record can hold: 1-255 bytes of [A-Za-z0-9._:=,+-]? */
bool lz_cache_value_ok(const char *value);

/* Parse a record's text (len bytes, not NUL-terminated) for key: true, with
 * the value copied to value (NUL-terminated), only when the text is exactly
 * key, one space, a valid value and one newline. */
bool lz_cache_record_parse(const char *text, size_t len, const char *key, char *value,
                           size_t value_size);

/* Read dir_fd/name (one component: name has no '/'; opened without
 * following a symlink): a regular file of this user, at most
 * LZ_CACHE_RECORD_MAX bytes, holding the record for key. 0 on a hit, -1 on
 * any miss. */
int lz_cache_record_load(int dir_fd, const char *name, const char *key, char *value,
                         size_t value_size);

/* Keep the record (best effort: a failure costs only the next asking):
 * written to a new file of a random name beside it, then renamed over it.
 * A key with a newline or a value that is not a token is not stored. */
void lz_cache_record_store(int dir_fd, const char *name, const char *key, const char *value);

#endif
