/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret doctor: check every host prerequisite of a rootless gVisor sandbox
 * and print, for each failure, the command that fixes it.
 *
 * Output contract (tests and users rely on it): one line per check,
 *   "<status>  <check name>  <what was found>"
 * with status "ok", "warn" or "FAIL", optionally followed by an indented
 * "note: ..." (why it matters) and, for FAIL, "fix: <command to paste>".
 * Exit 0 when no check failed (warnings allowed), 1 otherwise.
 *
 * Doctor only observes: it starts programs (runsc --version, newuidmap and
 * newgidmap on a throw-away child) through common/spawn.h, never a shell, and
 * it changes nothing on the host. Values of environment variables are not
 * printed (common/error.h); fixes refer to them by name instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pwd.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/error.h"
#include "common/fork.h"
#include "common/nodump.h"
#include "common/spawn.h"
#include "oci/spec.h"
#include "supervisor/limits.h"
#include "supervisor/runsc_info.h"
#include "ns/userns.h"
#include "common/text.h"
#include "common/util.h"
#include "lazaret-version.h"

const char lz_usage_doctor[] =
    "Usage: lazaret doctor\n"
    "\n"
    "Check every prerequisite of Lazaret on this host and print one line per\n"
    "check: ok, warn or FAIL. Each failure is followed by the command that fixes\n"
    "it. Also reports which runsc capabilities Lazaret will use and why.\n"
    "\n"
    "Checks: runsc (version, network mode, statx fix), cgroups, newuidmap and\n"
    "newgidmap, /etc/subuid and /etc/subgid ranges, user namespaces, id mapping,\n"
    "slirp4netns, /dev/net/tun, nft, skopeo, umoci, XDG_RUNTIME_DIR, core dumps.\n"
    "\n"
    "Exit status: 0 when every required check passed (warnings allowed), 1 when\n"
    "at least one failed, 2 on a usage error.\n";

/* runsc --version answers at once; a hang is a broken install. */
#define PROBE_TIMEOUT_MS 5000

typedef enum { ST_OK, ST_WARN, ST_FAIL } check_status;

typedef struct doctor {
    uid_t uid;
    gid_t gid;
    char *user;        /* login name, or the uid as text without a passwd entry */
    char *search_path; /* caller's PATH (absolute entries only are used), then system dirs */
    int failed;
    int warned;
    lz_subid_range subuid, subgid; /* what `lazaret run` maps, when found */
    bool subuid_ok, subgid_ok;
    char *newuidmap, *newgidmap; /* found and usable, else NULL */
    bool userns_ok;
} doctor;

static void report(doctor *d, check_status s, const char *check, const char *note, const char *fix,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void report(doctor *d, check_status s, const char *check, const char *note, const char *fix,
                   const char *fmt, ...)
{
    static const char *const word[] = { "ok", "warn", "FAIL" };
    va_list ap;
    printf("%-4s  %-16s ", word[s], check);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (note)
        printf("      note: %s\n", note);
    if (fix)
        printf("      fix:  %s\n", fix);
    if (s == ST_FAIL)
        d->failed++;
    else if (s == ST_WARN)
        d->warned++;
}

/* Read a small integer file such as a sysctl. 0 on success, -1 with errno. */
static int read_long_file(const char *path, long *ret)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long v;
    int ok = fscanf(f, "%ld", &v) == 1;
    fclose(f);
    if (!ok) {
        errno = EINVAL;
        return -1;
    }
    *ret = v;
    return 0;
}

static int find_tool(doctor *d, const char *name, char **ret_path)
{
    lz_error *e = NULL;
    int r = lz_spawn_find_program(name, d->search_path, ret_path, &e);
    lz_error_free(e);
    return r;
}

/* ---- runsc ---------------------------------------------------------------- */

/* What the first start with this runsc learned (runsc_info.h), from the
 * default Storage Root's cache: the same key a start uses (this binary,
 * this runsc, this kernel). false when nothing was learned yet. */
static bool learned_runsc_facts(const char *runsc, lz_runsc_facts *ret)
{
    char key[LZ_RUNSC_FACTS_KEY_MAX];
    if (lz_runsc_facts_key(runsc, key, sizeof(key)) < 0)
        return false;
    const char *dh = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    _cleanup_free_ char *dir = NULL;
    if (dh && dh[0] == '/')
        dir = lz_xasprintf("%s/lazaret", dh);
    else if (home && home[0] == '/')
        dir = lz_xasprintf("%s/.local/share/lazaret", home);
    else
        return false;
    int fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    int r = lz_runsc_facts_load(fd, key, ret);
    close(fd);
    return r == 0;
}

static void check_runsc(doctor *d)
{
    _cleanup_free_ char *path = NULL;
    bool from_env = false;
    lz_error *le = NULL;
    if (lz_runsc_locate(&path, &from_env, &le) < 0) {
        report(d, ST_FAIL, "runsc", "runsc is gVisor's container runtime: every sandbox runs in it",
               le->hint ? le->hint : "sudo apt-get install runsc", "%s%s%s", le->message,
               le->errnum ? ": " : "", le->errnum ? strerror(le->errnum) : "");
        lz_error_free(le);
        return;
    }
    const char *reinstall = from_env ? "point " LZ_RUNSC_ENV " at a working runsc, or unset it"
                                     : "sudo apt-get install --reinstall runsc";

    char *argv[] = { (char *) "runsc", (char *) "--version", NULL };
    lz_spawn_options opt = { .timeout_ms = PROBE_TIMEOUT_MS, .capture_max = 4096 };
    lz_spawn_output out = { 0 };
    lz_error *e = NULL;
    int st = lz_spawn_capture(path, argv, &opt, &out, &e);
    if (st != 0) {
        if (st < 0)
            report(d, ST_FAIL, "runsc", NULL, reinstall, "%s --version failed: %s%s%s", path,
                   e->message, e->errnum ? ": " : "", e->errnum ? strerror(e->errnum) : "");
        else
            report(d, ST_FAIL, "runsc", NULL, reinstall, "%s --version exited with status %d", path,
                   st);
        lz_error_free(e);
        lz_spawn_output_free(&out);
        return;
    }

    const char *v = strstr(out.data, "runsc version ");
    _cleanup_free_ char *version =
        lz_text_line_ascii(v ? v + strlen("runsc version ") : out.data, 64);
    long date = lz_runsc_release_date(out.data);
    lz_spawn_output_free(&out);

    const char *origin = from_env ? "set by " LZ_RUNSC_ENV : "from the system directories";
    char when[32] = "unknown";
    if (date)
        snprintf(when, sizeof(when), "%04ld-%02ld-%02ld", date / 10000, date / 100 % 100,
                 date % 100);
    if (date)
        report(d, ST_OK, "runsc", NULL, NULL, "%s (%s), version %s (release %s)", path, origin,
               version, when);
    else
        report(d, ST_WARN, "runsc", NULL, NULL,
               "%s (%s), version '%s': release date unknown; Lazaret decides by what its probes "
               "find, not by the date",
               path, origin, version);

    /* The flags Lazaret passes, and the platform runsc picks itself
     * (Lazaret passes no --platform): from `runsc flags`. */
    char *fargv[] = { (char *) "runsc", (char *) "flags", NULL };
    lz_spawn_options fopt = { .timeout_ms = PROBE_TIMEOUT_MS,
                              .capture_max = LZ_RUNSC_FLAGS_MAX,
                              .merge_stderr = true }; /* runsc prints its flags on stderr */
    lz_spawn_output fl = { 0 };
    e = NULL;
    st = lz_spawn_capture(path, fargv, &fopt, &fl, &e);
    lz_error_free(e);
    if (st != 0 || !fl.data || fl.truncated) {
        report(d, ST_FAIL, "runsc flags", NULL, reinstall, "%s flags %s", path,
               st < 0 ? "could not run" : "failed");
        lz_spawn_output_free(&fl);
        return;
    }
    const char *missing = NULL;
    for (size_t i = 0; !missing && lz_runsc_needed_flags[i]; i++)
        if (!lz_runsc_flags_has(fl.data, lz_runsc_needed_flags[i]))
            missing = lz_runsc_needed_flags[i];
    if (missing)
        report(d, ST_FAIL, "runsc flags", "Lazaret refuses to start a sandbox with this runsc",
               "use a supported runsc (docs/runtime.md \"Which runsc\")", "%s does not accept --%s",
               path, missing);
    else
        report(d, ST_OK, "runsc flags", NULL, NULL,
               "accepts every flag Lazaret passes (--root, --ignore-cgroups, --network, "
               "--overlay2, --log)");
    char platform[32];
    if (lz_runsc_flags_default_platform(fl.data, platform, sizeof(platform)))
        report(d, ST_OK, "platform", NULL, NULL,
               "%s (runsc's default; Lazaret passes no --platform)", platform);
    else
        report(d, ST_WARN, "platform", NULL, NULL,
               "unknown: 'runsc flags' names no default platform");
    lz_spawn_output_free(&fl);

    /* The release-dependent paths: what the first start with this runsc
     * learned, when it is in the default Storage Root. */
    lz_runsc_facts f;
    bool learned = learned_runsc_facts(path, &f);
    if (!learned)
        report(d, ST_OK, "network mode", NULL, NULL,
               "runsc's own network stack (--network=sandbox) inside a dedicated sandbox network "
               "namespace behind its router; whether this runsc needs /proc/sys/net covered for "
               "it (releases up to 2024-07-29 on Linux 6.5 and later) is learned by the first "
               "start with it");
    else if (f.netstack_cover)
        report(d, ST_OK, "network mode", NULL, NULL,
               "runsc's own network stack (--network=sandbox) inside a dedicated sandbox network "
               "namespace behind its router; learned at the first start: this runsc refuses it "
               "while /proc/sys/net/core shows the host's files, so the Runtime Supervisor covers "
               "/proc/sys/net in its own mount namespace (never host networking: its socket bugs "
               "break blocking reads and can end the sandbox)");
    else
        report(d, ST_OK, "network mode", NULL, NULL,
               "runsc's own network stack (--network=sandbox) inside a dedicated sandbox network "
               "namespace behind its router; learned at the first start: no cover of "
               "/proc/sys/net needed");
    if (!learned)
        report(d, ST_OK, "statx", NULL, NULL,
               "whether statx(AT_NO_AUTOMOUNT) works is learned by the first start with this "
               "runsc (releases before 2023-06 reject it: Lazaret then injects a preload library "
               "that clears the flag)");
    else if (f.statx_ok)
        report(d, ST_OK, "statx", NULL, NULL,
               "learned at the first start: statx(AT_NO_AUTOMOUNT) works, no workaround needed");
    else
        report(d, ST_WARN, "statx",
               "without it, ls and stat from coreutils 9 (Debian 12 and newer images) fail with "
               "\"Invalid argument\" inside the sandbox",
               NULL,
               "learned at the first start: this runsc rejects statx(AT_NO_AUTOMOUNT); Lazaret "
               "injects a preload library that clears the flag");
}

/* ---- resource limits (docs/limits.md) --------------------------------------- */

/* Which bounds hold for a Domain started now. Without a delegated cgroup
 * (check above) they are rlimits: the sentry's RLIMIT_FSIZE bounds its
 * memory file (all guest memory and the in-memory root file system), and
 * gVisor enforces the spec's RLIMIT_NPROC itself. Both hold with cgroups
 * too; runsc then adds the cgroup's own limits. */
static void check_limits(doctor *d)
{
    uint64_t mem = lz_limit_memory_effective(), def = lz_limit_memory_default();
    uint64_t tasks = lz_limit_tasks_effective(), tdef = lz_limit_tasks_default();
    const char *note = NULL;
    if (mem < def && tasks < tdef)
        note = "lowered by the RLIMIT_FSIZE (ulimit -f) and RLIMIT_NPROC (ulimit -u) lazaret was "
               "started with";
    else if (mem < def)
        note = "lowered by the RLIMIT_FSIZE (ulimit -f) lazaret was started with";
    else if (tasks < tdef)
        note = "lowered by the RLIMIT_NPROC (ulimit -u) lazaret was started with";
    report(d, ST_OK, "resource limits", note, NULL,
           "memory and in-memory root file system: %llu MiB per Domain (runsc's RLIMIT_FSIZE); "
           "host tasks (processes and threads, any sandbox uid): %llu per Domain (RLIMIT_NPROC "
           "of the supervisor and runsc: 1/%d of min(kernel.pid_max, kernel.threads-max)); "
           "processes: %d per sandbox user (RLIMIT_NPROC, enforced by gVisor)",
           (unsigned long long) (mem >> 20), (unsigned long long) tasks, LZ_LIMIT_TASKS_FRACTION,
           LZ_SPEC_NPROC);
}

/* ---- cgroups -------------------------------------------------------------- */

static void check_cgroups(doctor *d)
{
    struct statfs sfs;
    if (statfs("/sys/fs/cgroup", &sfs) < 0 || sfs.f_type != CGROUP2_SUPER_MAGIC) {
        report(d, ST_WARN, "cgroups",
               "per-sandbox cgroup limits need a cgroup v2 subtree delegated to the user", NULL,
               "cgroup v1 or hybrid hierarchy, not writable by %s: Lazaret runs runsc with "
               "--ignore-cgroups",
               d->user);
        return;
    }

    /* cgroup v2: the process's own cgroup is the "0::/path" line. */
    _cleanup_free_ char *rel = NULL;
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f) {
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, f)) > 0) {
            if (strncmp(line, "0::", 3) == 0) {
                line[strcspn(line, "\n")] = '\0';
                rel = lz_xstrdup(line + 3);
                break;
            }
        }
        fclose(f);
    }
    if (!rel) {
        report(d, ST_WARN, "cgroups", NULL, NULL,
               "cannot tell %s's cgroup from /proc/self/cgroup: Lazaret runs runsc with "
               "--ignore-cgroups",
               d->user);
        return;
    }
    _cleanup_free_ char *dir = lz_xasprintf("/sys/fs/cgroup%s", rel);
    if (access(dir, W_OK) == 0)
        report(d, ST_OK, "cgroups", NULL, NULL,
               "%s is writable by %s: runsc manages the sandbox's cgroup", dir, d->user);
    else
        report(d, ST_WARN, "cgroups",
               "per-sandbox cgroup limits need a cgroup subtree delegated to the user (systemd: "
               "run lazaret from a user service or 'systemd-run --user --scope')",
               NULL, "%s is not writable by %s: Lazaret runs runsc with --ignore-cgroups", dir,
               d->user);
}

/* ---- newuidmap / newgidmap ------------------------------------------------ */

/* Does the file carry capability cap in its permitted set (security.capability
 * xattr, any revision: data[0].permitted is the little-endian word at 4)? */
static bool file_has_cap(const char *path, int cap)
{
    unsigned char buf[64];
    ssize_t n = getxattr(path, "security.capability", buf, sizeof(buf));
    if (n < 8 || cap >= 32)
        return false;
    uint32_t permitted = (uint32_t) buf[4] | (uint32_t) buf[5] << 8 | (uint32_t) buf[6] << 16 |
                         (uint32_t) buf[7] << 24;
    return permitted & (1U << cap);
}

static void check_idmap_tool(doctor *d, const char *name, int cap, const char *cap_name,
                             char **ret_path)
{
    _cleanup_free_ char *path = NULL;
    if (find_tool(d, name, &path) < 0) {
        report(d, ST_FAIL, name,
               "it writes the user namespace's id map from /etc/subuid and /etc/subgid",
               "sudo apt-get install uidmap", "not found in PATH or the system directories");
        return;
    }
    struct stat st;
    struct statvfs vfs;
    if (stat(path, &st) < 0) {
        report(d, ST_FAIL, name, NULL, "sudo apt-get install --reinstall uidmap",
               "cannot inspect %s: %s", path, strerror(errno));
        return;
    }
    bool setuid_root = (st.st_mode & S_ISUID) && st.st_uid == 0;
    bool has_cap = file_has_cap(path, cap);
    if (!setuid_root && !has_cap) {
        _cleanup_free_ char *fix = lz_xasprintf("sudo chmod u+s %s", path);
        report(d, ST_FAIL, name, "it must be setuid root or carry the file capability", fix,
               "%s is neither setuid root nor has %s", path, cap_name);
        return;
    }
    if (statvfs(path, &vfs) == 0 && (vfs.f_flag & ST_NOSUID)) {
        report(d, ST_FAIL, name, "a nosuid mount disables both setuid bits and file capabilities",
               "sudo apt-get install --reinstall uidmap", "%s is on a filesystem mounted nosuid",
               path);
        return;
    }
    report(d, ST_OK, name, NULL, NULL, "%s (%s)", path, setuid_root ? "setuid root" : cap_name);
    *ret_path = TAKE_PTR(path);
}

/* ---- /etc/subuid, /etc/subgid --------------------------------------------- */

/* The very lookup `lazaret run` makes (ns/userns.h): doctor passes
 * exactly the ranges run accepts, and its fix is the hint run prints. */
static void check_subids(doctor *d, lz_subid_kind kind, const char *check, lz_subid_range *ret,
                         bool *ret_ok)
{
    const char *file = kind == LZ_SUBID_UID ? "/etc/subuid" : "/etc/subgid";
    lz_subid_range r;
    lz_error *e = NULL;
    if (lz_subid_lookup(kind, d->uid, d->gid, &r, &e) < 0) {
        report(d, ST_FAIL, check,
               "the sandbox runs as a range of subordinate ids, mapped by newuidmap/newgidmap",
               e->hint, "%s%s%s", e->message, e->errnum ? ": " : "",
               e->errnum ? strerror(e->errnum) : "");
        lz_error_free(e);
        return;
    }
    if (r.range_count == r.count)
        report(d, ST_OK, check, NULL, NULL, "%s: %lu-%lu (%u ids) for %s", file,
               (unsigned long) r.start, (unsigned long) r.start + r.count - 1, r.count, d->user);
    else
        report(d, ST_OK, check, NULL, NULL, "%s range %lu-%lu: %lu-%lu (%u ids) for %s", file,
               (unsigned long) r.start, (unsigned long) r.start + r.range_count - 1,
               (unsigned long) r.start, (unsigned long) r.start + r.count - 1, r.count, d->user);
    *ret = r;
    *ret_ok = true;
}

/* ---- user namespaces ------------------------------------------------------ */

typedef struct probe_result {
    int step; /* 0 success, 1 unshare(CLONE_NEWUSER) failed, 2 no capabilities inside */
    int errnum;
} probe_result;

/* In a throw-away child: create a user namespace, then use the capabilities
 * it should grant (new mount and network namespaces). Some kernels let the
 * first step succeed and deny the second (Ubuntu's AppArmor restriction), so
 * only both together show that Lazaret's supervisor can work. */
/* The probe's two findings, as its error messages (the step they stand for
 * is told from the text). */
static const char probe_no_userns[] = "unshare(CLONE_NEWUSER) failed";
static const char probe_no_caps[] = "a new user namespace grants no capabilities";

static int probe_userns_child(void *arg, int channel, lz_error **err)
{
    (void) arg, (void) channel;
    if (unshare(CLONE_NEWUSER) < 0)
        return lz_error_set(err, errno, "%s", probe_no_userns);
    if (unshare(CLONE_NEWNS | CLONE_NEWNET) < 0)
        return lz_error_set(err, errno, "%s", probe_no_caps);
    return 0;
}

static int probe_userns(probe_result *ret)
{
    lz_fork_options opt = { .what = "a probe process" };
    lz_error *e = NULL;
    int status = lz_fork_call(probe_userns_child, NULL, &opt, NULL, &e);
    probe_result r = { 0, 0 };
    if (status < 0 && strcmp(e->message, probe_no_userns) == 0) {
        r = (probe_result){ 1, e->errnum };
    } else if (status < 0 && strcmp(e->message, probe_no_caps) == 0) {
        r = (probe_result){ 2, e->errnum };
    } else if (status < 0) {
        errno = e->errnum; /* it could not be started: check_userns says so */
        lz_error_free(e);
        return -1;
    } else if (status != 0) {
        r = (probe_result){ 1, EIO };
    }
    lz_error_free(e);
    *ret = r;
    return 0;
}

static void check_userns(doctor *d)
{
    probe_result r;
    if (probe_userns(&r) < 0) {
        report(d, ST_FAIL, "user namespaces", NULL, NULL, "cannot start a probe process: %s",
               strerror(errno));
        return;
    }
    long max_ns = -1, clone_ok = -1, aa = -1;
    read_long_file("/proc/sys/user/max_user_namespaces", &max_ns);
    read_long_file("/proc/sys/kernel/unprivileged_userns_clone", &clone_ok);
    read_long_file("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &aa);

    if (r.step == 0) {
        report(d, ST_OK, "user namespaces", NULL, NULL,
               "%s can create a user namespace and use its capabilities", d->user);
        d->userns_ok = true;
        return;
    }
    const char *fix = NULL;
    const char *why = NULL;
    if (max_ns == 0) {
        fix = "sudo sysctl -w user.max_user_namespaces=15000";
        why = "user.max_user_namespaces is 0";
    } else if (clone_ok == 0) {
        fix = "sudo sysctl -w kernel.unprivileged_userns_clone=1";
        why = "kernel.unprivileged_userns_clone is 0";
    } else if (aa == 1) {
        fix = "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0";
        why = "kernel.apparmor_restrict_unprivileged_userns is 1 (or give lazaret an AppArmor "
              "profile with 'userns,')";
    } else {
        why = "no sysctl explains it: a seccomp filter (container runtime) or a security module "
              "denies it; run lazaret directly on the host";
    }
    report(d, ST_FAIL, "user namespaces", why, fix, "%s: %s",
           r.step == 1 ? "unshare(CLONE_NEWUSER) failed"
                       : "a new user namespace grants no capabilities",
           strerror(r.errnum));
}

static const char idmap_probe_no_userns[] = "the probe could not create a user namespace";

static int idmap_probe_child(void *arg, int channel, lz_error **err)
{
    int *go = arg;
    close(go[1]);
    if (unshare(CLONE_NEWUSER) < 0)
        return lz_error_set(err, errno, "%s", idmap_probe_no_userns);
    if (lz_fork_ready(channel) < 0)
        return 1;
    char c;
    while (read(go[0], &c, 1) < 0 && errno == EINTR)
        ;
    return 0;
}

/* End to end: a child in a fresh user namespace gets the full map Lazaret
 * uses (own id -> 0, the subordinate range -> 1..65536), written by
 * newuidmap/newgidmap exactly as the supervisor will. */
static void check_idmapping(doctor *d)
{
    const char *check = "id mapping";
    if (!d->newuidmap || !d->newgidmap || !d->userns_ok || !d->subuid_ok || !d->subgid_ok) {
        report(d, ST_WARN, check, NULL, NULL, "not tried: it needs the checks above to pass");
        return;
    }

    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0) {
        report(d, ST_FAIL, check, NULL, NULL, "cannot create a pipe: %s", strerror(errno));
        return;
    }
    /* The probe enters a user namespace, says so, then waits until the
     * doctor is done with it (EOF on go) and exits. */
    lz_fork_options fo = { .what = "a probe process" };
    lz_child probe = { 0 };
    lz_error *pe = NULL;
    int started = lz_fork_call(idmap_probe_child, go, &fo, &probe, &pe);
    close(go[0]);
    if (started < 0 && strcmp(pe->message, idmap_probe_no_userns) != 0) {
        report(d, ST_FAIL, check, NULL, NULL, "cannot start a probe process: %s",
               strerror(pe->errnum));
        lz_error_free(pe);
        close(go[1]);
        return;
    }
    lz_error_free(pe);
    pid_t pid = probe.pid;

    _cleanup_free_ char *detail = NULL;
    if (started < 0) {
        detail = lz_xstrdup(idmap_probe_no_userns);
    } else {
        struct {
            const char *path, *name;
            uid_t own;
            const lz_subid_range *r;
        } maps[] = {
            { d->newuidmap, "newuidmap", d->uid, &d->subuid },
            { d->newgidmap, "newgidmap", d->gid, &d->subgid },
        };
        for (size_t i = 0; i < LZ_ARRAY_SIZE(maps) && !detail; i++) {
            char pid_s[24], own_s[24], start_s[24], count_s[24];
            snprintf(pid_s, sizeof(pid_s), "%d", (int) pid);
            snprintf(own_s, sizeof(own_s), "%u", (unsigned) maps[i].own);
            snprintf(start_s, sizeof(start_s), "%u", (unsigned) maps[i].r->start);
            snprintf(count_s, sizeof(count_s), "%u", (unsigned) maps[i].r->count);
            char *argv[] = { (char *) maps[i].name, pid_s,   (char *) "0", own_s, (char *) "1",
                             (char *) "1",          start_s, count_s,      NULL };
            lz_spawn_options opt = { .timeout_ms = PROBE_TIMEOUT_MS,
                                     .capture_max = 1024,
                                     .merge_stderr = true };
            lz_spawn_output out = { 0 };
            lz_error *e = NULL;
            int st = lz_spawn_capture(maps[i].path, argv, &opt, &out, &e);
            if (st < 0) {
                detail = lz_xasprintf("%s", e->message);
            } else if (st != 0) {
                _cleanup_free_ char *msg = lz_text_line_ascii(out.data, 200);
                detail = lz_xasprintf("%s exited with status %d: %s", maps[i].name, st, msg);
            }
            lz_error_free(e);
            lz_spawn_output_free(&out);
        }
    }
    close(go[1]);
    if (started == 0)
        lz_best_effort(lz_child_wait(&probe, -1, NULL));

    if (detail) {
        report(d, ST_FAIL, check,
               "newuidmap/newgidmap refuse ranges that are not in /etc/subuid and /etc/subgid, "
               "or run without privilege (nosuid mount, missing setuid bit)",
               "sudo apt-get install --reinstall uidmap", "%s", detail);
        return;
    }
    report(d, ST_OK, check, NULL, NULL,
           "newuidmap and newgidmap map %s and %u subordinate ids into a user namespace", d->user,
           LZ_SUBID_COUNT);
}

/* ---- plain tools ---------------------------------------------------------- */

static void check_tool(doctor *d, const char *name, const char *package, const char *why)
{
    _cleanup_free_ char *path = NULL;
    if (find_tool(d, name, &path) < 0) {
        _cleanup_free_ char *fix = lz_xasprintf("sudo apt-get install %s", package);
        report(d, ST_FAIL, name, why, fix, "not found in PATH or the system directories");
        return;
    }
    report(d, ST_OK, name, NULL, NULL, "%s", path);
}

/* ---- /dev/net/tun --------------------------------------------------------- */

static void check_tun(doctor *d)
{
    static const char tun[] = "/dev/net/tun";
    int fd = open(tun, O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0) {
        /* Just opening it creates nothing: an interface needs TUNSETIFF,
         * which needs CAP_NET_ADMIN in the network namespace. */
        close(fd);
        report(d, ST_OK, tun, NULL, NULL, "%s can open it read-write", d->user);
        return;
    }
    int saved = errno;
    const char *why = "slirp4netns opens it to connect the sandbox's router to the network";
    if (saved == ENOENT || saved == ENODEV || saved == ENXIO) {
        report(d, ST_FAIL, tun, why, "sudo modprobe tun", "cannot open %s: %s", tun,
               strerror(saved));
        return;
    }
    struct stat st;
    if (saved == EACCES && stat(tun, &st) == 0)
        report(d, ST_FAIL, tun,
               "typical desktop systems ship it with mode 0666; opening it grants nothing by "
               "itself (creating an interface needs CAP_NET_ADMIN in a network namespace)",
               "sudo chmod 0666 /dev/net/tun", "cannot open %s read-write as %s (mode %04o)", tun,
               d->user, (unsigned) (st.st_mode & 07777));
    else
        report(d, ST_FAIL, tun, why, "sudo chmod 0666 /dev/net/tun", "cannot open %s: %s", tun,
               strerror(saved));
}

/* ---- XDG_RUNTIME_DIR ------------------------------------------------------ */

/* Is path a directory (not a symlink) owned by uid with mode 0700? Returns 0
 * when it is, else -1 with *ret_why describing the first problem. */
static int runtime_dir_suitable(const char *path, uid_t uid, char **ret_why)
{
    int fd = open(path, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        *ret_why = lz_xasprintf(errno == ELOOP || errno == ENOTDIR
                                    ? "is not a directory (or is a symbolic link)"
                                    : "cannot be opened: %s",
                                strerror(errno));
        return -1;
    }
    struct stat st;
    int r = fstat(fd, &st);
    int saved = errno;
    close(fd);
    if (r < 0) {
        *ret_why = lz_xasprintf("cannot be inspected: %s", strerror(saved));
        return -1;
    }
    if (st.st_uid != uid) {
        *ret_why = lz_xasprintf("is owned by uid %u, not %u", (unsigned) st.st_uid, (unsigned) uid);
        return -1;
    }
    if ((st.st_mode & 07777) != 0700) {
        *ret_why = lz_xasprintf("has mode %04o, not 0700", (unsigned) (st.st_mode & 07777));
        return -1;
    }
    return 0;
}

static void check_runtime_dir(doctor *d)
{
    static const char check[] = "XDG_RUNTIME_DIR";
    const char *why = "Lazaret keeps sockets, locks and runsc state of running sandboxes there; "
                      "it must be private to the user";
    /* The standard place, created by systemd-logind at login. When it is
     * missing (su, ssh without pam_systemd, containers) the fix creates it. */
    _cleanup_free_ char *std = lz_xasprintf("/run/user/%u", (unsigned) d->uid);
    _cleanup_free_ char *std_why = NULL;
    _cleanup_free_ char *export_fix = NULL;
    if (runtime_dir_suitable(std, d->uid, &std_why) == 0)
        export_fix = lz_xstrdup("export XDG_RUNTIME_DIR=/run/user/$(id -u)");
    else
        export_fix = lz_xasprintf("sudo install -d -m 0700 -o %u -g %u %s && "
                                  "export XDG_RUNTIME_DIR=/run/user/$(id -u)",
                                  (unsigned) d->uid, (unsigned) d->gid, std);

    const char *v = getenv("XDG_RUNTIME_DIR");
    if (!v || !v[0]) {
        report(d, ST_FAIL, check, why, export_fix, "is not set");
        return;
    }
    if (v[0] != '/') {
        report(d, ST_FAIL, check, why, export_fix, "is not an absolute path");
        return;
    }
    _cleanup_free_ char *problem = NULL;
    if (runtime_dir_suitable(v, d->uid, &problem) == 0) {
        report(d, ST_OK, check, NULL, NULL, "is a directory owned by %s with mode 0700", d->user);
        return;
    }
    /* Owned by the user but too open: tighten it. Anything else: use the
     * standard directory instead of repairing someone else's. */
    struct stat st;
    bool own_dir = lstat(v, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == d->uid;
    report(d, ST_FAIL, check, why, own_dir ? "chmod 0700 \"$XDG_RUNTIME_DIR\"" : export_fix, "%s",
           problem);
}

/* ---- command -------------------------------------------------------------- */

/* ---- core dumps ----------------------------------------------------------- */

/* Would this host still write a core dump of a process that holds the
 * profile's secrets? Lazaret's own processes are non-dumpable (main.c): the
 * kernel skips them whatever kernel.core_pattern and fs.suid_dumpable say.
 * The programs they execute (runsc, whose exec processes hold a session's
 * environment) are dumpable again after execve; for those only RLIMIT_CORE
 * counts, and how much depends on kernel.core_pattern (common/nodump.h,
 * docs/runtime.md "Secrets in memory and core dumps"). This process went
 * through the same set-up as `lazaret run`, so its own state is the evidence. */
static void check_core_dumps(doctor *d)
{
    const char *check = "core dumps";
    struct rlimit rl;
    int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    if (getrlimit(RLIMIT_CORE, &rl) < 0 || dumpable != 0 || rl.rlim_max > LZ_CORE_LIMIT) {
        report(d, ST_FAIL, check,
               "Lazaret makes itself non-dumpable and lowers RLIMIT_CORE "
               "before it reads any secret",
               NULL, "this process is %s with a core limit of %lld bytes",
               dumpable == 0 ? "non-dumpable" : "dumpable",
               rl.rlim_max == RLIM_INFINITY ? -1LL : (long long) rl.rlim_max);
        return;
    }
    char pattern[256] = "";
    int fd = open("/proc/sys/kernel/core_pattern", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, pattern, sizeof(pattern) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        report(d, ST_WARN, check, NULL, NULL, "cannot read /proc/sys/kernel/core_pattern: %s",
               strerror(errno));
        return;
    }
    pattern[n] = '\0';
    pattern[strcspn(pattern, "\n")] = '\0';
    _cleanup_free_ char *shown = lz_text_line_ascii(pattern, 80);
    long suid = -1;
    read_long_file("/proc/sys/fs/suid_dumpable", &suid);

    if (pattern[0] == '@') {
        report(d, ST_WARN, check,
               "the kernel ignores RLIMIT_CORE for a core-dump socket: a crashing runsc process, "
               "which holds a session's environment (the profile's secrets), is dumped to the "
               "service behind it; Lazaret's own processes are non-dumpable and never dumped",
               "configure that service to drop dumps of runsc, or: sudo sysctl -w "
               "kernel.core_pattern=core",
               "kernel.core_pattern hands dumps to a socket (%s)", shown);
    } else if (pattern[0] == '|' && rl.rlim_max == 0) {
        report(d, ST_WARN, check,
               "your hard RLIMIT_CORE is 0, which a piped core_pattern ignores: a crashing runsc "
               "process (it holds a session's environment) is piped to the handler; a limit of 1 "
               "would make the kernel refuse it",
               "allow a hard core limit of at least 1 for your user (limits.conf 'hard core'), "
               "or: sudo sysctl -w kernel.core_pattern=core",
               "kernel.core_pattern pipes dumps to %s", shown);
    } else {
        report(d, ST_OK, check, NULL, NULL,
               "no Lazaret process or runsc it starts is dumped (non-dumpable, RLIMIT_CORE %lld; "
               "core_pattern %s%s; fs.suid_dumpable %ld)",
               (long long) rl.rlim_max, pattern[0] == '|' ? "pipes to " : "", shown, suid);
    }
}

int lz_cmd_doctor(int argc, char **argv, const lz_global_options *g)
{
    (void) g; /* doctor checks the host, not a configuration */
    int r = lz_cli_parse_flags("doctor", NULL, 0, argc, argv, 1, NULL);
    if (r != LZ_EXIT_OK)
        return r;

    doctor d = {
        .uid = getuid(),
        .gid = getgid(),
    };
    struct passwd *pw = getpwuid(d.uid);
    d.user = pw ? lz_xstrdup(pw->pw_name) : lz_xasprintf("%u", (unsigned) d.uid);
    /* The user's PATH first (their choice of runsc), then the system
     * directories, which ordinary users' PATHs often lack. */
    const char *path = getenv("PATH");
    d.search_path = lz_xasprintf("%s:%s", path ? path : "", LZ_SPAWN_SYSTEM_PATH);

    printf("lazaret %s doctor: checking prerequisites for %s (uid %u)\n", LAZARET_VERSION, d.user,
           (unsigned) d.uid);

    check_runsc(&d);
    check_cgroups(&d);
    check_limits(&d);
    check_idmap_tool(&d, "newuidmap", 7 /* CAP_SETUID */, "cap_setuid", &d.newuidmap);
    check_idmap_tool(&d, "newgidmap", 6 /* CAP_SETGID */, "cap_setgid", &d.newgidmap);
    check_subids(&d, LZ_SUBID_UID, "subuid range", &d.subuid, &d.subuid_ok);
    check_subids(&d, LZ_SUBID_GID, "subgid range", &d.subgid, &d.subgid_ok);
    check_userns(&d);
    check_idmapping(&d);
    check_tool(&d, "slirp4netns", "slirp4netns",
               "it gives the sandbox's router user-mode network access");
    check_tun(&d);
    check_tool(&d, "nft", "nftables", "the router answers denied connections at once with it");
    check_tool(&d, "skopeo", "skopeo", "it fetches and copies container images");
    check_tool(&d, "umoci", "umoci", "it unpacks images into root filesystems without root");
    check_runtime_dir(&d);
    check_core_dumps(&d);

    if (d.failed)
        printf("\n%d check%s failed: run the fix lines above, then 'lazaret doctor' again.\n",
               d.failed, d.failed == 1 ? "" : "s");
    else
        printf("\nAll required checks passed%s.\n",
               d.warned ? " (warnings describe how Lazaret adapts to this host)" : "");
    fflush(stdout);

    int status = d.failed ? LZ_EXIT_FAILURE : LZ_EXIT_OK;
    free(d.newuidmap);
    free(d.newgidmap);
    free(d.search_path);
    free(d.user);
    return status;
}
