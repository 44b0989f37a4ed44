/* SPDX-License-Identifier: Apache-2.0 */
#include "config/policy.h"

static void add_rules(json_t *rules, const lz_ipv4_prefix_list *l, const char *action)
{
    for (size_t i = 0; i < l->count; i++) {
        char buf[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(&l->items[i], buf);
        json_array_append_new(rules, json_pack("{s:s, s:s, s:s}", "family", "IPv4", "network", buf,
                                               "action", action));
    }
}

json_t *lz_derived_network_policy(const lz_resolved_config *cfg, const char *resolver)
{
    json_t *rules = json_array();
    add_rules(rules, &cfg->allow, "Allow");
    add_rules(rules, &cfg->deny, "Deny");
    return json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:s}], s:[{s:s, s:s}], s:o, s:[{s:s, s:s}]}",
                     "schema_id", LZ_DERIVED_NETWORK_POLICY_ID, "address_families", "family",
                     "IPv4", "disposition", "enabled", "family", "IPv6", "disposition", "disabled",
                     "default_actions", "family", "IPv4", "action", "Deny", "prefix_rules", rules,
                     "resolvers", "family", "IPv4", "address", resolver);
}
