/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret config check PROFILE [--workspace DIR] [--json]
 *
 * Loads exactly as `run` will (lz_config_load) and prints the resolved
 * selected profile with its Domain ID and configuration fingerprint.
 * Environment values are never printed: only names and their sources.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "client/client.h"
#include "common/error.h"
#include "common/options.h"
#include "common/util.h"
#include "config/resolve.h"
#include "oci/layout.h"

const char lz_usage_config[] =
    "Usage: lazaret [--config FILE] config check PROFILE [--workspace DIR] [--json]\n"
    "\n"
    "Load the configuration exactly as 'lazaret run' does, validate every rule,\n"
    "and print the resolved profile (with its host rules and the DNS mode in force),\n"
    "its Domain ID and configuration fingerprint.\n"
    "\n"
    "Options:\n"
    "  --workspace DIR  the project directory (default: the top of the Git working\n"
    "                   tree you are in, else the current directory)\n"
    "  --json           print one JSON object instead of text\n"
    "\n"
    "Exit status: 0 valid, 1 invalid, 2 usage error.\n";

static const char *kind_name(lz_volume_kind k)
{
    return k == LZ_VOLUME_DIRECTORY ? "directory" : "file";
}

static const char *access_name(lz_volume_access a)
{
    return a == LZ_ACCESS_READ_ONLY ? "read-only" : "read-write";
}

static json_t *prefixes_json(const lz_ipv4_prefix_list *l)
{
    json_t *a = json_array();
    for (size_t i = 0; i < l->count; i++) {
        char buf[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(&l->items[i], buf);
        json_array_append_new(a, json_string(buf));
    }
    return a;
}

static json_t *hosts_json(const lz_host_list *l)
{
    json_t *a = json_array();
    for (size_t i = 0; i < l->count; i++) {
        char buf[LZ_HOST_NAME_MAX + 3];
        lz_host_pattern_format(&l->items[i], buf);
        json_array_append_new(a, json_string(buf));
    }
    return a;
}

static json_t *resolvers_json(const lz_resolved_config *c)
{
    json_t *a = json_array();
    for (size_t i = 0; i < c->n_resolvers; i++) {
        char buf[16];
        snprintf(buf, sizeof(buf), "%u.%u.%u.%u", c->resolvers[i][0], c->resolvers[i][1],
                 c->resolvers[i][2], c->resolvers[i][3]);
        json_array_append_new(a, json_string(buf));
    }
    return a;
}

/* What the DNS mode in force means, in one line (docs/configuration.md
 * "The DNS mode"). */
static const char *dns_mode_meaning(const lz_resolved_config *c)
{
    if (c->dns_mode == LZ_DNS_STRICT)
        return "strict: names no allow_hosts pattern covers are answered NXDOMAIN here and never "
               "leave this machine";
    if (c->schema_version < 2)
        return "forward: names not denied are asked upstream (a made-up name leaves this "
               "machine); add allow_hosts or dns = \"strict\" (schema "
               "\"" LZ_CONFIG_SCHEMA_ID_V2 "\") to keep them here";
    return "forward: names not denied are asked upstream (a made-up name leaves this machine); "
           "add allow_hosts or dns = \"strict\" to keep them here";
}

/* True when one of the profile's persistent directories is dir or
 * contains it. */
static bool persists(const lz_resolved_config *c, const char *dir)
{
    for (size_t i = 0; i < c->n_persistent_dirs; i++) {
        const char *p = c->persistent_dirs[i];
        size_t n = strlen(p);
        if (strcmp(p, "/") == 0 || (strncmp(dir, p, n) == 0 && (dir[n] == '/' || !dir[n])))
            return true;
    }
    return false;
}

/* Advice, not refusal (the configuration is valid): /usr kept across
 * restarts without dpkg's database means programs a package manager
 * installed survive while the database that says they are installed does
 * not (docs/configuration.md "Persistent directories and package
 * managers"). NULL when there is nothing to say. */
static char *package_db_warning(const lz_resolved_config *c)
{
    /* /usr or a directory in it where dpkg puts files (not /usr/local). */
    bool keeps_packages = persists(c, "/usr");
    for (size_t i = 0; i < c->n_persistent_dirs; i++) {
        const char *p = c->persistent_dirs[i];
        if (strncmp(p, "/usr/", 5) == 0 && strcmp(p, "/usr/local") != 0 &&
            strncmp(p, "/usr/local/", 11) != 0)
            keeps_packages = true;
    }
    if (!keeps_packages || persists(c, "/var/lib/dpkg"))
        return NULL;
    return lz_xasprintf("profiles.%s.persistent_dirs keeps /usr but not /var/lib/dpkg: what dpkg "
                        "or apt installs keeps its files after a restart, but the package "
                        "database forgets it, so the next install or removal goes wrong; add "
                        "\"/var/lib/dpkg\" (and \"/etc\", where packages keep their "
                        "configuration) to persistent_dirs",
                        c->profile);
}

static int print_json(const lz_resolved_config *c)
{
    char id[65], fp[65];
    lz_digest_hex(c->domain_id, id);
    lz_digest_hex(c->fingerprint, fp);

    json_t *o = json_object();
    json_object_set_new(o, "profile", json_string(c->profile));
    json_object_set_new(o, "workspace", json_string(c->workspace.label));
    json_object_set_new(o, "config_file", json_string(c->config_file.label));
    json_object_set_new(o, "domain_id", json_string(id));
    json_object_set_new(o, "configuration_fingerprint", json_string(fp));
    json_object_set_new(o, "storage_root", json_string(c->storage_root.label));
    json_object_set_new(o, "runtime_root", json_string(c->runtime_root.label));
    json_object_set_new(o, "profile_dir", json_string(c->profile_dir.label));
    json_object_set_new(o, "domain_root", json_string(c->storage_domain_root.label));
    json_object_set_new(o, "domain_runtime_dir", json_string(c->runtime_domain_root.label));
    json_object_set_new(o, "image", json_string(c->image));
    json_object_set_new(o, "isolate_gitignored", json_boolean(c->isolate_gitignored));

    json_t *pd = json_array();
    for (size_t i = 0; i < c->n_persistent_dirs; i++)
        json_array_append_new(pd, json_string(c->persistent_dirs[i]));
    json_object_set_new(o, "persistent_dirs", pd);

    json_t *env = json_array();
    for (size_t i = 0; i < c->n_env; i++)
        json_array_append_new(env, json_pack("{s:s, s:s}", "name", c->env[i].sandbox_name, "from",
                                             c->env[i].host_name));
    json_object_set_new(o, "environment", env);
    /* Plain values are written in the file: shown (never the env ones). */
    json_t *values = json_array();
    for (size_t i = 0; i < c->n_environment; i++)
        json_array_append_new(values, json_pack("{s:s, s:s}", "name", c->environment[i].name,
                                                "value", c->environment[i].value));
    json_object_set_new(o, "environment_values", values);
    json_t *command = json_null();
    if (c->command) {
        command = json_array();
        for (size_t i = 0; i < c->n_command; i++)
            json_array_append_new(command, json_string(c->command[i]));
    }
    json_object_set_new(o, "command", command);

    json_t *vols = json_array();
    for (size_t i = 0; i < c->n_volumes; i++) {
        const lz_resolved_volume *v = &c->volumes[i];
        json_array_append_new(vols,
                              json_pack("{s:s, s:s, s:s, s:s, s:b}", "source", v->source.label,
                                        "destination", v->container, "kind", kind_name(v->kind),
                                        "access", access_name(v->access), "create", v->create));
    }
    json_object_set_new(o, "volumes", vols);

    json_object_set_new(o, "network",
                        json_pack("{s:o, s:o}", "allow", prefixes_json(&c->allow), "deny",
                                  prefixes_json(&c->deny)));

    /* Schema v2 only: a v1 file's JSON keeps exactly its v1 keys. */
    if (c->schema_version >= 2) {
        json_object_set_new(o, "hosts",
                            json_pack("{s:o, s:o}", "allow", hosts_json(&c->allow_hosts), "deny",
                                      hosts_json(&c->deny_hosts)));
        json_object_set_new(o, "dns",
                            json_pack("{s:s, s:b, s:o}", "mode",
                                      c->dns_mode == LZ_DNS_STRICT ? "strict" : "forward",
                                      "explicit", c->dns_mode_explicit, "resolvers",
                                      resolvers_json(c)));
    }

    json_t *rules = json_array();
    for (size_t i = 0; i < c->n_rules; i++) {
        const lz_resolved_rule *r = &c->rules[i];
        json_t *args = json_array();
        for (size_t k = 0; k < r->n_args; k++)
            json_array_append_new(args, json_string(r->args[k]));
        json_array_append_new(rules,
                              json_pack("{s:s, s:o, s:b}", "executable", r->executable.label,
                                        "args", args, "allow_extra_args", r->allow_extra_args));
    }
    json_object_set_new(
        o, "escalation",
        json_pack("{s:b, s:o}", "enabled", c->escalation_enabled, "auto_approve", rules));

    json_t *warnings = json_array();
    char *w = package_db_warning(c);
    if (w)
        json_array_append_new(warnings, json_string(w));
    free(w);
    json_object_set_new(o, "warnings", warnings);

    /* Strings come from validated UTF-8 configuration or raw pathnames;
     * JSON_ENSURE_ASCII keeps the output printable whatever the bytes. */
    int r = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    json_decref(o);
    if (r < 0)
        return -1;
    fputc('\n', stdout);
    return 0;
}

static void print_text(const lz_resolved_config *c)
{
    char id[65], fp[65];
    lz_digest_hex(c->domain_id, id);
    lz_digest_hex(c->fingerprint, fp);
    printf("configuration %s is valid\n\n", c->config_file.label);
    printf("profile:                   %s\n", c->profile);
    printf("workspace:                 %s\n", c->workspace.label);
    printf("domain id:                 %s\n", id);
    printf("configuration fingerprint: %s\n", fp);
    printf("storage root:              %s\n", c->storage_root.label);
    printf("runtime root:              %s\n", c->runtime_root.label);
    printf("profile dir:               %s\n", c->profile_dir.label);
    printf("domain root:               %s\n", c->storage_domain_root.label);
    printf("image:                     %s\n", c->image);
    printf("isolate gitignored:        %s\n", c->isolate_gitignored ? "yes" : "no");
    printf("persistent dirs:          ");
    if (!c->n_persistent_dirs)
        printf(" (none)");
    for (size_t i = 0; i < c->n_persistent_dirs; i++)
        printf(" %s", c->persistent_dirs[i]);
    printf("\nenvironment:              ");
    if (!c->n_env && !c->n_environment)
        printf(" (none)");
    printf("\n");
    for (size_t i = 0; i < c->n_environment; i++) {
        printf("  %s=", c->environment[i].name);
        lz_print_remote(stdout, "", c->environment[i].value, "\n");
    }
    for (size_t i = 0; i < c->n_env; i++)
        printf("  %s from host $%s (value not shown)\n", c->env[i].sandbox_name,
               c->env[i].host_name);
    printf("default command:          ");
    if (!c->command)
        printf(" (the image's login shell)");
    for (size_t i = 0; i < c->n_command; i++)
        lz_print_remote(stdout, " ", c->command[i], "");
    printf("\n");
    printf("volumes:                  %s\n", c->n_volumes ? "" : " (none)");
    for (size_t i = 0; i < c->n_volumes; i++) {
        const lz_resolved_volume *v = &c->volumes[i];
        printf("  %s <- %s (%s, %s%s)\n", v->container, v->source.label, kind_name(v->kind),
               access_name(v->access), v->create ? ", created if missing" : "");
    }
    printf("network (IPv4 only; IPv6 disabled; longest prefix wins; default deny):\n");
    for (size_t i = 0; i < c->allow.count; i++) {
        char buf[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(&c->allow.items[i], buf);
        printf("  allow %s\n", buf);
    }
    for (size_t i = 0; i < c->deny.count; i++) {
        char buf[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(&c->deny.items[i], buf);
        printf("  deny  %s\n", buf);
    }
    if (c->schema_version >= 2) {
        printf("host rules (the most specific pattern wins; a deny of either kind wins over an "
               "allow of the other):%s\n",
               c->allow_hosts.count || c->deny_hosts.count ? "" : " (none)");
        const lz_host_list *lists[2] = { &c->allow_hosts, &c->deny_hosts };
        for (int k = 0; k < 2; k++)
            for (size_t i = 0; i < lists[k]->count; i++) {
                char buf[LZ_HOST_NAME_MAX + 3];
                lz_host_pattern_format(&lists[k]->items[i], buf);
                printf("  %s %s\n", k == 0 ? "allow" : "deny ", buf);
            }
    }
    printf("dns:                       %s\n", dns_mode_meaning(c));
    if (c->schema_version >= 2) {
        printf("resolvers:                ");
        if (!c->n_resolvers)
            printf(" the host's resolv.conf nameservers");
        for (size_t i = 0; i < c->n_resolvers; i++)
            printf(" %u.%u.%u.%u", c->resolvers[i][0], c->resolvers[i][1], c->resolvers[i][2],
                   c->resolvers[i][3]);
        printf("\n");
    }
    printf("escalation:                %s\n", c->escalation_enabled ? "enabled" : "disabled");
    for (size_t i = 0; i < c->n_rules; i++) {
        const lz_resolved_rule *r = &c->rules[i];
        printf("  auto-approve: %s", r->executable.label);
        for (size_t k = 0; k < r->n_args; k++)
            printf(" '%s'", r->args[k]);
        printf("%s\n", r->allow_extra_args ? " [further arguments allowed]" : "");
    }
}

static int config_check(int argc, char **argv, const lz_global_options *g)
{
    enum { OPT_JSON, OPT_WORKSPACE };
    static const lz_option options[] = {
        { "json", 0, NULL, OPT_JSON },
        { "workspace", 0, "DIR", OPT_WORKSPACE },
    };
    const char *profile = NULL, *workspace = NULL;
    bool json = false;
    lz_opt_parser p;
    lz_opt_init(&p, options, LZ_ARRAY_SIZE(options), argc, argv, 1);
    for (int o; (o = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        if (o == LZ_OPT_ERROR)
            return lz_cli_usage_error("config check", "%s", p.error);
        if (o == OPT_JSON)
            json = true;
        else if (o == OPT_WORKSPACE)
            workspace = p.value;
        else if (!profile)
            profile = p.arg;
        else
            return lz_cli_usage_error("config check", "unexpected argument '%s'", p.arg);
    }
    if (!profile)
        return lz_cli_usage_error("config check", "missing PROFILE");

    lz_resolved_config *cfg = lz_cli_load_profile(g, profile, workspace);
    if (!cfg)
        return LZ_EXIT_FAILURE;
    lz_error *err = NULL;
    int status = LZ_EXIT_OK;
    errno = 0;
    int wrote = 0;
    if (json) {
        wrote = print_json(cfg);
    } else {
        print_text(cfg);
        char *w = package_db_warning(cfg);
        if (w)
            fprintf(stderr, "lazaret: warning: %s\n", w);
        free(w);
    }
    if (fflush(stdout) != 0 || ferror(stdout) || wrote < 0) {
        /* errno of the failed write (EPIPE, ENOSPC), 0 when jansson failed. */
        lz_error_set(&err, errno, "cannot write the %s of profile %s to standard output",
                     json ? "JSON description" : "description", cfg->profile);
        lz_error_hint(&err,
                      "write it to a file or a pipe that reads all of it (lazaret config "
                      "check %s%s > FILE)",
                      cfg->profile, json ? " --json" : "");
        lz_error_report(err, stderr);
        lz_error_free(err);
        status = LZ_EXIT_FAILURE;
    }
    lz_resolved_config_free(cfg);
    return status;
}

int lz_cmd_config(int argc, char **argv, const lz_global_options *g)
{
    if (argc < 2)
        return lz_cli_usage_error("config", "missing subcommand (expected 'check')");
    if (strcmp(argv[1], "check") == 0)
        return config_check(argc - 1, argv + 1, g);
    return lz_cli_usage_error("config", "unknown subcommand '%s' (expected 'check')", argv[1]);
}
