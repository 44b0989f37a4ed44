/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret image list [--json]
 * lazaret image prune [--dry-run] [--yes]
 *
 * The Storage Catalog (<data_root>/images/, oci/image.h) as the developer
 * sees it: each prepared image by digest, the references that named it,
 * its size on disk (the keep-id tree included), the Domains whose record
 * says they run it (oci/catalog.h), when it was prepared and last used.
 * prune removes the images no Domain with state on disk uses.
 *
 * Concurrency: prune holds the catalog lock (images/.lock, exclusive) from
 * before it reads the Domains' records until the last removal. A start
 * prepares its image and writes its Domain's record under the same lock
 * (lz_image_prepare), so a prune either finishes before that start looks
 * at the catalog (which then prepares the image again) or sees its record.
 * Nothing else removes or replaces a catalog entry.
 *
 * What an image holds is as untrusted as what a sandbox wrote: sizes come
 * from the bounded no-follow walk of `state list`, removal from
 * lz_remove_tree_mapped (descriptors, no symlink followed, no mount
 * crossed; the keep-id tree's subordinate-id files from inside a user
 * namespace where the developer is root over them).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/state.h"
#include "common/options.h"
#include "common/text.h"
#include "common/util.h"
#include "config/resolve.h"
#include "fs/confined.h"
#include "ns/userns.h"
#include "oci/catalog.h"
#include "store/domain_root.h"

const char lz_usage_image[] =
    "Usage: lazaret [--config FILE] image list [--json]\n"
    "       lazaret [--config FILE] image prune [--dry-run] [--yes]\n"
    "\n"
    "list   every prepared image of your user: its digest, the references that named\n"
    "       it, its size on disk (the copy for a non-root image user included), the\n"
    "       Domains (profile, workspace) that use it, when it was prepared and last used.\n"
    "prune  remove the prepared images no Domain with state on disk uses (a Domain\n"
    "       uses the image it last started with), and what interrupted preparations\n"
    "       left. Asks on a terminal, else needs --yes. A start meanwhile waits.\n"
    "       An image removed is prepared again by the next start that needs it (a\n"
    "       registry image needs its registry for that).\n"
    "\n"
    "Options:\n"
    "  --json      list: print JSON\n"
    "  --dry-run   prune: say what would be removed, remove nothing\n"
    "  --yes       prune: do not ask (needed when stdin is not a terminal)\n";

/* The catalog, opened without following a symlink. */
typedef struct catalog {
    char *images_label, *rootfs_label, *domains_label;
    int images_fd, rootfs_fd, domains_fd; /* domains_fd -1 when there is none yet */
} catalog;

static void catalog_close(catalog *c)
{
    free(c->images_label);
    free(c->rootfs_label);
    free(c->domains_label);
    if (c->images_fd >= 0)
        close(c->images_fd);
    if (c->rootfs_fd >= 0)
        close(c->rootfs_fd);
    if (c->domains_fd >= 0)
        close(c->domains_fd);
}

static int open_dir_of_mine(int parent, const char *name, const char *label, int *ret,
                            lz_error **err)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        if (errno == ENOENT) {
            *ret = -1;
            return 0;
        }
        return lz_error_set(err, errno, "cannot open %s", label);
    }
    if (fstat(fd, &st) < 0 || st.st_uid != getuid() || (st.st_mode & 022)) {
        close(fd);
        lz_error_set(err, 0, "%s is not a directory of yours without group/other write", label);
        return lz_error_hint(err, "check who made it: Lazaret makes it yours, mode 0700");
    }
    *ret = fd;
    return 0;
}

/* 1 when the catalog exists, 0 when nothing was ever prepared. */
static int catalog_open(const lz_global_options *g, catalog *c, lz_error **err)
{
    *c = (catalog){ .images_fd = -1, .rootfs_fd = -1, .domains_fd = -1 };
    _cleanup_free_ char *storage = lz_storage_root_choose(g->config_path, err);
    if (!storage)
        return -1;
    lz_path_plan plan = LZ_PATH_PLAN_INIT;
    if (lz_plan_existing(storage, &plan, err) < 0) {
        if ((*err)->errnum != ENOENT)
            return -1;
        lz_error_free(*err);
        *err = NULL;
        return 0;
    }
    _cleanup_close_ int root = lz_plan_open(&plan, O_RDONLY | O_DIRECTORY, true, err);
    lz_plan_clear(&plan);
    if (root < 0)
        return -1;
    c->images_label = lz_xasprintf("%s/images", storage);
    c->rootfs_label = lz_xasprintf("%s/images/rootfs", storage);
    c->domains_label = lz_xasprintf("%s/domains", storage);
    if (open_dir_of_mine(root, "images", c->images_label, &c->images_fd, err) < 0 ||
        open_dir_of_mine(root, "domains", c->domains_label, &c->domains_fd, err) < 0)
        return -1;
    if (c->images_fd < 0)
        return 0;
    if (open_dir_of_mine(c->images_fd, "rootfs", c->rootfs_label, &c->rootfs_fd, err) < 0)
        return -1;
    return c->rootfs_fd >= 0;
}

/* The catalog lock: exclusive for prune (as every preparation takes it),
 * shared for a look that must not see a preparation half-way. */
static int catalog_lock(const catalog *c, int how, lz_error **err)
{
    int fd = openat(c->images_fd, LZ_CATALOG_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot open the Storage Catalog lock in %s",
                            c->images_label);
    if (flock(fd, how | LOCK_NB) < 0) {
        fprintf(stderr, "lazaret: waiting for another Lazaret to finish preparing an image\n");
        if (flock(fd, how) < 0) {
            int e = errno;
            close(fd);
            return lz_error_set(err, e, "cannot lock the Storage Catalog %s", c->images_label);
        }
    }
    return fd;
}

static void set_time(json_t *o, const char *key, long long secs)
{
    json_t *t = json_integer(secs);
    state_set_time(o, key, secs > 0 ? t : NULL);
    json_decref(t);
}

static void bump_time(json_t *row, const char *key, long long secs)
{
    json_t *cur = json_object_get(row, "last_used_epoch");
    if (secs > json_integer_value(cur)) {
        json_object_set_new(row, "last_used_epoch", json_integer(secs));
        set_time(row, key, secs);
    }
}

/* What the catalog holds, by digest: {digest: row}. Abandoned .tmp-
 * entries go to *tmp (names), records of references to *refs ({record
 * name: digest}). *unknown_running counts the running Domains whose image
 * is not recorded (started by an older Lazaret). */
static json_t *catalog_scan(const catalog *c, json_t *tmp, json_t *refs, int *unknown_running)
{
    json_t *rows = json_object();
    *unknown_running = 0;
    DIR *d = fdopendir(fcntl(c->rootfs_fd, F_DUPFD_CLOEXEC, 3));
    for (struct dirent *e; d && (e = readdir(d));) {
        char digest[65];
        bool keep_id = false;
        if (strncmp(e->d_name, LZ_CATALOG_TMP_PREFIX, strlen(LZ_CATALOG_TMP_PREFIX)) == 0) {
            json_array_append_new(tmp, json_string(e->d_name));
            continue;
        }
        if (!lz_catalog_entry_parse(e->d_name, digest, &keep_id))
            continue;
        json_t *row = json_object_get(rows, digest);
        if (!row) {
            row = json_pack("{s:s, s:[], s:[], s:[], s:I, s:b, s:I, s:n, s:n}", "digest", digest,
                            "references", "entries", "domains", "bytes", (json_int_t) 0,
                            "sizes_partial", 0, "last_used_epoch", (json_int_t) 0, "prepared",
                            "last_used");
            json_object_set_new(rows, digest, row);
        }
        state_walk w = state_size_of(c->rootfs_fd, e->d_name);
        json_array_append_new(json_object_get(row, "entries"),
                              json_pack("{s:s, s:b, s:I, s:b}", "name", e->d_name, "keep_id",
                                        keep_id, "bytes", (json_int_t) w.bytes, "sizes_partial",
                                        w.partial));
        json_object_set_new(
            row, "bytes",
            json_integer(json_integer_value(json_object_get(row, "bytes")) + (json_int_t) w.bytes));
        if (w.partial)
            json_object_set_new(row, "sizes_partial", json_true());
        /* When it was prepared: umoci wrote its config.json then. */
        _cleanup_free_ char *cfg = lz_xasprintf("%s/config.json", e->d_name);
        struct stat st;
        if (!keep_id && fstatat(c->rootfs_fd, cfg, &st, AT_SYMLINK_NOFOLLOW) == 0)
            set_time(row, "prepared", (long long) st.st_mtime);
    }
    if (d)
        closedir(d);

    d = fdopendir(fcntl(c->images_fd, F_DUPFD_CLOEXEC, 3));
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, LZ_CATALOG_REF_PREFIX, strlen(LZ_CATALOG_REF_PREFIX)) != 0)
            continue;
        char *source = NULL;
        lz_catalog_ref ref;
        if (lz_catalog_ref_read(c->images_fd, e->d_name, &source, &ref) < 0)
            continue;
        json_object_set_new(refs, e->d_name, json_string(ref.digest_hex));
        json_t *row = json_object_get(rows, ref.digest_hex);
        if (row) {
            json_array_append_new(json_object_get(row, "references"), json_string(source));
            bump_time(row, "last_used", ref.used);
        }
        free(source);
    }
    if (d)
        closedir(d);

    _cleanup_free_ char *rroot = NULL;
    json_t *running = lz_cli_running_domains(&rroot);
    d = c->domains_fd >= 0 ? fdopendir(fcntl(c->domains_fd, F_DUPFD_CLOEXEC, 3)) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!lz_domain_id_valid(e->d_name))
            continue;
        int droot = openat(c->domains_fd, e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (droot < 0)
            continue;
        bool is_running = running && state_running_by_id(running, e->d_name);
        lz_catalog_use use = { 0 };
        int known = lz_catalog_use_read(droot, &use);
        json_t *row = known == 1 ? json_object_get(rows, use.digest_hex) : NULL;
        if (known != 1 && is_running)
            (*unknown_running)++;
        if (row) {
            lz_domain_summary s = { 0 };
            lz_error *err = NULL;
            json_t *o = json_pack("{s:s, s:s, s:b, s:b}", "domain_id", e->d_name, "entry",
                                  use.entry, "running", is_running, "offline", use.offline);
            if (lz_store_read_summary(droot, &s, &err) == 0) {
                json_object_set_new(o, "profile", json_string(s.profile));
                json_object_set_new(o, "workspace", json_string(s.workspace));
            }
            lz_error_free(err);
            lz_domain_summary_clear(&s);
            set_time(o, "started", use.started);
            json_array_append_new(json_object_get(row, "domains"), o);
            bump_time(row, "last_used", use.started);
        }
        lz_catalog_use_clear(&use);
        close(droot);
    }
    if (d)
        closedir(d);
    json_decref(running);
    return rows;
}

static void print_row(json_t *row)
{
    char size[32];
    state_human((unsigned long long) json_integer_value(json_object_get(row, "bytes")), size,
                sizeof(size));
    const char *prepared = json_string_value(json_object_get(row, "prepared"));
    const char *used = json_string_value(json_object_get(row, "last_used"));
    printf("sha256:%s\n", json_string_value(json_object_get(row, "digest")));
    printf("  on disk:     %s%s\n", size,
           json_is_true(json_object_get(row, "sizes_partial")) ? " (at least: some parts are "
                                                                 "unreadable to you)"
                                                               : "");
    printf("  prepared:    %s\n", prepared ? prepared : "unknown");
    printf("  last used:   %s\n", used ? used : "unknown");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(row, "references"), i, v)
    {
        _cleanup_free_ char *ref = lz_text_printable(json_string_value(v));
        printf("  reference:   %s\n", ref);
    }
    json_array_foreach(json_object_get(row, "entries"), i, v)
    {
        state_human((unsigned long long) json_integer_value(json_object_get(v, "bytes")), size,
                    sizeof(size));
        printf("  entry:       %s  %s%s\n", json_string_value(json_object_get(v, "name")), size,
               json_is_true(json_object_get(v, "keep_id")) ? " (for the image's non-root user: "
                                                             "files of subordinate ids)"
                                                           : "");
    }
    if (json_array_size(json_object_get(row, "domains")) == 0)
        printf("  used by:     no Domain ('lazaret image prune' removes it)\n");
    json_array_foreach(json_object_get(row, "domains"), i, v)
    {
        const char *p = json_string_value(json_object_get(v, "profile"));
        _cleanup_free_ char *ws =
            lz_text_printable(json_string_value(json_object_get(v, "workspace")) ?: "?");
        printf("  used by:     Domain %.16s… profile '%s' workspace %s%s%s\n",
               json_string_value(json_object_get(v, "domain_id")), p ? p : "?", ws,
               json_is_true(json_object_get(v, "running")) ? " (running)" : "",
               json_is_true(json_object_get(v, "offline")) ? " (last started offline)" : "");
    }
}

static int image_list(const lz_global_options *g, bool as_json)
{
    lz_error *err = NULL;
    catalog c;
    int have = catalog_open(g, &c, &err);
    json_t *all = json_array();
    int status = LZ_EXIT_FAILURE, lock = -1;
    if (have < 0)
        goto out;
    if (have) {
        lock = catalog_lock(&c, LOCK_SH, &err);
        if (lock < 0)
            goto out;
        json_t *tmp = json_array(), *refs = json_object();
        int unknown = 0;
        json_t *rows = catalog_scan(&c, tmp, refs, &unknown);
        const char *k;
        json_t *row;
        json_object_foreach(rows, k, row)
        {
            json_object_del(row, "last_used_epoch");
            json_array_append(all, row);
        }
        json_decref(rows);
        json_decref(tmp);
        json_decref(refs);
    }
    if (as_json) {
        json_dumpf(all, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
    } else if (json_array_size(all) == 0) {
        printf("No image is prepared.\n");
    } else {
        size_t i;
        json_t *row;
        json_array_foreach(all, i, row)
        {
            if (i)
                putchar('\n');
            print_row(row);
        }
    }
    status = LZ_EXIT_OK;
out:
    if (err) {
        lz_error_report(err, stderr);
        lz_error_free(err);
    }
    if (lock >= 0)
        close(lock);
    json_decref(all);
    catalog_close(&c);
    return status;
}

static int image_prune(const lz_global_options *g, bool dry_run, bool yes)
{
    lz_error *err = NULL;
    catalog c;
    int have = catalog_open(g, &c, &err);
    int status = LZ_EXIT_FAILURE, lock = -1;
    json_t *rows = NULL, *tmp = json_array(), *refs = json_object(), *doomed = json_array();
    unsigned long long total = 0;
    if (have < 0)
        goto out;
    if (!have) {
        printf("No image is prepared: nothing to prune.\n");
        status = LZ_EXIT_OK;
        goto out;
    }
    /* Held from the first look at the records to the last removal. */
    lock = catalog_lock(&c, dry_run ? LOCK_SH : LOCK_EX, &err);
    if (lock < 0)
        goto out;
    int unknown = 0;
    rows = catalog_scan(&c, tmp, refs, &unknown);
    if (unknown) {
        lz_error_set(&err, 0,
                     "%d running Domain(s) started by an older Lazaret have no record of "
                     "their image in %s: nothing is pruned while they run",
                     unknown, c.domains_label);
        lz_error_hint(&err, "stop them ('lazaret status' lists them; 'lazaret stop' in their "
                            "workspace), then prune again");
        goto out;
    }
    const char *k;
    json_t *row;
    json_object_foreach(rows, k, row)
    {
        if (json_array_size(json_object_get(row, "domains")) != 0)
            continue;
        json_array_append(doomed, row);
        total += (unsigned long long) json_integer_value(json_object_get(row, "bytes"));
    }
    if (json_array_size(doomed) == 0 && json_array_size(tmp) == 0) {
        printf("Nothing to prune: every prepared image is used by a Domain with state on "
               "disk.\n");
        status = LZ_EXIT_OK;
        goto out;
    }
    char size[32];
    state_human(total, size, sizeof(size));
    printf("%s %zu image(s) no Domain uses (%s) from %s:\n", dry_run ? "Would remove" : "Removing",
           json_array_size(doomed), size, c.rootfs_label);
    size_t i;
    json_array_foreach(doomed, i, row)
    {
        state_human((unsigned long long) json_integer_value(json_object_get(row, "bytes")), size,
                    sizeof(size));
        printf("  sha256:%s  %s", json_string_value(json_object_get(row, "digest")), size);
        size_t j;
        json_t *v;
        json_array_foreach(json_object_get(row, "references"), j, v)
        {
            _cleanup_free_ char *ref = lz_text_printable(json_string_value(v));
            printf("%s%s", j ? ", " : "  (", ref);
        }
        printf("%s\n", json_array_size(json_object_get(row, "references")) ? ")" : "");
    }
    json_t *v;
    json_array_foreach(tmp, i, v)
        printf("  %s  (left by an interrupted preparation)\n", json_string_value(v));
    if (dry_run) {
        printf("Nothing was removed (--dry-run).\n");
        status = LZ_EXIT_OK;
        goto out;
    }
    if (!yes) {
        if (!isatty(STDIN_FILENO)) {
            lz_error_set(&err, 0,
                         "refusing to prune the Storage Catalog %s without confirmation: "
                         "standard input is not a terminal",
                         c.images_label);
            lz_error_hint(&err, "add --yes to confirm (lazaret image prune --yes); "
                                "--dry-run shows what goes");
            goto out;
        }
        if (!lz_cli_confirm("Remove them?")) {
            printf("Nothing was removed.\n");
            status = LZ_EXIT_OK;
            goto out;
        }
    }
    /* The keep-id tree first, then the developer-owned one: a prune cut
     * short leaves no keep-id tree without the entry whose config.json
     * says its user (both are made again as needed anyway). */
    json_array_foreach(doomed, i, row)
    {
        for (int pass = 0; pass < 2; pass++) {
            size_t j;
            json_array_foreach(json_object_get(row, "entries"), j, v)
            {
                if (json_is_true(json_object_get(v, "keep_id")) != (pass == 0))
                    continue;
                const char *name = json_string_value(json_object_get(v, "name"));
                if (lz_remove_tree_mapped(c.rootfs_fd, name, c.rootfs_label, &err) < 0) {
                    lz_error_prefix(&err, "prune incomplete: cannot remove %s/%s", c.rootfs_label,
                                    name);
                    lz_error_hint(&err, "a mount point or a file outside your subordinate ids "
                                        "stops the removal; what was removed before stays "
                                        "removed");
                    goto out;
                }
            }
        }
        /* Its references' records: they would name an image that is gone. */
        const char *name;
        json_object_foreach(refs, name, v)
        {
            if (strcmp(json_string_value(v), json_string_value(json_object_get(row, "digest"))) ==
                0)
                unlinkat(c.images_fd, name, 0);
        }
    }
    /* Records of references whose image is gone (removed by hand, or by
     * an older Lazaret): they would name nothing. */
    json_object_foreach(refs, k, v)
    {
        if (!json_object_get(rows, json_string_value(v)))
            unlinkat(c.images_fd, k, 0);
    }
    json_array_foreach(tmp, i, v)
    {
        if (lz_remove_tree_mapped(c.rootfs_fd, json_string_value(v), c.rootfs_label, &err) < 0) {
            lz_error_prefix(&err, "prune incomplete");
            goto out;
        }
    }
    state_human(total, size, sizeof(size));
    printf("Removed %zu image(s), %s.\n", json_array_size(doomed), size);
    status = LZ_EXIT_OK;
out:
    if (err) {
        lz_error_report(err, stderr);
        lz_error_free(err);
    }
    if (lock >= 0)
        close(lock);
    json_decref(rows);
    json_decref(tmp);
    json_decref(refs);
    json_decref(doomed);
    catalog_close(&c);
    return status;
}

int lz_cmd_image(int argc, char **argv, const lz_global_options *g)
{
    if (argc < 2)
        return lz_cli_usage_error("image", "which one: list or prune");
    const char *sub = argv[1];
    if (strcmp(sub, "list") == 0) {
        static const lz_option options[] = { { "json", 0, NULL, 0 } };
        bool as_json = false;
        int r =
            lz_cli_parse_flags("image", options, LZ_ARRAY_SIZE(options), argc, argv, 2, &as_json);
        return r != LZ_EXIT_OK ? r : image_list(g, as_json);
    }
    if (strcmp(sub, "prune") == 0) {
        static const lz_option options[] = { { "dry-run", 0, NULL, 0 }, { "yes", 0, NULL, 1 } };
        bool flags[2] = { false, false };
        int r = lz_cli_parse_flags("image", options, LZ_ARRAY_SIZE(options), argc, argv, 2, flags);
        return r != LZ_EXIT_OK ? r : image_prune(g, flags[0], flags[1]);
    }
    return lz_cli_usage_error("image", "unknown subcommand '%s'", sub);
}
