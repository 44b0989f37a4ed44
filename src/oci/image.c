/* SPDX-License-Identifier: Apache-2.0 */
#include "oci/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/spawn.h"
#include "common/text.h"
#include "common/util.h"
#include "fs/cache_record.h"
#include "fs/remove.h"
#include "ns/userns.h"
#include "oci/catalog.h"

static const char *const transports[] = {
    (char *) "oci:",
    (char *) "oci-archive:",
    (char *) "docker-archive:",
    (char *) "containers-storage:",
    (char *) "docker://",
    (char *) "dir:",
};

bool lz_image_reference_is_registry(const char *reference)
{
    for (size_t i = 0; i < LZ_ARRAY_SIZE(transports); i++)
        if (strncmp(reference, transports[i], strlen(transports[i])) == 0)
            return strcmp(transports[i], "docker://") == 0;
    return true;
}

char *lz_image_source(const char *reference)
{
    for (size_t i = 0; i < LZ_ARRAY_SIZE(transports); i++)
        if (strncmp(reference, transports[i], strlen(transports[i])) == 0)
            return lz_xstrdup(reference);
    return lz_xasprintf("docker://%s", reference);
}

/* The file whose identity stands for a local image source (an OCI layout's
 * index.json, an archive, a dir: transport's manifest.json), or NULL for a
 * source that is not a local file (a registry, containers-storage). The
 * path is split from the reference as skopeo splits it: at the first ':'
 * after the transport (containers/image, SplitPathAndImage). */
static char *local_source_file(const char *source)
{
    static const struct {
        const char *transport, *file;
    } local[] = { { "oci:", "/index.json" },
                  { "oci-archive:", "" },
                  { "docker-archive:", "" },
                  { "dir:", "/manifest.json" } };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(local); i++) {
        size_t tl = strlen(local[i].transport);
        if (strncmp(source, local[i].transport, tl) != 0)
            continue;
        const char *path = source + tl;
        size_t pl = strcmp(local[i].transport, "dir:") == 0 ? strlen(path) : strcspn(path, ":");
        if (pl == 0 || path[0] != '/')
            return NULL;
        return lz_xasprintf("%.*s%s", (int) pl, path, local[i].file);
    }
    return NULL;
}

/* The key under which a local source's manifest digest is cached: the
 * source and its file's identity (lz_cache_file_identity). NULL when the
 * source is not local or its file cannot be stat'ed (then skopeo is asked,
 * as for a registry). */
static char *source_digest_key(const char *source)
{
    _cleanup_free_ char *file = local_source_file(source);
    struct stat st;
    if (!file || stat(file, &st) < 0 || !S_ISREG(st.st_mode) || strchr(source, '\n'))
        return NULL;
    char id[LZ_CACHE_IDENTITY_MAX];
    lz_cache_file_identity(&st, id);
    return lz_xasprintf("lazaret-source-digest-v1 source=%s id=%s", source, id);
}

static int find_tool(const char *name, char **ret, lz_error **err)
{
    if (lz_spawn_find_program(name, LZ_SPAWN_SYSTEM_PATH, ret, err) < 0) {
        lz_error_hint(err, "install it: sudo apt-get install %s", name);
        return -1;
    }
    return 0;
}

/* skopeo and umoci get a minimal environment plus HOME and XDG_RUNTIME_DIR,
 * where containers tools keep registry credentials and policy overrides. */
static char **tool_env(void)
{
    static char *env[5];
    static char *home, *rt;
    size_t n = 0;
    env[n++] = (char *) "PATH=" LZ_SPAWN_SYSTEM_PATH;
    env[n++] = (char *) "LC_ALL=C";
    if (!home && getenv("HOME"))
        home = lz_xasprintf("HOME=%s", getenv("HOME"));
    if (!rt && getenv("XDG_RUNTIME_DIR"))
        rt = lz_xasprintf("XDG_RUNTIME_DIR=%s", getenv("XDG_RUNTIME_DIR"));
    if (home)
        env[n++] = home;
    if (rt)
        env[n++] = rt;
    env[n] = NULL;
    return env;
}

/* Run a tool; on failure turn its output into the error message. */
static int run_tool(const char *path, char *const argv[], int timeout_ms, lz_spawn_output *out,
                    const char *what, lz_error **err)
{
    lz_spawn_options opt = {
        .envp = tool_env(), .merge_stderr = true, .timeout_ms = timeout_ms, .capture_max = 4 << 20
    };
    lz_spawn_output o = { 0 };
    int status = lz_spawn_capture(path, argv, &opt, &o, err);
    if (status < 0)
        return lz_error_prefix(err, "%s", what);
    if (status != 0) {
        /* Keep the tool's last line: it says what went wrong. */
        char *last = o.data ? o.data : (char *) "";
        size_t n = o.len;
        while (n && (last[n - 1] == '\n' || last[n - 1] == '\r'))
            last[--n] = '\0';
        char *nl = strrchr(last, '\n');
        /* The line may name the image's files: the image's author chose
         * those bytes (attack round i12f, E11). */
        _cleanup_free_ char *line = lz_text_printable(nl ? nl + 1 : last);
        lz_error_set(err, 0, "%s: %s exited with status %d: %s", what, argv[0], status, line);
        lz_spawn_output_free(&o);
        return -1;
    }
    if (out)
        *out = o;
    else
        lz_spawn_output_free(&o);
    return 0;
}

/* An OCI layout's index.json names the tag's manifest by digest, and
 * skopeo reads blobs/sha256/<digest> without checking that its content has
 * that digest: a manifest blob rewritten in place, index.json untouched,
 * changes what skopeo answers although the key (index.json's identity)
 * does not (attack round i13b, 2-B). So a cached digest of an oci: source
 * holds only while that blob still hashes to it; read as skopeo reads it
 * (by path, in the developer's own layout), bounded like a manifest. */
#define MANIFEST_MAX ((off_t) 4 << 20)
static bool oci_manifest_blob_is(const char *source, const char *digest_hex)
{
    if (strncmp(source, "oci:", 4) != 0)
        return true; /* an archive or a dir: layout: its key covers the manifest */
    _cleanup_free_ char *index = local_source_file(source);
    if (!index)
        return false;
    index[strlen(index) - strlen("/index.json")] = '\0';
    _cleanup_free_ char *blob = lz_xasprintf("%s/blobs/sha256/%s", index, digest_hex);
    _cleanup_close_ int fd = open(blob, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > MANIFEST_MAX)
        return false;
    _cleanup_free_ char *data = lz_xmalloc((size_t) st.st_size + 1);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, data + len, (size_t) st.st_size + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return false;
        if (n == 0)
            break;
        len += (size_t) n;
        if (len > (size_t) st.st_size)
            return false; /* grew while read */
    }
    char hex[65];
    lz_sha256_hex(data, len, hex);
    return strcmp(hex, digest_hex) == 0;
}

/* Read the image configuration umoci wrote into the bundle (an OCI runtime
 * config.json): we keep the environment and working directory. */
static void read_bundle_config(int bundle_fd, lz_prepared_image *img)
{
    int fd = openat(bundle_fd, "config.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    json_error_t jerr;
    json_t *root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
    close(fd);
    if (!root)
        return;
    json_t *proc = json_object_get(root, "process");
    json_t *env = json_object_get(proc, "env");
    if (json_is_array(env)) {
        size_t n = json_array_size(env);
        img->env = lz_xcalloc(n + 1, sizeof(char *));
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const char *e = json_string_value(json_array_get(env, i));
            if (e && strchr(e, '=') && k < n)
                img->env[k++] = lz_xstrdup(e);
        }
    }
    const char *cwd = json_string_value(json_object_get(proc, "cwd"));
    if (cwd && cwd[0] == '/')
        img->workdir = lz_xstrdup(cwd);
    /* The image's User, as umoci resolved it against the image's own
     * /etc/passwd and /etc/group (names) or took it (numbers). */
    json_t *user = json_object_get(proc, "user");
    json_t *uid = json_object_get(user, "uid"), *gid = json_object_get(user, "gid");
    if (json_is_integer(uid) && json_is_integer(gid) && json_integer_value(uid) >= 0 &&
        json_integer_value(gid) >= 0 && json_integer_value(uid) <= UINT32_MAX &&
        json_integer_value(gid) <= UINT32_MAX) {
        img->user.uid = (uint32_t) json_integer_value(uid);
        img->user.gid = (uint32_t) json_integer_value(gid);
    }
    json_decref(root);
}

/* ---- the copy is the image the catalog key names ------------------------------------- */

/* A small file of the private layout (made by skopeo in our 0700 directory),
 * whole, at most max bytes. */
static int read_layout_file(int dir_fd, const char *rel, size_t max, char **ret, size_t *ret_len,
                            lz_error **err)
{
    struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                       RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
    _cleanup_close_ int fd = (int) syscall(SYS_openat2, dir_fd, rel, &how, sizeof(how));
    if (fd < 0)
        return lz_error_set(err, errno, "cannot open %s of the copied image", rel);
    char *buf = lz_xmalloc(max + 1);
    size_t len = 0;
    for (ssize_t n; len <= max && (n = read(fd, buf + len, max + 1 - len)) != 0;) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            return lz_error_set(err, e, "cannot read %s of the copied image", rel);
        }
        len += (size_t) n;
    }
    if (len > max) {
        free(buf);
        return lz_error_set(err, 0, "%s of the copied image is larger than %zu bytes", rel, max);
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return 0;
}

/* "docker://host/name:tag" or "docker://name@sha256:…" -> "docker://host/name". */
static char *docker_repository(const char *source)
{
    char *r = lz_xstrdup(source);
    char *at = strchr(r, '@');
    if (at) {
        *at = '\0';
        return r;
    }
    char *slash = strrchr(r, '/');
    char *colon = strrchr(slash ? slash : r, ':');
    if (colon && colon > r + strlen("docker://"))
        *colon = '\0';
    return r;
}

/* The catalog key is the digest of the manifest `skopeo inspect --raw`
 * returned, but the tree comes from a separate `skopeo copy`: a source that
 * answers the two differently (a layout being rewritten, a sandbox
 * rewriting a layout kept in its workspace) would put one image's files
 * under another's key, for every Domain of that image (attack round i12f,
 * E4). So the copy must be the image the key names, byte for byte: its
 * manifest (hashed here, from the private layout) is the inspected one, or
 * a child the inspected index names by digest. Nothing weaker: comparing
 * what two manifests say (their blobs) was fooled by a manifest whose keys
 * jansson reads one way and skopeo's and umoci's Go decoders, which match
 * keys regardless of case, another (round i12g, E4f). A registry image is
 * copied by the inspected digest (copy_source), which skopeo verifies
 * itself; only there may the copy differ from it, when skopeo rewrote a
 * Docker manifest as OCI. The blobs are content-addressed and umoci
 * checks each against its digest as it unpacks. */
static int verify_copy(const char *source, const lz_spawn_output *raw, const char *key_hex,
                       int tmp_fd, lz_error **err)
{
    _cleanup_free_ char *index = NULL, *mblob = NULL;
    size_t index_len = 0, mlen = 0;
    if (read_layout_file(tmp_fd, "layout/index.json", 1 << 20, &index, &index_len, err) < 0)
        return -1;
    json_t *ij = json_loadb(index, index_len, JSON_REJECT_DUPLICATES, NULL);
    const char *mdigest = NULL;
    size_t i, tagged = 0;
    json_t *e;
    json_array_foreach(json_object_get(ij, "manifests"), i, e)
    {
        const char *ref = json_string_value(json_object_get(json_object_get(e, "annotations"),
                                                            "org.opencontainers.image.ref.name"));
        if (ref && strcmp(ref, "image") == 0) {
            mdigest = json_string_value(json_object_get(e, "digest"));
            tagged++;
        }
    }
    char copied_hex[65] = "";
    if (tagged == 1 && mdigest && strncmp(mdigest, "sha256:", 7) == 0 && strlen(mdigest) == 71 &&
        strspn(mdigest + 7, "0123456789abcdef") == 64) {
        _cleanup_free_ char *rel = lz_xasprintf("layout/blobs/sha256/%s", mdigest + 7);
        if (read_layout_file(tmp_fd, rel, 4 << 20, &mblob, &mlen, err) < 0) {
            json_decref(ij);
            return -1;
        }
        lz_sha256_hex(mblob, mlen, copied_hex);
    }
    json_decref(ij);
    if (!copied_hex[0])
        return lz_error_set(err, 0,
                            "the copied image does not have exactly one manifest tagged "
                            "as copied");
    if (strcmp(copied_hex, key_hex) == 0)
        return 0;
    bool ok = strncmp(source, "docker://", 9) == 0;
    json_t *inspected = json_loadb(raw->data, raw->len, JSON_REJECT_DUPLICATES, NULL);
    char want[72];
    snprintf(want, sizeof(want), "sha256:%s", copied_hex);
    json_array_foreach(json_object_get(inspected, "manifests"), i, e)
    {
        const char *d = json_string_value(json_object_get(e, "digest"));
        ok |= d && strcmp(d, want) == 0;
    }
    json_decref(inspected);
    if (ok)
        return 0;
    lz_error_set(err, 0,
                 "the image changed while it was copied: the copy (manifest sha256:%.12s…) "
                 "is not the image whose manifest was read (sha256:%.12s…)",
                 copied_hex, key_hex);
    return lz_error_hint(err, "nothing was prepared; run again when the image source is no longer "
                              "being changed, and check who can write it");
}

/* What skopeo copies: a registry image by the digest of the manifest that
 * was read (skopeo checks the manifest it fetches against it), any other
 * source as it is (verify_copy compares the bytes). */
static char *copy_source(const char *source, const char *key_hex)
{
    if (strncmp(source, "docker://", 9) != 0)
        return lz_xstrdup(source);
    _cleanup_free_ char *repo = docker_repository(source);
    return lz_xasprintf("%s@sha256:%s", repo, key_hex);
}

/* A private OCI layout of the image in rootfs_fd/tmp_name (made fresh),
 * checked against the catalog key (verify_copy). */
static int copy_layout(const char *skopeo, const char *source, const char *reference,
                       const lz_spawn_output *raw, const char *key_hex, int rootfs_fd,
                       const char *tmp_name, const char *tmp_label, lz_error **err)
{
    lz_best_effort(lz_remove_tree_mapped(rootfs_fd, tmp_name, tmp_label, NULL));
    if (mkdirat(rootfs_fd, tmp_name, 0700) < 0)
        return lz_error_set(err, errno, "cannot create %s", tmp_label);
    _cleanup_free_ char *layout = lz_xasprintf("oci:%s/layout:image", tmp_label);
    _cleanup_free_ char *from = copy_source(source, key_hex);
    char *const copy_argv[] = {
        (char *) "skopeo", (char *) "copy", (char *) "--quiet", from, layout, NULL
    };
    if (run_tool(skopeo, copy_argv, -1, NULL, "cannot copy the image", err) < 0) {
        lz_error_prefix(err, "image '%s'", reference);
        return lz_error_hint(err, "check the reference and, for a registry image, the network");
    }
    _cleanup_close_ int tmp_fd =
        openat(rootfs_fd, tmp_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tmp_fd < 0)
        return lz_error_set(err, errno, "cannot open %s", tmp_label);
    if (verify_copy(source, raw, key_hex, tmp_fd, err) < 0)
        return lz_error_prefix(err, "image '%s'", reference);
    return 0;
}

/* The keep-id tree of an image (docs/runtime.md "The agent's user"): umoci
 * unpacks as root of a user namespace with the Domain's keep-id map, so
 * every file gets the host id the sandbox's map gives its image owner. It
 * runs inside that namespace (lz_userns_call), where the files it made are
 * its own: it also opens the bundle to the developer (0755: the catalog
 * directory above is 0700) and renames it into place. */
typedef struct keep_id_unpack {
    const char *umoci, *image_arg, *bundle, *tmp_bundle_rel, *entry;
    int rootfs_fd;
    lz_idmap user;
} keep_id_unpack;

#define KEEP_ID_SEAL "lazaret-keep-id"

/* Is the keep-id entry one this code made for this user: sealed (written
 * last, so a half-made entry fails), with the user's ids, by the host id
 * the keep-id map gives the sandbox's root (S+uid-1: the unpack ran as that
 * root)? An entry made any other way (an older Lazaret, a copy of the
 * developer-owned tree) is not used (attack round i12f, E7). */
static bool keep_id_entry_ok(int rootfs_fd, const char *entry, const lz_idmap *user)
{
    lz_subid_range uids;
    if (lz_subid_lookup(LZ_SUBID_UID, getuid(), getgid(), &uids, NULL) < 0)
        return false;
    uid_t root_host = user->uid == 0 ? getuid() : (uid_t) (uids.start + user->uid - 1);
    _cleanup_free_ char *rel = lz_xasprintf("%s/" KEEP_ID_SEAL, entry);
    _cleanup_close_ int fd = openat(rootfs_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != root_host)
        return false;
    char buf[64], want[64];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int wlen = snprintf(want, sizeof(want), "keep-id 1 uid %u gid %u\n", (unsigned) user->uid,
                        (unsigned) user->gid);
    return n == wlen && memcmp(buf, want, (size_t) n) == 0;
}

static int unpack_keep_id(void *arg, lz_error **err)
{
    keep_id_unpack *j = arg;
    char *const argv[] = { (char *) "umoci",      (char *) "unpack",  (char *) "--image",
                           (char *) j->image_arg, (char *) j->bundle, NULL };
    if (run_tool(j->umoci, argv, -1, NULL, "cannot unpack the image for its non-root user", err) <
        0)
        return lz_error_hint(err,
                             "an image with device nodes or files of ids above %u cannot "
                             "run as its non-root user (docs/runtime.md \"The agent's "
                             "user\")",
                             LZ_SUBID_COUNT);
    /* The entry's seal, written last, by the namespace's root: what
     * keep_id_entry_ok checks before an entry is used. */
    _cleanup_free_ char *seal_rel = lz_xasprintf("%s/" KEEP_ID_SEAL, j->tmp_bundle_rel);
    _cleanup_close_ int seal =
        openat(j->rootfs_fd, seal_rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    char text[64];
    int len = snprintf(text, sizeof(text), "keep-id 1 uid %u gid %u\n", (unsigned) j->user.uid,
                       (unsigned) j->user.gid);
    if (seal < 0 || write(seal, text, (size_t) len) != len)
        return lz_error_set(err, errno, "cannot seal the unpacked image %s", j->bundle);
    if (fchmodat(j->rootfs_fd, j->tmp_bundle_rel, 0755, 0) < 0)
        return lz_error_set(err, errno, "cannot open the unpacked image %s", j->bundle);
    if (renameat(j->rootfs_fd, j->tmp_bundle_rel, j->rootfs_fd, j->entry) < 0)
        return lz_error_set(err, errno, "cannot move the prepared image into the catalog");
    return 0;
}

/* The catalog entry at label, which must be a directory. */
static int open_entry(const char *label, lz_path_plan *ret, lz_error **err)
{
    if (lz_plan_existing(label, ret, err) < 0)
        return -1;
    if (!S_ISDIR(ret->target.mode)) {
        lz_error_set(err, 0, "the prepared image %s is not a directory", label);
        return lz_error_hint(err, "remove it; it will be prepared again");
    }
    return 0;
}

/* Did skopeo fail to reach the registry at all (no answer: a refused or
 * timed-out connection, no route, no name resolution), rather than get an
 * answer that says no (unauthorized, denied, unknown manifest)? Only then
 * may a start fall back to what is prepared (docs/runtime.md "Images"):
 * a registry that refuses is asked again, never bypassed. */
static bool registry_unreachable(const char *message)
{
    static const char *const answered[] = {
        "unauthorized",     "denied",    "authentication required",
        "manifest unknown", "not found", "toomanyrequests"
    };
    static const char *const unreachable[] = {
        "connection refused",
        "no such host",
        "network is unreachable",
        "no route to host",
        "i/o timeout",
        "TLS handshake timeout",
        "connection reset by peer",
        "connection timed out",
        "server misbehaving",
        "temporary failure in name resolution",
        "dial tcp",
        "dial udp",
        "Client.Timeout exceeded",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(answered); i++)
        if (strcasestr(message, answered[i]))
            return false;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(unreachable); i++)
        if (strcasestr(message, unreachable[i]))
            return true;
    return false;
}

/* The part of skopeo's message that says why (from "dial ..." on, without
 * the closing quote of its log line): what a notice shows. Newly allocated. */
static char *unreachable_reason(const char *message)
{
    const char *from = strstr(message, "dial ");
    if (!from)
        from = strstr(message, "lookup ");
    if (!from)
        from = message;
    size_t n = strlen(from);
    while (n && (from[n - 1] == '"' || from[n - 1] == '\\'))
        n--;
    return lz_xstrndup(from, n);
}

#define INSPECT_PREPARED_MS 20000

static void format_utc(long long secs, char out[static 32])
{
    time_t t = (time_t) secs;
    struct tm tm;
    if (secs <= 0 || !gmtime_r(&t, &tm) || strftime(out, 32, "%Y-%m-%d %H:%M UTC", &tm) == 0)
        snprintf(out, 32, "at an unknown time");
}

/* Leftovers of a preparation that was killed (Ctrl-C during a long
 * unpack): its private layout and half-unpacked trees under .tmp-<pid>.
 * Every preparation holds the catalog lock while its .tmp- entry exists,
 * and the caller holds it now: any .tmp- entry is abandoned. Best effort:
 * what cannot be removed now is tried again next time. */
static void sweep_abandoned(int rootfs_fd, const char *rootfs_label)
{
    _cleanup_close_ int fd = openat(rootfs_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d)
        return;
    fd = -EBADF; /* the DIR owns it */
    char *names[64];
    size_t n = 0;
    for (struct dirent *e; n < LZ_ARRAY_SIZE(names) && (e = readdir(d));)
        if (strncmp(e->d_name, LZ_CATALOG_TMP_PREFIX, strlen(LZ_CATALOG_TMP_PREFIX)) == 0)
            names[n++] = lz_xstrdup(e->d_name);
    closedir(d);
    for (size_t i = 0; i < n; i++) {
        lz_best_effort(lz_remove_tree_mapped(rootfs_fd, names[i], rootfs_label, NULL));
        free(names[i]);
    }
}

/* The developer-owned tree of an image that runs as a non-root user is
 * never run (its keep-id tree is): only its config.json is read, for the
 * user. Its rootfs/ goes, so that an image takes its size once
 * (docs/runtime.md "Images"). */
static int drop_unused_rootfs(int parent_fd, const char *bundle_rel, const char *label,
                              lz_error **err)
{
    _cleanup_close_ int bfd =
        openat(parent_fd, bundle_rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd < 0)
        return lz_error_set(err, errno, "cannot open %s", label);
    return lz_remove_tree_mapped(bfd, "rootfs", label, err);
}

int lz_image_prepare(const lz_path_plan *storage_root, const char *reference,
                     const lz_image_use_record *use, lz_progress_fn progress, void *userdata,
                     lz_prepared_image *ret, lz_error **err)
{
    lz_path_plan images = LZ_PATH_PLAN_INIT, rootfs_dir = LZ_PATH_PLAN_INIT;
    _cleanup_free_ char *skopeo = NULL, *umoci = NULL, *source = NULL, *tmp_label = NULL,
                        *tmp_name = NULL, *final_label = NULL, *image_arg = NULL, *entry = NULL;
    _cleanup_close_ int lock_fd = -EBADF, rootfs_fd = -EBADF, images_fd = -EBADF;
    _cleanup_free_ char *digest_key = NULL, *digest_record = NULL;
    lz_spawn_output raw = { 0 };
    lz_prepared_image img = { .bundle = LZ_PATH_PLAN_INIT };
    int r = -1;
    bool have_layout = false;

    if (find_tool("skopeo", &skopeo, err) < 0 || find_tool("umoci", &umoci, err) < 0)
        goto out;
    source = lz_image_source(reference);

    if (lz_ensure_owned_child(storage_root, "images/rootfs", &rootfs_dir, err) < 0 ||
        lz_ensure_owned_child(storage_root, "images", &images, err) < 0)
        goto out;
    {
        images_fd = lz_plan_open(&images, O_RDONLY | O_DIRECTORY, true, err);
        if (images_fd < 0)
            goto out;
        lock_fd = openat(images_fd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (lock_fd < 0) {
            lz_error_set(err, errno, "cannot open the Storage Catalog lock in %s", images.label);
            goto out;
        }
    }
    if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
        if (progress)
            progress(LZ_PROGRESS_PHASE, "waiting for another Lazaret to finish preparing an image",
                     userdata);
        if (flock(lock_fd, LOCK_EX) < 0) {
            lz_error_set(err, errno, "cannot lock the Storage Catalog %s", images.label);
            goto out;
        }
    }

    rootfs_fd = lz_plan_open(&rootfs_dir, O_RDONLY | O_DIRECTORY, true, err);
    if (rootfs_fd < 0)
        goto out;
    sweep_abandoned(rootfs_fd, rootfs_dir.label);
    /* The catalog key: the digest of the raw top-level manifest. Of a
     * local source it was learned when the source was last asked, and kept
     * with the identity of the source's file (source_digest_key): a start
     * without `skopeo inspect`, ~16 ms shorter, when that entry is
     * prepared already. A registry is asked every time. */
    digest_key = source_digest_key(source);
    if (digest_key) {
        char name[8 + 65];
        char key_hex[65];
        lz_sha256_hex(source, strlen(source), key_hex);
        snprintf(name, sizeof(name), "source-%.16s", key_hex);
        digest_record = lz_xstrdup(name);
    }
    struct stat st;
    char cached[65];
    long long now = (long long) time(NULL), checked = 0;
    if (digest_key &&
        lz_cache_record_load(images_fd, digest_record, digest_key, cached, sizeof(cached)) == 0 &&
        strlen(cached) == 64 && strspn(cached, "0123456789abcdef") == 64 &&
        fstatat(rootfs_fd, cached, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        oci_manifest_blob_is(source, cached)) {
        memcpy(img.digest_hex, cached, sizeof(cached));
        checked = now; /* the source's identity is unchanged: it says this digest */
    } else {
        char *const argv[] = { (char *) "skopeo", (char *) "inspect", (char *) "--raw", source,
                               NULL };
        /* A registry image this exact reference named before, still
         * prepared: what an offline start falls back to. Then a registry
         * that does not answer within INSPECT_PREPARED_MS counts as
         * unreachable too (a train's flaky network), rather than keeping
         * the developer waiting five minutes. */
        bool is_registry = strncmp(source, "docker://", 9) == 0;
        lz_catalog_ref last;
        bool have_last = is_registry && lz_catalog_ref_load(images_fd, source, &last) == 0 &&
                         fstatat(rootfs_fd, last.digest_hex, &st, AT_SYMLINK_NOFOLLOW) == 0;
        lz_error *ask = NULL;
        if (run_tool(skopeo, argv, have_last ? INSPECT_PREPARED_MS : 300000, &raw,
                     "cannot read the image manifest", &ask) == 0) {
            lz_sha256_hex(raw.data, raw.len, img.digest_hex);
            checked = now;
        } else if (is_registry &&
                   (registry_unreachable(ask->message) || ask->errnum == ETIMEDOUT)) {
            /* Offline: what this exact reference named when it was last
             * asked, if that image is still prepared. */
            if (!have_last) {
                _cleanup_free_ char *why = unreachable_reason(ask->message);
                lz_error_set(err, ask->errnum,
                             "image '%s': the registry cannot be reached (%s) and no image was "
                             "prepared for this reference",
                             reference, why);
                lz_error_hint(err, "connect to the network and run again (the first start of a "
                                   "registry image needs its registry; later starts work "
                                   "offline), or name an image on this machine in the profile "
                                   "(oci:/path/to/layout:tag)");
                lz_error_free(ask);
                goto out;
            }
            memcpy(img.digest_hex, last.digest_hex, sizeof(last.digest_hex));
            checked = last.checked;
            img.offline = true;
            if (progress) {
                char when[32], prepared[32];
                format_utc(last.checked, when);
                _cleanup_free_ char *cfg = lz_xasprintf("%s/config.json", img.digest_hex);
                format_utc(fstatat(rootfs_fd, cfg, &st, AT_SYMLINK_NOFOLLOW) == 0
                               ? (long long) st.st_mtime
                               : 0,
                           prepared);
                _cleanup_free_ char *why = unreachable_reason(ask->message);
                _cleanup_free_ char *line = lz_xasprintf(
                    "the registry of image '%s' is not reachable (%s): starting offline with "
                    "sha256:%s, prepared %s, which the registry last confirmed for this "
                    "reference %s. A tag changed upstream since then is not seen offline; the "
                    "next start online uses it.",
                    reference, why, img.digest_hex, prepared, when);
                progress(LZ_PROGRESS_PHASE, line, userdata);
            }
            lz_error_free(ask);
        } else {
            *err = ask;
            lz_error_prefix(err, "image '%s'", reference);
            lz_error_hint(err, "check the image reference in the profile; a plain reference "
                               "needs network access, an offline image can be given as "
                               "oci:/path/to/layout:tag or oci-archive:/path/to/image.tar");
            goto out;
        }
    }
    final_label = lz_xasprintf("%s/%s", rootfs_dir.label, img.digest_hex);
    tmp_name = lz_xasprintf(".tmp-%d", (int) getpid());
    tmp_label = lz_xasprintf("%s/%s", rootfs_dir.label, tmp_name);
    image_arg = lz_xasprintf("%s/layout:image", tmp_label);

    /* Every prepared image has its developer-owned tree (umoci --rootless:
     * every file the developer's, root's in the default map); its
     * configuration says which user the image runs as. */
    if (fstatat(rootfs_fd, img.digest_hex, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT) {
            lz_error_set(err, errno, "cannot inspect %s", final_label);
            goto out;
        }
        /* Not prepared yet: copy into a private layout, unpack, rename. */
        if (progress) {
            char *line = lz_xasprintf("preparing image %s (first use of this image; this can "
                                      "take minutes)",
                                      reference);
            progress(LZ_PROGRESS_PHASE, line, userdata);
            free(line);
        }
        if (copy_layout(skopeo, source, reference, &raw, img.digest_hex, rootfs_fd, tmp_name,
                        tmp_label, err) < 0)
            goto out;
        have_layout = true;
        if (progress)
            progress(LZ_PROGRESS_PHASE, "unpacking image", userdata);
        _cleanup_free_ char *bundle = lz_xasprintf("%s/bundle", tmp_label);
        char *const unpack_argv[] = { (char *) "umoci",
                                      (char *) "unpack",
                                      (char *) "--rootless",
                                      (char *) "--image",
                                      image_arg,
                                      bundle,
                                      NULL };
        if (run_tool(umoci, unpack_argv, -1, NULL, "cannot unpack the image", err) < 0) {
            lz_error_prefix(err, "image '%s'", reference);
            goto out;
        }
        _cleanup_free_ char *tmp_bundle_rel = lz_xasprintf("%s/bundle", tmp_name);
        {
            lz_prepared_image probe = { .bundle = LZ_PATH_PLAN_INIT };
            _cleanup_close_ int bfd =
                openat(rootfs_fd, tmp_bundle_rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (bfd >= 0)
                read_bundle_config(bfd, &probe);
            bool non_root = probe.user.uid != 0 || probe.user.gid != 0;
            lz_prepared_image_clear(&probe);
            if (non_root && drop_unused_rootfs(rootfs_fd, tmp_bundle_rel, bundle, err) < 0)
                goto out;
        }
        if (renameat(rootfs_fd, tmp_bundle_rel, rootfs_fd, img.digest_hex) < 0) {
            lz_error_set(err, errno, "cannot move the prepared image into %s", final_label);
            goto out;
        }
    }

    if (open_entry(final_label, &img.bundle, err) < 0)
        goto out;
    /* Asked, and its entry is there: kept for the next start. The key was
     * made before asking, so a source rewritten meanwhile has another
     * identity now and misses. */
    if (digest_key && raw.data)
        lz_cache_record_store(images_fd, digest_record, digest_key, img.digest_hex);
    {
        _cleanup_close_ int bfd = lz_plan_open(&img.bundle, O_RDONLY | O_DIRECTORY, true, err);
        if (bfd < 0)
            goto out;
        read_bundle_config(bfd, &img);
    }

    if (img.user.uid != 0 || img.user.gid != 0) {
        /* A non-root User: the keep-id tree, its own catalog entry. */
        if (lz_idmap_check(&img.user, err) < 0) {
            lz_error_prefix(err, "image '%s'", reference);
            goto out;
        }
        entry = lz_xasprintf("%s.keep-id-%u-%u", img.digest_hex, (unsigned) img.user.uid,
                             (unsigned) img.user.gid);
        free(final_label);
        final_label = lz_xasprintf("%s/%s", rootfs_dir.label, entry);
        bool present = fstatat(rootfs_fd, entry, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!present && errno != ENOENT) {
            lz_error_set(err, errno, "cannot inspect %s", final_label);
            goto out;
        }
        if (present && !keep_id_entry_ok(rootfs_fd, entry, &img.user)) {
            /* Not ours: made again (we hold the catalog lock). */
            if (lz_remove_tree_mapped(rootfs_fd, entry, rootfs_dir.label, err) < 0) {
                lz_error_prefix(err, "image '%s': the unsealed entry %s cannot be replaced",
                                reference, final_label);
                goto out;
            }
            present = false;
        }
        if (!present) {
            if (progress) {
                char *line = lz_xasprintf("unpacking image %s for its user (uid %u)", reference,
                                          (unsigned) img.user.uid);
                progress(LZ_PROGRESS_PHASE, line, userdata);
                free(line);
            }
            if (!have_layout && copy_layout(skopeo, source, reference, &raw, img.digest_hex,
                                            rootfs_fd, tmp_name, tmp_label, err) < 0)
                goto out;
            have_layout = true;
            _cleanup_free_ char *bundle = lz_xasprintf("%s/keep-id", tmp_label);
            _cleanup_free_ char *tmp_bundle_rel = lz_xasprintf("%s/keep-id", tmp_name);
            keep_id_unpack job = { .umoci = umoci,
                                   .image_arg = image_arg,
                                   .bundle = bundle,
                                   .tmp_bundle_rel = tmp_bundle_rel,
                                   .entry = entry,
                                   .rootfs_fd = rootfs_fd,
                                   .user = img.user };
            if (lz_userns_call(&img.user, unpack_keep_id, &job, err) < 0) {
                lz_error_prefix(err, "image '%s'", reference);
                goto out;
            }
        }
        /* An entry made before the developer-owned rootfs of a non-root
         * image was dropped: dropped now. */
        if (fstatat(rootfs_fd, img.digest_hex, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode)) {
            _cleanup_free_ char *rootfs_rel = lz_xasprintf("%s/rootfs", img.digest_hex);
            _cleanup_free_ char *dev_label =
                lz_xasprintf("%s/%s", rootfs_dir.label, img.digest_hex);
            if (fstatat(rootfs_fd, rootfs_rel, &st, AT_SYMLINK_NOFOLLOW) == 0)
                lz_best_effort(drop_unused_rootfs(rootfs_fd, img.digest_hex, dev_label, NULL));
        }
        lz_plan_clear(&img.bundle);
        if (open_entry(final_label, &img.bundle, err) < 0)
            goto out;
    }
    if (have_layout && progress)
        progress(LZ_PROGRESS_PHASE, "image ready", userdata);
    /* Still under the catalog lock: the reference's record, and the
     * Domain's record of its image, which keeps the entry from `lazaret
     * image prune` from now on (a prune waits for this lock, then sees the
     * record). */
    {
        lz_catalog_ref ref = { .checked = checked, .used = now };
        memcpy(ref.digest_hex, img.digest_hex, sizeof(ref.digest_hex));
        lz_catalog_ref_store(images_fd, source, &ref);
    }
    if (use && use->domain_root_fd >= 0) {
        lz_catalog_use rec = { .source = source, .started = now, .offline = img.offline };
        memcpy(rec.digest_hex, img.digest_hex, sizeof(rec.digest_hex));
        snprintf(rec.entry, sizeof(rec.entry), "%s", entry ? entry : img.digest_hex);
        if (lz_catalog_use_write(use->domain_root_fd, use->domain_root_label, &rec, err) < 0)
            goto out;
    }
    img.checked = checked;
    img.rootfs_label = lz_xasprintf("%s/rootfs", final_label);
    *ret = img;
    img = (lz_prepared_image){ .bundle = LZ_PATH_PLAN_INIT };
    r = 0;
out:
    if (tmp_name && (have_layout || r < 0))
        lz_best_effort(lz_remove_tree_mapped(rootfs_fd, tmp_name, rootfs_dir.label, NULL));
    lz_spawn_output_free(&raw);
    lz_prepared_image_clear(&img);
    lz_plan_clear(&images);
    lz_plan_clear(&rootfs_dir);
    return r;
}

void lz_prepared_image_clear(lz_prepared_image *img)
{
    lz_plan_clear(&img->bundle);
    free(img->rootfs_label);
    img->rootfs_label = NULL;
    if (img->env) {
        for (char **e = img->env; *e; e++)
            free(*e);
        free(img->env);
        img->env = NULL;
    }
    free(img->workdir);
    img->workdir = NULL;
}
