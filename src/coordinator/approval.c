/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/approval.h"

#include <string.h>

bool lz_rule_matches(const lz_resolved_rule *rule, char *const *argv, size_t argc)
{
    if (argc == 0 || !argv[0] || strcmp(argv[0], rule->executable.label) != 0)
        return false;
    size_t given = argc - 1;
    if (rule->allow_extra_args ? given < rule->n_args : given != rule->n_args)
        return false;
    /* A prefix rule without arguments would approve everything: the schema
     * refuses it at load, and it is refused here too. */
    if (rule->allow_extra_args && rule->n_args == 0)
        return false;
    for (size_t i = 0; i < rule->n_args; i++)
        if (strcmp(argv[1 + i], rule->args[i]) != 0)
            return false;
    return true;
}

const lz_resolved_rule *lz_rules_match(const lz_resolved_config *cfg, char *const *argv,
                                       size_t argc)
{
    if (!cfg->escalation_enabled)
        return NULL;
    for (size_t i = 0; i < cfg->n_rules; i++)
        if (lz_rule_matches(&cfg->rules[i], argv, argc))
            return &cfg->rules[i];
    return NULL;
}
