/* SPDX-License-Identifier: Apache-2.0
 *
 * DomainIdV1 and ConfigurationFingerprintV1, framed exactly as the schema
 * says (schema "Domain and configuration digests"). Neither is a credential.
 */
#ifndef LAZARET_CONFIG_DIGEST_H
#define LAZARET_CONFIG_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct lz_resolved_config;

/* SHA-256("lazaret-domain-id-v1\0" || bytes(profile) || bytes(workspace)). */
LZ_MUST_CHECK
int lz_domain_id_v1(const char *profile, const char *canonical_workspace, uint8_t out[32],
                    lz_error **err);

/* The fingerprint of a resolved configuration (every field but env values). */
LZ_MUST_CHECK
int lz_configuration_fingerprint_v1(const struct lz_resolved_config *cfg, uint8_t out[32],
                                    lz_error **err);

/* The fingerprint of a v2 configuration: the v1 fields framed as v1 under
 * the separator "lazaret-configuration-fingerprint-v2\0", then the v2
 * fields (docs/configuration.md "Configuration fingerprint"). */
LZ_MUST_CHECK
int lz_configuration_fingerprint_v2(const struct lz_resolved_config *cfg, uint8_t out[32],
                                    lz_error **err);

/* The configuration in parts, each with its own digest, named by the keys
 * a developer edits: what a refusal of a changed configuration names as
 * changed (issue 26). The running Domain publishes its parts in
 * status.json; a CLI whose fingerprint differs compares its own. Not part
 * of the fingerprint (which stays exactly as the schema frames it); env
 * values are never in a part. */
#define LZ_CONFIG_PARTS 10
typedef struct lz_config_part {
    const char *name; /* static: "image", "volumes", "allow_hosts/deny_hosts", … */
    uint8_t digest[32];
} lz_config_part;

LZ_MUST_CHECK
int lz_configuration_parts(const struct lz_resolved_config *cfg,
                           lz_config_part out[LZ_CONFIG_PARTS], lz_error **err);

/* A growable byte buffer for canonical framing (exposed for unit tests). */
typedef struct lz_frame {
    uint8_t *data;
    size_t len, cap;
    int overflow; /* a length or count did not fit u32 */
} lz_frame;

void lz_frame_u32be(lz_frame *f, uint64_t v);
void lz_frame_raw(lz_frame *f, const void *p, size_t n);
void lz_frame_bytes(lz_frame *f, const void *p, size_t n); /* u32be(n) || p */
void lz_frame_bool(lz_frame *f, int b);
/* list(items): sort complete item encodings bytewise, then u32be(count) and
 * bytes(item) for each. Consumes (frees) the item frames. */
void lz_frame_sorted_list(lz_frame *f, lz_frame *items, size_t n);
/* Declared-order list: same framing, no sorting. Consumes the item frames. */
void lz_frame_ordered_list(lz_frame *f, lz_frame *items, size_t n);
void lz_frame_free(lz_frame *f);

#endif
