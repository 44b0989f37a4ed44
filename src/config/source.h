/* SPDX-License-Identifier: Apache-2.0
 *
 * Choosing and reading the configuration source (spec 3.2): the explicit
 * --config path or the XDG default, opened through a confined plan, checked
 * (regular file, <= 1 MiB, owner root or the invoking user, one hard link, no
 * group/other write), and read twice with unchanged identity, size and ctime.
 * A changed source is never retried.
 */
#ifndef LAZARET_CONFIG_SOURCE_H
#define LAZARET_CONFIG_SOURCE_H

#include <stddef.h>

#include "common/error.h"
#include "fs/confined.h"

typedef struct lz_config_source {
    lz_path_plan plan; /* plan.label: the canonical path of the source */
    char *bytes;       /* the whole file, NUL-terminated for convenience */
    size_t len;
} lz_config_source;

/* Normalize an absolute path from the environment: collapse repeated '/',
 * drop a trailing '/'; refuse '.', '..' and relative paths. Returns a new
 * string or NULL (with *what set). */
char *lz_env_path_normalize(const char *value, const char **what);

/* The configuration path to use: `explicit_path` (host-path grammar:
 * absolute or "~/...") or $XDG_CONFIG_HOME/lazaret/config.toml, falling back
 * to $HOME/.config/lazaret/config.toml. `home` must be a normalized absolute
 * path. Returns a newly allocated absolute path. */
char *lz_config_source_select(const char *explicit_path, const char *home, lz_error **err);

/* Open, check and read the source at absolute path `path`. */
LZ_MUST_CHECK
int lz_config_source_read(const char *path, lz_config_source *ret, lz_error **err);

void lz_config_source_clear(lz_config_source *src);

#endif
