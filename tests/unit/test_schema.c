/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests of src/config/schema.c (lz_config_doc_parse): a table-driven
 * corpus of v1 and v2 configuration documents. Each refusing case names the exact
 * dotted key path the diagnostic must carry and, when given, its line; each
 * accepting case may check the decoded values. Every rule the decoder
 * implements has an accepting and a refusing case. A few further tests cover
 * the profile lookup, the size limit and raw NUL / invalid UTF-8 input.
 *
 * Every corpus entry is one TAP test line (named after the case).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/schema.h"

#define LABEL "fuzz.toml"

typedef void (*doc_check)(const lz_config_doc *doc);

typedef struct schema_case {
    const char *name;
    const char *toml;
    const char *keypath; /* NULL: the document is accepted */
    unsigned line;       /* expected diagnostic line; 0: not checked */
    doc_check check;     /* for accepted documents; may be NULL */
} schema_case;

#define REFUSE(n, t, kp, ln)                                                                       \
    {                                                                                              \
        n, t, kp, ln, NULL                                                                         \
    }
#define ACCEPT(n, t, chk)                                                                          \
    {                                                                                              \
        n, t, NULL, 0, chk                                                                         \
    }

/* Line 1. */
#define HEAD "schema = \"lazaret-trusted-host-config-v1\"\n"
/* Lines 2-3. */
#define PROF "[profiles.claude]\nimage = \"docker.io/library/debian:bookworm\"\n"
/* A document whose first free line (inside [profiles.claude]) is line 4. */
#define P(x) HEAD PROF x
/* Line 4: a persistent directory for volume cases; volumes start on line 5. */
#define PV(x) P("persistent_dirs = [\"/root\"]\n" x)
/* Lines 4-5: an enabled escalation table; rules start on line 6. */
#define PE(x) P("[profiles.claude.escalation]\nenabled = true\n" x)

/* Schema v2 (issue 25): line 1, then the same profile lines. */
#define LABEL63 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define LABEL64 LABEL63 "a"
/* With three LABEL63s, their dots and ".com": a name of 253. */
#define X57 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
#define HEAD2 "schema = \"lazaret-trusted-host-config-v2\"\n"
#define P2(x) HEAD2 PROF x

/* ---- helpers for checks ----------------------------------------------- */

static const lz_profile_decl *profile(const lz_config_doc *doc, const char *name)
{
    const lz_profile_decl *p = lz_config_doc_profile(doc, name);
    if (!p)
        fail_msg("profile '%s' not found", name);
    return p;
}

static void assert_prefix_str(const lz_ipv4_prefix *p, const char *want)
{
    char buf[32]; /* >= LZ_IPV4_PREFIX_BUFSZ */
    lz_ipv4_prefix_format(p, buf);
    assert_string_equal(buf, want);
}

/* ---- accept checks ---------------------------------------------------- */

static void check_defaults(const lz_config_doc *doc)
{
    assert_string_equal(doc->label, LABEL);
    assert_null(doc->data_root);
    assert_int_equal(doc->default_allow.count, 0);
    assert_int_equal(doc->default_deny.count, 0);
    assert_int_equal(doc->n_profiles, 1);
    const lz_profile_decl *p = profile(doc, "claude");
    assert_string_equal(p->name, "claude");
    assert_string_equal(p->image, "docker.io/library/debian:bookworm");
    assert_true(p->isolate_gitignored);
    assert_int_equal(p->n_persistent_dirs, 0);
    assert_int_equal(p->allow_egress.count, 0);
    assert_int_equal(p->deny_egress.count, 0);
    assert_int_equal(p->n_env, 0);
    assert_int_equal(p->n_volumes, 0);
    assert_false(p->escalation_enabled);
    assert_int_equal(p->n_rules, 0);
    assert_int_equal(p->pos.line, 2);
}

static const char full_doc[] =
    "schema = \"lazaret-trusted-host-config-v1\"\n"                                    /* 1 */
    "[storage]\n"                                                                      /* 2 */
    "data_root = \"~/lazaret-data\"\n"                                                 /* 3 */
    "[network]\n"                                                                      /* 4 */
    "default_allow = [\"198.51.100.7/24\", \"203.0.113.0/24\", \"198.51.100.0/24\"]\n" /* 5 */
    "default_deny = [\"0.0.0.0/0\"]\n"                                                 /* 6 */
    "[profiles.claude]\n"                                                              /* 7 */
    "image = \"docker.io/library/debian:bookworm\"\n"                                  /* 8 */
    "isolate_gitignored = false\n"                                                     /* 9 */
    "persistent_dirs = [\"/root\", \"/home/agent/.cache\"]\n"                          /* 10 */
    "allow_egress = [\"10.1.0.0/16\"]\n"                                               /* 11 */
    "deny_egress = [\"10.1.2.0/24\", \"10.1.2.3/24\"]\n"                               /* 12 */
    "[profiles.claude.env]\n"                                                          /* 13 */
    "_x = \"env:_Y1\"\n"                                                               /* 14 */
    "GITHUB_TOKEN = \"env:GH_TOKEN\"\n"                                                /* 15 */
    "[[profiles.claude.volumes]]\n"                                                    /* 16 */
    "host = \"{profile_dir}/cache\"\n"                                                 /* 17 */
    "container = \"/root/cache\"\n"                                                    /* 18 */
    "kind = \"directory\"\n"                                                           /* 19 */
    "create = true\n"                                                                  /* 20 */
    "[[profiles.claude.volumes]]\n"                                                    /* 21 */
    "host = \"~/.gitconfig\"\n"                                                        /* 22 */
    "container = \"/home/agent/.cache/gitconfig\"\n"                                   /* 23 */
    "kind = \"file\"\n"                                                                /* 24 */
    "access = \"read-only\"\n"                                                         /* 25 */
    "[profiles.claude.escalation]\n"                                                   /* 26 */
    "enabled = true\n"                                                                 /* 27 */
    "[[profiles.claude.escalation.auto_approve]]\n"                                    /* 28 */
    "executable = \"/usr/bin/git\"\n"                                                  /* 29 */
    "args = [\"status\", \"--short\"]\n"                                               /* 30 */
    "[[profiles.claude.escalation.auto_approve]]\n"                                    /* 31 */
    "executable = \"~/bin/tool\"\n"                                                    /* 32 */
    "args = [\"--short\", \"status\"]\n"                                               /* 33 */
    "allow_extra_args = true\n"                                                        /* 34 */
    "[[profiles.claude.escalation.auto_approve]]\n"                                    /* 35 */
    "executable = \"/usr/bin/git\"\n"                                                  /* 36 */
    "args = [\"status\", \"--short\"]\n"                                               /* 37 */
    "allow_extra_args = true\n"                                                        /* 38 */
    "[[profiles.claude.escalation.auto_approve]]\n"                                    /* 39 */
    "executable = \"/usr/bin/git\"\n"                                                  /* 40 */
    "args = [\"--short\", \"status\"]\n"                                               /* 41 */
    "[[profiles.claude.escalation.auto_approve]]\n"                                    /* 42 */
    "executable = \"/usr/bin/id\"\n"                                                   /* 43 */
    "[profiles.\"Other-1.x_y\"]\n"                                                     /* 44 */
    "image = \"oci:/srv/images/x:latest\"\n";                                          /* 45 */

static void check_full(const lz_config_doc *doc)
{
    assert_string_equal(doc->data_root, "~/lazaret-data");
    assert_int_equal(doc->data_root_pos.line, 3);
    /* Host bits cleared, deduplicated, sorted. */
    assert_int_equal(doc->default_allow.count, 2);
    assert_prefix_str(&doc->default_allow.items[0], "198.51.100.0/24");
    assert_prefix_str(&doc->default_allow.items[1], "203.0.113.0/24");
    assert_int_equal(doc->default_deny.count, 1);
    assert_prefix_str(&doc->default_deny.items[0], "0.0.0.0/0");

    /* Profiles sorted by name bytes. */
    assert_int_equal(doc->n_profiles, 2);
    assert_string_equal(doc->profiles[0].name, "Other-1.x_y");
    assert_string_equal(doc->profiles[1].name, "claude");
    assert_string_equal(profile(doc, "Other-1.x_y")->image, "oci:/srv/images/x:latest");
    assert_true(profile(doc, "Other-1.x_y")->isolate_gitignored);

    const lz_profile_decl *p = profile(doc, "claude");
    assert_string_equal(p->image, "docker.io/library/debian:bookworm");
    assert_false(p->isolate_gitignored);
    assert_int_equal(p->n_persistent_dirs, 2);
    assert_string_equal(p->persistent_dirs[0], "/root");
    assert_string_equal(p->persistent_dirs[1], "/home/agent/.cache");
    assert_int_equal(p->persistent_pos[1].line, 10);
    assert_int_equal(p->allow_egress.count, 1);
    assert_prefix_str(&p->allow_egress.items[0], "10.1.0.0/16");
    assert_int_equal(p->deny_egress.count, 1);
    assert_prefix_str(&p->deny_egress.items[0], "10.1.2.0/24");

    /* Environment: the map key and the name after "env:". */
    assert_int_equal(p->n_env, 2);
    bool saw_gh = false, saw_x = false;
    for (size_t i = 0; i < p->n_env; i++) {
        if (strcmp(p->env[i].sandbox_name, "GITHUB_TOKEN") == 0) {
            assert_string_equal(p->env[i].host_name, "GH_TOKEN");
            assert_int_equal(p->env[i].pos.line, 15);
            saw_gh = true;
        } else if (strcmp(p->env[i].sandbox_name, "_x") == 0) {
            assert_string_equal(p->env[i].host_name, "_Y1");
            saw_x = true;
        }
    }
    assert_true(saw_gh && saw_x);

    /* Volumes in declared order; defaults access=read-write, create=false. */
    assert_int_equal(p->n_volumes, 2);
    assert_string_equal(p->volumes[0].host, "{profile_dir}/cache");
    assert_string_equal(p->volumes[0].container, "/root/cache");
    assert_int_equal(p->volumes[0].kind, LZ_VOLUME_DIRECTORY);
    assert_int_equal(p->volumes[0].access, LZ_ACCESS_READ_WRITE);
    assert_true(p->volumes[0].create);
    assert_int_equal(p->volumes[0].host_pos.line, 17);
    assert_string_equal(p->volumes[1].host, "~/.gitconfig");
    assert_string_equal(p->volumes[1].container, "/home/agent/.cache/gitconfig");
    assert_int_equal(p->volumes[1].kind, LZ_VOLUME_FILE);
    assert_int_equal(p->volumes[1].access, LZ_ACCESS_READ_ONLY);
    assert_false(p->volumes[1].create);
    assert_int_equal(p->volumes[1].host_pos.line, 22);

    /* Rules in declared order, arguments in declared order. Rules differing
     * only in argument order or in allow_extra_args are distinct. */
    assert_true(p->escalation_enabled);
    assert_int_equal(p->n_rules, 5);
    assert_string_equal(p->rules[0].executable, "/usr/bin/git");
    assert_int_equal(p->rules[0].n_args, 2);
    assert_string_equal(p->rules[0].args[0], "status");
    assert_string_equal(p->rules[0].args[1], "--short");
    assert_false(p->rules[0].allow_extra_args);
    assert_int_equal(p->rules[0].executable_pos.line, 29);
    assert_string_equal(p->rules[1].executable, "~/bin/tool");
    assert_string_equal(p->rules[1].args[0], "--short");
    assert_string_equal(p->rules[1].args[1], "status");
    assert_true(p->rules[1].allow_extra_args);
    assert_string_equal(p->rules[2].executable, "/usr/bin/git");
    assert_true(p->rules[2].allow_extra_args);
    assert_string_equal(p->rules[3].args[0], "--short");
    assert_false(p->rules[3].allow_extra_args);
    assert_string_equal(p->rules[4].executable, "/usr/bin/id");
    assert_int_equal(p->rules[4].n_args, 0);
    assert_false(p->rules[4].allow_extra_args);
}

static void check_explicit_defaults(const lz_config_doc *doc)
{
    const lz_profile_decl *p = profile(doc, "claude");
    assert_true(p->isolate_gitignored);
    assert_int_equal(p->n_volumes, 1);
    assert_int_equal(p->volumes[0].access, LZ_ACCESS_READ_WRITE);
    assert_false(p->volumes[0].create);
    assert_false(p->escalation_enabled);
    assert_int_equal(p->n_rules, 0);
    assert_int_equal(p->n_env, 0);
    assert_int_equal(p->n_persistent_dirs, 1);
    assert_null(doc->data_root);
}

static void check_data_root_abs(const lz_config_doc *doc)
{
    assert_string_equal(doc->data_root, "/var/lib/lazaret-b~");
}

static void check_prefix_dedup(const lz_config_doc *doc)
{
    const lz_profile_decl *p = profile(doc, "claude");
    assert_int_equal(p->allow_egress.count, 2);
    assert_prefix_str(&p->allow_egress.items[0], "1.2.3.0/24");
    assert_prefix_str(&p->allow_egress.items[1], "1.2.3.0/25");
    assert_int_equal(p->deny_egress.count, 1);
    assert_prefix_str(&p->deny_egress.items[0], "0.0.0.0/0");
}

static void check_two_profiles(const lz_config_doc *doc)
{
    assert_int_equal(doc->n_profiles, 2);
    assert_non_null(lz_config_doc_profile(doc, "a"));
    assert_non_null(lz_config_doc_profile(doc, "b"));
}

static void check_name64(const lz_config_doc *doc)
{
    assert_int_equal(doc->n_profiles, 1);
    assert_int_equal(strlen(doc->profiles[0].name), 64);
}

static void check_volume_ro(const lz_config_doc *doc)
{
    const lz_profile_decl *p = profile(doc, "claude");
    assert_int_equal(p->n_volumes, 1);
    assert_string_equal(p->volumes[0].host, "/srv/data");
    assert_int_equal(p->volumes[0].kind, LZ_VOLUME_DIRECTORY);
    assert_int_equal(p->volumes[0].access, LZ_ACCESS_READ_ONLY);
    assert_false(p->volumes[0].create);
}

static void check_rule_args(const lz_config_doc *doc)
{
    const lz_profile_decl *p = profile(doc, "claude");
    assert_true(p->escalation_enabled);
    assert_int_equal(p->n_rules, 1);
    assert_int_equal(p->rules[0].n_args, 4);
    static const char *const want[] = { "-c", "echo $HOME *", "", "caf\xc3\xa9" };
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(p->rules[0].args[i], want[i]);
}

static void check_escalation_enabled_no_rules(const lz_config_doc *doc)
{
    const lz_profile_decl *p = profile(doc, "claude");
    assert_true(p->escalation_enabled);
    assert_int_equal(p->n_rules, 0);
}

/* ---- the corpus ------------------------------------------------------- */

static void assert_hosts(const lz_host_list *l, const char *const *want)
{
    size_t n = 0;
    for (; want[n]; n++) {
        assert_true(n < l->count);
        char buf[LZ_HOST_NAME_MAX + 3];
        lz_host_pattern_format(&l->items[n], buf);
        assert_string_equal(buf, want[n]);
    }
    assert_int_equal(l->count, n);
}

static void check_v1_has_no_v2(const lz_config_doc *doc)
{
    assert_int_equal(doc->schema_version, 1);
    assert_int_equal(doc->default_allow_hosts.count, 0);
    assert_int_equal(doc->default_deny_hosts.count, 0);
    assert_int_equal(doc->default_dns, LZ_DNS_DECL_UNSET);
    assert_int_equal(doc->n_resolvers, 0);
    const lz_profile_decl *p = profile(doc, "claude");
    assert_int_equal(p->allow_hosts.count, 0);
    assert_int_equal(p->deny_hosts.count, 0);
    assert_int_equal(p->dns, LZ_DNS_DECL_UNSET);
}

/* Issue 26: plain environment values and the default command. */
static void check_v2_environment_command(const lz_config_doc *doc)
{
    const lz_profile_decl *p = profile(doc, "claude");
    assert_int_equal(p->n_environment, 2);
    /* In the parser's order (toml++ sorts a table's keys). */
    assert_string_equal(p->environment[0].name, "ANTHROPIC_BASE_URL");
    assert_string_equal(p->environment[0].value, "http://api.example:8080; $(not a shell)");
    assert_string_equal(p->environment[1].name, "IS_SANDBOX");
    assert_string_equal(p->environment[1].value, "1");
    assert_int_equal(p->n_command, 3);
    assert_string_equal(p->command[0], "claude");
    assert_string_equal(p->command[2], "");
    assert_null(p->command[3]);
    assert_int_equal(p->n_env, 1);
}

static void check_v2_minimal(const lz_config_doc *doc)
{
    assert_int_equal(doc->schema_version, 2);
    check_defaults(doc);
    assert_int_equal(doc->n_resolvers, 0);
    assert_int_equal(profile(doc, "claude")->dns, LZ_DNS_DECL_UNSET);
}

static void check_v2_full(const lz_config_doc *doc)
{
    assert_int_equal(doc->schema_version, 2);
    const lz_profile_decl *p = profile(doc, "claude");
    /* Sorted by name, exact before wildcard, duplicates dropped. */
    assert_hosts(&p->allow_hosts.list, (const char *[]){ "api.anthropic.com", "*.example.com",
                                                         "registry.npmjs.org", NULL });
    /* The declarations keep the declared order and positions. */
    assert_int_equal(p->allow_hosts.count, 4);
    assert_string_equal(p->allow_hosts.items[0].pattern.name, "registry.npmjs.org");
    assert_int_equal(p->allow_hosts.items[0].pos.line, 4);
    assert_int_equal(p->allow_hosts.items[3].index, 3);
    assert_hosts(&p->deny_hosts.list, (const char *[]){ "bad.example.com", NULL });
    assert_int_equal(p->dns, LZ_DNS_DECL_FORWARD);
    assert_int_equal(p->dns_pos.line, 6);
    assert_hosts(&doc->default_allow_hosts.list, (const char *[]){ "github.com", NULL });
    assert_hosts(&doc->default_deny_hosts.list,
                 (const char *[]){ "*.telemetry.example.net", NULL });
    assert_int_equal(doc->default_dns, LZ_DNS_DECL_STRICT);
    assert_int_equal(doc->n_resolvers, 2);
    assert_memory_equal(doc->resolvers[0], ((uint8_t[]){ 203, 0, 113, 53 }), 4);
    assert_memory_equal(doc->resolvers[1], ((uint8_t[]){ 127, 0, 0, 53 }), 4);
}

static const schema_case corpus[] = {
    /* -- accepted documents -------------------------------------------- */
    ACCEPT("minimal document, all defaults", P(""), check_defaults),
    ACCEPT("full document", full_doc, check_full),
    ACCEPT(
        "explicit values equal to the defaults",
        P("isolate_gitignored = true\n"
          "persistent_dirs = [\"/root\"]\n"
          "allow_egress = []\n"
          "deny_egress = []\n"
          "env = {}\n"
          "volumes = [{ host = \"{profile_dir}/a\", container = \"/root/a\", kind = \"directory\", "
          "access = \"read-write\", create = false }]\n"
          "escalation = { enabled = false, auto_approve = [] }\n"
          "[storage]\n[network]\ndefault_allow = []\ndefault_deny = []\n"),
        check_explicit_defaults),
    ACCEPT("schema as a literal string", "schema = 'lazaret-trusted-host-config-v1'\n" PROF, NULL),
    ACCEPT("profiles as dotted keys", HEAD "profiles.claude.image = \"x\"\n", NULL),
    ACCEPT("profiles as an inline table", HEAD "profiles = { claude = { image = \"x\" } }\n", NULL),

    /* -- TOML syntax and strictness ------------------------------------ */
    REFUSE("toml: missing value", HEAD "[profiles.claude]\nimage = \n", "(document)", 3),
    REFUSE("toml: duplicate key", P("image = \"again\"\n"), "(document)", 4),
    REFUSE("toml: duplicate key, quoted", P("\"image\" = \"again\"\n"), "(document)", 4),
    REFUSE("toml: duplicate key, escaped", P("\"\\u0069mage\" = \"again\"\n"), "(document)", 4),
    REFUSE("toml: duplicate table", P("[profiles.claude]\n"), "(document)", 4),
    REFUSE("toml: duplicate root key", HEAD "schema = \"x\"\n" PROF, "(document)", 2),
    REFUSE("toml: unterminated string", P("persistent_dirs = [\"/root]\n"), "(document)", 4),
    REFUSE("toml: unterminated array", P("persistent_dirs = [\"/root\"\n"), "(document)", 0),
    REFUSE("toml: bare word value", P("isolate_gitignored = yes\n"), "(document)", 4),
    REFUSE("toml: capitalised boolean", P("isolate_gitignored = True\n"), "(document)", 4),
    REFUSE("toml: integer overflow", P("x = 9223372036854775808\n"), "(document)", 4),
    REFUSE("toml: NUL escape in a string", P("persistent_dirs = [\"/ro\\u0000ot\"]\n"),
           "(document)", 4),
    REFUSE("toml: NUL escape in a key", P("\"a\\u0000b\" = 1\n"), "(document)", 4),
    REFUSE("toml: NUL escape in an env value", P("env = { A = \"env:A\\u0000\" }\n"), "(document)",
           4),
    REFUSE("toml: invalid UTF-8 in a string",
           P("image2 = \"a\xff"
             "b\"\n"),
           "(document)", 4),
    REFUSE("toml: overlong UTF-8 in a comment", P("# \xc0\xaf\n"), "(document)", 4),
    REFUSE("toml: surrogate UTF-8 in a string", P("x = \"\xed\xa0\x80\"\n"), "(document)", 4),
    REFUSE("toml: truncated UTF-8 in a key", P("\"a\xc3\" = 1\n"), "(document)", 4),
    REFUSE("toml: control character in a string",
           P("x = \"a\x01"
             "b\"\n"),
           "(document)", 4),
    REFUSE("toml: redefined table via dotted key",
           HEAD "[profiles.claude]\nimage = \"x\"\nescalation.enabled = true\n"
                "[profiles.claude.escalation]\nenabled = false\n",
           "(document)", 5),

    REFUSE("toml 1.1: \\e escape", P("x = \"\\e\"\n"), "(document)", 4),
    REFUSE("toml 1.1: \\x escape", P("x = \"\\x41\"\n"), "(document)", 4),
    REFUSE("toml 1.1: multi-line inline table", P("env = {\nA = \"env:A\"\n}\n"), "(document)", 4),
    REFUSE("toml 1.1: trailing comma in inline table", P("env = { A = \"env:A\", }\n"),
           "(document)", 4),
    REFUSE("toml 1.1: time without seconds", P("x = 07:32\n"), "(document)", 4),
    REFUSE("toml: inline table extended by a header",
           P("escalation = { enabled = true }\n[profiles.claude.escalation.auto_approve]\n"),
           "(document)", 5),

    /* -- root ---------------------------------------------------------- */
    REFUSE("root: unknown field", HEAD "bogus = 1\n" PROF, "bogus", 2),
    REFUSE("root: unknown table", HEAD "[bogus]\n" PROF, "bogus", 0),
    REFUSE("root: alias 'profile'", HEAD "[profile.claude]\nimage = \"x\"\n", "profile", 2),
    REFUSE("root: alias 'Schema'", "Schema = \"lazaret-trusted-host-config-v1\"\n" PROF, "Schema",
           1),
    REFUSE("empty document", "", "schema", 0),
    REFUSE("whitespace and comments only", "\n  \n# nothing\n", "schema", 0),
    REFUSE("schema: missing", PROF, "schema", 0),
    REFUSE("schema: wrong version", "schema = \"lazaret-trusted-host-config-v3\"\n" PROF, "schema",
           1),
    REFUSE("schema: wrong case", "schema = \"Lazaret-trusted-host-config-v1\"\n" PROF, "schema", 1),
    REFUSE("schema: trailing space", "schema = \"lazaret-trusted-host-config-v1 \"\n" PROF,
           "schema", 1),
    REFUSE("schema: empty", "schema = \"\"\n" PROF, "schema", 1),
    REFUSE("schema: integer", "schema = 1\n" PROF, "schema", 1),
    REFUSE("schema: array", "schema = [\"lazaret-trusted-host-config-v1\"]\n" PROF, "schema", 1),
    REFUSE("schema: table", PROF "[schema]\nid = 1\n", "schema", 0),
    REFUSE("profiles: missing", HEAD, "profiles", 0),
    REFUSE("profiles: missing with storage", HEAD "[storage]\n", "profiles", 0),
    REFUSE("profiles: empty table", HEAD "[profiles]\n", "profiles", 2),
    REFUSE("profiles: empty inline table", HEAD "profiles = {}\n", "profiles", 2),
    REFUSE("profiles: integer", HEAD "profiles = 1\n", "profiles", 2),
    REFUSE("profiles: string", HEAD "profiles = \"claude\"\n", "profiles", 2),
    REFUSE("profiles: array", HEAD "profiles = []\n", "profiles", 2),
    REFUSE("profiles: array of tables", HEAD "[[profiles]]\nimage = \"x\"\n", "profiles", 0),
    REFUSE("profile: not a table (string)", HEAD "[profiles]\nclaude = \"x\"\n", "profiles.claude",
           3),
    REFUSE("profile: not a table (array)", HEAD "[profiles]\nclaude = [{ image = \"x\" }]\n",
           "profiles.claude", 3),
    REFUSE("profile: array of tables", HEAD "[[profiles.claude]]\nimage = \"x\"\n",
           "profiles.claude", 0),
    REFUSE("profile: bad one after a good one",
           HEAD "[profiles.a]\nimage = \"x\"\n[profiles.b]\nimage = 1\n", "profiles.b.image", 5),

    /* -- storage ------------------------------------------------------- */
    REFUSE("storage: not a table", HEAD "storage = \"/x\"\n" PROF, "storage", 2),
    REFUSE("storage: array", HEAD "storage = []\n" PROF, "storage", 2),
    REFUSE("storage: unknown field", HEAD "[storage]\ndata_roots = \"/x\"\n" PROF,
           "storage.data_roots", 3),
    REFUSE("storage: alias dataRoot", HEAD "[storage]\ndataRoot = \"/x\"\n" PROF,
           "storage.dataRoot", 3),
    REFUSE("storage: runtime_root is not configurable",
           HEAD "[storage]\nruntime_root = \"/x\"\n" PROF, "storage.runtime_root", 3),
    ACCEPT("data_root: absolute", HEAD "[storage]\ndata_root = \"/var/lib/lazaret-b~\"\n" PROF,
           check_data_root_abs),
    ACCEPT("data_root: home", HEAD "[storage]\ndata_root = \"~/x\"\n" PROF, NULL),
    ACCEPT("storage: empty table", HEAD "[storage]\n" PROF, NULL),
    REFUSE("data_root: integer", HEAD "[storage]\ndata_root = 1\n" PROF, "storage.data_root", 3),
    REFUSE("data_root: boolean", HEAD "[storage]\ndata_root = true\n" PROF, "storage.data_root", 3),
    REFUSE("data_root: array", HEAD "[storage]\ndata_root = [\"/x\"]\n" PROF, "storage.data_root",
           3),
    REFUSE("data_root: empty", HEAD "[storage]\ndata_root = \"\"\n" PROF, "storage.data_root", 3),
    REFUSE("data_root: relative", HEAD "[storage]\ndata_root = \"data\"\n" PROF,
           "storage.data_root", 3),
    REFUSE("data_root: {profile_dir}", HEAD "[storage]\ndata_root = \"{profile_dir}/x\"\n" PROF,
           "storage.data_root", 3),
    REFUSE("data_root: ~", HEAD "[storage]\ndata_root = \"~\"\n" PROF, "storage.data_root", 3),
    REFUSE("data_root: ~/", HEAD "[storage]\ndata_root = \"~/\"\n" PROF, "storage.data_root", 3),
    REFUSE("data_root: ~//etc", HEAD "[storage]\ndata_root = \"~//etc\"\n" PROF,
           "storage.data_root", 3),
    REFUSE("data_root: ~user", HEAD "[storage]\ndata_root = \"~user/x\"\n" PROF,
           "storage.data_root", 3),
    REFUSE("data_root: root", HEAD "[storage]\ndata_root = \"/\"\n" PROF, "storage.data_root", 3),
    REFUSE("data_root: trailing slash", HEAD "[storage]\ndata_root = \"/x/\"\n" PROF,
           "storage.data_root", 3),
    REFUSE("data_root: dotdot", HEAD "[storage]\ndata_root = \"/x/../y\"\n" PROF,
           "storage.data_root", 3),
    REFUSE("data_root: variable", HEAD "[storage]\ndata_root = \"$HOME/x\"\n" PROF,
           "storage.data_root", 3),
    REFUSE("data_root: glob", HEAD "[storage]\ndata_root = \"/x/*\"\n" PROF, "storage.data_root",
           3),

    /* -- network ------------------------------------------------------- */
    REFUSE("network: not a table", HEAD "network = 1\n" PROF, "network", 2),
    REFUSE("network: unknown field", HEAD "[network]\nallow = []\n" PROF, "network.allow", 3),
    REFUSE("network: alias default-allow", HEAD "[network]\ndefault-allow = []\n" PROF,
           "network.default-allow", 3),
    REFUSE("network: ipv6 switch is not a field", HEAD "[network]\nipv6 = false\n" PROF,
           "network.ipv6", 3),
    ACCEPT("network: empty table", HEAD "[network]\n" PROF, NULL),
    REFUSE("default_allow: string", HEAD "[network]\ndefault_allow = \"1.2.3.0/24\"\n" PROF,
           "network.default_allow", 3),
    REFUSE("default_allow: table", HEAD "[network]\ndefault_allow = {}\n" PROF,
           "network.default_allow", 3),
    REFUSE("default_allow: integer item",
           HEAD "[network]\ndefault_allow = [\"1.2.3.0/24\", 5]\n" PROF, "network.default_allow[1]",
           3),
    REFUSE("default_allow: no prefix length",
           HEAD "[network]\ndefault_allow = [\"1.2.3.0/24\", \"1.2.3.4\"]\n" PROF,
           "network.default_allow[1]", 3),
    REFUSE("default_allow: /33", HEAD "[network]\ndefault_allow = [\"1.2.3.4/33\"]\n" PROF,
           "network.default_allow[0]", 3),
    REFUSE("default_allow: ipv6", HEAD "[network]\ndefault_allow = [\"2001:db8::/32\"]\n" PROF,
           "network.default_allow[0]", 3),
    REFUSE("default_allow: leading zero", HEAD "[network]\ndefault_allow = [\"01.2.3.4/8\"]\n" PROF,
           "network.default_allow[0]", 3),
    REFUSE("default_deny: string", HEAD "[network]\ndefault_deny = \"1.2.3.0/24\"\n" PROF,
           "network.default_deny", 3),
    REFUSE("default_deny: boolean item", HEAD "[network]\ndefault_deny = [true]\n" PROF,
           "network.default_deny[0]", 3),
    REFUSE("default_deny: 256", HEAD "[network]\ndefault_deny = [\"256.0.0.0/8\"]\n" PROF,
           "network.default_deny[0]", 3),
    REFUSE("default_deny: spaces", HEAD "[network]\ndefault_deny = [\" 1.2.3.0/24\"]\n" PROF,
           "network.default_deny[0]", 3),
    REFUSE("default_deny: trailing garbage",
           HEAD "[network]\ndefault_deny = [\"1.2.3.0/24\",\n\"1.2.3.0/24x\"]\n" PROF,
           "network.default_deny[1]", 4),

    /* -- profile names ------------------------------------------------- */
    ACCEPT("profile name: 64 characters",
           HEAD "[profiles.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]"
                "\nimage = \"x\"\n",
           check_name64),
    ACCEPT("profile name: 1 character", HEAD "[profiles.a]\nimage = \"x\"\n", NULL),
    ACCEPT("profile name: inner . _ -", HEAD "[profiles.\"a.b_c-d\"]\nimage = \"x\"\n", NULL),
    ACCEPT("profile name: digit first", HEAD "[profiles.9]\nimage = \"x\"\n", NULL),
    REFUSE("profile name: 65 characters",
           HEAD "[profiles.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]"
                "\nimage = \"x\"\n",
           "profiles.\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", 2),
    REFUSE("profile name: empty", HEAD "[profiles.\"\"]\nimage = \"x\"\n", "profiles.\"\"", 2),
    REFUSE("profile name: .", HEAD "[profiles.\".\"]\nimage = \"x\"\n", "profiles.\".\"", 2),
    REFUSE("profile name: ..", HEAD "[profiles.\"..\"]\nimage = \"x\"\n", "profiles.\"..\"", 2),
    REFUSE("profile name: leading .", HEAD "[profiles.\".a\"]\nimage = \"x\"\n", "profiles.\".a\"",
           2),
    REFUSE("profile name: leading -", HEAD "[profiles.-a]\nimage = \"x\"\n", "profiles.\"-a\"", 2),
    REFUSE("profile name: leading _", HEAD "[profiles._a]\nimage = \"x\"\n", "profiles.\"_a\"", 2),
    REFUSE("profile name: space", HEAD "[profiles.\"a b\"]\nimage = \"x\"\n", "profiles.\"a b\"",
           2),
    REFUSE("profile name: slash", HEAD "[profiles.\"a/b\"]\nimage = \"x\"\n", "profiles.\"a/b\"",
           2),
    REFUSE("profile name: non-ASCII", HEAD "[profiles.\"caf\xc3\xa9\"]\nimage = \"x\"\n",
           "profiles.\"caf\xc3\xa9\"", 2),
    REFUSE("profile name: non-ASCII escape", HEAD "[profiles.\"a\\u00e9\"]\nimage = \"x\"\n",
           "profiles.\"a\xc3\xa9\"", 2),

    /* -- profile fields ------------------------------------------------ */
    REFUSE("profile: unknown field", P("bogus = 1\n"), "profiles.claude.bogus", 4),
    REFUSE("profile: alias isolate-gitignored", P("isolate-gitignored = false\n"),
           "profiles.claude.isolate-gitignored", 4),
    REFUSE("profile: alias persistent_dir", P("persistent_dir = [\"/root\"]\n"),
           "profiles.claude.persistent_dir", 4),
    REFUSE("profile: default is not a field", P("default = true\n"), "profiles.claude.default", 4),
    REFUSE("profile: unknown subtable", P("[profiles.claude.network]\n"), "profiles.claude.network",
           0),
    REFUSE("image: missing", HEAD "[profiles.claude]\nisolate_gitignored = true\n",
           "profiles.claude.image", 2),
    REFUSE("image: missing in inline table", HEAD "[profiles]\nclaude = {}\n",
           "profiles.claude.image", 3),
    REFUSE("image: empty", HEAD "[profiles.claude]\nimage = \"\"\n", "profiles.claude.image", 3),
    REFUSE("image: space", HEAD "[profiles.claude]\nimage = \"debian bookworm\"\n",
           "profiles.claude.image", 3),
    REFUSE("image: leading space", HEAD "[profiles.claude]\nimage = \" debian\"\n",
           "profiles.claude.image", 3),
    REFUSE("image: tab", HEAD "[profiles.claude]\nimage = \"debian\\t\"\n", "profiles.claude.image",
           3),
    REFUSE("image: newline", HEAD "[profiles.claude]\nimage = \"debian\\n\"\n",
           "profiles.claude.image", 3),
    REFUSE("image: escape character", HEAD "[profiles.claude]\nimage = \"\\u001b[31m\"\n",
           "profiles.claude.image", 3),
    REFUSE("image: integer", HEAD "[profiles.claude]\nimage = 1\n", "profiles.claude.image", 3),
    REFUSE("image: array", HEAD "[profiles.claude]\nimage = [\"x\"]\n", "profiles.claude.image", 3),
    REFUSE("image: table", HEAD "[profiles.claude.image]\nref = \"x\"\n", "profiles.claude.image",
           0),
    REFUSE("isolate_gitignored: string", P("isolate_gitignored = \"false\"\n"),
           "profiles.claude.isolate_gitignored", 4),
    REFUSE("isolate_gitignored: integer", P("isolate_gitignored = 0\n"),
           "profiles.claude.isolate_gitignored", 4),
    REFUSE("isolate_gitignored: date", P("isolate_gitignored = 1979-05-27\n"),
           "profiles.claude.isolate_gitignored", 4),

    /* -- persistent_dirs ----------------------------------------------- */
    ACCEPT("persistent_dirs: siblings and prefixes that are not ancestors",
           P("persistent_dirs = [\"/a\", \"/ab\", \"/b/c\", \"/b/cd\", \"/a.b\"]\n"), NULL),
    REFUSE("persistent_dirs: string", P("persistent_dirs = \"/root\"\n"),
           "profiles.claude.persistent_dirs", 4),
    REFUSE("persistent_dirs: integer item", P("persistent_dirs = [\"/root\", 1]\n"),
           "profiles.claude.persistent_dirs[1]", 4),
    REFUSE("persistent_dirs: root", P("persistent_dirs = [\"/\"]\n"),
           "profiles.claude.persistent_dirs[0]", 4),
    REFUSE("persistent_dirs: relative", P("persistent_dirs = [\"root\"]\n"),
           "profiles.claude.persistent_dirs[0]", 4),
    REFUSE("persistent_dirs: empty", P("persistent_dirs = [\"\"]\n"),
           "profiles.claude.persistent_dirs[0]", 4),
    REFUSE("persistent_dirs: home anchor", P("persistent_dirs = [\"~/x\"]\n"),
           "profiles.claude.persistent_dirs[0]", 4),
    REFUSE("persistent_dirs: trailing slash", P("persistent_dirs = [\"/root/\"]\n"),
           "profiles.claude.persistent_dirs[0]", 4),
    REFUSE("persistent_dirs: repeated slash", P("persistent_dirs = [\"/a//b\"]\n"),
           "profiles.claude.persistent_dirs[0]", 4),
    REFUSE("persistent_dirs: dot", P("persistent_dirs = [\"/a/./b\"]\n"),
           "profiles.claude.persistent_dirs[0]", 4),
    REFUSE("persistent_dirs: dotdot", P("persistent_dirs = [\"/a/..\"]\n"),
           "profiles.claude.persistent_dirs[0]", 4),
    REFUSE("persistent_dirs: repeated", P("persistent_dirs = [\"/a\", \"/b\",\n\"/a\"]\n"),
           "profiles.claude.persistent_dirs[2]", 5),
    REFUSE("persistent_dirs: descendant after ancestor",
           P("persistent_dirs = [\"/a\", \"/a/b\"]\n"), "profiles.claude.persistent_dirs[1]", 4),
    REFUSE("persistent_dirs: ancestor after descendant",
           P("persistent_dirs = [\"/a/b/c\", \"/a\"]\n"), "profiles.claude.persistent_dirs[1]", 4),

    /* -- allow_egress / deny_egress ------------------------------------ */
    ACCEPT("egress: dedup after host-bit clearing",
           P("allow_egress = [\"1.2.3.4/24\", \"1.2.3.0/24\", \"1.2.3.0/25\"]\n"
             "deny_egress = [\"0.0.0.0/0\", \"9.9.9.9/0\"]\n"),
           check_prefix_dedup),
    REFUSE("allow_egress: string", P("allow_egress = \"1.2.3.0/24\"\n"),
           "profiles.claude.allow_egress", 4),
    REFUSE("allow_egress: integer item", P("allow_egress = [1]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("allow_egress: /08", P("allow_egress = [\"1.2.3.0/24\", \"1.0.0.0/08\"]\n"),
           "profiles.claude.allow_egress[1]", 4),
    REFUSE("allow_egress: five octets", P("allow_egress = [\"1.2.3.4.5/8\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("allow_egress: negative", P("allow_egress = [\"-1.2.3.4/8\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("deny_egress: table", P("deny_egress = { a = \"1.2.3.0/24\" }\n"),
           "profiles.claude.deny_egress", 4),
    REFUSE("deny_egress: ipv6", P("deny_egress = [\"::/0\"]\n"), "profiles.claude.deny_egress[0]",
           4),
    REFUSE("deny_egress: hostname", P("deny_egress = [\"example.com/32\"]\n"),
           "profiles.claude.deny_egress[0]", 4),

    /* -- allow/deny conflicts ------------------------------------------ */
    ACCEPT("conflict: RFC 1918 sub-prefix allowed", P("allow_egress = [\"10.1.0.0/16\"]\n"), NULL),
    ACCEPT("conflict: wider than RFC 1918 allowed",
           P("allow_egress = [\"10.0.0.0/7\", \"172.0.0.0/8\"]\n"), NULL),
    ACCEPT("conflict: different lengths allowed",
           HEAD
           "[network]\ndefault_allow = [\"1.2.3.0/24\"]\ndefault_deny = [\"1.2.3.0/25\"]\n" PROF
           "allow_egress = [\"5.0.0.0/8\"]\ndeny_egress = [\"5.5.0.0/16\", \"0.0.0.0/0\"]\n",
           NULL),
    ACCEPT("conflict: profile allow vs another profile's deny is no conflict",
           HEAD "[profiles.a]\nimage = \"x\"\nallow_egress = [\"1.2.3.0/24\"]\n"
                "[profiles.b]\nimage = \"x\"\ndeny_egress = [\"1.2.3.0/24\"]\n",
           check_two_profiles),
    REFUSE("conflict: global allow vs global deny",
           HEAD
           "[network]\ndefault_allow = [\"1.2.3.0/24\"]\ndefault_deny = [\"1.2.3.0/24\"]\n" PROF,
           "network.default_allow[0]", 0),
    REFUSE("conflict: global allow vs profile deny",
           HEAD "[network]\ndefault_allow = [\"1.2.3.0/24\"]\n" PROF
                "deny_egress = [\"1.2.3.0/24\"]\n",
           "network.default_allow[0]", 0),
    REFUSE("conflict: profile allow vs global deny",
           HEAD "[network]\ndefault_deny = [\"1.2.3.0/24\"]\n" PROF
                "allow_egress = [\"1.2.3.0/24\"]\n",
           "profiles.claude.allow_egress[0]", 0),
    REFUSE("conflict: profile allow vs the same profile's deny",
           P("allow_egress = [\"1.2.3.0/24\"]\ndeny_egress = [\"1.2.3.0/24\"]\n"),
           "profiles.claude.allow_egress[0]", 0),
    REFUSE("conflict: equal after host-bit clearing",
           P("allow_egress = [\"1.2.3.4/24\"]\ndeny_egress = [\"1.2.3.200/24\"]\n"),
           "profiles.claude.allow_egress[0]", 0),
    REFUSE("conflict: in the second profile",
           HEAD "[profiles.a]\nimage = \"x\"\nallow_egress = [\"1.2.3.0/24\"]\n"
                "[profiles.b]\nimage = \"x\"\nallow_egress = [\"5.0.0.0/8\"]\n"
                "deny_egress = [\"5.0.0.0/8\"]\n",
           "profiles.b.allow_egress[0]", 0),
    REFUSE("conflict: allow 10.0.0.0/8 (always denied)", P("allow_egress = [\"10.0.0.0/8\"]\n"),
           "profiles.claude.allow_egress[0]", 0),
    REFUSE("conflict: allow 172.16.0.0/12 (always denied)",
           P("allow_egress = [\"172.16.0.0/12\"]\n"), "profiles.claude.allow_egress[0]", 0),
    REFUSE("conflict: allow 192.168.0.0/16 (always denied)",
           P("allow_egress = [\"192.168.0.0/16\"]\n"), "profiles.claude.allow_egress[0]", 0),
    REFUSE("conflict: allow 10.9.9.9/8 normalizes to RFC 1918",
           P("allow_egress = [\"10.9.9.9/8\"]\n"), "profiles.claude.allow_egress[0]", 0),
    REFUSE("conflict: global allow of RFC 1918",
           HEAD "[network]\ndefault_allow = [\"192.168.0.0/16\"]\n" PROF,
           "network.default_allow[0]", 0),

    /* -- allows a sandbox can never reach (docs/network.md) ------------ */
    REFUSE("never: allow loopback", P("allow_egress = [\"127.0.0.0/8\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow one loopback address",
           P("allow_egress = [\"1.2.3.0/24\", \"127.1.2.3/32\"]\n"),
           "profiles.claude.allow_egress[1]", 4),
    REFUSE("never: allow 0.0.0.0/8", P("allow_egress = [\"0.0.0.0/8\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow 0.0.0.0/32", P("allow_egress = [\"0.0.0.0/32\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow the sandbox link", P("allow_egress = [\"169.254.77.0/30\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow the router address", P("allow_egress = [\"169.254.77.1/32\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow link-local", P("allow_egress = [\"169.254.0.0/16\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow slirp's network", P("allow_egress = [\"100.96.0.0/24\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow slirp's host alias", P("allow_egress = [\"100.96.0.2/32\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow multicast", P("allow_egress = [\"224.0.0.0/4\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow one multicast group", P("allow_egress = [\"239.1.2.3/32\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow reserved", P("allow_egress = [\"240.0.0.0/4\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow the limited broadcast", P("allow_egress = [\"255.255.255.255/32\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: allow loopback after host-bit clearing", P("allow_egress = [\"127.9.9.9/8\"]\n"),
           "profiles.claude.allow_egress[0]", 4),
    REFUSE("never: global allow of loopback",
           HEAD "[network]\ndefault_allow = [\"127.0.0.1/32\"]\n" PROF, "network.default_allow[0]",
           3),
    REFUSE("never: in the second profile",
           HEAD "[profiles.a]\nimage = \"x\"\nallow_egress = [\"1.2.3.0/24\"]\n"
                "[profiles.b]\nimage = \"x\"\nallow_egress = [\"169.254.1.0/24\"]\n",
           "profiles.b.allow_egress[0]", 7),
    ACCEPT("never: a prefix containing the ranges is accepted",
           P("allow_egress = [\"0.0.0.0/0\", \"100.0.0.0/8\", \"169.0.0.0/8\", \"224.0.0.0/3\"]\n"),
           NULL),
    ACCEPT("never: neighbours of the ranges are accepted",
           P("allow_egress = [\"1.0.0.0/8\", \"126.255.255.255/32\", \"128.0.0.0/32\", "
             "\"100.96.1.0/24\", \"100.95.255.0/24\", \"169.253.0.0/16\", \"169.255.0.0/16\", "
             "\"223.255.255.255/32\"]\n"),
           NULL),
    ACCEPT("never: denies inside the ranges are accepted",
           P("deny_egress = [\"127.0.0.0/8\", \"169.254.77.0/30\", \"100.96.0.0/24\", "
             "\"0.0.0.0/8\"]\n"),
           NULL),

    /* -- env ----------------------------------------------------------- */
    ACCEPT("env: inline table", P("env = { A = \"env:B\", _c = \"env:_\" }\n"), NULL),
    REFUSE("env: string", P("env = \"env:A\"\n"), "profiles.claude.env", 4),
    REFUSE("env: array", P("env = [\"A=env:A\"]\n"), "profiles.claude.env", 4),
    REFUSE("env: literal value", P("[profiles.claude.env]\nTOKEN = \"hunter2\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: empty value", P("[profiles.claude.env]\nTOKEN = \"\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: empty reference", P("[profiles.claude.env]\nTOKEN = \"env:\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: ENV: scheme", P("[profiles.claude.env]\nTOKEN = \"ENV:TOKEN\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: other scheme", P("[profiles.claude.env]\nTOKEN = \"file:/etc/token\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: shell form", P("[profiles.claude.env]\nTOKEN = \"$TOKEN\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: reference with bad name", P("[profiles.claude.env]\nTOKEN = \"env:1X\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: reference with dash", P("[profiles.claude.env]\nTOKEN = \"env:A-B\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: reference with space", P("[profiles.claude.env]\nTOKEN = \"env: A\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: reference with suffix", P("[profiles.claude.env]\nTOKEN = \"env:A:B\"\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: integer value", P("[profiles.claude.env]\nTOKEN = 1\n"),
           "profiles.claude.env.TOKEN", 5),
    REFUSE("env: table value", P("[profiles.claude.env.TOKEN]\nname = \"A\"\n"),
           "profiles.claude.env.TOKEN", 0),
    REFUSE("env: key starts with a digit", P("[profiles.claude.env]\n1X = \"env:A\"\n"),
           "profiles.claude.env.1X", 5),
    REFUSE("env: key with dash", P("[profiles.claude.env]\nA-B = \"env:A\"\n"),
           "profiles.claude.env.A-B", 5),
    REFUSE("env: empty key", P("[profiles.claude.env]\n\"\" = \"env:A\"\n"), "profiles.claude.env.",
           5),
    REFUSE("env: key with =", P("[profiles.claude.env]\n\"A=B\" = \"env:A\"\n"),
           "profiles.claude.env.A=B", 5),

    /* -- volumes ------------------------------------------------------- */
    ACCEPT(
        "volume: read-only absolute directory",
        PV("volumes = [{ host = \"/srv/data\", container = \"/root/data\", kind = \"directory\", "
           "access = \"read-only\" }]\n"),
        check_volume_ro),
    ACCEPT("volume: host with inner tilde",
           PV("volumes = [{ host = \"/srv/b~\", container = \"/root/b\", kind = \"file\" }]\n"),
           NULL),
    ACCEPT("volume: containers that are siblings and prefix strings",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\" },\n"
              "{ host = \"/b\", container = \"/root/ab\", kind = \"file\" },\n"
              "{ host = \"/c\", container = \"/root/a.b\", kind = \"file\" }]\n"),
           NULL),
    ACCEPT("volume: create=true beneath {profile_dir}",
           PV("volumes = [{ host = \"{profile_dir}/a/b\", container = \"/root/a\", kind = "
              "\"directory\", "
              "create = true }]\n"),
           NULL),
    ACCEPT("volume: create=false file from ~/",
           PV("volumes = [{ host = \"~/x\", container = \"/root/x\", kind = \"file\", create = "
              "false }]\n"),
           NULL),
    ACCEPT("volume: containers inside different persistent dirs",
           P("persistent_dirs = [\"/root\", \"/home/agent\"]\n"
             "volumes = [{ host = \"/a\", container = \"/home/agent/a\", kind = \"file\" },\n"
             "{ host = \"/b\", container = \"/root/a\", kind = \"file\" }]\n"),
           NULL),
    ACCEPT("volume: empty list without persistent dirs", P("volumes = []\n"), NULL),
    REFUSE("volumes: table", PV("volumes = { host = \"/a\" }\n"), "profiles.claude.volumes", 5),
    REFUSE("volumes: string item", PV("volumes = [\"/a:/root/a\"]\n"), "profiles.claude.volumes[0]",
           5),
    REFUSE(
        "volume: unknown field",
        PV("[[profiles.claude.volumes]]\nhost = \"/a\"\ncontainer = \"/root/a\"\nkind = \"file\"\n"
           "mode = \"0644\"\n"),
        "profiles.claude.volumes[0].mode", 9),
    REFUSE("volume: alias source",
           PV("volumes = [{ source = \"/a\", host = \"/a\", container = \"/root/a\", kind = "
              "\"file\" }]\n"),
           "profiles.claude.volumes[0].source", 5),
    REFUSE("volume: alias read_only",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\", read_only = "
              "true }]\n"),
           "profiles.claude.volumes[0].read_only", 5),
    REFUSE("volume: host missing", PV("volumes = [{ container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: container missing", PV("volumes = [{ host = \"/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: kind missing", PV("volumes = [{ host = \"/a\", container = \"/root/a\" }]\n"),
           "profiles.claude.volumes[0].kind", 5),
    REFUSE("volume: host integer",
           PV("volumes = [{ host = 1, container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: container array",
           PV("volumes = [{ host = \"/a\", container = [\"/root/a\"], kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: kind boolean",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = true }]\n"),
           "profiles.claude.volumes[0].kind", 5),
    REFUSE("volume: access boolean",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\", access = "
              "false }]\n"),
           "profiles.claude.volumes[0].access", 5),
    REFUSE("volume: create string",
           PV("volumes = [{ host = \"{profile_dir}/a\", container = \"/root/a\", kind = "
              "\"directory\", "
              "create = \"true\" }]\n"),
           "profiles.claude.volumes[0].create", 5),
    REFUSE("volume: host relative",
           PV("volumes = [{ host = \"a\", container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: host ~//etc",
           PV("volumes = [{ host = \"~//etc\", container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: host {profile_dir}//etc",
           PV("volumes = [{ host = \"{profile_dir}//etc\", container = \"/root/a\", kind = "
              "\"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: host {profile_dir} alone",
           PV("volumes = [{ host = \"{profile_dir}\", container = \"/root/a\", kind = "
              "\"directory\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: host {profile_dir}/",
           PV("volumes = [{ host = \"{profile_dir}/\", container = \"/root/a\", kind = "
              "\"directory\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: host trailing slash",
           PV("volumes = [{ host = \"/a/\", container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: host dotdot",
           PV("volumes = [{ host = \"{profile_dir}/../x\", container = \"/root/a\", kind = "
              "\"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: host variable",
           PV("volumes = [{ host = \"/a/$X\", container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: host glob",
           PV("volumes = [{ host = \"/a/*\", container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: host tilde component",
           PV("volumes = [{ host = \"/a/~b\", container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].host", 5),
    REFUSE("volume: container root",
           PV("volumes = [{ host = \"/a\", container = \"/\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: container relative",
           PV("volumes = [{ host = \"/a\", container = \"root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: container trailing slash",
           PV("volumes = [{ host = \"/a\", container = \"/root/a/\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: container dotdot",
           PV("volumes = [{ host = \"/a\", container = \"/root/../etc\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: kind File",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"File\" }]\n"),
           "profiles.claude.volumes[0].kind", 5),
    REFUSE("volume: kind dir",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"dir\" }]\n"),
           "profiles.claude.volumes[0].kind", 5),
    REFUSE("volume: kind in the second volume",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\" },\n"
              "{ host = \"/b\", container = \"/root/b\", kind = \"DIRECTORY\" }]\n"),
           "profiles.claude.volumes[1].kind", 6),
    REFUSE("volume: access READ-ONLY",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\", access = "
              "\"READ-ONLY\" }]\n"),
           "profiles.claude.volumes[0].access", 5),
    REFUSE("volume: access ro",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\", access = "
              "\"ro\" }]\n"),
           "profiles.claude.volumes[0].access", 5),
    REFUSE("volume: access read_only",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\", access = "
              "\"read_only\" }]\n"),
           "profiles.claude.volumes[0].access", 5),
    REFUSE("volume: create=true for a file",
           PV("volumes = [{ host = \"{profile_dir}/a\", container = \"/root/a\", kind = \"file\", "
              "create = true }]\n"),
           "profiles.claude.volumes[0].create", 5),
    REFUSE("volume: create=true for an absolute host",
           PV("volumes = [{ host = \"/srv/a\", container = \"/root/a\", kind = \"directory\", "
              "create = true }]\n"),
           "profiles.claude.volumes[0].create", 5),
    REFUSE("volume: create=true for a home host",
           PV("volumes = [{ host = \"~/a\", container = \"/root/a\", kind = \"directory\", "
              "create = true }]\n"),
           "profiles.claude.volumes[0].create", 5),
    REFUSE("volume: containers equal",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\" },\n"
              "{ host = \"/b\", container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[1].container", 6),
    REFUSE("volume: container below an earlier one",
           PV("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"directory\" },\n"
              "{ host = \"/b\", container = \"/root/a/b\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[1].container", 6),
    REFUSE("volume: container above an earlier one",
           PV("volumes = [{ host = \"/a\", container = \"/root/a/b\", kind = \"file\" },\n"
              "{ host = \"/b\", container = \"/root/a\", kind = \"directory\" }]\n"),
           "profiles.claude.volumes[1].container", 6),
    REFUSE("volume: container equals a persistent dir",
           PV("volumes = [{ host = \"/a\", container = \"/root\", kind = \"directory\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: container equals the second persistent dir",
           P("persistent_dirs = [\"/root\", \"/home/agent\"]\n"
             "volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\" },\n"
             "{ host = \"/b\", container = \"/home/agent\", kind = \"directory\" }]\n"),
           "profiles.claude.volumes[1].container", 6),
    REFUSE("volume: container outside every persistent dir",
           PV("volumes = [{ host = \"/a\", container = \"/home/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: container above a persistent dir",
           P("persistent_dirs = [\"/home/agent\"]\n"
             "volumes = [{ host = \"/a\", container = \"/home\", kind = \"directory\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: container beside a persistent dir (string prefix)",
           PV("volumes = [{ host = \"/a\", container = \"/rootx/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].container", 5),
    REFUSE("volume: no persistent dirs at all",
           P("volumes = [{ host = \"/a\", container = \"/root/a\", kind = \"file\" }]\n"),
           "profiles.claude.volumes[0].container", 4),

    /* -- escalation ---------------------------------------------------- */
    ACCEPT("escalation: disabled with an empty rule list",
           P("[profiles.claude.escalation]\nenabled = false\nauto_approve = []\n"), NULL),
    ACCEPT("escalation: enabled without rules", PE(""), check_escalation_enabled_no_rules),
    ACCEPT("escalation: empty table", P("[profiles.claude.escalation]\n"), NULL),
    ACCEPT("rule: args order kept, shell text is just an argument",
           PE("[[profiles.claude.escalation.auto_approve]]\nexecutable = \"/bin/sh\"\n"
              "args = [\"-c\", \"echo $HOME *\", \"\", \"caf\xc3\xa9\"]\n"),
           check_rule_args),
    ACCEPT("rule: allow_extra_args=true with one argument",
           PE("[[profiles.claude.escalation.auto_approve]]\nexecutable = \"/usr/bin/git\"\n"
              "args = [\"log\"]\nallow_extra_args = true\n"),
           NULL),
    ACCEPT("rule: same args, different executables",
           PE("auto_approve = [{ executable = \"/usr/bin/git\", args = [\"a\"] },\n"
              "{ executable = \"/usr/local/bin/git\", args = [\"a\"] }]\n"),
           NULL),
    ACCEPT("rule: prefix args are a different rule",
           PE("auto_approve = [{ executable = \"/usr/bin/git\", args = [\"a\"] },\n"
              "{ executable = \"/usr/bin/git\", args = [\"a\", \"b\"] },\n"
              "{ executable = \"/usr/bin/git\" }]\n"),
           NULL),
    REFUSE("escalation: boolean", P("escalation = true\n"), "profiles.claude.escalation", 4),
    REFUSE("escalation: array", P("escalation = []\n"), "profiles.claude.escalation", 4),
    REFUSE("escalation: unknown field", P("[profiles.claude.escalation]\nenable = true\n"),
           "profiles.claude.escalation.enable", 5),
    REFUSE("escalation: alias autoApprove", P("[profiles.claude.escalation]\nautoApprove = []\n"),
           "profiles.claude.escalation.autoApprove", 5),
    REFUSE("escalation: enabled string", P("[profiles.claude.escalation]\nenabled = \"true\"\n"),
           "profiles.claude.escalation.enabled", 5),
    REFUSE("escalation: enabled integer", P("[profiles.claude.escalation]\nenabled = 1\n"),
           "profiles.claude.escalation.enabled", 5),
    REFUSE("escalation: auto_approve table", PE("auto_approve = { executable = \"/bin/true\" }\n"),
           "profiles.claude.escalation.auto_approve", 6),
    REFUSE("escalation: auto_approve string", PE("auto_approve = \"/bin/true\"\n"),
           "profiles.claude.escalation.auto_approve", 6),
    REFUSE("escalation: rules while disabled",
           P("[profiles.claude.escalation]\nenabled = false\n"
             "auto_approve = [{ executable = \"/bin/true\" }]\n"),
           "profiles.claude.escalation.auto_approve", 6),
    REFUSE("escalation: rules while enabled is absent",
           P("[profiles.claude.escalation]\n"
             "[[profiles.claude.escalation.auto_approve]]\nexecutable = \"/bin/true\"\n"),
           "profiles.claude.escalation.auto_approve", 0),
    REFUSE("rule: string item", PE("auto_approve = [\"/bin/true\"]\n"),
           "profiles.claude.escalation.auto_approve[0]", 6),
    REFUSE(
        "rule: unknown field",
        PE("[[profiles.claude.escalation.auto_approve]]\nexecutable = \"/bin/true\"\nargv = []\n"),
        "profiles.claude.escalation.auto_approve[0].argv", 8),
    REFUSE("rule: alias allow-extra-args",
           PE("auto_approve = [{ executable = \"/bin/true\", args = [\"a\"], allow-extra-args = "
              "true }]\n"),
           "profiles.claude.escalation.auto_approve[0].allow-extra-args", 6),
    REFUSE("rule: executable missing", PE("auto_approve = [{ args = [\"a\"] }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: executable integer", PE("auto_approve = [{ executable = 1 }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: executable array", PE("auto_approve = [{ executable = [\"/bin/true\"] }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: executable relative (no PATH lookup)",
           PE("auto_approve = [{ executable = \"git\" }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: executable ./git", PE("auto_approve = [{ executable = \"./git\" }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: executable {profile_dir}",
           PE("auto_approve = [{ executable = \"{profile_dir}/x\" }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: executable ~//bin", PE("auto_approve = [{ executable = \"~//bin/x\" }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: executable trailing slash",
           PE("auto_approve = [{ executable = \"/usr/bin/\" }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: executable variable", PE("auto_approve = [{ executable = \"$HOME/bin/x\" }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: executable empty", PE("auto_approve = [{ executable = \"\" }]\n"),
           "profiles.claude.escalation.auto_approve[0].executable", 6),
    REFUSE("rule: args string",
           PE("auto_approve = [{ executable = \"/bin/echo\", args = \"a b\" }]\n"),
           "profiles.claude.escalation.auto_approve[0].args", 6),
    REFUSE("rule: args integer item",
           PE("auto_approve = [{ executable = \"/bin/echo\", args = [\"a\", 1] }]\n"),
           "profiles.claude.escalation.auto_approve[0].args[1]", 6),
    REFUSE("rule: args array item",
           PE("auto_approve = [{ executable = \"/bin/echo\", args = [[\"a\"]] }]\n"),
           "profiles.claude.escalation.auto_approve[0].args[0]", 6),
    REFUSE("rule: allow_extra_args string",
           PE("auto_approve = [{ executable = \"/bin/echo\", args = [\"a\"], allow_extra_args = "
              "\"yes\" }]\n"),
           "profiles.claude.escalation.auto_approve[0].allow_extra_args", 6),
    REFUSE("rule: allow_extra_args without args",
           PE("auto_approve = [{ executable = \"/bin/echo\", allow_extra_args = true }]\n"),
           "profiles.claude.escalation.auto_approve[0].allow_extra_args", 6),
    REFUSE("rule: allow_extra_args with empty args",
           PE("[[profiles.claude.escalation.auto_approve]]\nexecutable = \"/bin/echo\"\nargs = []\n"
              "allow_extra_args = true\n"),
           "profiles.claude.escalation.auto_approve[0].allow_extra_args", 9),
    REFUSE(
        "rule: exact duplicate",
        PE("auto_approve = [{ executable = \"/usr/bin/git\", args = [\"status\"] },\n"
           "{ executable = \"/usr/bin/git\", args = [\"status\"], allow_extra_args = false }]\n"),
        "profiles.claude.escalation.auto_approve[1]", 7),
    REFUSE("rule: exact duplicate without args",
           PE("auto_approve = [{ executable = \"/bin/true\" }, { executable = \"/bin/x\" },\n"
              "{ executable = \"/bin/true\", args = [] }]\n"),
           "profiles.claude.escalation.auto_approve[2]", 7),
    REFUSE("rule: exact duplicate with allow_extra_args",
           PE("auto_approve = [{ executable = \"/bin/e\", args = [\"a\", \"b\"], allow_extra_args "
              "= true },\n"
              "{ executable = \"/bin/e\", args = [\"a\", \"b\"], allow_extra_args = true }]\n"),
           "profiles.claude.escalation.auto_approve[1]", 7),
    /* -- schema v2: host rules, DNS mode, resolvers (issue 25) --------- */
    ACCEPT("v2: minimal document", P2(""), check_v2_minimal),
    ACCEPT("v1: no v2 field is set", P(""), check_v1_has_no_v2),
    ACCEPT("v2: every new key",
           P2("allow_hosts = [\"registry.npmjs.org\", \"*.example.com\", \"api.anthropic.com\",\n"
              "\"registry.npmjs.org\"]\n"
              "dns = \"forward\"\n"
              "deny_hosts = [\"bad.example.com\"]\n"
              "[network]\n"
              "default_allow_hosts = [\"github.com\"]\n"
              "default_deny_hosts = [\"*.telemetry.example.net\"]\n"
              "default_dns = \"strict\"\n"
              "resolvers = [\"203.0.113.53\", \"127.0.0.53\"]\n"),
           check_v2_full),
    ACCEPT("v2: empty host lists", P2("allow_hosts = []\ndeny_hosts = []\n"), NULL),
    ACCEPT("v2: strict without allow_hosts", P2("dns = \"strict\"\n"), NULL),
    ACCEPT("v2: an exact deny inside an allowed wildcard",
           P2("allow_hosts = [\"*.example.com\"]\ndeny_hosts = [\"ads.example.com\"]\n"), NULL),
    ACCEPT("v2: a wildcard and its parent are different patterns",
           P2("allow_hosts = [\"example.com\"]\ndeny_hosts = [\"*.example.com\"]\n"), NULL),
    ACCEPT("v2: three resolvers",
           P2("[network]\nresolvers = [\"192.0.2.1\", \"192.0.2.2\", \"192.0.2.3\"]\n"), NULL),
    REFUSE("v1: allow_hosts is unknown", P("allow_hosts = [\"a.example\"]\n"),
           "profiles.claude.allow_hosts", 4),
    REFUSE("v1: deny_hosts is unknown", P("deny_hosts = [\"a.example\"]\n"),
           "profiles.claude.deny_hosts", 4),
    REFUSE("v1: dns is unknown", P("dns = \"strict\"\n"), "profiles.claude.dns", 4),
    REFUSE("v1: network.resolvers is unknown", P("[network]\nresolvers = [\"192.0.2.1\"]\n"),
           "network.resolvers", 5),
    REFUSE("v1: network.default_allow_hosts is unknown",
           P("[network]\ndefault_allow_hosts = [\"a.example\"]\n"), "network.default_allow_hosts",
           5),
    REFUSE("v1: network.default_deny_hosts is unknown",
           P("[network]\ndefault_deny_hosts = [\"a.example\"]\n"), "network.default_deny_hosts", 5),
    REFUSE("v1: network.default_dns is unknown", P("[network]\ndefault_dns = \"strict\"\n"),
           "network.default_dns", 5),
    REFUSE("v2: resolvers in a profile", P2("resolvers = [\"192.0.2.1\"]\n"),
           "profiles.claude.resolvers", 4),
    REFUSE("v2: allow_hosts not an array", P2("allow_hosts = \"a.example\"\n"),
           "profiles.claude.allow_hosts", 4),
    REFUSE("v2: allow_hosts item not a string", P2("allow_hosts = [\"a.example\", 3]\n"),
           "profiles.claude.allow_hosts[1]", 4),
    REFUSE("v2: uppercase", P2("allow_hosts = [\"Api.example.com\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    REFUSE("v2: trailing dot", P2("allow_hosts = [\"api.example.com.\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    REFUSE("v2: non-ASCII", P2("allow_hosts = [\"b\u00fccher.example\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    REFUSE("v2: IPv4 literal", P2("deny_hosts = [\"a.example\", \"192.0.2.1\"]\n"),
           "profiles.claude.deny_hosts[1]", 4),
    REFUSE("v2: single label", P2("allow_hosts = [\"localhost\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    REFUSE("v2: wildcard over a TLD", P2("allow_hosts = [\"*.com\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    REFUSE("v2: wildcard alone", P2("allow_hosts = [\"*\"]\n"), "profiles.claude.allow_hosts[0]",
           4),
    REFUSE("v2: misplaced wildcard", P2("allow_hosts = [\"a.*.example.com\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    REFUSE("v2: partial wildcard label", P2("allow_hosts = [\"*api.example.com\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    REFUSE("v2: underscore", P2("allow_hosts = [\"_x.example.com\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    /* -- environment values and the default command (issue 26) --------- */
    ACCEPT("v2: environment and command",
           P2("env = { TOKEN = \"env:TOKEN\" }\n"
              "environment = { IS_SANDBOX = \"1\", ANTHROPIC_BASE_URL = \"http://api.example:8080; "
              "$(not a shell)\" }\n"
              "command = [\"claude\", \"--continue\", \"\"]\n"),
           check_v2_environment_command),
    REFUSE("v1: environment is unknown", P("environment = { A = \"1\" }\n"),
           "profiles.claude.environment", 4),
    REFUSE("v1: command is unknown", P("command = [\"claude\"]\n"), "profiles.claude.command", 4),
    REFUSE("v2: environment name in env too",
           P2("env = { TOKEN = \"env:TOKEN\" }\nenvironment = { TOKEN = \"plain\" }\n"),
           "profiles.claude.environment.TOKEN", 5),
    REFUSE("v2: environment value not a string", P2("environment = { A = 1 }\n"),
           "profiles.claude.environment.A", 4),
    REFUSE("v2: environment name invalid", P2("environment = { \"A-B\" = \"1\" }\n"),
           "profiles.claude.environment.A-B", 4),
    REFUSE("v2: environment name of Lazaret's",
           P2("environment = { LAZARET_ESCALATE_CAPABILITY = \"x\" }\n"),
           "profiles.claude.environment.LAZARET_ESCALATE_CAPABILITY", 4),
    REFUSE("v2: command is a string", P2("command = \"claude --continue\"\n"),
           "profiles.claude.command", 4),
    REFUSE("v2: command empty", P2("command = []\n"), "profiles.claude.command", 4),
    REFUSE("v2: command with an empty program", P2("command = [\"\", \"x\"]\n"),
           "profiles.claude.command[0]", 4),
    REFUSE("v2: command word not a string", P2("command = [\"claude\", 1]\n"),
           "profiles.claude.command[1]", 4),
    REFUSE("v2: URL instead of a name", P2("allow_hosts = [\"https://api.example.com/\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    REFUSE("v2: label of 64", P2("allow_hosts = [\"" LABEL64 ".example.com\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    ACCEPT("v2: label of 63", P2("allow_hosts = [\"" LABEL63 ".example.com\"]\n"), NULL),
    REFUSE("v2: name of 254",
           P2("allow_hosts = [\"" LABEL63 "." LABEL63 "." LABEL63 "." X57 "x"
              ".com\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    ACCEPT("v2: name of 253",
           P2("allow_hosts = [\"" LABEL63 "." LABEL63 "." LABEL63 "." X57 ".com\"]\n"), NULL),
    REFUSE("v2: bad pattern in network defaults",
           P2("[network]\ndefault_deny_hosts = [\"ok.example\", \"Bad.example\"]\n"),
           "network.default_deny_hosts[1]", 5),
    REFUSE("v2: dns misspelt", P2("dns = \"STRICT\"\n"), "profiles.claude.dns", 4),
    REFUSE("v2: dns not a string", P2("dns = true\n"), "profiles.claude.dns", 4),
    REFUSE("v2: default_dns misspelt", P2("[network]\ndefault_dns = \"off\"\n"),
           "network.default_dns", 5),
    REFUSE("v2: resolvers not an array", P2("[network]\nresolvers = \"192.0.2.1\"\n"),
           "network.resolvers", 5),
    REFUSE("v2: resolvers empty", P2("[network]\nresolvers = []\n"), "network.resolvers", 5),
    REFUSE("v2: resolver with a prefix length", P2("[network]\nresolvers = [\"192.0.2.1/32\"]\n"),
           "network.resolvers[0]", 5),
    REFUSE("v2: resolver with a port", P2("[network]\nresolvers = [\"192.0.2.1:53\"]\n"),
           "network.resolvers[0]", 5),
    REFUSE("v2: IPv6 resolver", P2("[network]\nresolvers = [\"::1\"]\n"), "network.resolvers[0]",
           5),
    REFUSE("v2: resolver by name", P2("[network]\nresolvers = [\"dns.example.com\"]\n"),
           "network.resolvers[0]", 5),
    REFUSE("v2: resolver with a leading zero", P2("[network]\nresolvers = [\"192.0.2.01\"]\n"),
           "network.resolvers[0]", 5),
    REFUSE("v2: four resolvers",
           P2("[network]\nresolvers = [\"192.0.2.1\", \"192.0.2.2\", \"192.0.2.3\",\n"
              "\"192.0.2.4\"]\n"),
           "network.resolvers[3]", 6),
    REFUSE("v2: resolver 0.0.0.0", P2("[network]\nresolvers = [\"0.0.0.0\"]\n"),
           "network.resolvers[0]", 5),
    REFUSE("v2: resolver broadcast", P2("[network]\nresolvers = [\"255.255.255.255\"]\n"),
           "network.resolvers[0]", 5),
    REFUSE("v2: resolver multicast", P2("[network]\nresolvers = [\"224.0.0.251\"]\n"),
           "network.resolvers[0]", 5),
    REFUSE("v2: resolver repeated", P2("[network]\nresolvers = [\"192.0.2.1\", \"192.0.2.1\"]\n"),
           "network.resolvers[1]", 5),
    REFUSE("v2: resolver not a string", P2("[network]\nresolvers = [53]\n"), "network.resolvers[0]",
           5),
    REFUSE("v2: same pattern allowed and denied",
           P2("allow_hosts = [\"x.example\", \"a.example\"]\ndeny_hosts = [\"a.example\"]\n"),
           "profiles.claude.allow_hosts[1]", 4),
    REFUSE("v2: same wildcard allowed and denied",
           P2("deny_hosts = [\"*.example.com\"]\nallow_hosts = [\"*.example.com\"]\n"),
           "profiles.claude.allow_hosts[0]", 5),
    REFUSE("v2: profile allow against a network deny",
           P2("allow_hosts = [\"a.example\"]\n[network]\ndefault_deny_hosts = [\"a.example\"]\n"),
           "profiles.claude.allow_hosts[0]", 4),
    REFUSE("v2: network allow against a profile deny",
           P2("deny_hosts = [\"a.example\"]\n[network]\ndefault_allow_hosts = [\"a.example\"]\n"),
           "network.default_allow_hosts[0]", 6),
    REFUSE("v2: network allow against a network deny",
           P2("[network]\ndefault_allow_hosts = [\"a.example\"]\n"
              "default_deny_hosts = [\"a.example\"]\n"),
           "network.default_allow_hosts[0]", 5),
};

/* ---- the corpus runner ------------------------------------------------ */

static void run_case(void **state)
{
    const schema_case *tc = *state;
    lz_config_doc *const sentinel = (lz_config_doc *) (uintptr_t) 0x1;
    lz_config_doc *doc = sentinel;
    lz_error *err = NULL;
    int r = lz_config_doc_parse(tc->toml, strlen(tc->toml), LABEL, &doc, &err);

    if (!tc->keypath) {
        if (r != 0)
            fail_msg("'%s': expected acceptance, got: %s", tc->name,
                     err ? err->message : "(no error)");
        assert_null(err);
        assert_non_null(doc);
        assert_ptr_not_equal(doc, sentinel);
        if (tc->check)
            tc->check(doc);
        lz_config_doc_free(doc);
        return;
    }

    if (r != -1) {
        if (r == 0 && doc != sentinel)
            lz_config_doc_free(doc);
        fail_msg("'%s': expected refusal at %s, but the document was accepted", tc->name,
                 tc->keypath);
    }
    /* The error contract: ret untouched, an error with a message. */
    assert_ptr_equal(doc, sentinel);
    assert_non_null(err);
    assert_non_null(err->message);
    const char *msg = err->message;
    if (getenv("LZ_TEST_VERBOSE"))
        print_message("%s\n  hint: %s\n", msg, err->hint ? err->hint : "(none)");
    if (strncmp(msg, LABEL ":", strlen(LABEL ":")) != 0)
        fail_msg("'%s': message does not start with the label: %s", tc->name, msg);
    /* The exact key path: "...: KEYPATH: what". */
    char *needle = NULL;
    if (asprintf(&needle, ": %s: ", tc->keypath) < 0)
        fail_msg("out of memory");
    bool has_kp = strstr(msg, needle) != NULL;
    free(needle);
    if (!has_kp)
        fail_msg("'%s': message lacks the key path '%s': %s", tc->name, tc->keypath, msg);
    if (tc->line) {
        char *want = NULL;
        if (asprintf(&want, LABEL ":%u:", tc->line) < 0)
            fail_msg("out of memory");
        bool ok = strncmp(msg, want, strlen(want)) == 0;
        free(want);
        if (!ok)
            fail_msg("'%s': expected line %u: %s", tc->name, tc->line, msg);
    }
    lz_error_free(err);
}

/* ---- further tests ---------------------------------------------------- */

static void test_profile_lookup_exact(void **state)
{
    (void) state;
    static const char text[] = HEAD "[profiles.claude]\nimage = \"lower\"\n"
                                    "[profiles.Claude]\nimage = \"upper\"\n"
                                    "[profiles.\"claude.dev\"]\nimage = \"dev\"\n";
    lz_config_doc *doc = NULL;
    lz_error *err = NULL;
    assert_int_equal(lz_config_doc_parse(text, strlen(text), LABEL, &doc, &err), 0);
    assert_null(err);
    assert_int_equal(doc->n_profiles, 3);
    const lz_profile_decl *p = lz_config_doc_profile(doc, "claude");
    assert_non_null(p);
    assert_string_equal(p->image, "lower");
    p = lz_config_doc_profile(doc, "Claude");
    assert_non_null(p);
    assert_string_equal(p->image, "upper");
    p = lz_config_doc_profile(doc, "claude.dev");
    assert_non_null(p);
    assert_string_equal(p->image, "dev");
    assert_null(lz_config_doc_profile(doc, "CLAUDE"));
    assert_null(lz_config_doc_profile(doc, "claud"));
    assert_null(lz_config_doc_profile(doc, "claude "));
    assert_null(lz_config_doc_profile(doc, "claudee"));
    assert_null(lz_config_doc_profile(doc, "claude.DEV"));
    assert_null(lz_config_doc_profile(doc, ""));
    lz_config_doc_free(doc);
}

/* A valid document padded with a comment to exactly `size` bytes. */
static char *padded_doc(size_t size)
{
    static const char text[] = HEAD PROF "#";
    size_t n = strlen(text);
    assert_true(size > n + 1);
    char *buf = malloc(size);
    assert_non_null(buf);
    memcpy(buf, text, n);
    memset(buf + n, 'x', size - n - 1);
    buf[size - 1] = '\n';
    return buf;
}

static void test_size_limit(void **state)
{
    (void) state;
    lz_config_doc *doc = NULL;
    lz_error *err = NULL;

    /* Exactly the limit (1,048,576 bytes) is accepted. */
    char *buf = padded_doc(LZ_CONFIG_MAX_BYTES);
    assert_int_equal(lz_config_doc_parse(buf, LZ_CONFIG_MAX_BYTES, LABEL, &doc, &err), 0);
    assert_null(err);
    assert_non_null(lz_config_doc_profile(doc, "claude"));
    lz_config_doc_free(doc);
    free(buf);

    /* One byte more is refused before parsing. */
    doc = NULL;
    buf = padded_doc(LZ_CONFIG_MAX_BYTES + 1);
    assert_int_equal(lz_config_doc_parse(buf, LZ_CONFIG_MAX_BYTES + 1, LABEL, &doc, &err), -1);
    assert_null(doc);
    assert_non_null(err);
    assert_true(strncmp(err->message, LABEL ":", strlen(LABEL ":")) == 0);
    assert_non_null(strstr(err->message, "1048576"));
    lz_error_free(err);
    free(buf);
}

static void expect_refused_raw(const char *what, const char *buf, size_t len)
{
    lz_config_doc *doc = NULL;
    lz_error *err = NULL;
    int r = lz_config_doc_parse(buf, len, LABEL, &doc, &err);
    if (r != -1) {
        lz_config_doc_free(doc);
        fail_msg("%s: expected refusal", what);
    }
    assert_null(doc);
    assert_non_null(err);
    if (strncmp(err->message, LABEL ":", strlen(LABEL ":")) != 0)
        fail_msg("%s: message does not start with the label: %s", what, err->message);
    lz_error_free(err);
}

static void test_raw_nul_refused(void **state)
{
    (void) state;
    /* sizeof - 1: the literal's own terminator is not part of the input. */
    static const char in_comment[] = HEAD PROF "# a\0b\n";
    static const char in_string[] = HEAD "[profiles.claude]\nimage = \"deb\0ian\"\n";
    static const char in_key[] = HEAD PROF "is\0olate_gitignored = true\n";
    static const char at_end[] = HEAD PROF "\0";
    static const char at_start[] = "\0" HEAD PROF;
    static const char before_garbage[] = HEAD PROF "\0bogus = 1\n";
    expect_refused_raw("NUL in a comment", in_comment, sizeof(in_comment) - 1);
    expect_refused_raw("NUL in a string", in_string, sizeof(in_string) - 1);
    expect_refused_raw("NUL in a key", in_key, sizeof(in_key) - 1);
    expect_refused_raw("NUL as the last byte", at_end, sizeof(at_end) - 1);
    expect_refused_raw("NUL as the first byte", at_start, sizeof(at_start) - 1);
    expect_refused_raw("NUL hiding a later line", before_garbage, sizeof(before_garbage) - 1);
}

static void test_raw_invalid_utf8_refused(void **state)
{
    (void) state;
    static const char *const docs[] = {
        HEAD PROF "# \xff\n",
        HEAD PROF "# \x80\n",
        HEAD "[profiles.claude]\nimage = \"deb\xc3\"\n",
        HEAD "[profiles.claude]\nimage = \"\xf4\x90\x80\x80\"\n", /* > U+10FFFF */
        HEAD "[profiles.claude]\nimage = \"\xe0\x80\xaf\"\n",     /* overlong */
        HEAD PROF "persistent_dirs = [\"/\xed\xbf\xbf\"]\n",      /* surrogate */
        HEAD "[profiles.\"a\xfe\"]\nimage = \"x\"\n",
        HEAD PROF "\xc3", /* truncated at EOF */
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        char what[64];
        snprintf(what, sizeof(what), "invalid UTF-8 document %zu", i);
        expect_refused_raw(what, docs[i], strlen(docs[i]));
    }
}

static void test_not_nul_terminated(void **state)
{
    (void) state;
    /* The decoder reads exactly len bytes: a valid prefix followed by junk
     * that is outside len is accepted; the same junk inside len refuses. */
    static const char text[] = HEAD PROF "bogus = 1\n";
    size_t valid_len = strlen(HEAD PROF);
    char *buf = malloc(valid_len);
    assert_non_null(buf);
    memcpy(buf, text, valid_len); /* no terminator */
    lz_config_doc *doc = NULL;
    lz_error *err = NULL;
    assert_int_equal(lz_config_doc_parse(buf, valid_len, LABEL, &doc, &err), 0);
    lz_config_doc_free(doc);
    free(buf);
    expect_refused_raw("junk inside len", text, strlen(text));
}

static void test_error_hint_and_null_err(void **state)
{
    (void) state;
    static const char text[] = P("bogus = 1\n");
    lz_config_doc *doc = NULL;
    lz_error *err = NULL;
    assert_int_equal(lz_config_doc_parse(text, strlen(text), LABEL, &doc, &err), -1);
    assert_non_null(err);
    assert_non_null(err->hint);
    assert_non_null(strstr(err->hint, "image"));
    lz_error_free(err);
    err = NULL;
    /* err == NULL is allowed. */
    assert_int_equal(lz_config_doc_parse(text, strlen(text), LABEL, &doc, NULL), -1);
    assert_null(doc);
    /* An env literal's value never appears in the diagnostic. */
    static const char secret[] = P("env = { TOKEN = \"s3cr3t-value\" }\n");
    assert_int_equal(lz_config_doc_parse(secret, strlen(secret), LABEL, &doc, &err), -1);
    assert_null(strstr(err->message, "s3cr3t-value"));
    assert_true(!err->hint || !strstr(err->hint, "s3cr3t-value"));
    lz_error_free(err);
}

/* The diagnostics of v2: FILE:LINE:COL, the refused value, and a fix that
 * fits the value. */
static void expect_diag(const char *text, const char *msg_part, const char *hint_part)
{
    lz_config_doc *doc = NULL;
    lz_error *err = NULL;
    if (lz_config_doc_parse(text, strlen(text), LABEL, &doc, &err) != -1)
        fail_msg("accepted: %s", text);
    assert_non_null(err);
    if (!strstr(err->message, msg_part))
        fail_msg("message '%s' lacks '%s'", err->message, msg_part);
    if (!err->hint || !strstr(err->hint, hint_part))
        fail_msg("hint '%s' lacks '%s'", err->hint ? err->hint : "(none)", hint_part);
    lz_error_free(err);
}

static void test_v2_diagnostics(void **state)
{
    (void) state;
    expect_diag(P2("allow_hosts = [\"Api.Example.com.\"]\n"),
                LABEL ":4:16: profiles.claude.allow_hosts[0]: 'Api.Example.com.' is not a host "
                      "pattern: uppercase",
                "write \"api.example.com\"");
    expect_diag(P2("allow_hosts = [\"a.example\", \"api.example.com.\"]\n"),
                LABEL ":4:29: profiles.claude.allow_hosts[1]",
                "write \"api.example.com\" (no "
                "trailing dot)");
    expect_diag(P2("allow_hosts = [\"b\u00fccher.example\"]\n"), "non-ASCII", "xn--");
    expect_diag(P2("allow_hosts = [\"192.0.2.1\"]\n"), "IPv4 address",
                "allow_egress = [\"192.0.2.1/32\"]");
    expect_diag(P2("deny_hosts = [\"192.0.2.1\"]\n"), "IPv4 address",
                "deny_egress = [\"192.0.2.1/32\"]");
    expect_diag(P2("allow_hosts = [\"192.0.2.0/24\"]\n"), "a character other than",
                "allow_egress = [\"192.0.2.0/24\"]");
    expect_diag(P2("allow_hosts = [\"" LABEL63 "." LABEL63 "." LABEL63 "." X57 "x.com\"]\n"),
                "longer than 253", "at least two labels");
    expect_diag(P2("allow_hosts = [\"localhost\"]\n"), "single label", "at least two labels");
    expect_diag(P2("allow_hosts = [\"a.*.example.com\"]\n"), "whole first label",
                "\"*.example.com\"");
    expect_diag(P2("allow_hosts = [\"" LABEL64 ".example.com\"]\n"), "longer than 63",
                "at least two labels");
    expect_diag(P2("allow_hosts = [\"a.example\"]\ndeny_hosts = [\"a.example\"]\n"),
                LABEL ":4:16: profiles.claude.allow_hosts[0]: 'a.example' is both allowed and "
                      "denied for profile 'claude' (denied by profiles.claude.deny_hosts[0] at "
                      "line 5, column 15)",
                "more specific pattern");
    expect_diag(P2("[network]\nresolvers = [\"192.0.2.1\", \"192.0.2.2\", \"192.0.2.3\", "
                   "\"192.0.2.4\"]\n"),
                LABEL ":5:53: network.resolvers[3]: more than 3 resolvers", "at most three");
    expect_diag(P2("[network]\nresolvers = [\"0.0.0.0\"]\n"), "this network", "unicast");
    expect_diag(P2("[network]\nresolvers = [\"1.2.3.4/32\"]\n"), "not an IPv4 address",
                "no prefix length");
    expect_diag(P2("dns = \"off\"\n"), "expected \"strict\" or \"forward\", found 'off'",
                "never leave the machine");
    /* A v1 file: the new keys are unknown, and the hint says which schema
     * has them; a v2 file's unknown key gets the ordinary hint. */
    expect_diag(P("allow_hosts = [\"a.example\"]\n"), "unknown field 'allow_hosts'",
                "needs schema = \"lazaret-trusted-host-config-v2\"");
    expect_diag(P2("resolvers = [\"192.0.2.1\"]\n"), "unknown field 'resolvers'", "remove");
}

int main(void)
{
    static const struct CMUnitTest extra[] = {
        cmocka_unit_test(test_v2_diagnostics),
        cmocka_unit_test(test_profile_lookup_exact),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_raw_nul_refused),
        cmocka_unit_test(test_raw_invalid_utf8_refused),
        cmocka_unit_test(test_not_nul_terminated),
        cmocka_unit_test(test_error_hint_and_null_err),
    };
    size_t n_corpus = sizeof(corpus) / sizeof(corpus[0]);
    size_t n_extra = sizeof(extra) / sizeof(extra[0]);
    struct CMUnitTest *tests = calloc(n_corpus + n_extra, sizeof(*tests));
    if (!tests)
        return 1;
    for (size_t i = 0; i < n_corpus; i++) {
        tests[i].name = corpus[i].name;
        tests[i].test_func = run_case;
        tests[i].initial_state = (void *) &corpus[i];
    }
    for (size_t i = 0; i < n_extra; i++)
        tests[n_corpus + i] = extra[i];
    int r = _cmocka_run_group_tests("schema", tests, n_corpus + n_extra, NULL, NULL);
    free(tests);
    return r;
}
