/* SPDX-License-Identifier: Apache-2.0
 *
 * What the runsc Lazaret uses can do, and which runsc that is. Lazaret
 * probes rather than assumes (docs/platform.md "runsc releases"): the flags
 * it passes are looked up in `runsc flags`; whether runsc's netstack needs
 * /proc/sys/net covered and whether statx(AT_NO_AUTOMOUNT) works are
 * answered by the first sandbox started with this runsc (lifecycle.c); the
 * release date is only shown, never decides.
 */
#ifndef LAZARET_SUPERVISOR_RUNSC_INFO_H
#define LAZARET_SUPERVISOR_RUNSC_INFO_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The environment variable that names the runsc to use (docs/runtime.md
 * "Which runsc"); without it, runsc from the system directories. */
#define LZ_RUNSC_ENV "LAZARET_RUNSC"

/* The runsc Lazaret uses: $LAZARET_RUNSC when set, validated (an absolute
 * path; the file and every directory above it owned by root or the caller
 * and writable by no one else - nobody but them can swap the program the
 * sandbox runs under; a regular file the caller may execute), else runsc
 * from LZ_SPAWN_SYSTEM_PATH. *ret_path is the canonical path (malloc'd);
 * *ret_from_env says which. */
int lz_runsc_locate(char **ret_path, bool *ret_from_env, lz_error **err);

/* What `runsc flags` may print (about 16 KiB in 2024). */
#define LZ_RUNSC_FLAGS_MAX ((size_t) 256 * 1024)

/* Is --NAME among the flags `runsc flags` printed (each as a line
 * "  -NAME ...")? */
bool lz_runsc_flags_has(const char *flags_output, const char *name);

/* The default of -platform in `runsc flags` ("ptrace", "systrap", "kvm")
 * into buf; false when it is not printed. */
bool lz_runsc_flags_default_platform(const char *flags_output, char *buf, size_t size);

/* The global flags Lazaret passes to every runsc command (supervisor.c);
 * a runsc that lacks one is refused before it runs (docs/errors.md
 * "runsc"). NULL-terminated. */
extern const char *const lz_runsc_needed_flags[];

/* The release date in "runsc version 0.0~20221219.0" (Debian) or
 * "runsc version release-20221219.0" (upstream) as YYYYMMDD; 0 if none. */
long lz_runsc_release_date(const char *version_output);

/* What a cold start needs to know of the installed runsc, learned once per
 * runsc binary and kept in the Storage Root (issue 13: asking costs a
 * `runsc --version` and a `runsc exec` into the new sandbox, about 55 ms of
 * every cold start; docs/performance.md "Where a cold start goes"). */
typedef struct lz_runsc_facts {
    long release_date; /* YYYYMMDD from `runsc --version`; 0 if unknown (shown only) */
    bool statx_ok;     /* statx(AT_NO_AUTOMOUNT) works in its sandboxes */
    /* Its `runsc start` refused --network=sandbox in the sandbox's own
     * network namespace and started once /proc/sys/net was covered in the
     * supervisor's mount namespace (lifecycle.c, sup_cover_proc_sys_net). */
    bool netstack_cover;
    /* Its `runsc flags` lists --directfs (2023 on, default true): Lazaret
     * passes --directfs=false (docs/platform.md "Other differences"). */
    bool has_directfs;
} lz_runsc_facts;

/* The cache file, in the Storage Root (Lazaret's own; no sandbox has it). */
#define LZ_RUNSC_FACTS_FILE "runsc-facts"

/* The key the facts are kept under: this Lazaret's version, the identity
 * (fs/cache_record.h lz_cache_file_identity) of its binary
 * (/proc/self/exe) and of the runsc binary, and the kernel's release and
 * build (the cover's need depends on the kernel too: which /proc/sys/net
 * files a network namespace shows), so that an upgraded or replaced runsc
 * or kernel, or a rebuilt Lazaret, asks again. Writes at most size
 * bytes; -1 when a binary cannot be stat'ed or the key does not fit. */
#define LZ_RUNSC_FACTS_KEY_MAX (128 + 2 * 128 + 65 + 17)
int lz_runsc_facts_key(const char *runsc_path, char *buf, size_t size);

/* Parse a cached value ("date=YYYYMMDD,statx=0|1,netcover=0|1,directfs=0|1"):
 * true only for exactly
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
