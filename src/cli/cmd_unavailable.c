/* SPDX-License-Identifier: Apache-2.0
 *
 * Commands that are part of the interface but not implemented yet. They say
 * so plainly and fail; nothing here pretends to work.
 */
#include <stdio.h>

#include "cli/cli.h"
#include "common/error.h"

const char lz_usage_state[] =
    "Usage: lazaret [--config FILE] state list|inspect|verify|reset ...\n"
    "\n"
    "List, inspect, verify or reset persistent sandbox state.\n"
    "\n"
    "Not available yet in this version.\n";

static int unavailable(const char *name, int status)
{
    lz_error *err = NULL;
    lz_error_set(&err, 0, "'lazaret %s' is not available yet in this version", name);
    lz_error_hint(&err, "the Domain's state lives in <data_root>/domains/<id>/ (docs/runtime.md)");
    lz_error_report(err, stderr);
    lz_error_free(err);
    return status;
}

int lz_cmd_state(int argc, char **argv, const lz_global_options *g)
{
    (void) argc, (void) argv, (void) g;
    return unavailable("state", LZ_EXIT_FAILURE);
}
