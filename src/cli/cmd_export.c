/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret export kubernetes PROFILE [--workspace DIR] [-o FILE] [options]
 *
 * Loads and resolves the profile exactly as `run` does, then writes the
 * Kubernetes objects that run it under agent-sandbox on gVisor (YAML, on
 * stdout or FILE) and the mapping report (on stderr, text or JSON).
 * docs/kubernetes.md. No environment value is read into the output: the
 * resolved values are wiped before anything is built.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/error.h"
#include "common/options.h"
#include "common/text.h"
#include "common/util.h"
#include "export/kubernetes.h"
#include "export/yaml.h"
#include "fs/atomic.h"
#include "fs/confined.h"

const char lz_usage_export[] =
    "Usage: lazaret [--config FILE] export kubernetes PROFILE [--workspace DIR] [-o FILE]\n"
    "                                  [OPTION...]\n"
    "\n"
    "Write the profile as Kubernetes objects for the agent-sandbox controller on a\n"
    "gVisor RuntimeClass: PersistentVolumeClaims for the workspace and each\n"
    "persistent directory, a NetworkPolicy with the profile's egress policy, and a\n"
    "Sandbox (agents.x-k8s.io/v1beta1). The configuration is loaded exactly as\n"
    "'lazaret run' loads it. A report on stderr says, for every profile field,\n"
    "whether it was mapped, approximated or could not be mapped, and why.\n"
    "\n"
    "Options:\n"
    "  --workspace DIR       the project directory (as for 'run')\n"
    "  -o, --output FILE     write the YAML to FILE instead of stdout\n"
    "  --name NAME           base name of the objects (default\n"
    "                        lazaret-PROFILE-<8 hex digits of the Domain ID>)\n"
    "  --namespace NS        write metadata.namespace\n"
    "  --runtime-class NAME  the pod's runtimeClassName (default gvisor)\n"
    "  --with-runtime-class  also write the RuntimeClass (handler runsc)\n"
    "  --storage-class NAME  the claims' storageClassName (default: the cluster's)\n"
    "  --workspace-size Q    the workspace claim's size (default 10Gi)\n"
    "  --persistent-size Q   each persistent directory's claim size (default 5Gi)\n"
    "  --image REF           the image the cluster pulls instead of the profile's\n"
    "  --image-digest D      pin the image by this sha256:... manifest digest\n"
    "  --git-readonly        mount the workspace's .git read-only (for a claim that\n"
    "                        holds the repository before the Sandbox starts)\n"
    "  --run-as-user UID[:GID]  run the agent as this user (runAsNonRoot, fsGroup)\n"
    "  --memory Q            the container's memory limit (default 4Gi)\n"
    "  --ephemeral-storage Q the container's ephemeral-storage limit (default 10Gi)\n"
    "  --no-cluster-dns      no egress to the cluster's DNS\n"
    "  --template            write a SandboxTemplate, SandboxWarmPool and\n"
    "                        SandboxClaim instead of a Sandbox\n"
    "  --warm-pool N         the warm pool's replicas (with --template; default 1)\n"
    "  --report FORMAT       the report as 'text' (default) or 'json', on stderr\n"
    "  --strict              write nothing and exit 1 when a security-relevant field\n"
    "                        is approximated or cannot be mapped, unless accepted\n"
    "  --accept FIELD        with --strict: accept this report field's weakening, as\n"
    "                        the report names it (repeatable)\n"
    "\n"
    "Exit status: 0 written, 1 failure or --strict refusal, 2 usage error.\n";

static void print_report_text(const lz_k8s_export *e, const char *profile, size_t strict)
{
    fprintf(stderr, "lazaret export: profile '%s': %zu objects; the mapping of its fields:\n",
            profile, json_array_size(e->documents));
    for (size_t i = 0; i < e->n_entries; i++) {
        const lz_map_entry *m = &e->entries[i];
        bool weaker = m->security_relevant && m->status != LZ_MAP_MAPPED;
        fprintf(stderr, "  %-12s %s%s: %s\n", lz_map_status_name(m->status), m->field,
                !weaker       ? ""
                : m->accepted ? " [security, accepted]"
                              : " [security]",
                m->reason);
    }
    if (e->secret_command)
        fprintf(stderr,
                "lazaret export: create the Secret (bash, values from your "
                "environment, none on a command line):\n  %s\n",
                e->secret_command);
    if (strict)
        fprintf(stderr,
                "lazaret export: %zu security-relevant field%s approximated or not "
                "mappable (marked [security])\n",
                strict, strict == 1 ? " is" : "s are");
}

static void print_report_json(const lz_k8s_export *e, const char *profile, size_t strict)
{
    json_t *entries = json_array();
    for (size_t i = 0; i < e->n_entries; i++) {
        const lz_map_entry *m = &e->entries[i];
        json_array_append_new(entries, json_pack("{s:s, s:s, s:b, s:b, s:s}", "field", m->field,
                                                 "status", lz_map_status_name(m->status),
                                                 "security_relevant", m->security_relevant,
                                                 "accepted", m->accepted, "reason", m->reason));
    }
    json_t *r = json_pack("{s:s, s:I, s:I, s:o}", "profile", profile, "objects",
                          (json_int_t) json_array_size(e->documents), "strict_failures",
                          (json_int_t) strict, "fields", entries);
    if (e->secret_command)
        json_object_set_new(r, "secret_command", json_string(e->secret_command));
    json_dumpf(r, stderr, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    fputc('\n', stderr);
    json_decref(r);
}

/* Write every document to out; 0, or -1 with *err. */
static int write_yaml(FILE *out, const lz_k8s_export *e, const char *label, lz_error **err)
{
    size_t i;
    json_t *doc;
    json_array_foreach(e->documents, i, doc)
    {
        if (lz_yaml_document(out, doc) < 0)
            return lz_error_set(err, errno, "cannot write object %zu as YAML", i);
    }
    if (fflush(out) != 0 || ferror(out))
        return lz_error_set(err, errno, "cannot write %s", label);
    return 0;
}

/* path as an absolute path with "." and ".." taken lexically: the place
 * the path names as written. A link ".." would climb out of is never
 * looked at, and no component of the result is followed as a link
 * (write_file). NULL for an empty path or one that ends in a directory. */
static char *absolute_lexical(const char *path)
{
    size_t n = strlen(path);
    if (n == 0 || path[n - 1] == '/')
        return NULL;
    _cleanup_free_ char *cwd = NULL;
    if (path[0] != '/' && !(cwd = getcwd(NULL, 0)))
        return NULL;
    _cleanup_free_ char *joined = cwd ? lz_xasprintf("%s/%s", cwd, path) : lz_xstrdup(path);
    char *out = lz_xmalloc(strlen(joined) + 2);
    size_t len = 0;
    for (char *save = NULL, *c = strtok_r(joined, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            while (len > 0 && out[len - 1] != '/')
                len--;
            if (len > 0)
                len--;
            continue;
        }
        out[len++] = '/';
        memcpy(out + len, c, strlen(c));
        len += strlen(c);
    }
    out[len] = '\0';
    if (len == 0 || strrchr(out, '/')[1] == '\0') {
        free(out);
        return NULL;
    }
    return out;
}

/* -o FILE: written beside it and renamed over it (lz_write_atomic), so a
 * failed export never leaves half a file that kubectl would apply. Its directory is reached
 * without following any symlink (lz_walk_nofollow): FILE may lie in a
 * workspace a sandbox writes, which could otherwise lead the file into
 * another directory of the developer's. */
static int write_file(const char *path, const lz_k8s_export *e, lz_error **err)
{
    _cleanup_free_ char *abs = absolute_lexical(path);
    if (!abs) {
        _cleanup_free_ char *shown = lz_text_printable(path);
        lz_error_set(err, EINVAL, "cannot write to '%s': not a file name", shown);
        return lz_error_hint(err, "give -o a file, e.g. -o agent.yaml");
    }
    char *slash = strrchr(abs, '/');
    _cleanup_free_ char *dir =
        slash == abs ? lz_xstrdup("/") : lz_xstrndup(abs, (size_t) (slash - abs));
    const char *base = slash + 1;
    _cleanup_close_ int dirfd = lz_walk_nofollow(dir, NULL, err);
    if (dirfd < 0) {
        if (*err && (*err)->errnum == ELOOP)
            return lz_error_hint(err, "the export never follows a symbolic link to its output "
                                      "(it may lie in a workspace a sandbox writes); give the "
                                      "directory's real path");
        return lz_error_hint(err, "check that the directory of %s exists", abs);
    }
    /* The whole YAML in memory first: written in one piece (fs/atomic.h,
     * whose temporary name is random: one an agent could predict it could
     * plant first and make the export fail, attack round i14). */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return lz_error_set(err, errno, "cannot write %s", abs);
    int rc = write_yaml(mem, e, abs, err);
    if (fclose(mem) != 0 && rc == 0)
        rc = lz_error_set(err, errno, "cannot write %s", abs);
    _cleanup_free_ char *what = lz_xasprintf("the output %s", abs);
    if (rc == 0 && lz_write_atomic(dirfd, base, buf, len, 0644, 0, what, err) < 0)
        rc = lz_error_hint(err, "check that %s is writable and that %s is not a directory", dir,
                           abs);
    free(buf);
    return rc;
}

/* UID or UID:GID (GID defaults to UID), decimal, each 1..2^31-1. */
static int parse_ids(const char *s, lz_k8s_options *o)
{
    size_t d = strspn(s, "0123456789");
    if (d == 0 || (s[d] != '\0' && (s[d] != ':' || s[d + 1] == '\0' ||
                                    strspn(s + d + 1, "0123456789") != strlen(s + d + 1))))
        return -1;
    char *end;
    errno = 0;
    long uid = strtol(s, &end, 10), gid = uid;
    if (errno || end == s || (*end != '\0' && *end != ':'))
        return -1;
    if (*end == ':') {
        const char *g = end + 1;
        gid = strtol(g, &end, 10);
        if (errno || end == g || *end)
            return -1;
    }
    if (uid <= 0 || gid <= 0 || uid > 2147483647L || gid > 2147483647L || s[0] == '+' ||
        s[0] == ' ')
        return -1;
    o->run_as = true;
    o->run_as_user = uid;
    o->run_as_group = gid;
    return 0;
}

static int parse_count(const char *s, unsigned *ret)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < 1 || v > 1000)
        return -1;
    *ret = (unsigned) v;
    return 0;
}

int lz_cmd_export(int argc, char **argv, const lz_global_options *g)
{
    if (argc < 2)
        return lz_cli_usage_error("export", "needs a target: kubernetes");
    if (strcmp(argv[1], "kubernetes") != 0)
        return lz_cli_usage_error("export", "unknown target '%s' (there is: kubernetes)", argv[1]);
    const char *profile = NULL, *workspace = NULL, *output = NULL, *report = "text";
    bool strict = false;
    lz_k8s_options o = { 0 };
    enum {
        OPT_NAME,
        OPT_NAMESPACE,
        OPT_RUNTIME_CLASS,
        OPT_STORAGE_CLASS,
        OPT_WORKSPACE_SIZE,
        OPT_PERSISTENT_SIZE,
        OPT_IMAGE,
        OPT_IMAGE_DIGEST,
        OPT_MEMORY,
        OPT_EPHEMERAL_STORAGE,
        OPT_WORKSPACE,
        OPT_OUTPUT,
        OPT_REPORT,
        OPT_WARM_POOL,
        OPT_RUN_AS_USER,
        OPT_ACCEPT,
        OPT_WITH_RUNTIME_CLASS,
        OPT_GIT_READONLY,
        OPT_NO_CLUSTER_DNS,
        OPT_TEMPLATE,
        OPT_STRICT,
    };
    static const lz_option options[] = {
        { "name", 0, "NAME", OPT_NAME },
        { "namespace", 0, "NS", OPT_NAMESPACE },
        { "runtime-class", 0, "NAME", OPT_RUNTIME_CLASS },
        { "storage-class", 0, "NAME", OPT_STORAGE_CLASS },
        { "workspace-size", 0, "Q", OPT_WORKSPACE_SIZE },
        { "persistent-size", 0, "Q", OPT_PERSISTENT_SIZE },
        { "image", 0, "REF", OPT_IMAGE },
        { "image-digest", 0, "D", OPT_IMAGE_DIGEST },
        { "memory", 0, "Q", OPT_MEMORY },
        { "ephemeral-storage", 0, "Q", OPT_EPHEMERAL_STORAGE },
        { "workspace", 0, "DIR", OPT_WORKSPACE },
        { "output", 'o', "FILE", OPT_OUTPUT },
        { "report", 0, "FORMAT", OPT_REPORT },
        { "warm-pool", 0, "N", OPT_WARM_POOL },
        { "run-as-user", 0, "UID[:GID]", OPT_RUN_AS_USER },
        { "accept", 0, "FIELD", OPT_ACCEPT },
        { "with-runtime-class", 0, NULL, OPT_WITH_RUNTIME_CLASS },
        { "git-readonly", 0, NULL, OPT_GIT_READONLY },
        { "no-cluster-dns", 0, NULL, OPT_NO_CLUSTER_DNS },
        { "template", 0, NULL, OPT_TEMPLATE },
        { "strict", 0, NULL, OPT_STRICT },
    };
    /* Where each valued option of the export's own goes. */
    const char **slots[] = {
        [OPT_NAME] = &o.name,
        [OPT_NAMESPACE] = &o.namespace_name,
        [OPT_RUNTIME_CLASS] = &o.runtime_class,
        [OPT_STORAGE_CLASS] = &o.storage_class,
        [OPT_WORKSPACE_SIZE] = &o.workspace_size,
        [OPT_PERSISTENT_SIZE] = &o.persistent_size,
        [OPT_IMAGE] = &o.image,
        [OPT_IMAGE_DIGEST] = &o.image_digest,
        [OPT_MEMORY] = &o.memory,
        [OPT_EPHEMERAL_STORAGE] = &o.ephemeral_storage,
    };
    const char *accept[64];
    size_t n_accept = 0;
    const char *run_as = NULL;
    const char *warm_pool = NULL;
    lz_opt_parser p;
    lz_opt_init(&p, options, LZ_ARRAY_SIZE(options), argc, argv, 2);
    for (int opt; (opt = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        switch (opt) {
        case LZ_OPT_ERROR:
            return lz_cli_usage_error("export", "%s", p.error);
        case LZ_OPT_ARGUMENT:
            if (profile)
                return lz_cli_usage_error("export", "unexpected argument '%s'", p.arg);
            profile = p.arg;
            break;
        case OPT_WORKSPACE:
            workspace = p.value;
            break;
        case OPT_OUTPUT:
            output = p.value;
            break;
        case OPT_REPORT:
            report = p.value;
            break;
        case OPT_WARM_POOL:
            warm_pool = p.value;
            break;
        case OPT_RUN_AS_USER:
            run_as = p.value;
            break;
        case OPT_ACCEPT:
            if (n_accept == LZ_ARRAY_SIZE(accept))
                return lz_cli_usage_error("export", "--accept at most %zu times",
                                          LZ_ARRAY_SIZE(accept));
            accept[n_accept++] = p.value;
            break;
        case OPT_WITH_RUNTIME_CLASS:
            o.runtime_class_object = true;
            break;
        case OPT_GIT_READONLY:
            o.git_readonly = true;
            break;
        case OPT_NO_CLUSTER_DNS:
            o.no_cluster_dns = true;
            break;
        case OPT_TEMPLATE:
            o.form = LZ_K8S_FORM_TEMPLATE;
            break;
        case OPT_STRICT:
            strict = true;
            break;
        default:
            *slots[opt] = p.value;
            break;
        }
    }
    if (!profile)
        return lz_cli_usage_error("export", "needs a PROFILE");
    if (strcmp(report, "text") != 0 && strcmp(report, "json") != 0)
        return lz_cli_usage_error("export", "--report is 'text' or 'json'");
    if (warm_pool && o.form != LZ_K8S_FORM_TEMPLATE)
        return lz_cli_usage_error("export", "--warm-pool needs --template");
    if (warm_pool && parse_count(warm_pool, &o.warm_pool_replicas) < 0)
        return lz_cli_usage_error("export", "--warm-pool takes a count from 1 to 1000");
    if (n_accept && !strict)
        return lz_cli_usage_error("export", "--accept only means something with --strict");
    if (run_as && parse_ids(run_as, &o) < 0)
        return lz_cli_usage_error("export", "--run-as-user takes UID or UID:GID, numbers "
                                            "above 0");

    lz_resolved_config *cfg = lz_cli_load_profile(g, profile, workspace, LZ_LOAD_ENV_NAMES);
    if (!cfg)
        return LZ_EXIT_FAILURE;
    /* Nothing below needs a value; none may reach the output. */
    lz_resolved_config_forget_env_values(cfg);

    lz_error *err = NULL;
    lz_k8s_export e;
    int status = LZ_EXIT_FAILURE;
    if (lz_k8s_export_build(cfg, &o, &e, &err) < 0)
        goto fail;
    for (size_t i = 0; i < n_accept; i++)
        if (!lz_k8s_export_accept(&e, accept[i])) {
            _cleanup_free_ char *shown = lz_text_printable(accept[i]);
            lz_error_set(&err, 0, "--accept %s: the report has no such field", shown);
            lz_error_hint(&err, "name a field exactly as the report prints it, e.g. --accept "
                                "limits.processes");
            lz_k8s_export_clear(&e);
            goto fail;
        }
    size_t failures = lz_k8s_export_strict_failures(&e);
    if (strcmp(report, "json") == 0)
        print_report_json(&e, cfg->profile, failures);
    else
        print_report_text(&e, cfg->profile, failures);
    if (strict && failures) {
        lz_error_set(&err, 0,
                     "--strict: nothing written: %zu security-relevant field%s "
                     "approximated or not mappable",
                     failures, failures == 1 ? " is" : "s are");
        lz_error_hint(&err, "see the fields marked [security] above (or security_relevant in "
                            "--report json) and docs/kubernetes.md");
        lz_k8s_export_clear(&e);
        goto fail;
    }
    int rc = output ? write_file(output, &e, &err) : write_yaml(stdout, &e, "stdout", &err);
    lz_k8s_export_clear(&e);
    if (rc < 0)
        goto fail;
    status = LZ_EXIT_OK;
    goto out;
fail:
    lz_error_report(err, stderr);
    lz_error_free(err);
out:
    lz_resolved_config_free(cfg);
    return status;
}
