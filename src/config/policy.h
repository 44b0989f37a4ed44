/* SPDX-License-Identifier: Apache-2.0
 *
 * DerivedNetworkPolicy (schema "Network policy"): the effective policy of a
 * resolved profile in its serialized form, as recorded in the Domain Store
 * and shown by `lazaret status`. The Network Sidecar programs exactly this.
 */
#ifndef LAZARET_CONFIG_POLICY_H
#define LAZARET_CONFIG_POLICY_H

#include <jansson.h>

#include "config/resolve.h"

#define LZ_DERIVED_NETWORK_POLICY_ID "lazaret-derived-network-policy-v1"

/* A new JSON object: schema_id, address_families (IPv4 enabled, IPv6
 * disabled), default_actions (IPv4 deny), prefix_rules (every effective
 * allow and deny prefix), resolvers (the sidecar's). */
json_t *lz_derived_network_policy(const lz_resolved_config *cfg, const char *resolver);

#endif
