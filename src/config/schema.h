/* SPDX-License-Identifier: Apache-2.0
 *
 * The trusted-host configuration document (schema "lazaret-trusted-host-
 * config-v1", or "-v2" = v1 plus the host keys of issue 25): strict structural decoding of every
 * profile, with all grammar rules that need no filesystem or environment. Resolution of the
 * selected profile (paths, environment, digests) is resolve.h.
 */
#ifndef LAZARET_CONFIG_SCHEMA_H
#define LAZARET_CONFIG_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "config/hosts.h"
#include "config/network.h"

#define LZ_CONFIG_SCHEMA_ID "lazaret-trusted-host-config-v1"
/* v1 plus host rules, the DNS mode and the upstream resolvers (issue 25). */
#define LZ_CONFIG_SCHEMA_ID_V2 "lazaret-trusted-host-config-v2"
#define LZ_CONFIG_RESOLVERS_MAX 3
#define LZ_CONFIG_MAX_BYTES 1048576

typedef enum lz_volume_kind { LZ_VOLUME_FILE = 0, LZ_VOLUME_DIRECTORY = 1 } lz_volume_kind;
typedef enum lz_volume_access {
    LZ_ACCESS_READ_ONLY = 0,
    LZ_ACCESS_READ_WRITE = 1
} lz_volume_access;

/* Where a value was declared: for diagnostics only. */
typedef struct lz_source_pos {
    unsigned line, column;
} lz_source_pos;

/* A non-secret environment value of the profile (`environment`, v2):
 * written in the file, shown by config check, part of the fingerprint. */
typedef struct lz_setenv_decl {
    char *name;
    char *value;
    lz_source_pos pos;
} lz_setenv_decl;

/* Longest `environment` value and `command` word, in bytes. */
#define LZ_CONFIG_VALUE_MAX 4096
#define LZ_CONFIG_COMMAND_MAX 64 /* words */

typedef struct lz_env_decl {
    char *sandbox_name; /* map key */
    char *host_name;    /* the NAME of "env:NAME" */
    lz_source_pos pos;
} lz_env_decl;

/* One declared prefix of an allow list, with where it was written (for the
 * allow/deny conflict diagnostic). */
typedef struct lz_prefix_decl {
    lz_ipv4_prefix prefix; /* normalized */
    size_t index;          /* position in the declared array */
    lz_source_pos pos;
} lz_prefix_decl;

typedef struct lz_prefix_decls {
    lz_prefix_decl *items;
    size_t count;
} lz_prefix_decls;

/* One declared host pattern, with where it was written. */
typedef struct lz_host_decl {
    lz_host_pattern pattern; /* canonical */
    size_t index;            /* position in the declared array */
    lz_source_pos pos;
} lz_host_decl;

/* A declared host list: the patterns (sorted, deduplicated) and each
 * declaration in declared order. */
typedef struct lz_host_decls {
    lz_host_list list;
    lz_host_decl *items;
    size_t count;
} lz_host_decls;

/* A `dns`/`default_dns` key as declared. */
typedef enum lz_dns_decl {
    LZ_DNS_DECL_UNSET = 0,
    LZ_DNS_DECL_FORWARD,
    LZ_DNS_DECL_STRICT,
} lz_dns_decl;

typedef struct lz_volume_decl {
    char *host;      /* as declared: "/abs", "~/x" or "{profile_dir}/x" */
    char *container; /* normalized sandbox path */
    lz_volume_kind kind;
    lz_volume_access access;
    bool create;
    lz_source_pos pos, host_pos, container_pos;
} lz_volume_decl;

typedef struct lz_rule_decl {
    char *executable; /* as declared host path */
    char **args;
    size_t n_args;
    bool allow_extra_args;
    lz_source_pos pos, executable_pos;
} lz_rule_decl;

typedef struct lz_profile_decl {
    char *name;
    char *image;
    bool isolate_gitignored;
    char **persistent_dirs;
    size_t n_persistent_dirs;
    lz_source_pos *persistent_pos;
    lz_ipv4_prefix_list allow_egress, deny_egress;
    lz_prefix_decls allow_egress_decl;
    lz_host_decls allow_hosts, deny_hosts; /* v2 */
    lz_dns_decl dns;                       /* v2 */
    lz_source_pos dns_pos;
    lz_env_decl *env;
    size_t n_env;
    lz_setenv_decl *environment; /* v2 */
    size_t n_environment;
    char **command; /* v2: the default command of `run`, NULL when none */
    size_t n_command;
    lz_volume_decl *volumes;
    size_t n_volumes;
    bool escalation_enabled;
    lz_rule_decl *rules;
    size_t n_rules;
    lz_source_pos pos;
} lz_profile_decl;

typedef struct lz_config_doc {
    char *label;     /* the source's name for diagnostics */
    char *data_root; /* storage.data_root as declared, or NULL */
    lz_source_pos data_root_pos;
    lz_ipv4_prefix_list default_allow, default_deny;
    lz_prefix_decls default_allow_decl;
    unsigned schema_version;                               /* 1 or 2 */
    lz_host_decls default_allow_hosts, default_deny_hosts; /* v2 */
    lz_dns_decl default_dns;                               /* v2 */
    uint8_t resolvers[LZ_CONFIG_RESOLVERS_MAX][4];         /* v2, in declared order */
    size_t n_resolvers;
    lz_profile_decl *profiles; /* sorted by name */
    size_t n_profiles;
} lz_config_doc;

/* Free a declared host list's patterns and declarations. */
void lz_host_decls_clear(lz_host_decls *d);

/* Decode buf[0..len) as a v1 or v2 configuration. `label` names the source in
 * diagnostics ("/home/a/.config/lazaret/config.toml"). Every profile is
 * decoded and checked against every rule that needs neither the filesystem
 * nor the environment; the first violation refuses the whole document with a
 * message "LABEL:LINE:COL: KEY.PATH: what was expected" and a hint.
 * This is the entry point the fuzzer drives. */
LZ_MUST_CHECK
int lz_config_doc_parse(const char *buf, size_t len, const char *label, lz_config_doc **ret,
                        lz_error **err);

void lz_config_doc_free(lz_config_doc *doc);

/* The profile named `name` (exact, case-sensitive), or NULL. */
const lz_profile_decl *lz_config_doc_profile(const lz_config_doc *doc, const char *name);

#endif
