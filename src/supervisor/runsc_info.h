/* SPDX-License-Identifier: Apache-2.0
 *
 * What the installed runsc can do. Lazaret probes rather than assumes
 * (docs/platform.md "runsc releases"): the release date decides between runsc's own network stack
 * and host networking inside a dedicated namespace; the statx behaviour is
 * probed in the running sandbox itself (lifecycle.c).
 */
#ifndef LAZARET_SUPERVISOR_RUNSC_INFO_H
#define LAZARET_SUPERVISOR_RUNSC_INFO_H

#include <stdbool.h>
#include <stddef.h>

/* Releases from this date on run --network=sandbox in a non-root network
 * namespace on current kernels; older ones decide "root namespace" by the
 * presence of /proc/sys/net/core/rmem_default and refuse. */
#define LZ_RUNSC_NETSTACK_OK_FROM 20230101L

/* The release date in "runsc version 0.0~20221219.0" (Debian) or
 * "runsc version release-20221219.0" (upstream) as YYYYMMDD; 0 if none. */
long lz_runsc_release_date(const char *version_output);

/* What a cold start needs to know of the installed runsc, learned once per
 * runsc binary and kept in the Storage Root (issue 13: asking costs a
 * `runsc --version` and a `runsc exec` into the new sandbox, about 55 ms of
 * every cold start; docs/performance.md "Where a cold start goes"). */
typedef struct lz_runsc_facts {
    long release_date; /* YYYYMMDD from `runsc --version`; 0 if unknown */
    bool statx_ok;     /* statx(AT_NO_AUTOMOUNT) works in its sandboxes */
} lz_runsc_facts;

/* The cache file, in the Storage Root (Lazaret's own; no sandbox has it). */
#define LZ_RUNSC_FACTS_FILE "runsc-facts"

/* The key the facts are kept under: this Lazaret's version, the identity
 * (fs/cache_record.h lz_cache_file_identity) of its binary
 * (/proc/self/exe) and of the runsc binary, so that an upgraded or
 * replaced runsc, or a rebuilt Lazaret, asks again. Writes at most size
 * bytes; -1 when a binary cannot be stat'ed or the key does not fit. */
int lz_runsc_facts_key(const char *runsc_path, char *buf, size_t size);

/* Parse a cached value ("date=YYYYMMDD,statx=0|1"): true only for exactly
 * the text Lazaret writes (a truncated or edited value is a miss, never a
 * wrong answer). */
bool lz_runsc_facts_parse_value(const char *value, lz_runsc_facts *ret);

/* Load the facts for key from dir_fd/LZ_RUNSC_FACTS_FILE (a record of
 * fs/cache_record.h). 0 on a hit, -1 on any miss. */
int lz_runsc_facts_load(int dir_fd, const char *key, lz_runsc_facts *ret);

/* Keep the facts (best effort: a failure only costs the next start the
 * probes). */
void lz_runsc_facts_store(int dir_fd, const char *key, const lz_runsc_facts *f);

#endif
