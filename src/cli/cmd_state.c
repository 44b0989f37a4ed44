/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret state list [--json]   (spec 3.9, State Inspection; issue 12)
 *
 * Every Domain of this user that has state on disk, running or not: for
 * each <data_root>/domains/<id>/ its store's profile and workspace, when it
 * was last used, how much its persistent directories (state/) and its
 * git-ignored copies (ignored/) take, and, when its coordinator runs, the
 * running generation and sessions (that coordinator's status.json).
 *
 * Reads only. The store is opened read-only (a running coordinator is not
 * disturbed); the sizes come from a walk that never follows a symlink and
 * is bounded, since what is under state/ and ignored/ was written by a
 * sandbox (docs/security.md: untrusted on every later use).
 *
 * inspect, verify and reset act on one Domain (by ID prefix, or the
 * workspace's and profile's): inspect and verify read only, like list;
 * reset removes state/ and ignored/ through descriptors (fs/remove.h)
 * while holding the Domain lock (docs/runtime.md "State inspection and
 * reset"); fix-ownership gives back to the developer what a sandbox left
 * in the workspace and read-write volumes owned by a subordinate id, as
 * every teardown now does (supervisor/giveback.h; docs/runtime.md
 * "Ownership give-back"), for what older versions left.
 *
 * The files of the command: this one parses and dispatches; state_target.c
 * chooses the Domain and says what it is; state_walk.c measures what a
 * sandbox wrote; state_inspect.c lists and inspects; state_verify.c
 * verifies; state_reset.c resets and gives ownership back. The Domain
 * Root's layout, its lock and the choice of a Domain by ID prefix are
 * store/domain_root.h's.
 */
#include <string.h>

#include "cli/state.h"
#include "common/options.h"
#include "common/util.h"

const char lz_usage_state[] =
    "Usage: lazaret [--config FILE] state list [--json]\n"
    "       lazaret [--config FILE] state inspect [DOMAIN] [--profile P] [--workspace DIR] "
    "[--json]\n"
    "       lazaret [--config FILE] state verify  [DOMAIN] [--profile P] [--workspace DIR] "
    "[--json]\n"
    "       lazaret [--config FILE] state reset   [DOMAIN] [--profile P] [--workspace DIR] "
    "[--stop]\n"
    "                                             [--yes] [--json]\n"
    "       lazaret [--config FILE] state fix-ownership [DOMAIN] [--profile P] [--workspace DIR]\n"
    "                                             [--stop] [--json]\n"
    "\n"
    "list     every Domain of your user with state on disk, running or not: profile,\n"
    "         workspace, last use, the size of its persistent directories and of its\n"
    "         git-ignored copies, and its running generation and sessions.\n"
    "inspect  one Domain: its persistent directories and git-ignored copies with their\n"
    "         sizes, the profile's volumes, its recent generations and host escalations.\n"
    "verify   one Domain's structure: the store (schema, SQLite integrity check), the\n"
    "         persistent directories' upper and work directories, ownership and modes,\n"
    "         no symlink where a directory belongs, no mount inside. Exits 1 on a problem.\n"
    "reset    remove one Domain's persistent directories and git-ignored copies; keeps\n"
    "         its store (history) and logs, never touches the workspace. Refused while\n"
    "         the Domain runs unless --stop; asks on a terminal, else needs --yes.\n"
    "fix-ownership  give back to you (uid and gid) what a sandbox left in the Domain's\n"
    "         workspace and read-write volumes owned by one of your subordinate ids, so\n"
    "         that you can change or remove it; setuid/setgid bits of those files are\n"
    "         cleared. Every teardown does this; this is for what older versions left.\n"
    "         Never follows a symlink or enters another mount. Refused while the Domain\n"
    "         runs unless --stop. Exits 1 when something could not be given back.\n"
    "\n"
    "inspect and verify only read: a running Domain is not disturbed.\n"
    "\n"
    "The Domain (inspect, verify, reset, fix-ownership): DOMAIN is a prefix of its ID (as 'state "
    "list'\n"
    "shows); otherwise the workspace's (chosen as for 'run'), of --profile P when the\n"
    "workspace has several.\n"
    "\n"
    "Options:\n"
    "  --profile P        the Domain of this profile\n"
    "  --workspace DIR    the Domain of this workspace (default: as for 'run')\n"
    "  --stop             reset, fix-ownership: stop the running Domain cleanly first\n"
    "  --yes              reset: do not ask (needed when stdin is not a terminal)\n"
    "  --json             print JSON\n";

/* Parse the options of inspect/verify/reset/fix-ownership (--stop for the
 * last two, --yes for reset); a usage error returns 2. */
static int parse_opts(int argc, char **argv, bool stop_ok, bool yes_ok, state_opts *o)
{
    enum { OPT_PROFILE, OPT_WORKSPACE, OPT_JSON, OPT_STOP, OPT_YES };
    const lz_option options[] = {
        { "profile", 0, "P", OPT_PROFILE },
        { "workspace", 0, "DIR", OPT_WORKSPACE },
        { "json", 0, NULL, OPT_JSON },
        { stop_ok ? "stop" : NULL, 0, NULL, OPT_STOP },
        { yes_ok ? "yes" : NULL, 0, NULL, OPT_YES },
    };
    const char *sub = argv[1];
    lz_opt_parser p;
    lz_opt_init(&p, options, LZ_ARRAY_SIZE(options), argc, argv, 2);
    for (int opt; (opt = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        switch (opt) {
        case LZ_OPT_ERROR:
            return lz_cli_usage_error("state", "%s: %s", sub, p.error);
        case LZ_OPT_ARGUMENT:
            if (o->id_prefix)
                return lz_cli_usage_error("state", "%s: unexpected argument '%s'", sub, p.arg);
            o->id_prefix = p.arg;
            break;
        case OPT_PROFILE:
            o->profile = p.value;
            break;
        case OPT_WORKSPACE:
            o->workspace = p.value;
            break;
        case OPT_JSON:
            o->as_json = true;
            break;
        case OPT_STOP:
            o->stop = true;
            break;
        default:
            o->yes = true;
            break;
        }
    }
    if (o->id_prefix) {
        size_t n = strlen(o->id_prefix);
        if (n > 64 || strspn(o->id_prefix, "0123456789abcdef") != n)
            return lz_cli_usage_error("state",
                                      "%s: '%s' is not a Domain ID prefix (lowercase "
                                      "hex, as 'lazaret state list' shows; a profile "
                                      "is named with --profile)",
                                      sub, o->id_prefix);
        if (o->profile || o->workspace)
            return lz_cli_usage_error("state",
                                      "%s: a Domain ID prefix cannot be combined with "
                                      "--profile or --workspace",
                                      sub);
    }
    return 0;
}

int lz_cmd_state(int argc, char **argv, const lz_global_options *g)
{
    if (argc < 2)
        return lz_cli_usage_error("state", "which one: list, inspect, verify, reset or "
                                           "fix-ownership");
    const char *sub = argv[1];
    if (strcmp(sub, "list") == 0) {
        static const lz_option options[] = { { "json", 0, NULL, 0 } };
        bool as_json = false;
        int r =
            lz_cli_parse_flags("state", options, LZ_ARRAY_SIZE(options), argc, argv, 2, &as_json);
        return r != LZ_EXIT_OK ? r : state_list_all(as_json, g);
    }
    bool fix = strcmp(sub, "fix-ownership") == 0;
    if (strcmp(sub, "inspect") == 0 || strcmp(sub, "verify") == 0 || strcmp(sub, "reset") == 0 ||
        fix) {
        state_opts o = { 0 };
        int r = parse_opts(argc, argv, sub[0] == 'r' || fix, sub[0] == 'r', &o);
        if (r != 0)
            return r;
        if (fix)
            return state_fix_ownership(g, &o);
        if (sub[0] == 'i')
            return state_inspect(g, &o);
        if (sub[0] == 'v')
            return state_verify(g, &o);
        return state_reset(g, &o);
    }
    return lz_cli_usage_error("state", "unknown subcommand '%s'", sub);
}
