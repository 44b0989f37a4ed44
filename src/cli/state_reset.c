/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret state reset: removes one Domain's persistent directories and
 * git-ignored copies through descriptors (fs/remove.h) while holding the
 * Domain lock (docs/runtime.md "State inspection and reset");
 * lazaret state fix-ownership: gives back to the developer what a sandbox
 * left in the workspace and read-write volumes owned by a subordinate id,
 * as every teardown now does (supervisor/giveback.h; docs/runtime.md
 * "Ownership give-back"), for what older versions left.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/state.h"
#include "common/text.h"
#include "common/util.h"
#include "config/resolve.h"
#include "config/source.h"
#include "fs/confined.h"
#include "fs/remove.h"
#include "oci/layout.h"
#include "store/domain_root.h"
#include "supervisor/giveback.h"
#include "ns/userns.h"

/* The Domain lock of id, taken (lz_domain_lock_take) in $XDG_RUNTIME_DIR. */
static int take_domain_lock(const char *id, int wait_ms, lz_error **err)
{
    const char *rt = getenv("XDG_RUNTIME_DIR");
    const char *what = NULL;
    _cleanup_free_ char *norm = rt && *rt ? lz_env_path_normalize(rt, &what) : NULL;
    if (!norm) {
        lz_error_set(err, 0, "XDG_RUNTIME_DIR is not set or not an absolute path");
        return lz_error_hint(err, "export XDG_RUNTIME_DIR=/run/user/$(id -u)");
    }
    return lz_domain_lock_take(norm, id, wait_ms, err);
}

/* Remove droot/name: what a sandbox user other than the developer created
 * belongs to a subordinate uid on the host and is removed from inside a
 * user namespace (lz_remove_tree_mapped). */
static int remove_layer(int droot, const char *name, const char *label, lz_error **err)
{
    if (lz_remove_tree_mapped(droot, name, label, err) == 0)
        return 0;
    return lz_error_hint(err, "nothing else was changed; see 'lazaret state verify' (a mount "
                              "point or a file outside your subordinate ids stops the removal)");
}

int state_reset(const lz_global_options *g, const state_opts *opts)
{
    state_target t = { .droot = -1 };
    lz_error *err = NULL;
    int status = LZ_EXIT_FAILURE;
    int lock = -1;
    bool stopped = false;
    char *pws = NULL, *what = NULL;
    state_walk ws = { 0 }, wi = { 0 };
    char a[32], b[32];
    if (state_select_target(g, opts, &t, &err) < 0)
        goto out;
    struct stat st;
    if (fstat(t.droot, &st) < 0 || st.st_uid != getuid()) {
        lz_error_set(&err, 0, "the Domain Root %s is not yours", t.droot_label);
        lz_error_hint(&err, "'lazaret state verify %.12s' says what is wrong", t.id);
        goto out;
    }
    if (t.running && !opts->stop) {
        lz_error_set(&err, 0,
                     "Domain %.16s… (profile '%s') is running: its persistent state "
                     "is in use",
                     t.id, t.store_error ? "?" : t.sum.profile);
        lz_error_hint(&err,
                      "end its sessions, or add --stop to stop it cleanly first "
                      "(lazaret state reset --stop %.12s)",
                      t.id);
        goto out;
    }
    if (t.running && t.store_error) {
        lz_error_set(&err, 0,
                     "Domain %.16s… is running and its store cannot be read, so it "
                     "cannot be stopped from here",
                     t.id);
        lz_error_hint(&err, "run 'lazaret stop' in its workspace, then reset again");
        goto out;
    }
    ws = state_persistent_size(t.droot);
    wi = state_size_of(t.droot, "ignored");
    state_human(ws.bytes, a, sizeof(a));
    state_human(wi.bytes, b, sizeof(b));
    pws = t.store_error ? lz_xstrdup("?") : lz_text_printable(t.sum.workspace);
    what = lz_xasprintf(
        "This removes from Domain %s (profile '%s', workspace %s):\n"
        "  %s/state/    the persistent directories (%s)\n"
        "  %s/ignored/  the Domain's copies of git-ignored paths (%s)\n"
        "It keeps the Domain Store (its history of generations, sessions and host escalations) "
        "and logs/. The workspace is not touched.\n%s",
        t.id, t.store_error ? "?" : t.sum.profile, pws, t.droot_label, a, t.droot_label, b,
        t.running ? "The Domain is running: it is stopped first, ending its sessions.\n" : "");
    if (!opts->yes) {
        if (!isatty(STDIN_FILENO)) {
            lz_error_set(&err, 0,
                         "refusing to reset Domain %.16s… without confirmation: "
                         "standard input is not a terminal",
                         t.id);
            lz_error_hint(&err, "add --yes to confirm (lazaret state reset --yes %.12s)", t.id);
            goto out;
        }
        if (!lz_cli_confirm("%sReset Domain %.16s…?", what, t.id)) {
            fprintf(stderr, "Nothing was removed.\n");
            goto out;
        }
    }
    if (t.running) {
        /* 'lazaret stop''s path: over the session channel, waiting (30 s at
         * most) until the teardown released the Domain lock. */
        if (lz_cli_stop(t.sum.profile, t.sum.workspace) != LZ_EXIT_OK) {
            lz_error_set(&err, 0, "cannot stop Domain %.16s…; nothing was removed", t.id);
            lz_error_hint(&err, "see 'lazaret status' and %s/logs/coordinator.log", t.droot_label);
            goto out;
        }
        stopped = true;
    }
    /* Held until everything is removed: no generation can start meanwhile
     * (a `lazaret run` waits for the lock), none can be live. */
    lock = take_domain_lock(t.id, stopped ? 10000 : 0, &err);
    if (lock < 0)
        goto out;
    static const char *const layers[] = { LZ_DROOT_STATE, LZ_DROOT_IGNORED };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(layers); i++)
        if (remove_layer(t.droot, layers[i], t.droot_label, &err) < 0) {
            lz_error_prefix(&err, "reset of Domain %.16s… incomplete", t.id);
            goto out;
        }
    /* The records of what the Domain isolated and of the placeholder
     * directories it made (src/gitsentry/ignored.c): a path once isolated stays so,
     * and the placeholder budget stays spent, until this reset; and of the
     * sandbox user its files were made for (bootstrap.c). */
    static const char *const records[] = { LZ_DROOT_IGNORED_RECORD, LZ_DROOT_PLACEHOLDER_RECORD,
                                           LZ_SANDBOX_USER_RECORD };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(records); i++)
        if (unlinkat(t.droot, records[i], 0) < 0 && errno != ENOENT) {
            lz_error_set(&err, errno, "cannot remove %s/%s", t.droot_label, records[i]);
            goto out;
        }
    if (opts->as_json) {
        json_t *o = json_pack("{s:s, s:b, s:[s,s], s:[s,s]}", "domain_id", t.id, "stopped", stopped,
                              "removed", "state", "ignored", "kept", "store.db", "logs");
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
        json_decref(o);
    } else {
        printf("reset Domain %.16s…: removed state/ (%s) and ignored/ (%s); kept store.db and "
               "logs/\n",
               t.id, a, b);
    }
    status = LZ_EXIT_OK;
out:
    if (err) {
        lz_error_report(err, stderr);
        lz_error_free(err);
    }
    if (lock >= 0)
        close(lock);
    free(pws);
    free(what);
    state_target_clear(&t);
    return status;
}

/* ---- fix-ownership ---------------------------------------------------------- */

/* Stop a running Domain through 'lazaret stop''s path (as reset does). */
static int stop_target(const state_target *t, lz_error **err)
{
    if (lz_cli_stop(t->sum.profile, t->sum.workspace) == LZ_EXIT_OK)
        return 0;
    lz_error_set(err, 0, "cannot stop Domain %.16s…; nothing was changed", t->id);
    return lz_error_hint(err, "see 'lazaret status' and %s/logs/coordinator.log", t->droot_label);
}

/* The workspace alone, by the path the store records: for a profile that
 * no longer loads. */
static int fix_workspace_only(const char *workspace, char **ret_report, lz_error **err)
{
    lz_path_plan plan = LZ_PATH_PLAN_INIT;
    if (lz_plan_existing(workspace, &plan, err) < 0)
        return lz_error_prefix(err, "cannot open the workspace");
    lz_giveback_tree tree = { .label = plan.label };
    tree.fd = lz_plan_open(&plan, O_PATH | O_DIRECTORY, true, err);
    int r = -1;
    if (tree.fd >= 0 && lz_giveback_trees(&tree, 1, err) == 0) {
        *ret_report = lz_giveback_tree_line(&tree);
        r = 0;
    }
    if (tree.fd >= 0)
        close(tree.fd);
    lz_plan_clear(&plan);
    return r;
}

int state_fix_ownership(const lz_global_options *g, const state_opts *opts)
{
    state_target t = { .droot = -1 };
    lz_error *err = NULL, *cfg_err = NULL;
    int status = LZ_EXIT_FAILURE;
    int lock = -1;
    bool stopped = false, incomplete = false;
    lz_resolved_config *cfg = NULL;
    char *report = NULL;
    if (state_select_target(g, opts, &t, &err) < 0)
        goto out;
    if (t.store_error) {
        lz_error_set(&err, 0,
                     "the store of Domain %.16s… cannot be read (%s): its workspace "
                     "is not known",
                     t.id, t.store_error);
        lz_error_hint(&err, "'lazaret state verify %.12s' says what is wrong", t.id);
        goto out;
    }
    if (t.running && !opts->stop) {
        lz_error_set(&err, 0,
                     "Domain %.16s… (profile '%s') is running: its sandbox can still "
                     "change what would be given back",
                     t.id, t.sum.profile);
        lz_error_hint(&err,
                      "end its sessions (its teardown gives ownership back itself), or "
                      "add --stop (lazaret state fix-ownership --stop %.12s)",
                      t.id);
        goto out;
    }
    if (t.running) {
        if (stop_target(&t, &err) < 0)
            goto out;
        stopped = true;
    }
    /* Held for the whole walk: no sandbox of this Domain runs meanwhile. */
    lock = take_domain_lock(t.id, stopped ? 10000 : 0, &err);
    if (lock < 0)
        goto out;
    /* The profile gives the volumes; the workspace is the store's. */
    lz_load_request req = { .config_path = g->config_path,
                            .profile = t.sum.profile,
                            .workspace = t.sum.workspace,
                            .layout = lz_sandbox_layout_production() };
    if (lz_config_load(&req, &cfg, &cfg_err) == 0) {
        if (lz_giveback_domain(cfg, &report, &incomplete, &err) < 0)
            goto out;
    } else if (fix_workspace_only(t.sum.workspace, &report, &err) < 0) {
        goto out;
    }
    if (opts->as_json) {
        json_t *o = json_pack("{s:s, s:b, s:s, s:b}", "domain_id", t.id, "stopped", stopped,
                              "report", report ? report : "", "complete", !incomplete);
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
        json_decref(o);
    } else if (report) {
        printf("%s\n", report);
    } else {
        _cleanup_free_ char *pws = lz_text_printable(t.sum.workspace);
        printf("nothing in %s or the profile's read-write volumes belongs to your "
               "subordinate ids\n",
               pws);
    }
    if (cfg_err) {
        /* The workspace is done; the volumes need the profile (a missing
         * env: variable is enough to stop it loading). */
        lz_error_set(&err, cfg_err->errnum,
                     "the workspace was walked, but not the volumes of "
                     "profile '%s': %s",
                     t.sum.profile, cfg_err->message);
        lz_error_hint(&err, "%s; then run this again to cover the volumes",
                      cfg_err->hint ? cfg_err->hint : "fix the configuration");
        goto out;
    }
    if (incomplete) {
        lz_error_set(&err, 0,
                     "some entries of Domain %.16s…'s workspace or volumes could not "
                     "be given back (listed above)",
                     t.id);
        lz_error_hint(&err,
                      "an entry left is owned by ids outside your subordinate range, lies "
                      "below the walk's %u levels, or sits in a volume that could not be "
                      "opened; remove such a tree as root over your subordinate ids: "
                      "unshare --map-auto --map-root-user rm -rf DIR",
                      LZ_GIVEBACK_MAX_DEPTH);
        goto out;
    }
    status = LZ_EXIT_OK;
out:
    if (err) {
        lz_error_report(err, stderr);
        lz_error_free(err);
    }
    lz_error_free(cfg_err);
    lz_resolved_config_free(cfg);
    if (lock >= 0)
        close(lock);
    free(report);
    state_target_clear(&t);
    return status;
}
