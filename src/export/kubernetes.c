/* SPDX-License-Identifier: Apache-2.0
 *
 * The objects of `lazaret export kubernetes` and the mapping report. Facts
 * about agent-sandbox (field names, what the controller does with them)
 * are from its v0.5.6 release and cited in docs/kubernetes.md.
 */
#include "export/kubernetes.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"
#include "export/netpolicy.h"
#include "oci/image.h"

#define SANDBOX_API "agents.x-k8s.io/v1beta1"
#define EXTENSIONS_API "extensions.agents.x-k8s.io/v1beta1"
#define LABEL_NAME "app.kubernetes.io/name"
#define LABEL_INSTANCE "app.kubernetes.io/instance"
#define LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
#define ANNOTATION_PROFILE "lazaret.dev/profile"
#define ANNOTATION_FINGERPRINT "lazaret.dev/configuration-fingerprint"
#define ANNOTATION_PATH "lazaret.dev/sandbox-path"
/* The longest base name: its derived names (base + "-p-" + 8 hex) stay
 * DNS labels (63), as Pod and Service names of the Sandbox must. */
#define BASE_NAME_MAX 52

const char *lz_map_status_name(lz_map_status s)
{
    switch (s) {
    case LZ_MAP_MAPPED:
        return "mapped";
    case LZ_MAP_APPROXIMATED:
        return "approximated";
    case LZ_MAP_NOT_MAPPABLE:
        return "not-mappable";
    default:
        return "?";
    }
}

typedef struct builder {
    const lz_resolved_config *cfg;
    const lz_k8s_options *o;
    lz_k8s_export *out;
    char *base;
    char *image;
    bool image_pinned;
    char *secret; /* the Secret the env entries name */
} builder;

__attribute__((format(printf, 5, 6))) static void
report(builder *b, const char *field, lz_map_status status, bool security, const char *fmt, ...)
{
    lz_k8s_export *e = b->out;
    e->entries = lz_xrealloc(e->entries, e->n_entries + 1, sizeof(*e->entries));
    va_list ap;
    va_start(ap, fmt);
    char *reason = NULL;
    if (vasprintf(&reason, fmt, ap) < 0)
        abort();
    va_end(ap);
    /* Host paths in a reason are raw bytes: kept printable and valid UTF-8
     * (\xNN), so the text and the JSON report can always carry them. */
    e->entries[e->n_entries++] = (lz_map_entry){
        .field = lz_text_printable(field),
        .status = status,
        .security_relevant = security,
        .reason = lz_text_printable(reason),
    };
    free(reason);
}

/* ---- names and values Kubernetes accepts ---------------------------------- */

/* RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most max. */
static bool dns_label(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char) s[i]) || isdigit((unsigned char) s[i]) || s[i] == '-'))
            return false;
    return true;
}

/* RFC 1123 subdomain: labels joined by '.', at most 253. */
static bool dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    _cleanup_free_ char *copy = lz_xstrdup(s);
    for (char *save = NULL, *l = strtok_r(copy, ".", &save); l; l = strtok_r(NULL, ".", &save))
        if (!dns_label(l, 63))
            return false;
    return s[0] != '.' && s[n - 1] != '.' && !strstr(s, "..");
}

/* A resource.Quantity of bytes as a user writes one: digits, an optional
 * fraction and a binary or decimal suffix ("10Gi", "500M"). */
static bool storage_quantity(const char *s)
{
    size_t d = strspn(s, "0123456789");
    if (d == 0 || d > 18)
        return false;
    /* Not zero: a limit of 0 is no limit, a claim of 0 none (attack round
     * i14b, S3). */
    if (strspn(s, "0.") == strspn(s, "0123456789."))
        return false;
    s += d;
    if (*s == '.') {
        size_t f = strspn(s + 1, "0123456789");
        if (f == 0 || f > 9)
            return false;
        s += 1 + f;
    }
    static const char *const suffixes[] = { "",  "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
                                            "k", "M",  "G",  "T",  "P",  "E" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(suffixes); i++)
        if (strcmp(s, suffixes[i]) == 0)
            return true;
    return false;
}

static bool sha256_digest(const char *s)
{
    if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
        return false;
    for (const char *p = s + 7; *p; p++)
        if (!(isdigit((unsigned char) *p) || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* The first 8 hex digits of a digest, for names. */
static char *hex8(const unsigned char md[static 4])
{
    return lz_xasprintf("%02x%02x%02x%02x", md[0], md[1], md[2], md[3]);
}

/* The default base name: "lazaret-" + the profile in DNS-label form + "-"
 * + 8 hex digits of SHA-256 over this machine's id, the user's uid and the
 * Domain ID. Two workspaces of one profile (two Domains locally) get two
 * Sandboxes, and so do two developers, or one on two machines, exporting
 * the same profile name for the same workspace path into one namespace
 * (attack round i14, S3: the Domain ID alone is only profile + path). */
static char *default_base(const lz_resolved_config *cfg)
{
    char slug[33];
    size_t n = 0;
    for (const char *p = cfg->profile; *p && n < sizeof(slug) - 1; p++) {
        char c = (char) tolower((unsigned char) *p);
        if (!(islower((unsigned char) c) || isdigit((unsigned char) c)))
            c = '-';
        if (c == '-' && (n == 0 || slug[n - 1] == '-'))
            continue;
        slug[n++] = c;
    }
    while (n > 0 && slug[n - 1] == '-')
        n--;
    slug[n] = '\0';
    char machine[64] = "";
    FILE *f = fopen("/etc/machine-id", "re");
    if (f) {
        if (!fgets(machine, sizeof(machine), f))
            machine[0] = '\0';
        fclose(f);
        machine[strcspn(machine, "\n")] = '\0';
    }
    if (!machine[0] && gethostname(machine, sizeof(machine) - 1) < 0)
        machine[0] = '\0';
    unsigned char md[SHA256_DIGEST_LENGTH];
    char uid[24];
    snprintf(uid, sizeof(uid), "%lu", (unsigned long) getuid());
    /* NUL-separated: "lazaret-k8s-name-v1", the machine id, the uid, then
     * the 32 bytes of the Domain ID. */
    static const char tag[] = "lazaret-k8s-name-v1";
    size_t ml = strlen(machine) + 1, ul = strlen(uid) + 1;
    unsigned char buf[sizeof(tag) + sizeof(machine) + sizeof(uid) + LZ_DIGEST_LEN];
    size_t len = 0;
    memcpy(buf + len, tag, sizeof(tag));
    len += sizeof(tag);
    memcpy(buf + len, machine, ml);
    len += ml;
    memcpy(buf + len, uid, ul);
    len += ul;
    memcpy(buf + len, cfg->domain_id, LZ_DIGEST_LEN);
    len += LZ_DIGEST_LEN;
    SHA256(buf, len, md);
    _cleanup_free_ char *hex = hex8(md);
    return n ? lz_xasprintf("lazaret-%s-%s", slug, hex) : lz_xasprintf("lazaret-%s", hex);
}

/* 8 hex digits of SHA-256(path): a persistent dir's claim name that stays
 * the same when other dirs are added or removed. */
static char *path_tag(const char *path)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *) path, strlen(path), md);
    return hex8(md);
}

/* ---- the image ------------------------------------------------------------- */

/* The reference without its tag: "reg:5000/a/b:tag" -> "reg:5000/a/b"
 * (a ':' after the last '/' starts the tag). */
static char *without_tag(const char *ref)
{
    const char *slash = strrchr(ref, '/');
    const char *colon = strrchr(slash ? slash : ref, ':');
    return colon ? lz_xstrndup(ref, (size_t) (colon - ref)) : lz_xstrdup(ref);
}

/* [a-z0-9]+ with single '.' or '_', double '_' or runs of '-' between:
 * one path component of a repository name. */
static bool path_component(const char *s, size_t n)
{
    if (n == 0 || !(islower((unsigned char) s[0]) || isdigit((unsigned char) s[0])))
        return false;
    for (size_t i = 1; i < n; i++) {
        if (islower((unsigned char) s[i]) || isdigit((unsigned char) s[i]))
            continue;
        size_t j = i;
        while (j < n && strchr("._-", s[j]))
            j++;
        size_t sep = j - i;
        if (sep == 0)
            return false; /* neither a name character nor a separator */
        bool ok =
            (sep == 1) || (sep == 2 && s[i] == '_' && s[i + 1] == '_') || strspn(s + i, "-") == sep;
        if (!ok || j == n)
            return false;
        i = j - 1;
    }
    return true;
}

/* host[:port]: labels of [A-Za-z0-9-] joined by '.', an optional port. */
static bool registry_host(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t hn = colon ? (size_t) (colon - s) : n;
    if (hn == 0 || s[0] == '-' || s[hn - 1] == '-' || s[0] == '.' || s[hn - 1] == '.')
        return false;
    for (size_t i = 0; i < hn; i++)
        if (!(isalnum((unsigned char) s[i]) || s[i] == '-' || s[i] == '.') ||
            (s[i] == '.' && s[i + 1] == '.'))
            return false;
    if (colon) {
        size_t pn = n - hn - 1;
        if (pn == 0 || pn > 5 || strspn(colon + 1, "0123456789") < pn ||
            strtoul(colon + 1, NULL, 10) > 65535)
            return false;
    }
    return true;
}

/* A registry image reference as the container runtimes parse it
 * (distribution's reference grammar, without IPv6 hosts):
 * [host[:port]/]path[/path...][:tag][@sha256:<64 hex>]. */
bool lz_k8s_registry_reference(const char *ref)
{
    size_t n = strlen(ref);
    if (n == 0 || n > 1024)
        return false;
    const char *at = strchr(ref, '@');
    size_t name_end = at ? (size_t) (at - ref) : n;
    if (at && !sha256_digest(at + 1))
        return false;
    /* The tag: after the last ':' that follows the last '/'. */
    const char *slash = memrchr(ref, '/', name_end);
    const char *colon =
        memrchr(slash ? slash : ref, ':', name_end - (size_t) ((slash ? slash : ref) - ref));
    if (colon) {
        size_t tn = name_end - (size_t) (colon - ref) - 1;
        if (tn == 0 || tn > 128 || !(isalnum((unsigned char) colon[1]) || colon[1] == '_'))
            return false;
        for (size_t i = 1; i < tn; i++)
            if (!(isalnum((unsigned char) colon[1 + i]) || strchr("_.-", colon[1 + i])))
                return false;
        name_end = (size_t) (colon - ref);
    }
    /* The first component is a registry host when it has a '.' or a ':', or
     * is localhost or has a capital letter (as the runtimes decide). */
    size_t first = strcspn(ref, "/");
    size_t start = 0;
    if (first < name_end) {
        bool host = memchr(ref, '.', first) || memchr(ref, ':', first) ||
                    (first == 9 && strncmp(ref, "localhost", 9) == 0);
        for (size_t i = 0; i < first && !host; i++)
            host = isupper((unsigned char) ref[i]);
        if (host) {
            if (!registry_host(ref, first))
                return false;
            start = first + 1;
        }
    }
    if (start >= name_end)
        return false;
    for (size_t i = start; i <= name_end;) {
        size_t len = strcspn(ref + i, "/");
        if (i + len > name_end)
            len = name_end - i;
        if (!path_component(ref + i, len))
            return false;
        i += len + 1;
    }
    return true;
}

static int choose_image(builder *b, lz_error **err)
{
    const char *ref = b->o->image ? b->o->image : b->cfg->image;
    const char *from = b->o->image ? "--image" : "the profile's image";
    bool registry = lz_image_reference_is_registry(ref);
    if (strncmp(ref, "docker://", 9) == 0)
        ref += 9;
    if (!registry || !lz_k8s_registry_reference(ref)) {
        _cleanup_free_ char *shown = lz_text_printable(ref);
        lz_error_set(err, 0, "%s '%s' is not an image a cluster can pull", from, shown);
        if (b->o->image)
            return lz_error_hint(err, "give a registry reference, e.g. "
                                      "--image registry.example/team/agent@sha256:<digest>");
        return lz_error_hint(err,
                             "push it to a registry the cluster reaches (skopeo copy %s "
                             "docker://REGISTRY/NAME) and pass --image REGISTRY/NAME@sha256:DIGEST",
                             shown);
    }
    const char *at = strstr(ref, "@sha256:");
    if (b->o->image_digest) {
        if (at && strcmp(at + 1, b->o->image_digest) != 0) {
            _cleanup_free_ char *shown = lz_text_printable(ref);
            lz_error_set(err, 0, "--image-digest %s contradicts the digest of '%s'",
                         b->o->image_digest, shown);
            return lz_error_hint(err, "leave out --image-digest, or give the image without its "
                                      "digest");
        }
        _cleanup_free_ char *name = at ? lz_xstrndup(ref, (size_t) (at - ref)) : lz_xstrdup(ref);
        _cleanup_free_ char *bare = without_tag(name);
        b->image = lz_xasprintf("%s@%s", bare, b->o->image_digest);
        b->image_pinned = true;
    } else {
        b->image = lz_xstrdup(ref);
        b->image_pinned = at && sha256_digest(at + 1);
    }
    _cleanup_free_ char *shown = lz_text_printable(b->image);
    if (b->image_pinned)
        report(b, "image", LZ_MAP_MAPPED, false, "%s: pinned by digest", shown);
    else
        report(b, "image", LZ_MAP_APPROXIMATED, true,
               "%s: by tag, which the registry can move; locally the Domain keeps the manifest "
               "it prepared. Pin it with --image-digest sha256:... or a reference with @sha256:",
               shown);
    return 0;
}

/* ---- objects ---------------------------------------------------------------- */

static json_t *labels(builder *b)
{
    return json_pack("{s:s, s:s, s:s}", LABEL_NAME, "lazaret", LABEL_INSTANCE, b->base,
                     LABEL_MANAGED_BY, "lazaret");
}

static json_t *metadata(builder *b, const char *name)
{
    json_t *m = json_object();
    json_object_set_new(m, "name", json_string(name));
    if (b->o->namespace_name)
        json_object_set_new(m, "namespace", json_string(b->o->namespace_name));
    json_object_set_new(m, "labels", labels(b));
    return m;
}

static json_t *claim_spec(builder *b, const char *size)
{
    json_t *s = json_pack("{s:[s], s:{s:{s:s}}}", "accessModes", "ReadWriteOnce", "resources",
                          "requests", "storage", size);
    if (b->o->storage_class)
        json_object_set_new(s, "storageClassName", json_string(b->o->storage_class));
    return s;
}

typedef struct claim {
    char *volume;     /* the pod's volume name (a DNS label) */
    char *claim_name; /* the PVC's name (sandbox form) */
    char *path;       /* where it is mounted */
    const char *size;
} claim;

static json_t *pvc_object(builder *b, const claim *c)
{
    json_t *meta = metadata(b, c->claim_name);
    json_object_set_new(meta, "annotations", json_pack("{s:s}", ANNOTATION_PATH, c->path));
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "PersistentVolumeClaim",
                     "metadata", meta, "spec", claim_spec(b, c->size));
}

static json_t *container(builder *b, const claim *claims, size_t n_claims)
{
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string("agent"));
    json_object_set_new(c, "image", json_string(b->image));
    json_object_set_new(c, "imagePullPolicy", json_string("IfNotPresent"));
    /* The image's own command, kept alive with a terminal to attach to, as
     * `lazaret run` gives it one. */
    json_object_set_new(c, "stdin", json_true());
    json_object_set_new(c, "tty", json_true());
    json_object_set_new(c, "workingDir", json_string("/workspace"));
    if (b->cfg->n_env) {
        json_t *env = json_array();
        for (size_t i = 0; i < b->cfg->n_env; i++) {
            const lz_resolved_env *e = &b->cfg->env[i];
            json_array_append_new(env,
                                  json_pack("{s:s, s:{s:{s:s, s:s, s:b}}}", "name", e->sandbox_name,
                                            "valueFrom", "secretKeyRef", "name", b->secret, "key",
                                            e->sandbox_name, "optional", 0));
        }
        json_object_set_new(c, "env", env);
    }
    json_object_set_new(c, "resources",
                        json_pack("{s:{s:s, s:s}}", "limits", "memory", b->o->memory,
                                  "ephemeral-storage", b->o->ephemeral_storage));
    json_t *sc = json_pack("{s:b, s:b, s:{s:[s]}}", "allowPrivilegeEscalation", 0, "privileged", 0,
                           "capabilities", "drop", "ALL");
    if (b->o->run_as) {
        json_object_set_new(sc, "runAsUser", json_integer(b->o->run_as_user));
        json_object_set_new(sc, "runAsGroup", json_integer(b->o->run_as_group));
        json_object_set_new(sc, "runAsNonRoot", json_true());
    }
    json_object_set_new(c, "securityContext", sc);
    json_t *mounts = json_array();
    for (size_t i = 0; i < n_claims; i++) {
        json_array_append_new(
            mounts, json_pack("{s:s, s:s}", "name", claims[i].volume, "mountPath", claims[i].path));
        if (i == 0 && b->o->git_readonly)
            json_array_append_new(
                mounts, json_pack("{s:s, s:s, s:s, s:b}", "name", claims[0].volume, "mountPath",
                                  "/workspace/.git", "subPath", ".git", "readOnly", 1));
    }
    json_object_set_new(c, "volumeMounts", mounts);
    return c;
}

static json_t *pod_spec(builder *b, const claim *claims, size_t n_claims, bool claim_volumes)
{
    json_t *s = json_object();
    json_object_set_new(s, "runtimeClassName", json_string(b->o->runtime_class));
    json_object_set_new(s, "automountServiceAccountToken", json_false());
    json_object_set_new(s, "enableServiceLinks", json_false());
    json_t *psc = json_pack("{s:{s:s}}", "seccompProfile", "type", "RuntimeDefault");
    /* The claims' files group-owned by the agent's group, or a non-root
     * agent could not write its own workspace. */
    if (b->o->run_as)
        json_object_set_new(psc, "fsGroup", json_integer(b->o->run_as_group));
    json_object_set_new(s, "securityContext", psc);
    json_object_set_new(s, "containers", json_pack("[o]", container(b, claims, n_claims)));
    if (claim_volumes) {
        json_t *vols = json_array();
        for (size_t i = 0; i < n_claims; i++)
            json_array_append_new(vols, json_pack("{s:s, s:{s:s}}", "name", claims[i].volume,
                                                  "persistentVolumeClaim", "claimName",
                                                  claims[i].claim_name));
        json_object_set_new(s, "volumes", vols);
    }
    return s;
}

static json_t *pod_template(builder *b, const claim *claims, size_t n_claims, bool claim_volumes)
{
    return json_pack("{s:{s:o}, s:o}", "metadata", "labels", labels(b), "spec",
                     pod_spec(b, claims, n_claims, claim_volumes));
}

static json_t *ip_block_json(const lz_ip_block *blk)
{
    char buf[LZ_IPV4_PREFIX_BUFSZ];
    lz_ipv4_prefix_format(&blk->cidr, buf);
    json_t *ipb = json_pack("{s:s}", "cidr", buf);
    if (blk->n_except) {
        json_t *ex = json_array();
        for (size_t i = 0; i < blk->n_except; i++) {
            lz_ipv4_prefix_format(&blk->except[i], buf);
            json_array_append_new(ex, json_string(buf));
        }
        json_object_set_new(ipb, "except", ex);
    }
    return json_pack("{s:o}", "ipBlock", ipb);
}

/* The host rules and the DNS mode of configuration v2 (docs/kubernetes.md
 * "Host rules"). A NetworkPolicy speaks addresses only, and an FQDN policy
 * is a CNI's own resource (Cilium's toFQDNs, Calico's domains), so none is
 * written: each rule is reported not mappable, and --strict refuses until
 * it is accepted. Nothing here widens the policy: names allowed locally are
 * unreachable in the cluster unless a prefix rule allows their addresses. */
static void report_host_rules(builder *b)
{
    const lz_resolved_config *c = b->cfg;
    if (c->allow_hosts.count)
        report(b, "allow_hosts", LZ_MAP_NOT_MAPPABLE, true,
               "%zu host pattern%s: a NetworkPolicy has no host names, and no FQDN policy of a "
               "particular CNI is written; the pod reaches these names only where a prefix rule "
               "allows their addresses, and then without the name check on the connection "
               "(locally the TLS SNI or HTTP Host must be allowed too): add the addresses the "
               "agent needs as allow_egress prefixes, then --accept allow_hosts",
               c->allow_hosts.count, c->allow_hosts.count == 1 ? "" : "s");
    if (c->deny_hosts.count)
        report(b, "deny_hosts", LZ_MAP_NOT_MAPPABLE, true,
               "%zu host pattern%s: a NetworkPolicy has no host names, so a denied name is "
               "reachable wherever an allowed prefix holds its address (locally it is refused "
               "at resolution and on the connection): deny its addresses with deny_egress "
               "prefixes, then --accept deny_hosts",
               c->deny_hosts.count, c->deny_hosts.count == 1 ? "" : "s");
    if (c->dns_mode != LZ_DNS_STRICT)
        return;
    if (b->o->no_cluster_dns)
        report(b, "dns", LZ_MAP_APPROXIMATED, false,
               "strict: with --no-cluster-dns the pod has no resolver at all, so no name leaves "
               "the cluster, but the allowed ones do not resolve either");
    else
        report(b, "dns", LZ_MAP_NOT_MAPPABLE, true,
               "strict: the cluster's kube-dns asks upstream for every name, so a made-up name "
               "leaves the cluster (locally names no allow_hosts pattern covers are answered "
               "here and never leave the machine); --no-cluster-dns drops DNS altogether, or "
               "--accept dns");
}

/* One NetworkPolicy selecting exactly the Sandbox's pod (its instance
 * label): no ingress at all, DNS to the cluster's resolver (the one path a
 * local Domain always has, docs/network.md), and the flattened egress. */
static json_t *network_policy(builder *b)
{
    lz_ip_blocks blocks;
    lz_netpolicy_flatten(&b->cfg->allow, &b->cfg->deny, &blocks);
    json_t *egress = json_array();
    if (!b->o->no_cluster_dns)
        json_array_append_new(
            egress,
            json_pack("{s:[{s:{s:{s:s}}, s:{s:{s:s}}}], s:[{s:s, s:i}, {s:s, s:i}]}", "to",
                      "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name",
                      "kube-system", "podSelector", "matchLabels", "k8s-app", "kube-dns", "ports",
                      "protocol", "UDP", "port", 53, "protocol", "TCP", "port", 53));
    if (blocks.count) {
        json_t *to = json_array();
        for (size_t i = 0; i < blocks.count; i++)
            json_array_append_new(to, ip_block_json(&blocks.items[i]));
        json_array_append_new(egress, json_pack("{s:o}", "to", to));
    }
    size_t n_blocks = blocks.count;
    lz_ip_blocks_clear(&blocks);
    _cleanup_free_ char *name = lz_xasprintf("%s-egress", b->base);
    /* All three labels: an instance name alone could also be another
     * application's (a Helm release "web"), whose pods would then fall
     * under this policy (attack round i14b, S1). */
    json_t *spec = json_pack("{s:{s:o}, s:[s, s], s:o}", "podSelector", "matchLabels", labels(b),
                             "policyTypes", "Ingress", "Egress", "egress", egress);
    /* Exact for every address the profile names; but locally the host's
     * own addresses are refused whatever the policy allows, and a node's
     * addresses (and hostNetwork pods) inside an allowed prefix are not
     * known here to be excepted (attack round i14b, S4). */
    report(b, "network", n_blocks ? LZ_MAP_APPROXIMATED : LZ_MAP_MAPPED, n_blocks > 0,
           "%zu allow and %zu deny prefixes (with the never-routed ranges) as %zu ipBlocks, "
           "exactly; no ingress but from the pod's own node (as NetworkPolicy always allows); "
           "%s. %sEnforced by the cluster's CNI, which must implement NetworkPolicy; another "
           "policy selecting the pod can widen it (docs/kubernetes.md)",
           b->cfg->allow.count, b->cfg->deny.count, n_blocks,
           b->o->no_cluster_dns
               ? "no DNS (--no-cluster-dns; locally the sidecar's resolver is always there)"
               : "DNS only to the cluster's kube-dns, as locally only to the sidecar's resolver; "
                 "it also answers for the cluster's own Service names (--no-cluster-dns drops "
                 "it)",
           n_blocks ? "The nodes' own addresses and hostNetwork pods inside an allowed prefix "
                      "are not excepted (locally the host's addresses always are): deny the "
                      "nodes' ranges in the profile, then --accept network. "
                    : "");
    report_host_rules(b);
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "networking.k8s.io/v1", "kind",
                     "NetworkPolicy", "metadata", metadata(b, name), "spec", spec);
}

static json_t *sandbox_metadata(builder *b, const char *name)
{
    json_t *m = metadata(b, name);
    char fp[65];
    lz_digest_hex(b->cfg->fingerprint, fp);
    json_object_set_new(
        m, "annotations",
        json_pack("{s:s, s:s}", ANNOTATION_PROFILE, b->cfg->profile, ANNOTATION_FINGERPRINT, fp));
    return m;
}

/* ---- the report of what is not an object ------------------------------------ */

static void report_fields(builder *b)
{
    const lz_resolved_config *c = b->cfg;
    const lz_k8s_options *o = b->o;
    if (strcmp(o->runtime_class, "gvisor") == 0 || o->runtime_class_object)
        report(b, "runtime", LZ_MAP_MAPPED, false,
               "runtimeClassName %s%s; rootful runsc under the node's containerd (locally "
               "rootless runsc in your user namespace)",
               o->runtime_class,
               o->runtime_class_object ? ", written with handler runsc"
                                       : " (GKE Sandbox's name; check: kubectl get "
                                         "runtimeclass gvisor -o jsonpath={.handler} says "
                                         "runsc)");
    else
        report(b, "runtime", LZ_MAP_APPROXIMATED, true,
               "runtimeClassName %s: the export cannot know that it runs gVisor; "
               "--with-runtime-class writes it with handler runsc",
               o->runtime_class);
    report(b, "workspace", LZ_MAP_APPROXIMATED, false,
           "a PersistentVolumeClaim mounted at /workspace; it starts empty: nothing of %s is "
           "shared with the cluster, so put the project in (git clone) from inside",
           c->workspace.label);
    if (o->git_readonly)
        report(b, "git", LZ_MAP_APPROXIMATED, true,
               "--git-readonly: /workspace/.git is mounted read-only, so the agent can neither "
               "commit nor change that repository's hooks and configuration; but a hooks path "
               "inside the work tree (core.hooksPath = .husky), nested repositories and "
               "repositories cloned elsewhere stay writable (locally the Git Sentry protects "
               "them), and the claim must hold the repository before the Sandbox starts");
    else
        report(b, "git", LZ_MAP_NOT_MAPPABLE, true,
               "there is no Git Sentry in the cluster: the agent can change every hook and "
               "configuration of the repositories on the claim, so whatever later runs Git on "
               "them outside the sandbox (a job mounting the claim, a copy on a workstation) "
               "runs what it planted; treat them as untrusted (fetch from them, do not run Git "
               "in them). --git-readonly protects /workspace/.git of a claim filled beforehand");
    report(b, "isolate_gitignored", LZ_MAP_MAPPED, false,
           "%s locally; in the cluster every file of the workspace is the sandbox's own",
           c->isolate_gitignored ? "on" : "off");
    for (size_t i = 0; i < c->n_persistent_dirs; i++) {
        _cleanup_free_ char *f = lz_xasprintf("persistent_dirs[%s]", c->persistent_dirs[i]);
        report(b, f, LZ_MAP_APPROXIMATED, false,
               "a PersistentVolumeClaim mounted there, which hides the image's content at that "
               "path (locally the image shows through until a file is changed)");
    }
    for (size_t i = 0; i < c->n_volumes; i++) {
        _cleanup_free_ char *f = lz_xasprintf("volumes[%s]", c->volumes[i].container);
        report(b, f, LZ_MAP_NOT_MAPPABLE, false,
               "%s of this machine: a cluster node's path is not this machine's, and hostPath "
               "would give the pod the node; left out",
               c->volumes[i].source.label);
    }
    for (size_t i = 0; i < c->n_env; i++) {
        _cleanup_free_ char *f = lz_xasprintf("env.%s", c->env[i].sandbox_name);
        report(b, f, LZ_MAP_MAPPED, false,
               "secretKeyRef %s/%s, to be created from your $%s (the command follows the "
               "report); the value is never written; in the cluster it is kept in the Secret, "
               "readable by whoever may read Secrets there",
               b->secret, c->env[i].sandbox_name, c->env[i].host_name);
    }
    if (c->escalation_enabled || c->n_rules)
        report(b, "escalation", LZ_MAP_NOT_MAPPABLE, false,
               "host escalation (%zu rules): there is no host; nothing of it is written",
               c->n_rules);
    else
        report(b, "escalation", LZ_MAP_MAPPED, false, "off, as in the cluster");
    if (o->run_as)
        report(b, "user", LZ_MAP_MAPPED, false,
               "runAsUser %ld, runAsGroup and fsGroup %ld, runAsNonRoot: the agent is never "
               "root of the pod, and a setuid file it makes can only be its own; every "
               "capability dropped, no privilege escalation",
               o->run_as_user, o->run_as_group);
    else
        report(b, "user", LZ_MAP_APPROXIMATED, true,
               "the image's User, which may be root: then the agent is root of the pod under "
               "gVisor (locally root in a user namespace that maps it to you) and can leave "
               "setuid-root files on the claims for a later pod that mounts them (locally "
               "refused: docs/limits.md); capabilities dropped, no privilege escalation in this "
               "pod. --run-as-user UID[:GID] runs it as that user");
    report(b, "limits.memory", LZ_MAP_MAPPED, false,
           "resources.limits.memory %s and ephemeral-storage %s (--memory, "
           "--ephemeral-storage; locally the Domain's bound is half this machine's memory)",
           o->memory, o->ephemeral_storage);
    report(b, "limits.processes", LZ_MAP_APPROXIMATED, true,
           "a pod spec has no process bound: the node's kubelet podPidsLimit is the bound "
           "(locally 512 per sandbox user and a host task bound), and under gVisor the memory "
           "limit bounds the sandbox's tasks; check the node's configuration");
    report(b, "lifecycle", LZ_MAP_APPROXIMATED, false,
           "the Sandbox runs until it is deleted (locally the last terminal out ends the "
           "Domain); attach with kubectl attach -it or kubectl exec -it");
}

/* The command that makes the Secret from the host variables without a
 * value on any command line (other users can read argv): bash's printf is
 * a builtin, and kubectl reads the env file from the process substitution.
 * NULL without env entries. */
static char *secret_command(builder *b)
{
    const lz_resolved_config *c = b->cfg;
    if (!c->n_env)
        return NULL;
    char *fmt = lz_xstrdup(""), *args = lz_xstrdup("");
    for (size_t i = 0; i < c->n_env; i++) {
        char *f = lz_xasprintf("%s%s=%%s\\n", fmt, c->env[i].sandbox_name);
        char *a = lz_xasprintf("%s \"$%s\"", args, c->env[i].host_name);
        free(fmt);
        free(args);
        fmt = f;
        args = a;
    }
    char *cmd =
        lz_xasprintf("kubectl create secret generic %s%s%s --from-env-file=<(printf '%s'%s)",
                     b->secret, b->o->namespace_name ? " -n " : "",
                     b->o->namespace_name ? b->o->namespace_name : "", fmt, args);
    free(fmt);
    free(args);
    return cmd;
}

/* ---- the whole export ------------------------------------------------------- */

static int refuse_option(lz_error **err, const char *option, const char *value, const char *what,
                         const char *example)
{
    _cleanup_free_ char *shown = lz_text_printable(value);
    lz_error_set(err, 0, "%s '%s' is not %s", option, shown, what);
    return lz_error_hint(err, "give %s like %s", option, example);
}

static int check_options(const lz_k8s_options *o, lz_error **err)
{
    if (o->name && !dns_label(o->name, BASE_NAME_MAX))
        return refuse_option(err, "--name", o->name,
                             "a DNS label of at most 52 characters (lowercase letters, digits, "
                             "'-')",
                             "agent-1");
    if (o->namespace_name && !dns_label(o->namespace_name, 63))
        return refuse_option(err, "--namespace", o->namespace_name,
                             "a DNS label (lowercase letters, digits, '-', at most 63)", "agents");
    if (o->namespace_name && strncmp(o->namespace_name, "kube-", 5) == 0)
        return refuse_option(err, "--namespace", o->namespace_name,
                             "a namespace for agents (kube-* are the cluster's own)", "agents");
    if (o->run_as && (o->run_as_user <= 0 || o->run_as_group <= 0 || o->run_as_user > 2147483647L ||
                      o->run_as_group > 2147483647L))
        return lz_error_set(err, 0, "--run-as-user needs a user id (and group id) above 0");
    if (!storage_quantity(o->memory))
        return refuse_option(err, "--memory", o->memory, "a memory quantity", "4Gi");
    if (!storage_quantity(o->ephemeral_storage))
        return refuse_option(err, "--ephemeral-storage", o->ephemeral_storage, "a storage quantity",
                             "10Gi");
    if (!dns_subdomain(o->runtime_class))
        return refuse_option(err, "--runtime-class", o->runtime_class, "a DNS subdomain name",
                             "gvisor");
    if (o->storage_class && !dns_subdomain(o->storage_class))
        return refuse_option(err, "--storage-class", o->storage_class, "a DNS subdomain name",
                             "standard-rwo");
    if (!storage_quantity(o->workspace_size))
        return refuse_option(err, "--workspace-size", o->workspace_size, "a storage quantity",
                             "10Gi or 500M");
    if (!storage_quantity(o->persistent_size))
        return refuse_option(err, "--persistent-size", o->persistent_size, "a storage quantity",
                             "5Gi or 500M");
    if (o->image_digest && !sha256_digest(o->image_digest))
        return refuse_option(err, "--image-digest", o->image_digest,
                             "a manifest digest (sha256: and 64 lowercase hex digits)",
                             "the digest 'skopeo inspect --format {{.Digest}}' prints");
    return 0;
}

int lz_k8s_export_build(const lz_resolved_config *cfg, const lz_k8s_options *opts,
                        lz_k8s_export *ret, lz_error **err)
{
    lz_k8s_options o = *opts;
    if (!o.runtime_class)
        o.runtime_class = "gvisor";
    if (!o.workspace_size)
        o.workspace_size = "10Gi";
    if (!o.persistent_size)
        o.persistent_size = "5Gi";
    if (!o.memory)
        o.memory = "4Gi";
    if (!o.ephemeral_storage)
        o.ephemeral_storage = "10Gi";
    if (!o.warm_pool_replicas)
        o.warm_pool_replicas = 1;
    *ret = (lz_k8s_export){ 0 };
    if (check_options(&o, err) < 0)
        return -1;

    builder b = { .cfg = cfg, .o = &o, .out = ret };
    b.base = o.name ? lz_xstrdup(o.name) : default_base(cfg);
    b.secret = lz_xasprintf("%s-env", b.base);
    int rc = -1;
    size_t n_claims = 1 + cfg->n_persistent_dirs;
    claim *claims = lz_xcalloc(n_claims, sizeof(*claims));
    if (choose_image(&b, err) < 0)
        goto out;

    claims[0] = (claim){ lz_xstrdup("workspace"), lz_xasprintf("%s-workspace", b.base),
                         lz_xstrdup("/workspace"), o.workspace_size };
    for (size_t i = 0; i < cfg->n_persistent_dirs; i++) {
        _cleanup_free_ char *tag = path_tag(cfg->persistent_dirs[i]);
        claims[1 + i] = (claim){ lz_xasprintf("p-%s", tag), lz_xasprintf("%s-p-%s", b.base, tag),
                                 lz_xstrdup(cfg->persistent_dirs[i]), o.persistent_size };
        for (size_t k = 1; k < 1 + i; k++)
            if (strcmp(claims[k].volume, claims[1 + i].volume) == 0) {
                /* 32 bits of two paths' hashes alike: not seen, never silent. */
                lz_error_set(err, 0, "persistent_dirs %s and %s would share the claim name %s",
                             claims[k].path, claims[1 + i].path, claims[1 + i].claim_name);
                lz_error_hint(err, "rename one of the two directories in the profile");
                goto out;
            }
    }

    ret->documents = json_array();
    if (o.runtime_class_object)
        json_array_append_new(ret->documents,
                              json_pack("{s:s, s:s, s:{s:s}, s:s}", "apiVersion", "node.k8s.io/v1",
                                        "kind", "RuntimeClass", "metadata", "name", o.runtime_class,
                                        "handler", "runsc"));
    if (o.form == LZ_K8S_FORM_SANDBOX) {
        /* Claims of their own, not the Sandbox's volumeClaimTemplates: the
         * controller makes those owned by the Sandbox, and deleting it would
         * delete the workspace. */
        for (size_t i = 0; i < n_claims; i++)
            json_array_append_new(ret->documents, pvc_object(&b, &claims[i]));
        json_array_append_new(ret->documents, network_policy(&b));
        json_t *spec = json_pack("{s:o, s:b}", "podTemplate",
                                 pod_template(&b, claims, n_claims, true), "service", 0);
        json_array_append_new(ret->documents,
                              json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", SANDBOX_API, "kind",
                                        "Sandbox", "metadata", sandbox_metadata(&b, b.base), "spec",
                                        spec));
    } else {
        json_array_append_new(ret->documents, network_policy(&b));
        json_t *vcts = json_array();
        for (size_t i = 0; i < n_claims; i++)
            json_array_append_new(vcts, json_pack("{s:{s:s, s:{s:s}}, s:o}", "metadata", "name",
                                                  claims[i].volume, "annotations", ANNOTATION_PATH,
                                                  claims[i].path, "spec",
                                                  claim_spec(&b, claims[i].size)));
        _cleanup_free_ char *template_name = lz_xasprintf("%s-template", b.base);
        _cleanup_free_ char *pool_name = lz_xasprintf("%s-pool", b.base);
        _cleanup_free_ char *claim_name = lz_xasprintf("%s-claim", b.base);
        /* Unmanaged: the NetworkPolicy above is the only one written for
         * these pods; Managed would add the controller's own default. */
        json_t *spec = json_pack("{s:o, s:o, s:s, s:b, s:s, s:s}", "podTemplate",
                                 pod_template(&b, claims, n_claims, false), "volumeClaimTemplates",
                                 vcts, "volumeClaimTemplatesPolicy", "Disallowed", "service", 0,
                                 "networkPolicyManagement", "Unmanaged", "envVarsInjectionPolicy",
                                 "Disallowed");
        json_array_append_new(ret->documents,
                              json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", EXTENSIONS_API,
                                        "kind", "SandboxTemplate", "metadata",
                                        sandbox_metadata(&b, template_name), "spec", spec));
        json_array_append_new(ret->documents,
                              json_pack("{s:s, s:s, s:o, s:{s:I, s:{s:s}}}", "apiVersion",
                                        EXTENSIONS_API, "kind", "SandboxWarmPool", "metadata",
                                        metadata(&b, pool_name), "spec", "replicas",
                                        (json_int_t) o.warm_pool_replicas, "sandboxTemplateRef",
                                        "name", template_name));
        json_array_append_new(
            ret->documents, json_pack("{s:s, s:s, s:o, s:{s:{s:s}}}", "apiVersion", EXTENSIONS_API,
                                      "kind", "SandboxClaim", "metadata", metadata(&b, claim_name),
                                      "spec", "warmPoolRef", "name", pool_name));
        report(&b, "form", LZ_MAP_APPROXIMATED, false,
               "template form: each Sandbox of the warm pool gets claims of its own from "
               "volumeClaimTemplates, owned by that Sandbox and deleted with it; use the "
               "default form for a workspace that outlives its Sandbox");
    }
    report_fields(&b);
    ret->secret_command = secret_command(&b);
    rc = 0;
out:
    for (size_t i = 0; i < n_claims; i++) {
        free(claims[i].volume);
        free(claims[i].claim_name);
        free(claims[i].path);
    }
    free(claims);
    free(b.base);
    free(b.secret);
    free(b.image);
    if (rc < 0)
        lz_k8s_export_clear(ret);
    return rc;
}

void lz_k8s_export_clear(lz_k8s_export *e)
{
    json_decref(e->documents);
    for (size_t i = 0; i < e->n_entries; i++) {
        free(e->entries[i].field);
        free(e->entries[i].reason);
    }
    free(e->entries);
    free(e->secret_command);
    *e = (lz_k8s_export){ 0 };
}

bool lz_k8s_export_accept(lz_k8s_export *e, const char *field)
{
    for (size_t i = 0; i < e->n_entries; i++)
        if (strcmp(e->entries[i].field, field) == 0) {
            e->entries[i].accepted = true;
            return true;
        }
    return false;
}

size_t lz_k8s_export_strict_failures(const lz_k8s_export *e)
{
    size_t n = 0;
    for (size_t i = 0; i < e->n_entries; i++)
        n += e->entries[i].status != LZ_MAP_MAPPED && e->entries[i].security_relevant &&
             !e->entries[i].accepted;
    return n;
}
