/* SPDX-License-Identifier: Apache-2.0
 *
 * Pure string grammars of configuration v1 (schema "Trusted host
 * configuration"). No filesystem access here.
 */
#ifndef LAZARET_CONFIG_GRAMMAR_H
#define LAZARET_CONFIG_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>

/* [A-Za-z0-9][A-Za-z0-9._-]{0,63}, excluding "." and "..". */
bool lz_profile_name_valid(const char *s);

/* [A-Za-z_][A-Za-z0-9_]* (environment map keys and names after "env:"). */
bool lz_env_name_valid(const char *s);

/* Components of an absolute path after its leading "/": non-empty, no
 * repeated or trailing "/", no "." or "..". `what` receives a static
 * description of the first violation. The root "/" alone is invalid. */
bool lz_abs_path_components_valid(const char *s, const char **what);

typedef enum lz_host_path_anchor {
    LZ_HOST_ABSOLUTE,    /* "/a/b" */
    LZ_HOST_HOME,        /* "~/a/b" */
    LZ_HOST_PROFILE_DIR, /* "{profile_dir}/a/b" (volume hosts only) */
} lz_host_path_anchor;

/* Host path declaration grammar. On success stores the anchor and a pointer
 * to the suffix after the anchor's "/" (for LZ_HOST_ABSOLUTE: the whole path).
 * allow_profile_dir admits "{profile_dir}/". On failure `what` says why. */
bool lz_host_path_parse(const char *s, bool allow_profile_dir, lz_host_path_anchor *ret_anchor,
                        const char **ret_suffix, const char **what);

/* Sandbox path grammar: a normalized absolute path, not the root. */
bool lz_sandbox_path_valid(const char *s, const char **what);

#endif
