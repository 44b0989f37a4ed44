/* SPDX-License-Identifier: Apache-2.0
 *
 * Resolution of the selected profile (spec 3.2) against a real temporary
 * file tree: roots, overlaps, volumes, layout, auto-approval executables,
 * environment references, and configuration v2's effective host rules,
 * DNS mode and resolvers (v1 files resolving exactly as before).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "config/digest.h"
#include "config/resolve.h"
#include "oci/layout.h"

typedef struct fixture {
    char dir[64];
    char *home, *run, *ws, *cfg;
} fixture;

static void mkdir_p(const char *p, mode_t mode)
{
    char *copy = lz_xstrdup(p);
    for (char *s = copy + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            mkdir(copy, 0755);
            *s = '/';
        }
    }
    mkdir(copy, mode);
    assert_int_equal(chmod(copy, mode), 0);
    free(copy);
}

static void write_file(const char *p, const char *text, mode_t mode)
{
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t) strlen(text));
    close(fd);
    assert_int_equal(chmod(p, mode), 0);
}

static int setup(void **state)
{
    fixture *f = lz_xcalloc(1, sizeof(*f));
    strcpy(f->dir, "/tmp/lz-resolve-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->home = lz_xasprintf("%s/home", f->dir);
    f->run = lz_xasprintf("%s/run", f->dir);
    f->ws = lz_xasprintf("%s/home/ws", f->dir);
    f->cfg = lz_xasprintf("%s/home/.config/lazaret/config.toml", f->dir);
    mkdir_p(f->home, 0755);
    mkdir_p(f->run, 0700);
    mkdir_p(f->ws, 0755);
    char *cdir = lz_xasprintf("%s/home/.config/lazaret", f->dir);
    mkdir_p(cdir, 0700);
    free(cdir);
    setenv("HOME", f->home, 1);
    setenv("XDG_RUNTIME_DIR", f->run, 1);
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("XDG_DATA_HOME");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", f->dir, f->dir);
    assert_int_equal(system(cmd), 0);
    free(f->home);
    free(f->run);
    free(f->ws);
    free(f->cfg);
    free(f);
    return 0;
}

#define HEADER "schema = \"lazaret-trusted-host-config-v1\"\n"

/* Load `profile` from config text; NULL on success (cfg in *ret) or the
 * error message and hint joined (caller frees). */
static char *load_env(fixture *f, const char *text, const char *profile, const char *workspace,
                      lz_load_env env, lz_resolved_config **ret)
{
    write_file(f->cfg, text, 0600);
    lz_error *err = NULL;
    lz_resolved_config *cfg = NULL;
    lz_load_request req = {
        .config_path = NULL,
        .profile = profile,
        .workspace = workspace ? workspace : f->ws,
        .layout = lz_sandbox_layout_production(),
        .env = env,
    };
    if (lz_config_load(&req, &cfg, &err) == 0) {
        if (ret)
            *ret = cfg;
        else
            lz_resolved_config_free(cfg);
        return NULL;
    }
    assert_non_null(err);
    char *m = lz_xasprintf("%s | %s", err->message, err->hint ? err->hint : "");
    lz_error_free(err);
    return m;
}

/* A load as `run` does it: with the env values. */
static char *load(fixture *f, const char *text, const char *profile, const char *workspace,
                  lz_resolved_config **ret)
{
    return load_env(f, text, profile, workspace, LZ_LOAD_ENV_VALUES, ret);
}

static void refused(fixture *f, const char *text, const char *needle)
{
    char *m = load(f, text, "p", NULL, NULL);
    if (!m)
        fail_msg("configuration was accepted:\n%s", text);
    if (!strstr(m, needle))
        fail_msg("message '%s' does not contain '%s'", m, needle);
    free(m);
}

static void accepted(fixture *f, const char *text)
{
    char *m = load(f, text, "p", NULL, NULL);
    if (m)
        fail_msg("configuration was refused: %s\n%s", m, text);
}

static mode_t mode_of(const char *p)
{
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    return st.st_mode;
}

static void test_minimal_creates_owned_roots(void **state)
{
    fixture *f = *state;
    lz_resolved_config *cfg = NULL;
    char *m = load(f, HEADER "[profiles.p]\nimage = \"img\"\n", "p", NULL, &cfg);
    if (m)
        fail_msg("%s", m);
    char *storage = lz_xasprintf("%s/.local/share/lazaret", f->home);
    char *runtime = lz_xasprintf("%s/lazaret", f->run);
    assert_string_equal(cfg->storage_root.label, storage);
    assert_string_equal(cfg->runtime_root.label, runtime);
    assert_string_equal(cfg->workspace.label, f->ws);
    assert_string_equal(cfg->config_file.label, f->cfg);
    char *pd = lz_xasprintf("%s/profiles/p", storage);
    assert_string_equal(cfg->profile_dir.label, pd);
    /* Every component Lazaret created is 0700. */
    char *local = lz_xasprintf("%s/.local", f->home);
    assert_int_equal(mode_of(local) & 07777, 0700);
    assert_int_equal(mode_of(storage) & 07777, 0700);
    assert_int_equal(mode_of(pd) & 07777, 0700);
    assert_int_equal(mode_of(runtime) & 07777, 0700);
    /* Domain ID = DomainIdV1(profile, canonical workspace). */
    uint8_t id[32];
    assert_int_equal(lz_domain_id_v1("p", f->ws, id, NULL), 0);
    assert_memory_equal(id, cfg->domain_id, 32);
    char hex[65];
    lz_digest_hex(id, hex);
    char *sd = lz_xasprintf("%s/domains/%s", storage, hex);
    assert_string_equal(cfg->storage_domain_root.label, sd);
    assert_int_equal(mode_of(sd) & 07777, 0700);
    /* Effective deny always has RFC 1918. */
    assert_int_equal(cfg->deny.count, 3);
    assert_true(cfg->isolate_gitignored);
    free(storage), free(runtime), free(pd), free(local), free(sd);
    lz_resolved_config_free(cfg);
}

static void test_profile_selection(void **state)
{
    fixture *f = *state;
    const char *text = HEADER "[profiles.p]\nimage = \"a\"\n[profiles.P]\nimage = \"b\"\n";
    lz_resolved_config *cfg = NULL;
    assert_null(load(f, text, "P", NULL, &cfg));
    assert_string_equal(cfg->image, "b");
    lz_resolved_config_free(cfg);
    char *m = load(f, text, "q", NULL, NULL);
    assert_non_null(m);
    assert_non_null(strstr(m, "profile 'q' is not defined"));
    assert_non_null(strstr(m, "P, p"));
    free(m);
    m = load(f, text, "../x", NULL, NULL);
    assert_non_null(strstr(m, "not a valid profile name"));
    free(m);
}

static void test_xdg_inputs(void **state)
{
    fixture *f = *state;
    const char *text = HEADER "[profiles.p]\nimage = \"a\"\n";
    lz_resolved_config *cfg = NULL;

    setenv("XDG_DATA_HOME", "relative", 1); /* treated as unset */
    assert_null(load(f, text, "p", NULL, &cfg));
    assert_non_null(strstr(cfg->storage_root.label, "/home/.local/share/lazaret"));
    lz_resolved_config_free(cfg);

    char *dh = lz_xasprintf("%s/data", f->dir);
    setenv("XDG_DATA_HOME", dh, 1);
    assert_null(load(f, text, "p", NULL, &cfg));
    char *want = lz_xasprintf("%s/lazaret", dh);
    assert_string_equal(cfg->storage_root.label, want);
    lz_resolved_config_free(cfg);
    free(dh), free(want);
    unsetenv("XDG_DATA_HOME");

    unsetenv("XDG_RUNTIME_DIR");
    char *m = load(f, text, "p", NULL, NULL);
    assert_non_null(strstr(m, "XDG_RUNTIME_DIR is not set"));
    free(m);
    setenv("XDG_RUNTIME_DIR", "run/user/1", 1);
    m = load(f, text, "p", NULL, NULL);
    assert_non_null(strstr(m, "XDG_RUNTIME_DIR is not a usable path"));
    free(m);
    setenv("XDG_RUNTIME_DIR", f->run, 1);

    char *home = lz_xstrdup(getenv("HOME"));
    unsetenv("HOME");
    m = load(f, text, "p", NULL, NULL);
    assert_non_null(strstr(m, "HOME is not set"));
    free(m);
    setenv("HOME", home, 1);
    free(home);
}

static void test_data_root(void **state)
{
    fixture *f = *state;
    lz_resolved_config *cfg = NULL;
    assert_null(load(f, HEADER "[storage]\ndata_root = \"~/lzdata\"\n[profiles.p]\nimage = \"a\"\n",
                     "p", NULL, &cfg));
    char *want = lz_xasprintf("%s/lzdata", f->home);
    assert_string_equal(cfg->storage_root.label, want);
    lz_resolved_config_free(cfg);
    /* An existing root that is not 0700 is refused, with a fix. */
    assert_int_equal(chmod(want, 0755), 0);
    refused(f, HEADER "[storage]\ndata_root = \"~/lzdata\"\n[profiles.p]\nimage = \"a\"\n",
            "chmod 0700");
    /* A symlink in a declared root is resolved once into the canonical
     * label (like every declared host path); the plan then forbids symlinks. */
    char *link = lz_xasprintf("%s/lzlink", f->home);
    assert_int_equal(symlink(want, link), 0);
    assert_int_equal(chmod(want, 0700), 0);
    char *m =
        load(f, HEADER "[storage]\ndata_root = \"~/lzlink/sub\"\n[profiles.p]\nimage = \"a\"\n",
             "p", NULL, NULL);
    /* The symlink is in an ambient ancestor here and resolves once; the
     * canonical root lies beneath the real directory. */
    if (m)
        fail_msg("%s", m);
    free(want), free(link);
}

static void test_overlaps_refused(void **state)
{
    fixture *f = *state;
    /* SR-2: a configuration inside the workspace. */
    char *inner = lz_xasprintf("%s/lazaret.toml", f->ws);
    write_file(inner, HEADER "[profiles.p]\nimage = \"a\"\n", 0600);
    lz_error *err = NULL;
    lz_resolved_config *cfg = NULL;
    lz_load_request req = { inner, "p", f->ws, lz_sandbox_layout_production(), LZ_LOAD_ENV_NAMES };
    assert_int_equal(lz_config_load(&req, &cfg, &err), -1);
    assert_non_null(strstr(err->message, "the configuration file"));
    assert_non_null(strstr(err->message, "is inside the workspace"));
    lz_error_free(lz_error_take(&err));
    free(inner);

    /* A workspace that contains the Storage Root (the home directory; the
     * configuration file below it is found first). */
    char *m = load(f, HEADER "[profiles.p]\nimage = \"a\"\n", "p", f->home, NULL);
    assert_non_null(m);
    assert_non_null(strstr(m, "the workspace"));
    free(m);
    /* ... and with the configuration elsewhere, the Storage Root. */
    char *outside = lz_xasprintf("%s/outside.toml", f->dir);
    write_file(outside, HEADER "[profiles.p]\nimage = \"a\"\n", 0600);
    lz_load_request req2 = { outside, "p", f->home, lz_sandbox_layout_production(),
                             LZ_LOAD_ENV_NAMES };
    assert_int_equal(lz_config_load(&req2, &cfg, &err), -1);
    if (!strstr(err->message, "the workspace") || !strstr(err->message, "the Storage Root"))
        fail_msg("%s", err->message);
    lz_error_free(lz_error_take(&err));
    free(outside);

    /* A Storage Root inside the workspace. */
    refused(f, HEADER "[storage]\ndata_root = \"~/ws/.lazaret\"\n[profiles.p]\nimage = \"a\"\n",
            "the workspace");
    /* A Storage Root inside the runtime root's parent tree is fine, but the
     * Runtime Root itself may not be inside the Storage Root. */
    char *text =
        lz_xasprintf(HEADER "[storage]\ndata_root = \"%s\"\n[profiles.p]\nimage = \"a\"\n", f->run);
    refused(f, text, "the Runtime Root");
    free(text);
}

#define VOL_PROFILE                                                                                \
    HEADER "[profiles.p]\nimage = \"a\"\npersistent_dirs = [\"/root\"]\nvolumes = [ "

static char *with_volume(const char *vol)
{
    return lz_xasprintf(VOL_PROFILE "%s ]\n", vol);
}

static void test_volumes(void **state)
{
    fixture *f = *state;
    lz_resolved_config *cfg = NULL;
    char *t;

    /* create=true makes a 0700 directory beneath {profile_dir}. */
    t = with_volume(
        "{ host = \"{profile_dir}/a/b\", container = \"/root/x\", kind = \"directory\", "
        "create = true }");
    char *m = load(f, t, "p", NULL, &cfg);
    if (m)
        fail_msg("%s", m);
    assert_int_equal(cfg->n_volumes, 1);
    assert_int_equal(mode_of(cfg->volumes[0].source.label) & 07777, 0700);
    assert_true(S_ISDIR(mode_of(cfg->volumes[0].source.label)));
    lz_resolved_config_free(cfg);
    free(t);

    /* A missing source without create. */
    t = with_volume("{ host = \"~/nothere\", container = \"/root/x\", kind = \"directory\" }");
    refused(f, t, "does not exist");
    free(t);

    /* Existing file source, read-only. */
    char *file = lz_xasprintf("%s/data.txt", f->home);
    write_file(file, "x", 0644);
    t = with_volume("{ host = \"~/data.txt\", container = \"/root/d\", kind = \"file\", access = "
                    "\"read-only\" }");
    accepted(f, t);
    free(t);
    /* Kind mismatch both ways. */
    t = with_volume("{ host = \"~/data.txt\", container = \"/root/d\", kind = \"directory\" }");
    refused(f, t, "is not a directory");
    free(t);
    char *dir = lz_xasprintf("%s/dir", f->home);
    mkdir_p(dir, 0755);
    t = with_volume("{ host = \"~/dir\", container = \"/root/d\", kind = \"file\" }");
    refused(f, t, "is not a regular file");
    free(t);

    /* Symlinks cannot satisfy a source. */
    char *ln = lz_xasprintf("%s/link", f->home);
    assert_int_equal(symlink(dir, ln), 0);
    t = with_volume("{ host = \"~/link\", container = \"/root/d\", kind = \"directory\" }");
    refused(f, t, "symlink");
    free(t);
    char *ln2 = lz_xasprintf("%s/link/sub", f->home);
    mkdir_p(ln2, 0755);
    t = with_volume("{ host = \"~/link/sub\", container = \"/root/d\", kind = \"directory\" }");
    refused(f, t, "symlink");
    free(t);

    /* Special files. */
    char *fifo = lz_xasprintf("%s/fifo", f->home);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    t = with_volume("{ host = \"~/fifo\", container = \"/root/d\", kind = \"file\" }");
    refused(f, t, "is not a regular file");
    free(t);

    /* Overlaps: the workspace, one another, the Storage Root outside the
     * profile directory, the Runtime Root, the configuration file. */
    t = with_volume("{ host = \"~/ws/sub\", container = \"/root/d\", kind = \"directory\" }");
    mkdir_p(f->ws, 0755);
    char *wsub = lz_xasprintf("%s/sub", f->ws);
    mkdir_p(wsub, 0755);
    refused(f, t, "the workspace");
    free(t);
    t = with_volume("{ host = \"~/dir\", container = \"/root/d\", kind = \"directory\" }, "
                    "{ host = \"~/dir\", container = \"/root/e\", kind = \"directory\" }");
    refused(f, t, "another volume source");
    free(t);
    t = with_volume("{ host = \"~/.local/share/lazaret/domains\", container = \"/root/d\", kind = "
                    "\"directory\" }");
    refused(f, t, "volume source");
    free(t);
    t = with_volume(
        "{ host = \"~/.config/lazaret\", container = \"/root/d\", kind = \"directory\" }");
    refused(f, t, "the configuration file");
    free(t);
    t = with_volume("{ host = \"~\", container = \"/root/d\", kind = \"directory\" }");
    refused(f, t, "valid host path");
    free(t);
    char *t2 = lz_xasprintf(VOL_PROFILE "{ host = \"%s/lazaret\", container = \"/root/d\", kind "
                                        "= \"directory\" } ]\n",
                            f->run);
    refused(f, t2, "the Runtime Root");
    free(t2);

    free(file), free(dir), free(ln), free(ln2), free(fifo), free(wsub);
}

static void test_layout_conflicts(void **state)
{
    fixture *f = *state;
    refused(f, HEADER "[profiles.p]\nimage = \"a\"\npersistent_dirs = [\"/workspace\"]\n",
            "Lazaret-owned sandbox path /workspace");
    refused(f, HEADER "[profiles.p]\nimage = \"a\"\npersistent_dirs = [\"/workspace/x\"]\n",
            "/workspace");
    refused(f, HEADER "[profiles.p]\nimage = \"a\"\npersistent_dirs = [\"/run\"]\n",
            "/run/lazaret");
    refused(f, HEADER "[profiles.p]\nimage = \"a\"\npersistent_dirs = [\"/proc\"]\n", "/proc");
    accepted(f, HEADER
             "[profiles.p]\nimage = \"a\"\npersistent_dirs = [\"/dev2\", \"/sys2\", \"/run2\"]\n"
             "[[profiles.p.volumes]]\nhost = \"{profile_dir}/v\"\ncontainer = \"/run2/lazaret\"\n"
             "kind = \"directory\"\ncreate = true\n"
             "[[profiles.p.volumes]]\nhost = \"{profile_dir}/w\"\ncontainer = \"/sys2/x\"\n"
             "kind = \"directory\"\ncreate = true\n");
}

static void test_layout_accepts_neighbours(void **state)
{
    fixture *f = *state;
    accepted(f, HEADER "[profiles.p]\nimage = \"a\"\npersistent_dirs = [\"/workspaces\", "
                       "\"/usr\", \"/root\", \"/runner\"]\n");
}

static char *copy_exe(fixture *f, const char *name, mode_t mode)
{
    char *dst = lz_xasprintf("%s/%s", f->dir, name);
    int in = open("/usr/bin/true", O_RDONLY | O_CLOEXEC);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    assert_true(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        assert_int_equal(write(out, buf, (size_t) n), n);
    close(in);
    close(out);
    assert_int_equal(chmod(dst, mode), 0);
    return dst;
}

static char *rule_config(const char *exe, const char *extra)
{
    return lz_xasprintf(HEADER "[profiles.p]\nimage = \"a\"\n[profiles.p.escalation]\nenabled = "
                               "true\nauto_approve = [ { executable = \"%s\" } %s ]\n",
                        exe, extra);
}

static void test_auto_approval_executables(void **state)
{
    fixture *f = *state;
    lz_resolved_config *cfg = NULL;
    char *t;

    t = rule_config("/usr/bin/true", ", { executable = \"/usr/bin/env\", args = [\"ls\"], "
                                     "allow_extra_args = true }");
    char *m = load(f, t, "p", NULL, &cfg);
    if (m)
        fail_msg("%s", m);
    assert_int_equal(cfg->n_rules, 2);
    assert_string_equal(cfg->rules[0].executable.label, "/usr/bin/true");
    assert_string_equal(cfg->rules[1].args[0], "ls");
    lz_resolved_config_free(cfg);
    free(t);

    /* A declared symlink resolves to its canonical target: /bin -> usr/bin
     * on merged-/usr systems. */
    char *ln = lz_xasprintf("%s/true-link", f->dir);
    assert_int_equal(symlink("/usr/bin/true", ln), 0);
    t = rule_config(ln, "");
    assert_null(load(f, t, "p", NULL, &cfg));
    assert_string_equal(cfg->rules[0].executable.label, "/usr/bin/true");
    lz_resolved_config_free(cfg);
    free(t);
    /* ... so two spellings of one program are duplicates. */
    char *dup = lz_xasprintf(", { executable = \"%s\" }", ln);
    t = rule_config("/usr/bin/true", dup);
    refused(f, t, "duplicates");
    free(t), free(dup), free(ln);

    char *gw = copy_exe(f, "gw", 0775);
    t = rule_config(gw, "");
    refused(f, t, "writable by group or others");
    free(t);
    char *noexec = copy_exe(f, "noexec", 0644);
    t = rule_config(noexec, "");
    /* root may execute any file with an x bit only; 0644 has none. */
    refused(f, t, "not executable");
    free(t);
    char *hl = copy_exe(f, "hl", 0755);
    char *hl2 = lz_xasprintf("%s/hl2", f->dir);
    assert_int_equal(link(hl, hl2), 0);
    t = rule_config(hl, "");
    refused(f, t, "more than one hard link");
    free(t);
    char *good = copy_exe(f, "good", 0755);
    t = rule_config(good, "");
    accepted(f, t);
    free(t);
    t = rule_config("/usr/bin/no-such-program-lazaret", "");
    refused(f, t, "cannot resolve");
    free(t);
    t = rule_config("/usr/bin", "");
    refused(f, t, "not a regular file");
    free(t);

    /* Inside the workspace, or Lazaret's own trees. */
    char *inws = lz_xasprintf("%s/tool", f->ws);
    char *src = copy_exe(f, "tool", 0755);
    assert_int_equal(rename(src, inws), 0);
    t = rule_config(inws, "");
    refused(f, t, "the workspace");
    free(t);
    t = rule_config("~/.local/share/lazaret/x", "");
    char *x = lz_xasprintf("%s/.local/share/lazaret/x", f->home);
    char *tmp = copy_exe(f, "x", 0755);
    assert_int_equal(rename(tmp, x), 0);
    refused(f, t, "the Storage Root");
    free(t);

    if (geteuid() == 0) {
        char *foreign = copy_exe(f, "foreign", 0755);
        assert_int_equal(chown(foreign, 65534, 65534), 0);
        t = rule_config(foreign, "");
        refused(f, t, "owned by another user");
        free(t);
        free(foreign);
    }
    free(gw), free(noexec), free(hl), free(hl2), free(good), free(inws), free(src), free(x),
        free(tmp);
}

static void test_environment(void **state)
{
    fixture *f = *state;
    const char *text = HEADER
        "[profiles.p]\nimage = \"a\"\nenv = { B = \"env:LZ_TEST_B\", A = \"env:LZ_TEST_A\" }\n"
        "[profiles.q]\nimage = \"a\"\nenv = { C = \"env:LZ_TEST_UNSET_ELSEWHERE\" }\n";
    unsetenv("LZ_TEST_A");
    unsetenv("LZ_TEST_UNSET_ELSEWHERE");
    setenv("LZ_TEST_B", "hunter2-secret-b", 1);
    char *m = load(f, text, "p", NULL, NULL);
    assert_non_null(m);
    assert_non_null(strstr(m, "LZ_TEST_A is not set"));
    assert_non_null(strstr(m, "profiles.p.env.A"));
    assert_null(strstr(m, "hunter2"));
    free(m);

    setenv("LZ_TEST_A", "hunter2-secret-a", 1);
    lz_resolved_config *cfg = NULL;
    /* Only the selected profile's references are resolved: q's missing
     * variable does not matter for p. */
    assert_null(load(f, text, "p", NULL, &cfg));
    assert_int_equal(cfg->n_env, 2);
    assert_string_equal(cfg->env[0].sandbox_name, "A");
    assert_string_equal(cfg->env[0].value, "hunter2-secret-a");
    assert_string_equal(cfg->env[1].host_name, "LZ_TEST_B");
    uint8_t fp1[32];
    memcpy(fp1, cfg->fingerprint, 32);
    lz_resolved_config_free(cfg);

    /* Values are not fingerprinted. */
    setenv("LZ_TEST_A", "another", 1);
    assert_null(load(f, text, "p", NULL, &cfg));
    assert_memory_equal(fp1, cfg->fingerprint, 32);
    lz_resolved_config_free(cfg);

    setenv("LZ_TEST_A", "bad\xff", 1);
    m = load(f, text, "p", NULL, NULL);
    assert_non_null(strstr(m, "not valid UTF-8"));
    assert_null(strstr(m, "bad"));
    free(m);

    /* Without values (every command but run): neither the non-UTF-8 nor the
     * unset variable refuses the load; each says what the host holds, and
     * no value is read. The fingerprint is the same. */
    assert_null(load_env(f, text, "p", NULL, LZ_LOAD_ENV_NAMES, &cfg));
    assert_int_equal(cfg->env[0].host, LZ_ENV_NOT_UTF8);
    assert_null(cfg->env[0].value);
    assert_int_equal(cfg->env[1].host, LZ_ENV_SET);
    assert_null(cfg->env[1].value);
    assert_memory_equal(fp1, cfg->fingerprint, 32);
    lz_resolved_config_free(cfg);
    unsetenv("LZ_TEST_A");
    assert_null(load_env(f, text, "p", NULL, LZ_LOAD_ENV_NAMES, &cfg));
    assert_int_equal(cfg->env[0].host, LZ_ENV_UNSET);
    lz_resolved_config_free(cfg);
    unsetenv("LZ_TEST_B");
}

static void test_workspace(void **state)
{
    fixture *f = *state;
    const char *text = HEADER "[profiles.p]\nimage = \"a\"\n";
    lz_resolved_config *a = NULL, *b = NULL;
    /* A relative --workspace and a symlink resolve to the canonical path. */
    char *ln = lz_xasprintf("%s/wslink", f->dir);
    assert_int_equal(symlink(f->ws, ln), 0);
    assert_null(load(f, text, "p", ln, &a));
    assert_string_equal(a->workspace.label, f->ws);
    assert_int_equal(chdir(f->home), 0);
    assert_null(load(f, text, "p", "./ws/../ws", &b));
    assert_string_equal(b->workspace.label, f->ws);
    assert_memory_equal(a->domain_id, b->domain_id, 32);
    assert_memory_equal(a->fingerprint, b->fingerprint, 32);
    lz_resolved_config_free(a);
    lz_resolved_config_free(b);
    char *m = load(f, text, "p", "/nonexistent-lazaret-ws", NULL);
    assert_non_null(strstr(m, "cannot open the workspace"));
    free(m);
    char *file = lz_xasprintf("%s/afile", f->home);
    write_file(file, "", 0644);
    m = load(f, text, "p", file, NULL);
    assert_non_null(strstr(m, "not a directory"));
    free(m);
    free(ln), free(file);
}

/* ---- configuration v2 (issue 25) ---------------------------------------- */

#define HEADER2 "schema = \"lazaret-trusted-host-config-v2\"\n"

static void assert_list(const lz_host_list *l, const char *const *want)
{
    size_t n = 0;
    for (; want[n]; n++) {
        assert_true(n < l->count);
        char buf[LZ_HOST_NAME_MAX + 3];
        lz_host_pattern_format(&l->items[n], buf);
        assert_string_equal(buf, want[n]);
    }
    assert_int_equal(l->count, n);
}

static lz_resolved_config *must_load(fixture *f, const char *text, const char *profile)
{
    lz_resolved_config *cfg = NULL;
    char *m = load(f, text, profile, NULL, &cfg);
    if (m)
        fail_msg("%s\n%s", m, text);
    return cfg;
}

static void test_v2_effective_hosts_and_mode(void **state)
{
    fixture *f = *state;
    const char *text = HEADER2 "[network]\n"
                               "default_allow_hosts = [\"github.com\"]\n"
                               "default_deny_hosts = [\"*.telemetry.example\"]\n"
                               "resolvers = [\"203.0.113.53\", \"127.0.0.53\"]\n"
                               "[profiles.p]\nimage = \"a\"\n"
                               "allow_hosts = [\"api.anthropic.com\", \"github.com\"]\n"
                               "deny_hosts = [\"ads.example.com\"]\n"
                               "[profiles.bare]\nimage = \"a\"\n"
                               "[profiles.fwd]\nimage = \"a\"\ndns = \"forward\"\n";
    lz_resolved_config *cfg = must_load(f, text, "p");
    assert_int_equal(cfg->schema_version, 2);
    /* Effective = [network]'s ∪ the profile's, sorted, deduplicated. */
    assert_list(&cfg->allow_hosts, (const char *[]){ "api.anthropic.com", "github.com", NULL });
    assert_list(&cfg->deny_hosts,
                (const char *[]){ "ads.example.com", "*.telemetry.example", NULL });
    /* Strict by default: some allow_hosts pattern exists. */
    assert_int_equal(cfg->dns_mode, LZ_DNS_STRICT);
    assert_false(cfg->dns_mode_explicit);
    assert_int_equal(cfg->n_resolvers, 2);
    assert_memory_equal(cfg->resolvers[0], ((uint8_t[]){ 203, 0, 113, 53 }), 4);
    assert_memory_equal(cfg->resolvers[1], ((uint8_t[]){ 127, 0, 0, 53 }), 4);
    /* The v2 fingerprint; the Domain ID is the v1 one (profile + workspace). */
    uint8_t d[32], id[32];
    assert_int_equal(lz_configuration_fingerprint_v2(cfg, d, NULL), 0);
    assert_memory_equal(d, cfg->fingerprint, 32);
    assert_int_equal(lz_domain_id_v1("p", f->ws, id, NULL), 0);
    assert_memory_equal(id, cfg->domain_id, 32);
    lz_resolved_config_free(cfg);

    /* [network]'s allow alone still makes the mode strict. */
    cfg = must_load(f, text, "bare");
    assert_list(&cfg->allow_hosts, (const char *[]){ "github.com", NULL });
    assert_int_equal(cfg->dns_mode, LZ_DNS_STRICT);
    lz_resolved_config_free(cfg);

    /* An explicit forward wins over the default. */
    cfg = must_load(f, text, "fwd");
    assert_int_equal(cfg->dns_mode, LZ_DNS_FORWARD);
    assert_true(cfg->dns_mode_explicit);
    lz_resolved_config_free(cfg);
}

static void test_v2_mode_defaults(void **state)
{
    fixture *f = *state;
    /* No allow_hosts anywhere: forward, as every v1 profile. */
    lz_resolved_config *cfg = must_load(f, HEADER2 "[profiles.p]\nimage = \"a\"\n", "p");
    assert_int_equal(cfg->dns_mode, LZ_DNS_FORWARD);
    assert_false(cfg->dns_mode_explicit);
    assert_int_equal(cfg->n_resolvers, 0);
    lz_resolved_config_free(cfg);
    /* Only deny_hosts: still forward. */
    cfg = must_load(f, HEADER2 "[profiles.p]\nimage = \"a\"\ndeny_hosts = [\"x.example\"]\n", "p");
    assert_int_equal(cfg->dns_mode, LZ_DNS_FORWARD);
    lz_resolved_config_free(cfg);
    /* default_dns applies to every profile that has no dns key... */
    const char *text = HEADER2 "[network]\ndefault_dns = \"strict\"\n"
                               "[profiles.p]\nimage = \"a\"\n"
                               "[profiles.q]\nimage = \"a\"\ndns = \"forward\"\n"
                               "allow_hosts = [\"x.example\"]\n";
    cfg = must_load(f, text, "p");
    assert_int_equal(cfg->dns_mode, LZ_DNS_STRICT); /* strict with nothing allowed */
    assert_true(cfg->dns_mode_explicit);
    assert_int_equal(cfg->allow_hosts.count, 0);
    lz_resolved_config_free(cfg);
    /* ...and the profile's own key wins over it. */
    cfg = must_load(f, text, "q");
    assert_int_equal(cfg->dns_mode, LZ_DNS_FORWARD);
    assert_true(cfg->dns_mode_explicit);
    lz_resolved_config_free(cfg);
}

static void test_v1_resolves_as_before(void **state)
{
    fixture *f = *state;
    const char *v1 = HEADER "[profiles.p]\nimage = \"a\"\nallow_egress = [\"192.0.2.0/24\"]\n";
    const char *v2 = HEADER2 "[profiles.p]\nimage = \"a\"\nallow_egress = [\"192.0.2.0/24\"]\n";
    lz_resolved_config *a = must_load(f, v1, "p");
    assert_int_equal(a->schema_version, 1);
    assert_int_equal(a->allow_hosts.count, 0);
    assert_int_equal(a->deny_hosts.count, 0);
    assert_int_equal(a->dns_mode, LZ_DNS_FORWARD);
    assert_false(a->dns_mode_explicit);
    assert_int_equal(a->n_resolvers, 0);
    /* A v1 file's fingerprint is ConfigurationFingerprintV1. */
    uint8_t d[32];
    assert_int_equal(lz_configuration_fingerprint_v1(a, d, NULL), 0);
    assert_memory_equal(d, a->fingerprint, 32);
    /* The same settings written as v2: same Domain, another fingerprint
     * (the v2 framing has its own separator). */
    lz_resolved_config *b = must_load(f, v2, "p");
    assert_memory_equal(a->domain_id, b->domain_id, 32);
    assert_memory_not_equal(a->fingerprint, b->fingerprint, 32);
    lz_resolved_config_free(a);
    lz_resolved_config_free(b);
    /* The new keys are unknown to v1 (refused as before v2 existed). */
    refused(f, HEADER "[profiles.p]\nimage = \"a\"\nallow_hosts = [\"x.example\"]\n",
            "unknown field 'allow_hosts'");
}

static void test_v2_refusals_carry_positions(void **state)
{
    fixture *f = *state;
    char *want = lz_xasprintf("%s:4:16: profiles.p.allow_hosts[0]: 'x.example' is both allowed "
                              "and denied",
                              f->cfg);
    refused(f,
            HEADER2 "[network]\ndefault_deny_hosts = [\"x.example\"]\n"
                    "[profiles.p]\nimage = \"a\"\n"
                    "allow_hosts = [\"x.example\"]\n",
            "network.default_deny_hosts[0] at line 3");
    refused(f,
            HEADER2 "[profiles.p]\nimage = \"a\"\n"
                    "allow_hosts = [\"x.example\"]\ndeny_hosts = [\"x.example\"]\n",
            want);
    free(want);
    refused(f, HEADER2 "[profiles.p]\nimage = \"a\"\nallow_hosts = [\"X.example\"]\n",
            "write \"x.example\"");
    refused(f, HEADER2 "[network]\nresolvers = [\"224.0.0.1\"]\n[profiles.p]\nimage = \"a\"\n",
            "multicast");
}

/* The parts a refusal of a changed configuration names (issue 26): one
 * change shows in its own part only; env values in none. */
static void test_configuration_parts(void **state)
{
    fixture *f = *state;
    const char *base = HEADER "[profiles.p]\nimage = \"a\"\nallow_egress = [\"203.0.113.0/24\"]\n"
                              "env = { T = \"env:LZ_TEST_PART\" }\n";
    const char *image = HEADER "[profiles.p]\nimage = \"b\"\nallow_egress = [\"203.0.113.0/24\"]\n"
                               "env = { T = \"env:LZ_TEST_PART\" }\n";
    const char *egress = HEADER "[profiles.p]\nimage = \"a\"\nallow_egress = [\"203.0.113.0/25\"]\n"
                                "env = { T = \"env:LZ_TEST_PART\" }\n";
    const char *const texts[] = { base, image, egress, base };
    const char *const want[] = { NULL, "image", "allow_egress/deny_egress", NULL };
    lz_config_part first[LZ_CONFIG_PARTS];
    for (size_t t = 0; t < 4; t++) {
        setenv("LZ_TEST_PART", t == 3 ? "another value" : "value", 1);
        lz_resolved_config *cfg = NULL;
        assert_null(load(f, texts[t], "p", NULL, &cfg));
        lz_config_part parts[LZ_CONFIG_PARTS];
        lz_error *err = NULL;
        assert_int_equal(lz_configuration_parts(cfg, parts, &err), 0);
        lz_resolved_config_free(cfg);
        if (t == 0) {
            memcpy(first, parts, sizeof(parts));
            continue;
        }
        size_t differ = 0;
        for (size_t i = 0; i < LZ_CONFIG_PARTS; i++)
            if (memcmp(first[i].digest, parts[i].digest, 32) != 0) {
                differ++;
                assert_non_null(want[t]);
                assert_string_equal(parts[i].name, want[t]);
            }
        assert_int_equal(differ, want[t] ? 1 : 0);
    }
    unsetenv("LZ_TEST_PART");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_minimal_creates_owned_roots),
        T(test_profile_selection),
        T(test_xdg_inputs),
        T(test_data_root),
        T(test_overlaps_refused),
        T(test_volumes),
        T(test_layout_conflicts),
        T(test_layout_accepts_neighbours),
        T(test_auto_approval_executables),
        T(test_environment),
        T(test_workspace),
        T(test_v2_effective_hosts_and_mode),
        T(test_v2_mode_defaults),
        T(test_v1_resolves_as_before),
        T(test_v2_refusals_carry_positions),
        T(test_configuration_parts),
    };
    umask(022);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
