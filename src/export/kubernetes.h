/* SPDX-License-Identifier: Apache-2.0
 *
 * `lazaret export kubernetes`: a resolved profile as Kubernetes objects for
 * the agent-sandbox controller (kubernetes-sigs/agent-sandbox, API
 * agents.x-k8s.io/v1beta1) on a gVisor RuntimeClass, and the mapping
 * report that says, for every profile field, whether it was mapped,
 * approximated or could not be mapped, and why (docs/kubernetes.md).
 *
 * The objects are built as JSON values (jansson, members in a fixed order)
 * and written as YAML by yaml.h, so the same profile and options always
 * give the same bytes. Environment values are never read: an env entry
 * becomes a secretKeyRef into a Secret the user creates.
 */
#ifndef LAZARET_EXPORT_KUBERNETES_H
#define LAZARET_EXPORT_KUBERNETES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "config/resolve.h"

typedef enum lz_k8s_form {
    LZ_K8S_FORM_SANDBOX,  /* PVCs + NetworkPolicy + one Sandbox */
    LZ_K8S_FORM_TEMPLATE, /* NetworkPolicy + SandboxTemplate + SandboxWarmPool + SandboxClaim */
} lz_k8s_form;

typedef struct lz_k8s_options {
    const char *name;           /* base object name; NULL: lazaret-<profile>-<8 hex of Domain ID> */
    const char *namespace_name; /* NULL: no namespace written (kubectl -n decides) */
    const char *runtime_class;  /* podTemplate.spec.runtimeClassName; NULL: "gvisor" */
    bool runtime_class_object;  /* also write RuntimeClass{name: runtime_class, handler: runsc} */
    const char *storage_class;  /* NULL: the cluster's default StorageClass */
    const char *workspace_size; /* NULL: "10Gi" */
    const char *persistent_size; /* NULL: "5Gi" */
    const char *image;           /* NULL: the profile's image */
    const char *image_digest;    /* "sha256:<64 hex>" pinning the image, or NULL */
    bool git_readonly;   /* mount the workspace's .git read-only (a claim filled beforehand) */
    bool no_cluster_dns; /* no egress rule to the cluster's DNS */
    const char *memory;  /* resources.limits.memory; NULL: "4Gi" */
    const char *ephemeral_storage; /* resources.limits.ephemeral-storage; NULL: "10Gi" */
    bool run_as;                   /* runAsUser/runAsGroup/fsGroup below; false: the image's User */
    long run_as_user, run_as_group; /* with run_as: both > 0 */
    lz_k8s_form form;
    unsigned warm_pool_replicas; /* template form only; 0 means 1 */
} lz_k8s_options;

typedef enum lz_map_status {
    LZ_MAP_MAPPED,
    LZ_MAP_APPROXIMATED,
    LZ_MAP_NOT_MAPPABLE,
} lz_map_status;

typedef struct lz_map_entry {
    char *field; /* the profile field ("persistent_dirs[/root/.cache]") or the
                  * guarantee ("limits.processes"), printable */
    lz_map_status status;
    bool security_relevant; /* the cluster's guarantee is weaker than the local one */
    bool accepted;          /* named by --accept: the user has read it (lz_k8s_export_accept) */
    char *reason;           /* printable (lz_text_printable) */
} lz_map_entry;

typedef struct lz_k8s_export {
    json_t *documents; /* array of objects, in the order they are to be applied */
    lz_map_entry *entries;
    size_t n_entries;
    char *secret_command; /* the bash command that creates the env Secret, or NULL */
} lz_k8s_export;

/* Build the objects and the report for cfg. Fails (with *err naming the
 * option or field and what to do) on an option value Kubernetes would
 * refuse, or an image a cluster cannot pull (a local layout or archive)
 * without o->image. */
LZ_MUST_CHECK
int lz_k8s_export_build(const lz_resolved_config *cfg, const lz_k8s_options *o, lz_k8s_export *ret,
                        lz_error **err);

void lz_k8s_export_clear(lz_k8s_export *e);

/* Mark the entry whose field is exactly `field` accepted. Returns false
 * when there is none (a typo must not pass --strict silently). */
bool lz_k8s_export_accept(lz_k8s_export *e, const char *field);

/* How many entries are approximated or not mappable, security-relevant and
 * not accepted (what --strict refuses). */
size_t lz_k8s_export_strict_failures(const lz_k8s_export *e);

const char *lz_map_status_name(lz_map_status s);

/* Is ref a registry image reference the container runtimes accept
 * ([host[:port]/]path[:tag][@sha256:<64 hex>], distribution's grammar
 * without IPv6 hosts)? */
bool lz_k8s_registry_reference(const char *ref); /* "mapped", "approximated", "not-mappable" */

#endif
