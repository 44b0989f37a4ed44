/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/store/domain_store.c: creating and reopening the
 * SQLite Domain Store beneath a retained Domain Root descriptor, refusing a
 * foreign schema and a store.db that is not a regular file, and the
 * bookkeeping of generations, participants (Intent -> LeaseHeld -> Released)
 * and sessions. Every rule has an accepting and a refusing case. Each test
 * works in its own mkdtemp() directory; the database is inspected with a
 * second, read-only SQLite connection.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/util.h"
#include "store/domain_store.h"
#include "unit_fds.h"

#define DOMAIN_ID "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define FINGERPRINT "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

typedef struct {
    char *dir;    /* canonical path of this test's temporary directory */
    int root_fd;  /* O_PATH descriptor of dir: the Domain Root */
    int open_fds; /* descriptors open before the test: none may leak */
} fixture;

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void) st;
    (void) ftw;
    if (type == FTW_DP)
        return rmdir(path) < 0 ? -1 : 0;
    return unlink(path) < 0 ? -1 : 0;
}

static int setup(void **state)
{
    char tmpl[] = "/tmp/lz-test-store-XXXXXX";
    if (!mkdtemp(tmpl))
        return -1;
    fixture *f = lz_xcalloc(1, sizeof(*f));
    f->open_fds = count_open_fds();
    f->dir = realpath(tmpl, NULL);
    if (!f->dir)
        return -1;
    f->root_fd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (f->root_fd < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    close(f->root_fd);
    int leaked = count_open_fds() - f->open_fds;
    (void) nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f->dir);
    free(f);
    if (leaked != 0) {
        print_error("%d descriptor(s) leaked\n", leaked);
        return -1;
    }
    return 0;
}

static char *P(const fixture *f, const char *rel)
{
    return lz_xasprintf("%s/%s", f->dir, rel);
}

static void expect_ok(lz_error **err)
{
    if (*err)
        print_error("unexpected error: %s\n", (*err)->message);
    assert_null(*err);
}

static void expect_error(lz_error **err, const char *needle)
{
    assert_non_null(*err);
    assert_non_null((*err)->message);
    if (needle && !strstr((*err)->message, needle))
        print_error("unexpected error message \"%s\"\n", (*err)->message);
    if (needle)
        assert_non_null(strstr((*err)->message, needle));
    lz_error_free(lz_error_take(err));
}

static lz_domain_store *open_store(const fixture *f)
{
    lz_domain_store *s = NULL;
    lz_error *err = NULL;
    assert_int_equal(
        lz_domain_store_open(f->root_fd, DOMAIN_ID, "default", "/home/u/proj", &s, &err), 0);
    expect_ok(&err);
    assert_non_null(s);
    return s;
}

/* ---- a second connection, for inspection -------------------------------- */

static sqlite3 *inspect(const fixture *f, bool writable)
{
    _cleanup_free_ char *path = P(f, "store.db");
    sqlite3 *db = NULL;
    int flags = writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
    assert_int_equal(sqlite3_open_v2(path, &db, flags, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    return db;
}

/* The first column of the first row of sql as text (fresh allocation), or
 * NULL when there is no row or the value is NULL. */
static char *query_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        print_error("cannot prepare %s: %s\n", sql, sqlite3_errmsg(db));
    assert_non_null(st);
    char *out = NULL;
    int rc = sqlite3_step(st);
    assert_true(rc == SQLITE_ROW || rc == SQLITE_DONE);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        out = lz_xstrdup((const char *) sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
}

static int64_t query_int(sqlite3 *db, const char *sql)
{
    _cleanup_free_ char *t = query_text(db, sql);
    assert_non_null(t);
    return strtoll(t, NULL, 10);
}

/* A queried text: NULL (no row) is a failure, not a crash. */
static void assert_text(const char *got, const char *want)
{
    if (!got)
        print_error("no value where \"%s\" was expected\n", want);
    assert_non_null(got);
    assert_string_equal(got, want);
}

static void exec_ok(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        print_error("%s: %s\n", sql, msg ? msg : "?");
    assert_null(msg);
}

/* ---- open --------------------------------------------------------------- */

static void test_open_creates_schema(void **state)
{
    fixture *f = *state;
    lz_domain_store *s = open_store(f);

    struct stat st;
    assert_int_equal(fstatat(f->root_fd, "store.db", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0077, 0); /* private to its owner */

    sqlite3 *db = inspect(f, false);
    static const char *const tables[] = { "store_metadata", "domain", "generation", "participant",
                                          "session" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(tables); i++) {
        _cleanup_free_ char *q = lz_xasprintf(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '%s'", tables[i]);
        assert_int_equal(query_int(db, q), 1);
        _cleanup_free_ char *q2 =
            lz_xasprintf("SELECT sql FROM sqlite_master WHERE name = '%s'", tables[i]);
        _cleanup_free_ char *sql = query_text(db, q2);
        assert_non_null(sql);
        assert_non_null(strstr(sql, "STRICT"));
        _cleanup_free_ char *q3 = lz_xasprintf(
            "SELECT strict FROM pragma_table_list WHERE schema = 'main' AND name = '%s'",
            tables[i]);
        assert_int_equal(query_int(db, q3), 1);
    }
    /* and nothing that is not STRICT */
    assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_table_list WHERE "
                                   "schema = 'main' AND type = 'table' AND "
                                   "name NOT LIKE 'sqlite_%' AND strict = 0"),
                     0);
    _cleanup_free_ char *mode = query_text(db, "PRAGMA journal_mode");
    assert_text(mode, "wal");
    _cleanup_free_ char *id = query_text(db, "SELECT schema_id FROM store_metadata");
    assert_text(id, LZ_DOMAIN_STORE_SCHEMA_ID);
    assert_int_equal(query_int(db, "SELECT schema_version FROM store_metadata"),
                     LZ_DOMAIN_STORE_SCHEMA_VERSION);
    assert_int_equal(query_int(db, "SELECT count(*) FROM store_metadata"), 1);
    _cleanup_free_ char *dom = query_text(db, "SELECT domain_id FROM domain");
    assert_text(dom, DOMAIN_ID);
    _cleanup_free_ char *prof = query_text(db, "SELECT profile_name FROM domain");
    assert_text(prof, "default");
    /* STRICT is enforced: a text where an integer belongs is refused */
    sqlite3_close(db);
    db = inspect(f, true);
    assert_int_not_equal(sqlite3_exec(db, "INSERT INTO store_metadata VALUES ('x', 'not a number')",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
    sqlite3_close(db);
    lz_domain_store_close(s);
}

static void test_reopen_keeps_rows(void **state)
{
    fixture *f = *state;
    lz_error *err = NULL;
    lz_domain_store *s = open_store(f);
    int64_t g1 = 0, g2 = 0;
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g1, &err), 0);
    expect_ok(&err);
    assert_int_equal(lz_store_participant_intent(s, g1, LZ_ROLE_RUNTIME_FILES, "gen-1", &err), 0);
    expect_ok(&err);
    lz_domain_store_close(s);

    s = open_store(f);
    lz_participant *ps = NULL;
    size_t n = 0;
    assert_int_equal(lz_store_unreleased(s, &ps, &n, &err), 0);
    expect_ok(&err);
    assert_int_equal(n, 1);
    assert_int_equal(ps[0].generation_id, g1);
    assert_int_equal(ps[0].role, LZ_ROLE_RUNTIME_FILES);
    assert_text(ps[0].resource, "gen-1");
    lz_participants_free(ps, n);
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g2, &err), 0);
    expect_ok(&err);
    assert_true(g2 > g1);
    lz_domain_store_close(s);

    sqlite3 *db = inspect(f, false);
    assert_int_equal(query_int(db, "SELECT count(*) FROM store_metadata"), 1);
    assert_int_equal(query_int(db, "SELECT count(*) FROM domain"), 1);
    assert_int_equal(query_int(db, "SELECT count(*) FROM generation"), 2);
    sqlite3_close(db);
}

static void expect_open_refused(const fixture *f, const char *needle)
{
    lz_domain_store *s = (lz_domain_store *) 0x1; /* untouched on failure */
    lz_error *err = NULL;
    assert_int_equal(lz_domain_store_open(f->root_fd, DOMAIN_ID, "default", "/w", &s, &err), -1);
    assert_ptr_equal(s, (lz_domain_store *) 0x1);
    expect_error(&err, needle);
}

static void test_open_refuses_other_schema(void **state)
{
    fixture *f = *state;
    lz_domain_store_close(open_store(f));

    /* another version */
    sqlite3 *db = inspect(f, true);
    exec_ok(db, "UPDATE store_metadata SET schema_version = 2");
    sqlite3_close(db);
    expect_open_refused(f, "version 2");

    /* another schema id */
    db = inspect(f, true);
    exec_ok(db, "UPDATE store_metadata SET schema_id = 'someone-else', schema_version = 1");
    sqlite3_close(db);
    expect_open_refused(f, "someone-else");

    /* back to ours: accepted again, and nothing was changed by the refusals */
    db = inspect(f, true);
    exec_ok(db, "UPDATE store_metadata SET schema_id = '" LZ_DOMAIN_STORE_SCHEMA_ID "'");
    sqlite3_close(db);
    lz_domain_store_close(open_store(f));
    db = inspect(f, false);
    assert_int_equal(query_int(db, "SELECT count(*) FROM store_metadata"), 1);
    sqlite3_close(db);
}

static void test_open_refuses_foreign_database(void **state)
{
    /* an SQLite file with a table of the same name but another shape */
    fixture *f = *state;
    _cleanup_free_ char *path = P(f, "store.db");
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_ok(db, "CREATE TABLE store_metadata (x TEXT)");
    sqlite3_close(db);
    expect_open_refused(f, "store.db");
}

static void test_open_refuses_symlink(void **state)
{
    fixture *f = *state;
    /* a valid store elsewhere, reached through a symlink named store.db */
    _cleanup_free_ char *real = P(f, "real");
    assert_int_equal(mkdir(real, 0700), 0);
    int real_fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(real_fd >= 0);
    lz_domain_store *s = NULL;
    lz_error *err = NULL;
    assert_int_equal(lz_domain_store_open(real_fd, DOMAIN_ID, "default", "/w", &s, &err), 0);
    expect_ok(&err);
    lz_domain_store_close(s);
    close(real_fd);

    _cleanup_free_ char *link = P(f, "store.db");
    assert_int_equal(symlink("real/store.db", link), 0);
    expect_open_refused(f, "not a regular file");
    /* the link was neither followed nor replaced */
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));

    /* a dangling symlink is refused too (SQLite would create its target) */
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink("nowhere.db", link), 0);
    expect_open_refused(f, "not a regular file");
    _cleanup_free_ char *nowhere = P(f, "nowhere.db");
    assert_int_equal(access(nowhere, F_OK), -1);
}

static void test_open_refuses_directory(void **state)
{
    fixture *f = *state;
    _cleanup_free_ char *d = P(f, "store.db");
    assert_int_equal(mkdir(d, 0700), 0);
    expect_open_refused(f, "not a regular file");
}

static void test_open_refuses_bad_descriptor(void **state)
{
    (void) state;
    lz_domain_store *s = NULL;
    lz_error *err = NULL;
    assert_int_equal(lz_domain_store_open(-1, DOMAIN_ID, "default", "/w", &s, &err), -1);
    assert_null(s);
    expect_error(&err, "Domain Root");
}

/* ---- generations -------------------------------------------------------- */

static void test_generation_ids_increase(void **state)
{
    fixture *f = *state;
    lz_error *err = NULL;
    lz_domain_store *s = open_store(f);
    int64_t prev = 0;
    for (int i = 0; i < 5; i++) {
        int64_t g = -1;
        assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g, &err), 0);
        expect_ok(&err);
        assert_true(g > prev);
        prev = g;
    }
    /* valid states are accepted */
    static const char *const states[] = { "starting", "running", "tearing_down", "ended",
                                          "recovered" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(states); i++) {
        assert_int_equal(lz_store_generation_set_state(s, prev, states[i], &err), 0);
        expect_ok(&err);
    }
    sqlite3 *db = inspect(f, false);
    _cleanup_free_ char *q =
        lz_xasprintf("SELECT state FROM generation WHERE generation_id = %lld", (long long) prev);
    _cleanup_free_ char *st = query_text(db, q);
    assert_text(st, "recovered");
    _cleanup_free_ char *qf =
        lz_xasprintf("SELECT configuration_fingerprint FROM generation WHERE generation_id = %lld",
                     (long long) prev);
    _cleanup_free_ char *fp = query_text(db, qf);
    assert_text(fp, FINGERPRINT);
    sqlite3_close(db);

    /* an unknown state is refused */
    assert_int_equal(lz_store_generation_set_state(s, prev, "exploded", &err), -1);
    expect_error(&err, "generation");
    lz_domain_store_close(s);
}

/* ---- participants ------------------------------------------------------- */

static lz_process_identity fake_identity(pid_t pid, uint64_t start, uint64_t ino)
{
    lz_process_identity id = {
        .pid = pid, .start_time_ticks = start, .pidfs_dev = 15, .pidfs_ino = ino
    };
    snprintf(id.boot_id, sizeof(id.boot_id), "%s", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    return id;
}

static void expect_identity(const lz_participant *p, const lz_process_identity *id)
{
    assert_true(p->has_process);
    assert_string_equal(p->process.boot_id, id->boot_id);
    assert_int_equal(p->process.pid, id->pid);
    assert_int_equal(p->process.start_time_ticks, id->start_time_ticks);
    assert_int_equal(p->process.pidfs_dev, id->pidfs_dev);
    assert_int_equal(p->process.pidfs_ino, id->pidfs_ino);
}

static void test_participant_lifecycle(void **state)
{
    fixture *f = *state;
    lz_error *err = NULL;
    lz_domain_store *s = open_store(f);
    int64_t g = 0;
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g, &err), 0);
    lz_participant *ps = NULL;
    size_t n = 0;

    /* Intent */
    assert_int_equal(lz_store_participant_intent(s, g, LZ_ROLE_SUPERVISOR, NULL, &err), 0);
    expect_ok(&err);
    assert_int_equal(lz_store_unreleased(s, &ps, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ps[0].generation_id, g);
    assert_int_equal(ps[0].role, LZ_ROLE_SUPERVISOR);
    assert_int_equal(ps[0].state, LZ_PARTICIPANT_INTENT);
    assert_false(ps[0].has_process);
    assert_null(ps[0].resource);
    lz_participants_free(ps, n);

    /* LeaseHeld, with a process identity */
    lz_process_identity id = fake_identity(4242, 123456789, 0x8000000000000001ull);
    assert_int_equal(lz_store_participant_held(s, g, LZ_ROLE_SUPERVISOR, &id, &err), 0);
    expect_ok(&err);
    assert_int_equal(lz_store_unreleased(s, &ps, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ps[0].state, LZ_PARTICIPANT_LEASE_HELD);
    expect_identity(&ps[0], &id);
    lz_participants_free(ps, n);

    /* Released */
    assert_int_equal(lz_store_participant_released(s, g, LZ_ROLE_SUPERVISOR, &err), 0);
    expect_ok(&err);
    ps = (lz_participant *) 0x1;
    assert_int_equal(lz_store_unreleased(s, &ps, &n, &err), 0);
    expect_ok(&err);
    assert_int_equal(n, 0);
    lz_participants_free(ps, n);

    sqlite3 *db = inspect(f, false);
    _cleanup_free_ char *st = query_text(db, "SELECT state FROM participant");
    assert_text(st, "Released");
    sqlite3_close(db);
    lz_domain_store_close(s);
}

static void test_participant_refuses_unknown_generation(void **state)
{
    fixture *f = *state;
    lz_error *err = NULL;
    lz_domain_store *s = open_store(f);
    int64_t g = 0;
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g, &err), 0);
    assert_int_equal(lz_store_participant_intent(s, g, LZ_ROLE_SANDBOX, "c1", &err), 0);
    expect_ok(&err);
    /* a generation that does not exist (foreign key) */
    assert_int_equal(lz_store_participant_intent(s, g + 100, LZ_ROLE_SANDBOX, "c1", &err), -1);
    expect_error(&err, "participant");
    lz_domain_store_close(s);
}

static void test_unreleased_exactly(void **state)
{
    fixture *f = *state;
    lz_error *err = NULL;
    lz_domain_store *s = open_store(f);
    int64_t g1 = 0, g2 = 0;
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g1, &err), 0);
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g2, &err), 0);
    expect_ok(&err);
    lz_process_identity coord = fake_identity(100, 1000, 7);
    lz_process_identity sup = fake_identity(101, 1001, 8);
    lz_process_identity coord2 = fake_identity(200, 2000, 0);

    /* generation 1: coordinator held, supervisor released, files intended */
    assert_int_equal(lz_store_participant_intent(s, g1, LZ_ROLE_COORDINATOR, NULL, &err), 0);
    assert_int_equal(lz_store_participant_held(s, g1, LZ_ROLE_COORDINATOR, &coord, &err), 0);
    assert_int_equal(lz_store_participant_intent(s, g1, LZ_ROLE_SUPERVISOR, NULL, &err), 0);
    assert_int_equal(lz_store_participant_held(s, g1, LZ_ROLE_SUPERVISOR, &sup, &err), 0);
    assert_int_equal(lz_store_participant_released(s, g1, LZ_ROLE_SUPERVISOR, &err), 0);
    assert_int_equal(lz_store_participant_intent(s, g1, LZ_ROLE_RUNTIME_FILES, "gen-1", &err), 0);
    /* generation 2: sandbox held without a process, coordinator held */
    assert_int_equal(lz_store_participant_intent(s, g2, LZ_ROLE_SANDBOX, "lz-c2", &err), 0);
    assert_int_equal(lz_store_participant_held(s, g2, LZ_ROLE_SANDBOX, NULL, &err), 0);
    assert_int_equal(lz_store_participant_intent(s, g2, LZ_ROLE_COORDINATOR, NULL, &err), 0);
    assert_int_equal(lz_store_participant_held(s, g2, LZ_ROLE_COORDINATOR, &coord2, &err), 0);
    expect_ok(&err);

    lz_participant *ps = NULL;
    size_t n = 0;
    assert_int_equal(lz_store_unreleased(s, &ps, &n, &err), 0);
    expect_ok(&err);
    assert_int_equal(n, 4);
    /* oldest first: by generation, then in the order recorded */
    assert_int_equal(ps[0].generation_id, g1);
    assert_int_equal(ps[0].role, LZ_ROLE_COORDINATOR);
    assert_int_equal(ps[0].state, LZ_PARTICIPANT_LEASE_HELD);
    expect_identity(&ps[0], &coord);
    assert_int_equal(ps[1].generation_id, g1);
    assert_int_equal(ps[1].role, LZ_ROLE_RUNTIME_FILES);
    assert_int_equal(ps[1].state, LZ_PARTICIPANT_INTENT);
    assert_false(ps[1].has_process);
    assert_text(ps[1].resource, "gen-1");
    assert_int_equal(ps[2].generation_id, g2);
    assert_int_equal(ps[2].role, LZ_ROLE_SANDBOX);
    assert_int_equal(ps[2].state, LZ_PARTICIPANT_LEASE_HELD);
    assert_false(ps[2].has_process);
    assert_text(ps[2].resource, "lz-c2");
    assert_int_equal(ps[3].generation_id, g2);
    assert_int_equal(ps[3].role, LZ_ROLE_COORDINATOR);
    expect_identity(&ps[3], &coord2);
    for (size_t i = 0; i < n; i++)
        assert_int_not_equal(ps[i].role, LZ_ROLE_SUPERVISOR);
    lz_participants_free(ps, n);
    lz_domain_store_close(s);
}

/* The header's contract: "Every participant not yet Released, of every
 * generation not ended". */
/* A participant that teardown could not release (its generation ended
 * anyway) stays in the list, so that the next recovery finishes the job. */
static void test_unreleased_includes_ended_generations(void **state)
{
    fixture *f = *state;
    lz_error *err = NULL;
    lz_domain_store *s = open_store(f);
    int64_t g1 = 0, g2 = 0;
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g1, &err), 0);
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g2, &err), 0);
    assert_int_equal(lz_store_participant_intent(s, g1, LZ_ROLE_RUNTIME_FILES, "gen-1", &err), 0);
    assert_int_equal(lz_store_participant_intent(s, g2, LZ_ROLE_COORDINATOR, NULL, &err), 0);
    assert_int_equal(lz_store_participant_released(s, g2, LZ_ROLE_COORDINATOR, &err), 0);
    assert_int_equal(lz_store_generation_set_state(s, g1, "ended", &err), 0);
    expect_ok(&err);
    lz_participant *ps = NULL;
    size_t n = 0;
    int r = lz_store_unreleased(s, &ps, &n, &err);
    int64_t first = n > 0 ? ps[0].generation_id : -1;
    lz_role role = n > 0 ? ps[0].role : LZ_ROLE__COUNT;
    lz_participants_free(ps, n);
    lz_domain_store_close(s);
    expect_ok(&err);
    assert_int_equal(r, 0);
    assert_int_equal(n, 1);
    assert_int_equal(first, g1);
    assert_int_equal(role, LZ_ROLE_RUNTIME_FILES);
}

static void test_mark_recovered(void **state)
{
    fixture *f = *state;
    lz_error *err = NULL;
    lz_domain_store *s = open_store(f);
    int64_t g[4];
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g[i], &err), 0);
    assert_int_equal(lz_store_generation_set_state(s, g[1], "running", &err), 0);
    assert_int_equal(lz_store_generation_set_state(s, g[2], "tearing_down", &err), 0);
    assert_int_equal(lz_store_generation_set_state(s, g[3], "ended", &err), 0);
    assert_int_equal(lz_store_session_begin(s, g[1], "s-running", 77, true, &err), 0);
    assert_int_equal(lz_store_session_begin(s, g[3], "s-ended", 78, false, &err), 0);
    assert_int_equal(lz_store_session_end(s, g[3], "s-ended", "exited", 0, &err), 0);
    expect_ok(&err);

    assert_int_equal(lz_store_generations_mark_recovered(s, &err), 0);
    expect_ok(&err);

    sqlite3 *db = inspect(f, false);
    static const char *const want[] = { "recovered", "recovered", "recovered", "ended" };
    for (size_t i = 0; i < 4; i++) {
        _cleanup_free_ char *q = lz_xasprintf(
            "SELECT state FROM generation WHERE generation_id = %lld", (long long) g[i]);
        _cleanup_free_ char *st = query_text(db, q);
        assert_text(st, want[i]);
        _cleanup_free_ char *qe =
            lz_xasprintf("SELECT ended_at IS NOT NULL FROM generation WHERE generation_id = %lld",
                         (long long) g[i]);
        assert_int_equal(query_int(db, qe), 1);
    }
    /* a session left running is ended as lost; an ended one keeps its outcome */
    _cleanup_free_ char *o1 = query_text(
        db, "SELECT state || ':' || outcome FROM session WHERE session_id = 's-running'");
    assert_text(o1, "ended:lost");
    _cleanup_free_ char *o2 =
        query_text(db, "SELECT state || ':' || outcome FROM session WHERE session_id = 's-ended'");
    assert_text(o2, "ended:exited");
    sqlite3_close(db);

    /* a second run changes nothing and succeeds */
    assert_int_equal(lz_store_generations_mark_recovered(s, &err), 0);
    expect_ok(&err);
    lz_domain_store_close(s);
}

/* ---- sessions ----------------------------------------------------------- */

static void test_session_begin_end(void **state)
{
    fixture *f = *state;
    lz_error *err = NULL;
    lz_domain_store *s = open_store(f);
    int64_t g = 0;
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g, &err), 0);
    assert_int_equal(lz_store_session_begin(s, g, "s1", 31337, true, &err), 0);
    expect_ok(&err);

    sqlite3 *db = inspect(f, false);
    _cleanup_free_ char *row =
        query_text(db, "SELECT state || ':' || cli_pid || ':' || interactive || ':' || "
                       "(ended_at IS NULL) FROM session WHERE session_id = 's1'");
    assert_text(row, "running:31337:1:1");
    sqlite3_close(db);

    assert_int_equal(lz_store_session_end(s, g, "s1", "terminated", 9, &err), 0);
    expect_ok(&err);
    db = inspect(f, false);
    _cleanup_free_ char *row2 =
        query_text(db, "SELECT state || ':' || outcome || ':' || exit_code || ':' || "
                       "(ended_at IS NOT NULL) FROM session WHERE session_id = 's1'");
    assert_text(row2, "ended:terminated:9:1");
    sqlite3_close(db);

    /* refused: the same session twice, a session of an unknown generation */
    assert_int_equal(lz_store_session_begin(s, g, "s1", 1, false, &err), -1);
    expect_error(&err, "session");
    assert_int_equal(lz_store_session_begin(s, g + 100, "s2", 1, false, &err), -1);
    expect_error(&err, "session");
    lz_domain_store_close(s);
}

/* A write that records nothing is a failure, and a failed write leaves its
 * outputs untouched (docs/errors.md). Before, an UPDATE of a missing row
 * "succeeded", and generation_begin with no Domain row returned a stale
 * rowid as the new generation. */
static void test_writes_that_record_nothing_fail(void **state)
{
    fixture *f = *state;
    lz_error *err = NULL;
    lz_domain_store *s = open_store(f);
    int64_t g = 0;
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g, &err), 0);
    expect_ok(&err);
    /* No Intent row for these roles: nothing to update. */
    assert_int_equal(lz_store_participant_held(s, g, LZ_ROLE_SANDBOX, NULL, &err), -1);
    expect_error(&err, "0 rows changed");
    assert_int_equal(lz_store_participant_released(s, g, LZ_ROLE_SUPERVISOR, &err), -1);
    expect_error(&err, "participant release");
    assert_int_equal(lz_store_generation_set_state(s, g + 100, "running", &err), -1);
    expect_error(&err, "generation");
    assert_int_equal(lz_store_session_end(s, g, "nosuch", "exited", 0, &err), -1);
    expect_error(&err, "session end");
    /* The Domain row gone (another writer): no generation can be started,
     * and the output keeps its value. */
    sqlite3 *db = inspect(f, true);
    exec_ok(db, "PRAGMA foreign_keys=OFF; DELETE FROM domain;");
    sqlite3_close(db);
    int64_t g2 = -7;
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g2, &err), -1);
    expect_error(&err, "cannot start a generation");
    assert_int_equal(g2, -7);
    lz_domain_store_close(s);
}

/* ---- pruning (issue 12 item 4) -------------------------------------------- */

/* One complete generation: every kind of row that hangs off it. */
static int64_t full_generation(lz_domain_store *s, bool end)
{
    lz_error *err = NULL;
    int64_t g = 0;
    assert_int_equal(lz_store_generation_begin(s, FINGERPRINT, &g, &err), 0);
    static const lz_role roles[] = { LZ_ROLE_COORDINATOR, LZ_ROLE_SANDBOX };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(roles); i++) {
        assert_int_equal(lz_store_participant_intent(s, g, roles[i], "r", &err), 0);
        assert_int_equal(lz_store_participant_held(s, g, roles[i], NULL, &err), 0);
        assert_int_equal(lz_store_participant_released(s, g, roles[i], &err), 0);
    }
    assert_int_equal(lz_store_network_policy(s, g, "{}", &err), 0);
    assert_int_equal(lz_store_session_begin(s, g, "s1", 42, false, &err), 0);
    assert_int_equal(lz_store_session_end(s, g, "s1", "exited", 0, &err), 0);
    assert_int_equal(lz_store_escalation_begin(s, g, "e1", "s1", "[\"make\"]", "/workspace", "why",
                                               "rule 1", &err),
                     0);
    assert_int_equal(lz_store_escalation_end(s, g, "e1", "Completed", NULL, 0, NULL, &err), 0);
    if (end)
        assert_int_equal(lz_store_generation_set_state(s, g, "ended", &err), 0);
    expect_ok(&err);
    return g;
}

static void test_prune_bounds_the_store(void **state)
{
    fixture *f = *state;
    lz_domain_store *s = open_store(f);
    const int n = 3 * LZ_STORE_KEEP_GENERATIONS + 7;
    int64_t last = 0;
    for (int i = 0; i < n; i++)
        last = full_generation(s, true);
    sqlite3 *db = inspect(f, false);
    /* The newest KEEP when the last one began, plus the last one. */
    const int64_t kept = LZ_STORE_KEEP_GENERATIONS + 1;
    assert_int_equal(last, n); /* ids keep growing across prunes */
    assert_int_equal(query_int(db, "SELECT count(*) FROM generation"), kept);
    assert_int_equal(query_int(db, "SELECT min(generation_id) FROM generation"), n - kept + 1);
    assert_int_equal(query_int(db, "SELECT count(*) FROM participant"), 2 * kept);
    assert_int_equal(query_int(db, "SELECT count(*) FROM session"), kept);
    assert_int_equal(query_int(db, "SELECT count(*) FROM escalation"), kept);
    assert_int_equal(query_int(db, "SELECT count(*) FROM network_policy"), kept);
    /* No row of a pruned generation is left behind. */
    assert_int_equal(query_int(db, "SELECT count(*) FROM participant WHERE generation_id NOT IN "
                                   "(SELECT generation_id FROM generation)"),
                     0);
    sqlite3_close(db);
    /* The summary still counts every generation ever begun. */
    lz_domain_summary sum = { 0 };
    lz_error *err = NULL;
    assert_int_equal(lz_store_read_summary(f->root_fd, &sum, &err), 0);
    expect_ok(&err);
    assert_int_equal(sum.generations, n);
    lz_domain_summary_clear(&sum);
    lz_domain_store_close(s);
}

static void test_prune_spares_what_is_not_over(void **state)
{
    fixture *f = *state;
    lz_domain_store *s = open_store(f);
    lz_error *err = NULL;
    int64_t running = full_generation(s, false); /* never ended (its coordinator died) */
    int64_t held = full_generation(s, true);     /* ended, a participant not released */
    assert_int_equal(lz_store_participant_intent(s, held, LZ_ROLE_SUPERVISOR, NULL, &err), 0);
    int64_t old = full_generation(s, true); /* ended, released: prunable */
    for (int i = 0; i < 3; i++)
        full_generation(s, true);
    int64_t pruned = -1;
    assert_int_equal(lz_store_prune(s, 3, &pruned, &err), 0);
    expect_ok(&err);
    assert_int_equal(pruned, 1);
    sqlite3 *db = inspect(f, false);
    _cleanup_free_ char *q1 = lz_xasprintf("SELECT count(*) FROM generation WHERE generation_id "
                                           "IN (%lld, %lld)",
                                           (long long) running, (long long) held);
    _cleanup_free_ char *q2 = lz_xasprintf("SELECT count(*) FROM generation WHERE generation_id "
                                           "= %lld",
                                           (long long) old);
    assert_int_equal(query_int(db, q1), 2);
    assert_int_equal(query_int(db, q2), 0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM generation"), 5);
    sqlite3_close(db);
    /* Control: once it is ended and released, the same prune takes them. */
    assert_int_equal(lz_store_generation_set_state(s, running, "recovered", &err), 0);
    assert_int_equal(lz_store_participant_released(s, held, LZ_ROLE_SUPERVISOR, &err), 0);
    assert_int_equal(lz_store_prune(s, 3, &pruned, &err), 0);
    expect_ok(&err);
    assert_int_equal(pruned, 2);
    assert_int_equal(lz_store_prune(s, 0, NULL, &err), -1);
    expect_error(&err, "cannot keep 0");
    lz_domain_store_close(s);
}

static void test_health_and_history_read_only(void **state)
{
    fixture *f = *state;
    lz_domain_store *s = open_store(f);
    int64_t g = full_generation(s, true);
    lz_error *err = NULL;
    lz_store_health h;
    assert_int_equal(lz_store_check_health(f->root_fd, &h, &err), 0);
    expect_ok(&err);
    assert_true(h.schema_ok && h.integrity_ok);
    assert_string_equal(h.schema_id, LZ_DOMAIN_STORE_SCHEMA_ID);
    json_t *hist = NULL;
    assert_int_equal(lz_store_read_history(f->root_fd, 10, 10, &hist, &err), 0);
    expect_ok(&err);
    json_t *g0 = json_array_get(json_object_get(hist, "generations"), 0);
    assert_int_equal(json_integer_value(json_object_get(g0, "id")), g);
    assert_string_equal(json_string_value(json_object_get(g0, "state")), "ended");
    json_t *e0 = json_array_get(json_object_get(hist, "escalations"), 0);
    assert_string_equal(json_string_value(json_object_get(e0, "state")), "Completed");
    assert_string_equal(json_string_value(json_object_get(e0, "decision")), "rule 1");
    json_decref(hist);
    lz_domain_store_close(s);
    /* A damaged header: not a database at all, an error (not "ok"). */
    _cleanup_free_ char *path = P(f, "store.db");
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "garbage garbage garbage", 23, 0), 23);
    close(fd);
    assert_int_equal(lz_store_check_health(f->root_fd, &h, &err), -1);
    expect_error(&err, "Domain Store");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_open_creates_schema),
        T(test_reopen_keeps_rows),
        T(test_open_refuses_other_schema),
        T(test_open_refuses_foreign_database),
        T(test_open_refuses_symlink),
        T(test_open_refuses_directory),
        T(test_open_refuses_bad_descriptor),
        T(test_generation_ids_increase),
        T(test_participant_lifecycle),
        T(test_participant_refuses_unknown_generation),
        T(test_unreleased_exactly),
        T(test_unreleased_includes_ended_generations),
        T(test_mark_recovered),
        T(test_session_begin_end),
        T(test_writes_that_record_nothing_fail),
        T(test_prune_bounds_the_store),
        T(test_prune_spares_what_is_not_over),
        T(test_health_and_history_read_only),
    };
    return cmocka_run_group_tests_name("test_store", tests, NULL, NULL);
}
