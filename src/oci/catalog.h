/* SPDX-License-Identifier: Apache-2.0
 *
 * The Storage Catalog's records (docs/runtime.md "Images"): what `lazaret
 * image list` shows, what `lazaret image prune` keeps, and what an offline
 * start falls back to.
 *
 *   images/ref-<hex16>    one per image reference (the transport-qualified
 *                         source): the digest it last named, when a source
 *                         last said so (checked) and when it was last used;
 *                         an offline start of a registry image uses it
 *   <Domain Root>/image   the image a Domain last started with (digest,
 *                         entry, source, time, offline): a Domain with state
 *                         on disk keeps its image from being pruned, and the
 *                         record says which digest ran
 *
 * Both are written by the developer into the developer's own directories
 * (the catalog is 0700, a Domain Root too; no sandbox writes them), under
 * the catalog lock (images/.lock), which `lazaret image prune` holds for its
 * whole decision and removal. They are still read with bounds and checks:
 * a malformed record is ignored.
 */
#ifndef LAZARET_OCI_CATALOG_H
#define LAZARET_OCI_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define LZ_CATALOG_LOCK ".lock"
#define LZ_CATALOG_USE_RECORD "image" /* in a Domain Root */
#define LZ_CATALOG_REF_PREFIX "ref-"
#define LZ_CATALOG_TMP_PREFIX ".tmp-"
#define LZ_CATALOG_KEEP_ID_INFIX ".keep-id-"

/* What a reference record says. */
typedef struct lz_catalog_ref {
    char digest_hex[65];
    long long checked; /* seconds since the epoch: the source last named this digest */
    long long used;    /* the last start with it */
} lz_catalog_ref;

/* The record name of source: "ref-" and the first 16 hex digits of its SHA-256. */
void lz_catalog_ref_name(const char *source, char name[static 24]);

/* Keep (best effort) source's record. */
void lz_catalog_ref_store(int images_fd, const char *source, const lz_catalog_ref *ref);

/* Load source's record: 0 on a hit. */
int lz_catalog_ref_load(int images_fd, const char *source, lz_catalog_ref *ret);

/* Read the reference record images_fd/name whatever its source: 0 with
 * *ret_source newly allocated, -1 when it is not one. */
int lz_catalog_ref_read(int images_fd, const char *name, char **ret_source, lz_catalog_ref *ret);

/* What a Domain's image record says. */
typedef struct lz_catalog_use {
    char digest_hex[65];
    char entry[96]; /* the catalog entry the Domain ran: <digest> or <digest>.keep-id-U-G */
    char *source;   /* newly allocated on read */
    long long started;
    bool offline; /* started without asking the registry (it was unreachable) */
} lz_catalog_use;

/* Replace <Domain Root>/image. */
LZ_MUST_CHECK
int lz_catalog_use_write(int droot_fd, const char *droot_label, const lz_catalog_use *use,
                         lz_error **err);

/* Read it: 1 when present and well-formed, 0 when absent, -1 (errno) when
 * unreadable or malformed. */
int lz_catalog_use_read(int droot_fd, lz_catalog_use *ret);
void lz_catalog_use_clear(lz_catalog_use *use);

/* The SHA-256 of data as 64 lowercase hex digits. */
void lz_sha256_hex(const void *data, size_t len, char out[static 65]);

/* Is name a catalog entry, "<64 hex>" or "<64 hex>.keep-id-<uid>-<gid>"?
 * The digest goes to digest_hex; *keep_id says which. */
bool lz_catalog_entry_parse(const char *name, char digest_hex[static 65], bool *keep_id);

#endif
