/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/spawn.h"
#include "common/util.h"

int lz_subid_lookup(const char *file, uid_t uid, uint32_t min_count, lz_subid_range *ret,
                    lz_error **err)
{
    struct passwd *pw = getpwuid(uid);
    char uidbuf[32];
    snprintf(uidbuf, sizeof(uidbuf), "%u", (unsigned)uid);
    FILE *f = fopen(file, "re");
    if (!f) {
        lz_error_set(err, errno, "cannot read %s", file);
        return lz_error_hint(err,
                             "install the uidmap package and give your user a range: sudo "
                             "usermod --add-subuids 100000-165535 --add-subgids "
                             "100000-165535 %s",
                             pw ? pw->pw_name : uidbuf);
    }
    char line[512];
    int found = -1;
    while (fgets(line, sizeof(line), f)) {
        char *name = strtok(line, ":\n");
        char *start = strtok(NULL, ":\n");
        char *count = strtok(NULL, ":\n");
        if (!name || !start || !count)
            continue;
        if (strcmp(name, uidbuf) != 0 && !(pw && strcmp(name, pw->pw_name) == 0))
            continue;
        char *e1, *e2;
        unsigned long s = strtoul(start, &e1, 10), c = strtoul(count, &e2, 10);
        if (*e1 || *e2 || s == 0 || c < min_count || s > UINT32_MAX || c > UINT32_MAX)
            continue;
        ret->start = (uint32_t)s;
        ret->count = (uint32_t)c;
        found = 0;
        break;
    }
    fclose(f);
    if (found < 0) {
        lz_error_set(err, 0, "%s has no range of at least %u ids for %s", file, min_count,
                     pw ? pw->pw_name : uidbuf);
        return lz_error_hint(err,
                             "sudo usermod --add-subuids 100000-165535 --add-subgids "
                             "100000-165535 %s",
                             pw ? pw->pw_name : uidbuf);
    }
    return 0;
}

static int write_map(const char *tool, pid_t pid, unsigned id, const lz_subid_range *r,
                     lz_error **err)
{
    _cleanup_free_ char *path = NULL;
    if (lz_spawn_find_program(tool, LZ_SPAWN_SYSTEM_PATH, &path, err) < 0)
        return lz_error_hint(err, "install it: sudo apt-get install uidmap");
    char spid[16], sid[16], sstart[16], scount[16];
    snprintf(spid, sizeof(spid), "%d", (int)pid);
    snprintf(sid, sizeof(sid), "%u", id);
    snprintf(sstart, sizeof(sstart), "%u", r->start);
    snprintf(scount, sizeof(scount), "%u", r->count);
    char *const argv[] = {(char *)tool, spid,   (char *)"0", sid, (char *)"1",
                          (char *)"1",  sstart, scount,      NULL};
    lz_spawn_options opt = {.merge_stderr = true};
    lz_spawn_output out = {0};
    int status = lz_spawn_capture(path, argv, &opt, &out, err);
    if (status < 0)
        return -1;
    if (status != 0) {
        while (out.len && out.data[out.len - 1] == '\n')
            out.data[--out.len] = '\0';
        lz_error_set(err, 0, "%s failed (status %d): %s", tool, status, out.data ? out.data : "");
        lz_spawn_output_free(&out);
        return lz_error_hint(err,
                             "check that %s is setuid root and that your user has a "
                             "range in /etc/sub%cid (lazaret doctor)",
                             path, tool[3] == 'u' ? 'u' : 'g');
    }
    lz_spawn_output_free(&out);
    return 0;
}

int lz_userns_spawn(int (*fn)(void *arg), void *arg, pid_t *ret_pid, lz_error **err)
{
    lz_subid_range uids, gids;
    if (lz_subid_lookup("/etc/subuid", getuid(), 65536, &uids, err) < 0 ||
        lz_subid_lookup("/etc/subgid", getuid(), 65536, &gids, err) < 0)
        return -1;

    int to_parent[2], to_child[2];
    if (pipe2(to_parent, O_CLOEXEC) < 0)
        return lz_error_set(err, errno, "cannot create a pipe");
    if (pipe2(to_child, O_CLOEXEC) < 0) {
        close(to_parent[0]);
        close(to_parent[1]);
        return lz_error_set(err, errno, "cannot create a pipe");
    }
    uid_t uid = getuid();
    gid_t gid = getgid();
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(to_parent[0]), close(to_parent[1]), close(to_child[0]), close(to_child[1]);
        return lz_error_set(err, e, "cannot fork the Runtime Supervisor");
    }
    if (pid == 0) {
        close(to_parent[0]);
        close(to_child[1]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        char c = unshare(CLONE_NEWUSER) == 0 ? 'u' : 'e';
        if (write(to_parent[1], &c, 1) != 1 || c != 'u')
            _exit(126);
        if (read(to_child[0], &c, 1) != 1 || c != 'g')
            _exit(126);
        close(to_parent[1]);
        close(to_child[0]);
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
            _exit(126);
        if (setgroups(0, NULL) < 0 && errno != EPERM)
            _exit(126);
        _exit(fn(arg));
    }
    close(to_parent[1]);
    close(to_child[0]);
    char c = 0;
    int r = -1;
    if (read(to_parent[0], &c, 1) != 1 || c != 'u') {
        lz_error_set(err, 0, "cannot create a user namespace");
        lz_error_hint(err, "unprivileged user namespaces must be allowed (sysctl "
                           "user.max_user_namespaces > 0; lazaret doctor checks it)");
    } else if (write_map("newuidmap", pid, uid, &uids, err) == 0 &&
               write_map("newgidmap", pid, gid, &gids, err) == 0) {
        c = 'g';
        if (write(to_child[1], &c, 1) == 1)
            r = 0;
        else
            lz_error_set(err, errno, "cannot start the Runtime Supervisor");
    }
    close(to_parent[0]);
    close(to_child[1]);
    (void)uid, (void)gid;
    if (r < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    *ret_pid = pid;
    return 0;
}
