/* SPDX-License-Identifier: Apache-2.0 */
#include "oci/spec.h"
#include "protocol/mailbox.h"

#include <string.h>

#include "common/util.h"

/* Capabilities of sandbox processes: Docker's default set without NET_RAW
 * (no forged packets, SR-5) and MKNOD. They are capabilities of the gVisor
 * kernel only: gVisor implements them itself, and the sandbox holds no
 * capability over the host or the supervisor's namespaces. Package managers
 * (apt drops to _apt, chowns files) need CHOWN, DAC_OVERRIDE, FOWNER,
 * SETUID/SETGID. No NET_ADMIN: the sandbox never administers its network. */
static const char *const capabilities[] = {
    "CAP_AUDIT_WRITE", "CAP_CHOWN",   "CAP_DAC_OVERRIDE",     "CAP_FOWNER",
    "CAP_FSETID",      "CAP_KILL",    "CAP_NET_BIND_SERVICE", "CAP_SETFCAP",
    "CAP_SETGID",      "CAP_SETPCAP", "CAP_SETUID",           "CAP_SYS_CHROOT",
};

static json_t *strv(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; v && i < n && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

/* Root gets the list; another user none but the bounding set, as a
 * container runtime gives a non-root process (docker, podman). */
static json_t *caps(bool root)
{
    json_t *list = json_array();
    for (size_t i = 0; i < LZ_ARRAY_SIZE(capabilities); i++)
        json_array_append_new(list, json_string(capabilities[i]));
    json_t *c = json_object();
    json_object_set(c, "bounding", list);
    json_object_set_new(c, "effective", root ? json_incref(list) : json_array());
    json_object_set_new(c, "permitted", root ? json_incref(list) : json_array());
    json_object_set_new(c, "inheritable", json_array());
    json_object_set_new(c, "ambient", json_array());
    json_decref(list);
    return c;
}

/* Resource limits gVisor enforces itself inside the sandbox (it takes them
 * from the container's spec for `runsc exec` processes too). Only the
 * process count: the memory bound is the sentry's own RLIMIT_FSIZE
 * (supervisor/limits.h), and a per-process RLIMIT_AS would break runtimes
 * that reserve address space (V8, Go). */
static json_t *rlimits(void)
{
    return json_pack("[{s:s, s:I, s:I}]", "type", "RLIMIT_NPROC", "soft",
                     (json_int_t) LZ_SPEC_NPROC, "hard", (json_int_t) LZ_SPEC_NPROC);
}

static size_t strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

json_t *lz_spec_process(char *const *argv, size_t argc, const char *cwd, char *const *env,
                        bool terminal, const lz_idmap *user)
{
    json_t *args = json_array();
    json_array_append_new(args, json_string(LZ_GUEST_EXEC));
    /* A working directory below /workspace is the guest launcher's to
     * enter: the sandbox's copy of a git-ignored directory may lack it, and
     * runsc exec would fail the start, its reason written to a stderr the
     * sandbox has already shut (attack round i12b, F1). runsc starts in
     * /workspace, which always exists. */
    const char *spec_cwd = cwd;
    if (cwd && strncmp(cwd, "/workspace/", 11) == 0) {
        json_array_append_new(args, json_string("--cwd"));
        json_array_append_new(args, json_string(cwd));
        spec_cwd = "/workspace";
    }
    /* A real pseudo-terminal inside the sandbox for interactive sessions
     * (see src/guest/lazaret-exec.c). */
    if (terminal)
        json_array_append_new(args, json_string("--pty"));
    if (argc == 0) {
        json_array_append_new(args, json_string("--login-shell"));
    } else {
        json_array_append_new(args, json_string("--"));
        for (size_t i = 0; i < argc; i++)
            json_array_append_new(args, json_string(argv[i]));
    }
    json_t *p = json_object();
    json_object_set_new(p, "terminal", json_boolean(terminal));
    json_int_t uid = user ? user->uid : 0, gid = user ? user->gid : 0;
    json_object_set_new(p, "user", json_pack("{s:I, s:I}", "uid", uid, "gid", gid));
    json_object_set_new(p, "args", args);
    json_object_set_new(p, "env", strv(env, strv_len(env)));
    json_object_set_new(p, "cwd", json_string(spec_cwd));
    json_object_set_new(p, "capabilities", caps(uid == 0));
    json_object_set_new(p, "noNewPrivileges", json_false());
    json_object_set_new(p, "rlimits", rlimits());
    return p;
}

static void add_mount(json_t *mounts, const char *dest, const char *type, const char *source,
                      const char *const *options)
{
    json_t *o = json_array();
    for (size_t i = 0; options[i]; i++)
        json_array_append_new(o, json_string(options[i]));
    json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type",
                                            type, "source", source, "options", o));
}

json_t *lz_spec_container(const lz_sandbox_spec *s)
{
    static const char *const proc_opts[] = { "nosuid", "noexec", "nodev", NULL };
    static const char *const dev_opts[] = { "nosuid", "strictatime", "mode=755", "size=65536k",
                                            NULL };
    static const char *const pts_opts[] = { "nosuid",        "noexec",    "newinstance",
                                            "ptmxmode=0666", "mode=0620", NULL };
    static const char *const shm_opts[] = { "nosuid",    "noexec",      "nodev",
                                            "mode=1777", "size=65536k", NULL };
    static const char *const sys_opts[] = { "nosuid", "noexec", "nodev", "ro", NULL };
    static const char *const run_opts[] = { "nosuid", "nodev", "mode=755", NULL };
    static const char *const rw_bind[] = { "rbind", "rw", "nosuid", "nodev", NULL };
    static const char *const ro_bind[] = { "rbind", "ro", "nosuid", "nodev", NULL };

    json_t *mounts = json_array();
    add_mount(mounts, "/proc", "proc", "proc", proc_opts);
    add_mount(mounts, "/dev", "tmpfs", "tmpfs", dev_opts);
    add_mount(mounts, "/dev/pts", "devpts", "devpts", pts_opts);
    add_mount(mounts, "/dev/shm", "tmpfs", "shm", shm_opts);
    add_mount(mounts, "/sys", "sysfs", "sysfs", sys_opts);
    add_mount(mounts, LZ_GUEST_DIR, "tmpfs", "tmpfs", run_opts);
    add_mount(mounts, LZ_GUEST_BIN_DIR, "bind", s->guest_bin_dir, ro_bind);
    if (s->guest_lib_dir)
        add_mount(mounts, LZ_GUEST_LIB_DIR, "bind", s->guest_lib_dir, ro_bind);
    if (s->mailbox_inbox)
        add_mount(mounts, LZ_MBX_GUEST_INBOX, "bind", s->mailbox_inbox, rw_bind);
    if (s->mailbox_outbox)
        add_mount(mounts, LZ_MBX_GUEST_OUTBOX, "bind", s->mailbox_outbox, ro_bind);
    if (s->credentials_dir)
        add_mount(mounts, LZ_MBX_GUEST_CREDS, "bind", s->credentials_dir, ro_bind);
    /* Persistent directories before volumes: a volume lies inside one. */
    for (size_t i = 0; i < s->n_mounts; i++)
        add_mount(mounts, s->mounts[i].destination, "bind", s->mounts[i].source,
                  s->mounts[i].readonly ? ro_bind : rw_bind);
    /* One bind for the whole workspace tree: .git and the Git Sentry's
     * mounts (read-only protections, bind points, the Domain's copies of
     * git-ignored paths) are kernel mounts inside it, which the supervisor
     * composed from descriptors; "rbind" carries them into runsc's gofer
     * (supervisor/workspace.c sup_compose_workspace). */
    add_mount(mounts, "/workspace", "bind", s->workspace, rw_bind);
    /* Last: it lies inside the root or a persistent /usr, and must cover
     * whatever the sandbox left at that path there. */
    if (s->escalate_on_path)
        add_mount(mounts, LZ_GUEST_ESCALATE_ON_PATH, "bind", s->escalate_on_path, ro_bind);

    char *const init_args[] = { (char *) LZ_GUEST_EXEC, (char *) "--init" };
    json_t *process = lz_spec_process(NULL, 0, "/", s->env, false, NULL);
    json_object_set_new(process, "args", strv(init_args, 2));

    json_t *namespaces = json_array();
    const char *ns[] = { "pid", "ipc", "uts", "mount" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(ns); i++)
        json_array_append_new(namespaces, json_pack("{s:s}", "type", ns[i]));
    /* Join the namespace the Network Sidecar prepared (only its veth link
     * to the router), or a fresh, empty one. */
    if (s->netns_path)
        json_array_append_new(namespaces,
                              json_pack("{s:s, s:s}", "type", "network", "path", s->netns_path));
    else
        json_array_append_new(namespaces, json_pack("{s:s}", "type", "network"));

    json_t *masked = json_array();
    const char *masked_paths[] = { "/proc/kcore",      "/proc/keys",        "/proc/latency_stats",
                                   "/proc/timer_list", "/proc/sched_debug", "/sys/firmware" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(masked_paths); i++)
        json_array_append_new(masked, json_string(masked_paths[i]));

    json_t *linux_ = json_pack("{s:o, s:o}", "namespaces", namespaces, "maskedPaths", masked);

    return json_pack("{s:s, s:{s:s, s:b}, s:o, s:s, s:o, s:o}", "ociVersion", "1.0.2", "root",
                     "path", s->rootfs, "readonly", false, "process", process, "hostname",
                     s->hostname, "mounts", mounts, "linux", linux_);
}
