/* SPDX-License-Identifier: Apache-2.0
 *
 * Image preparation: an OCI reference becomes a prepared root filesystem in
 * the Storage Catalog, <storage>/images/, once per manifest digest, shared
 * read-only by every Domain that uses it.
 *
 *   reference  "docker.io/library/debian:bookworm"  fetched with skopeo (network)
 *              "oci:/path/layout:tag", "oci-archive:…", "docker-archive:…",
 *              "containers-storage:…", "docker://…", "dir:…"  used as they are
 *   digest     SHA-256 of the raw top-level manifest (skopeo inspect --raw),
 *              the catalog key: an unchanged image is never copied again
 *   artifact   images/rootfs/<digest-hex>/ = an `umoci unpack --rootless`
 *              bundle (rootfs/ and the image's config.json), complete once
 *              renamed into place; concurrent preparations serialize on an
 *              flock of images/.lock and the rename makes completion atomic.
 *              An image that runs as a non-root user keeps only the
 *              config.json of this tree; its keep-id tree is what runs.
 *   records    oci/catalog.h: per reference (what it named, for list and
 *              an offline start) and per Domain (which entry it ran).
 */
#ifndef LAZARET_OCI_IMAGE_H
#define LAZARET_OCI_IMAGE_H

#include <stdbool.h>

#include "common/error.h"
#include "fs/confined.h"
#include "ns/userns.h"

typedef struct lz_prepared_image {
    char digest_hex[65];
    lz_path_plan bundle; /* images/rootfs/<digest-hex> */
    char *rootfs_label;  /* <bundle>/rootfs, canonical path */
    char **env;          /* the image's configured environment, NULL-terminated */
    char *workdir;       /* the image's working directory or NULL */
    lz_idmap user;       /* the image's User (0/0: root); non-root means the bundle
                          * is the keep-id tree (docs/runtime.md "The agent's user") */
    bool offline;        /* the registry was unreachable: the digest it last named */
    long long checked;   /* when the source last named this digest (epoch seconds) */
} lz_prepared_image;

/* Where the Domain's record of its image (oci/catalog.h) goes: written
 * under the catalog lock, so a prune never removes an entry a start just
 * chose. domain_root_fd -1: no record. */
typedef struct lz_image_use_record {
    int domain_root_fd;
    const char *domain_root_label;
} lz_image_use_record;

/* What a progress line is: a phase of slow work (image preparation),
 * shown on stderr even without a terminal, one line per phase, so a CI log
 * or a script's output says why nothing else happens for minutes; or a
 * note (which workspace, waiting for a previous generation), shown on a
 * terminal only. */
typedef enum lz_progress_kind { LZ_PROGRESS_PHASE, LZ_PROGRESS_NOTE } lz_progress_kind;
typedef void (*lz_progress_fn)(lz_progress_kind kind, const char *line, void *userdata);

/* The transport-qualified form skopeo understands ("docker://" added to a
 * plain reference). Newly allocated. */
char *lz_image_source(const char *reference);

/* Does reference name a registry image (a plain reference or docker://),
 * rather than a local layout, archive, directory or containers-storage? */
bool lz_image_reference_is_registry(const char *reference);

/* Prepare `reference` beneath the Storage Root. progress (may be NULL)
 * receives one LZ_PROGRESS_PHASE line per phase of slow work, and the
 * notice of an offline start: a registry image whose registry cannot be
 * reached starts with the digest its reference last named, when that is
 * prepared (docs/runtime.md "Images"). use (may be NULL) says where the
 * Domain's record of its image goes. */
LZ_MUST_CHECK
int lz_image_prepare(const lz_path_plan *storage_root, const char *reference,
                     const lz_image_use_record *use, lz_progress_fn progress, void *userdata,
                     lz_prepared_image *ret, lz_error **err);

void lz_prepared_image_clear(lz_prepared_image *img);

#endif
