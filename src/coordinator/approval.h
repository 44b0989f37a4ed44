/* SPDX-License-Identifier: Apache-2.0
 *
 * Auto-approval (SR-8, spec 3.2): does a trusted exact rule of the host
 * configuration approve this argv? Matching is byte-exact and never
 * widened:
 *
 *  - argv[0] byte-equal to the rule's canonical executable path (no PATH
 *    lookup, no basename, no canonicalisation of the request's path: a
 *    request naming the same file another way is not auto-approved; it goes
 *    to the developer);
 *  - allow_extra_args = false: argv[1..] equal to the rule's args, element
 *    by element, same count;
 *  - allow_extra_args = true (the schema requires args non-empty then):
 *    argv[1..] starts with the rule's args, followed by zero or more
 *    arguments.
 *
 * Arguments are data: `;`, `&&`, `$(…)` are compared as bytes and, once
 * approved, reach the host program verbatim (no shell ever runs them).
 */
#ifndef LAZARET_COORDINATOR_APPROVAL_H
#define LAZARET_COORDINATOR_APPROVAL_H

#include <stdbool.h>
#include <stddef.h>

#include "config/resolve.h"

bool lz_rule_matches(const lz_resolved_rule *rule, char *const *argv, size_t argc);

/* The first rule of cfg that matches, or NULL (no rules when escalation is
 * disabled: the caller denies then without asking). */
const lz_resolved_rule *lz_rules_match(const lz_resolved_config *cfg, char *const *argv,
                                       size_t argc);

#endif
