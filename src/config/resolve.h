/* SPDX-License-Identifier: Apache-2.0
 *
 * Loading and resolving the selected profile (spec 3.2): the one way every
 * Lazaret consumer obtains configuration. The result is a move-owned,
 * non-serializable lz_resolved_config that owns every retained descriptor and
 * the resolved environment values, which are never printed, hashed or logged.
 */
#ifndef LAZARET_CONFIG_RESOLVE_H
#define LAZARET_CONFIG_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "config/hosts.h"
#include "config/network.h"
#include "config/schema.h"
#include "fs/confined.h"
#include "oci/layout.h"

#define LZ_DIGEST_LEN 32

typedef struct lz_resolved_env {
    char *sandbox_name;
    char *host_name;
    char *value; /* secret: never print, hash, log or persist */
} lz_resolved_env;

typedef struct lz_resolved_volume {
    lz_path_plan source; /* source.label is the canonical host source */
    char *container;
    lz_volume_kind kind;
    lz_volume_access access;
    bool create;
} lz_resolved_volume;

typedef struct lz_resolved_rule {
    lz_path_plan executable; /* executable.label is the canonical path */
    char **args;
    size_t n_args;
    bool allow_extra_args;
} lz_resolved_rule;

/* What the Network Sidecar's DNS responder does with a name no allow_hosts
 * pattern covers (docs/network.md "Egress by host name"). */
typedef enum lz_dns_mode {
    LZ_DNS_FORWARD = 0, /* asked upstream unless denied (every v1 profile) */
    LZ_DNS_STRICT = 1,  /* answered NXDOMAIN here: never leaves the machine */
} lz_dns_mode;

/* At most as many upstream resolvers as glibc's resolv.conf reads (MAXNS). */
#define LZ_RESOLVERS_MAX 3

typedef struct lz_resolved_config {
    char *profile;
    lz_path_plan config_file;
    lz_path_plan workspace;
    bool workspace_from_git; /* the Git top level above the current directory */
    lz_path_plan storage_root;
    lz_path_plan runtime_root;
    lz_path_plan profile_dir;
    lz_path_plan storage_domain_root; /* <storage>/domains/<id-hex> */
    lz_path_plan runtime_domain_root; /* <runtime>/domains/<id-hex> */
    char *image;
    bool isolate_gitignored;
    char **persistent_dirs; /* sorted */
    size_t n_persistent_dirs;
    lz_resolved_env *env; /* sorted by sandbox name */
    size_t n_env;
    /* `environment`: plain values, sorted by name; never a name of env. */
    lz_setenv_decl *environment;
    size_t n_environment;
    /* `command`: run's default command (NULL-terminated), NULL when none.
     * Not in the fingerprint: it is what a CLI asks, not what the Domain is. */
    char **command;
    size_t n_command;
    lz_resolved_volume *volumes; /* sorted by container path */
    size_t n_volumes;
    lz_ipv4_prefix_list allow, deny; /* effective, normalized, sorted */
    /* Configuration v2 (issue 25); a v1 file leaves them empty, FORWARD and
     * no resolvers. */
    unsigned schema_version;                /* 1 or 2 */
    lz_host_list allow_hosts, deny_hosts;   /* effective: the profile's and [network]'s */
    lz_dns_mode dns_mode;                   /* the effective mode (never unset) */
    bool dns_mode_explicit;                 /* set by a `dns`/`default_dns` key */
    uint8_t resolvers[LZ_RESOLVERS_MAX][4]; /* [network] resolvers, in order */
    size_t n_resolvers; /* 0: the host's resolv.conf nameservers, read by the sidecar */
    bool escalation_enabled;
    lz_resolved_rule *rules;
    size_t n_rules;
    uint8_t domain_id[LZ_DIGEST_LEN];
    uint8_t fingerprint[LZ_DIGEST_LEN];
} lz_resolved_config;

/* The retained directory descriptors of cfg's plans (roots, volumes, rule
 * executables): what a fork that drops everything else must keep.
 * Returns how many there are; stores at most max of them in out. */
size_t lz_resolved_config_fds(const lz_resolved_config *cfg, int *out, size_t max);

typedef struct lz_load_request {
    const char *config_path;         /* --config FILE, or NULL for the XDG default */
    const char *profile;             /* required, exact name */
    const char *workspace;           /* NULL: the current working directory */
    const lz_sandbox_layout *layout; /* required: production layout */
} lz_load_request;

/* Load, validate and resolve. On success *ret owns everything; free with
 * lz_resolved_config_free(). Reads XDG_CONFIG_HOME, XDG_DATA_HOME, HOME,
 * XDG_RUNTIME_DIR and the selected profile's env references from the process
 * environment. Creates missing Lazaret-owned roots (mode 0700). */
LZ_MUST_CHECK
int lz_config_load(const lz_load_request *req, lz_resolved_config **ret, lz_error **err);

/* The workspace a run with `--workspace requested` (NULL: none) would get,
 * by the same rules (docs/configuration.md "Which directory is the
 * workspace"), without a configuration: its canonical path, newly
 * allocated, or NULL with *err. */
LZ_MUST_CHECK
char *lz_workspace_choose(const char *requested, lz_error **err);

/* The full path of the Domain's coordinator log,
 * <Domain Root>/logs/coordinator.log, for messages (newly allocated). */
char *lz_domain_log_label(const lz_resolved_config *cfg);

/* The Storage Root the configuration (config_path, NULL: the default file)
 * names, canonical, newly allocated; NULL with *err. For the commands that
 * look at every Domain rather than one profile's. */
LZ_MUST_CHECK
char *lz_storage_root_choose(const char *config_path, lz_error **err);

void lz_resolved_config_free(lz_resolved_config *cfg);

/* Wipe (explicit_bzero) and free every resolved env value; each value is
 * NULL afterwards. For a process that keeps the configuration but has handed
 * the values on (docs/runtime.md, "Secrets in memory and core dumps"): a
 * configuration without values must never start a supervisor. */
void lz_resolved_config_forget_env_values(lz_resolved_config *cfg);

/* Wipe the host environment variables the profile's env references from this
 * process's own environment (lz_environ_scrub), except those Lazaret itself
 * reads later (HOME, PATH, TERM, XDG_*, the locale): their values live in
 * cfg. Not thread-safe. */
void lz_resolved_config_scrub_environ(const lz_resolved_config *cfg);

/* Lowercase hex of a digest into buf (65 bytes). */
void lz_digest_hex(const uint8_t d[LZ_DIGEST_LEN], char buf[static 65]);

#endif
