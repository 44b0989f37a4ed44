/* SPDX-License-Identifier: Apache-2.0
 *
 * Starting a host command of an escalation request (escalation_internal.h):
 * where it may run from (its working directory, bound to the decision; no
 * program from where the sandbox writes), whether it is Git (then the
 * sandbox stays frozen while it runs), and what it gets: a fixed
 * environment, its pinned executable, its keeper (keeper.h).
 */
#include "coordinator/escalation_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "coordinator/keeper.h"
#include "fs/confined.h"

/* The host directory for the request's working directory: the same place
 * in the workspace when it lies there (a plain directory, reached without
 * a symlink), else the workspace root. expect: the identity it had when
 * the request was decided; another object now (the sandbox swapped the
 * directory, attack round i11d, D1: a command approved for
 * /workspace/scratch ran in the workspace root and copied the host's
 * git-ignored .env) fails. *ret_id: its identity. -1 with *err. */
int esc_open_cwd(coord *c, const char *cwd, const lz_identity *expect, lz_identity *ret_id,
                 lz_error **err)
{
    int ws = lz_plan_open(&c->a->cfg->workspace, O_PATH | O_DIRECTORY, true, err);
    if (ws < 0)
        return -1;
    const char *rel = strncmp(cwd, "/workspace/", 11) == 0 ? cwd + 11 : NULL;
    int d = ws;
    if (rel && *rel) {
        d = lz_open_confined(ws, rel, O_PATH | O_DIRECTORY, 0, "working directory", err);
        close(ws);
        if (d < 0)
            return lz_error_prefix(err,
                                   "the working directory %s is not a plain directory of "
                                   "the workspace on this machine",
                                   cwd);
    }
    lz_identity id;
    if (lz_identity_of(d, &id, err) < 0) {
        close(d);
        return -1;
    }
    if (expect && (id.dev != expect->dev || id.ino != expect->ino)) {
        close(d);
        return lz_error_set(err, ESTALE,
                            "the working directory %s is another directory than "
                            "when the request was decided",
                            cwd);
    }
    if (ret_id)
        *ret_id = id;
    return d;
}

/* Where the sandbox can write on the host: a program there is refused
 * whatever the decision (attack round i11, A5: an approved workspace script
 * was rewritten in place after the check, and its interpreter read the new
 * text). Its workspace, its read-write volumes, and the storage and runtime
 * trees (state uppers, ignored copies, the mailbox). A file elsewhere with
 * one hard link is out of the sandbox's reach: its mounts are the only way
 * it writes, and a rename cannot leave a mount. NULL or what it is. */
const char *esc_sandbox_writable(const lz_resolved_config *cfg, const char *label)
{
    if (cfg->workspace.label && lz_path_overlaps(label, cfg->workspace.label))
        return "the workspace";
    for (size_t i = 0; i < cfg->n_volumes; i++)
        if (cfg->volumes[i].access == LZ_ACCESS_READ_WRITE && cfg->volumes[i].source.label &&
            lz_path_overlaps(label, cfg->volumes[i].source.label))
            return "a read-write volume";
    if (cfg->storage_root.label && lz_path_overlaps(label, cfg->storage_root.label))
        return "Lazaret's storage (the sandboxes' state)";
    if (cfg->runtime_root.label && lz_path_overlaps(label, cfg->runtime_root.label))
        return "Lazaret's runtime directory";
    return NULL;
}

/* Is the object open at fd a "#!" script? Its interpreter needs the
 * descriptor after the exec (spawn.h, exec_fd_keep). */
static bool is_script(int fd)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int r = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (r < 0)
        return false;
    char head[2] = { 0 };
    bool script = read(r, head, 2) == 2 && head[0] == '#' && head[1] == '!';
    close(r);
    return script;
}

/* What a keeper's copy of the coordinator's memory must not keep: the
 * outbox signing seed and the profile's environment values. */
static void wipe_for_keeper(void *arg)
{
    coord *c = arg;
    explicit_bzero(c->esc->coord_seed, sizeof(c->esc->coord_seed));
    lz_resolved_config *cfg = (lz_resolved_config *) c->a->cfg;
    for (size_t i = 0; i < cfg->n_env; i++)
        if (cfg->env[i].value)
            explicit_bzero(cfg->env[i].value, strlen(cfg->env[i].value));
}

/* Is this name Git (git, or one of its git-* programs)? */
static bool names_git(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strcmp(base, "git") == 0 || strncmp(base, "git-", 4) == 0;
}

/* Does the request run Git: the executable Lazaret runs (its canonical
 * path), or a wrapper that runs it (`env git status`, `timeout 60 git
 * fetch`, `nice git …`: any argument that names Git; attack round i23b ran
 * `/usr/bin/env git status`)? A program that runs Git on its own (`make`,
 * `gh`) cannot be told; docs/escalation.md says what holds for it. */
bool esc_runs_git(const escalation *e)
{
    if (names_git(e->plan->label))
        return true;
    for (size_t i = 0; i < e->req.argc; i++)
        if (names_git(e->req.argv[i]))
            return true;
    return false;
}

int esc_host_start(coord *c, escalation *e, int exe, int cwd, int out[2], lz_error **err)
{
    int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0)
                close(po[i]);
        }
        return lz_error_set(err, errno, "cannot create pipes for the command's output");
    }
    /* A fixed, minimal environment: nothing of the sandbox's or of the
     * coordinator's own (no LD_*, GIT_*, PAGER, BASH_ENV, ...). */
    struct passwd *pw = getpwuid(getuid());
    char *env_home = lz_xasprintf("HOME=%s", c->esc->home);
    char *env_user = lz_xasprintf("USER=%s", pw && pw->pw_name ? pw->pw_name : "");
    char *env_logname = lz_xasprintf("LOGNAME=%s", pw && pw->pw_name ? pw->pw_name : "");
    /* Git: a host git (or a program that runs one, such as gh) uses the
     * workspace's validated repository and discovers none: a repository
     * the sandbox makes under the working directory — after any audit, at a
     * moment it chooses (i11b, B2) — is never read. Without a .git
     * directory in the workspace, no repository at all. Bare-repository
     * discovery and fsmonitor are off in any case. */
    const char *ws = c->a->cfg->workspace.label;
    struct stat gsb;
    bool has_git = c->git.ws_fd >= 0 &&
                   fstatat(c->git.ws_fd, ".git", &gsb, AT_SYMLINK_NOFOLLOW) == 0 &&
                   S_ISDIR(gsb.st_mode);
    char *env_gitdir = has_git ? lz_xasprintf("GIT_DIR=%s/.git", ws)
                               : lz_xstrdup("GIT_DIR=/nonexistent/lazaret-no-repository");
    char *env_worktree = lz_xasprintf("GIT_WORK_TREE=%s", ws);
    char *envp[] = { (char *) "PATH=/usr/local/bin:/usr/bin:/bin",
                     env_home,
                     env_user,
                     env_logname,
                     (char *) "LANG=C.UTF-8",
                     (char *) "TERM=dumb",
                     env_gitdir,
                     env_worktree,
                     (char *) "GIT_CONFIG_COUNT=2",
                     (char *) "GIT_CONFIG_KEY_0=safe.bareRepository",
                     (char *) "GIT_CONFIG_VALUE_0=explicit",
                     (char *) "GIT_CONFIG_KEY_1=core.fsmonitor",
                     (char *) "GIT_CONFIG_VALUE_1=false",
                     NULL };
    lz_spawn_fd fds[] = { { po[1], 1 }, { pe[1], 2 } };
    lz_spawn_async opt = { .envp = envp,
                           .fds = fds,
                           .n_fds = 2,
                           .new_session = true,
                           .exec_from_fd = true,
                           .exec_fd = exe,
                           .exec_fd_keep = is_script(exe),
                           .chdir_to_fd = true,
                           .cwd_fd = cwd };
    int r = keeper_start(e->plan->label, e->req.argv, &opt, wipe_for_keeper, c, &e->child, err);
    free(env_home);
    free(env_user);
    free(env_logname);
    free(env_gitdir);
    free(env_worktree);
    close(po[1]);
    close(pe[1]);
    if (r < 0) {
        close(po[0]);
        close(pe[0]);
        return -1;
    }
    out[0] = po[0];
    out[1] = pe[0];
    return 0;
}
