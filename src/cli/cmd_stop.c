/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret stop [--profile P] [--workspace DIR]   (issue 12)
 *
 * Ends the workspace's running Domains cleanly over their authenticated
 * session channels (client/stop.c): the coordinator tells every session
 * why and tears down. Waits (30 s at most) until the Domain lock is free,
 * so that what follows (lazaret state reset --stop) finds no generation.
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/terminal.h"
#include "client/client.h"
#include "common/error.h"
#include "common/options.h"
#include "common/util.h"
#include "config/resolve.h"
#include "store/domain_root.h"

const char lz_usage_stop[] =
    "Usage: lazaret [--config FILE] stop [--profile PROFILE] [--workspace DIR]\n"
    "\n"
    "End the running Domain of the workspace (chosen as for 'run') cleanly: every\n"
    "session is told that the Domain was stopped, its command ends, and the\n"
    "sandbox is torn down. Without --profile, every running Domain of the\n"
    "workspace. Nothing running is not an error.\n"
    "\n"
    "Options:\n"
    "  --profile PROFILE  only this profile's Domain\n"
    "  --workspace DIR    the project directory (default: as for 'run')\n";

int lz_cli_stop(const char *profile, const char *workspace)
{
    lz_error *err = NULL;
    _cleanup_free_ char *ws = lz_workspace_choose(workspace, &err);
    if (!ws) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        return LZ_EXIT_FAILURE;
    }
    _cleanup_free_ char *root = NULL;
    json_t *all = lz_cli_running_domains(&root);
    if (!all)
        return LZ_EXIT_FAILURE;
    int found = 0, failed = 0;
    size_t i;
    json_t *d;
    json_array_foreach(all, i, d)
    {
        const char *id = json_string_value(json_object_get(d, "domain_id"));
        const char *p = json_string_value(json_object_get(d, "profile"));
        const char *w = json_string_value(json_object_get(d, "workspace"));
        if (!id || !p || !w || strcmp(w, ws) != 0 || (profile && strcmp(p, profile) != 0) ||
            !lz_domain_id_valid(id))
            continue;
        found++;
        _cleanup_free_ char *label = lz_xasprintf("%s/%s", root, id);
        _cleanup_close_ int dirfd = open(label, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* The log's path as the coordinator published it: only for messages. */
        const char *log = json_string_value(json_object_get(d, "log"));
        int r = dirfd < 0
                    ? -1
                    : lz_client_stop_domain(&lz_cli_terminal_ui, dirfd, label,
                                            log ? log : "the Domain's coordinator.log", id, p);
        if (r < 0)
            failed++;
        else if (r == 0)
            printf("stopped profile '%s' for the workspace %s\n", p, w);
    }
    json_decref(all);
    if (!found)
        printf("no Domain%s%s%s is running for the workspace %s\n", profile ? " of profile '" : "",
               profile ? profile : "", profile ? "'" : "", ws);
    return failed ? LZ_EXIT_FAILURE : LZ_EXIT_OK;
}

int lz_cmd_stop(int argc, char **argv, const lz_global_options *g)
{
    (void) g;
    enum { OPT_PROFILE, OPT_WORKSPACE };
    static const lz_option options[] = {
        { "profile", 0, "PROFILE", OPT_PROFILE },
        { "workspace", 0, "DIR", OPT_WORKSPACE },
    };
    const char *profile = NULL, *workspace = NULL;
    lz_opt_parser p;
    lz_opt_init(&p, options, LZ_ARRAY_SIZE(options), argc, argv, 1);
    for (int o; (o = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        if (o == LZ_OPT_ERROR)
            return lz_cli_usage_error("stop", "%s", p.error);
        if (o == LZ_OPT_ARGUMENT)
            return lz_cli_usage_error("stop", "unexpected argument '%s'", p.arg);
        if (o == OPT_PROFILE)
            profile = p.value;
        else
            workspace = p.value;
    }
    return lz_cli_stop(profile, workspace);
}
