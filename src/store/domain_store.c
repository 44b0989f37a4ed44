/* SPDX-License-Identifier: Apache-2.0 */
#include "store/domain_store.h"

#include <sqlite3.h>
#include <jansson.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

struct lz_domain_store {
    sqlite3 *db;
    char *label;
};

static const char *const role_names[LZ_ROLE__COUNT] = {
    [LZ_ROLE_COORDINATOR] = "coordinator",
    [LZ_ROLE_SUPERVISOR] = "supervisor",
    [LZ_ROLE_RUNTIME_FILES] = "runtime_files",
    [LZ_ROLE_EPHEMERAL_LAYER] = "ephemeral_layer",
    [LZ_ROLE_SANDBOX] = "sandbox",
};

const char *lz_role_name(lz_role role)
{
    return role < LZ_ROLE__COUNT ? role_names[role] : "unknown";
}

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS store_metadata ("
    "  schema_id TEXT NOT NULL,"
    "  schema_version INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE IF NOT EXISTS domain ("
    "  domain_id TEXT PRIMARY KEY,"
    "  profile_name TEXT NOT NULL,"
    "  canonical_workspace BLOB NOT NULL"
    ") STRICT;"
    "CREATE TABLE IF NOT EXISTS generation ("
    "  generation_id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  domain_id TEXT NOT NULL REFERENCES domain(domain_id),"
    "  configuration_fingerprint TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN"
    "    ('starting','running','tearing_down','ended','recovered')),"
    "  started_at INTEGER NOT NULL,"
    "  ended_at INTEGER"
    ") STRICT;"
    "CREATE TABLE IF NOT EXISTS participant ("
    "  generation_id INTEGER NOT NULL REFERENCES generation(generation_id),"
    "  role TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('Intent','LeaseHeld','Released')),"
    "  resource TEXT,"
    "  boot_id TEXT,"
    "  host_pid INTEGER,"
    "  start_time_ticks INTEGER,"
    "  pidfs_dev INTEGER,"
    "  pidfs_ino INTEGER,"
    "  updated_at INTEGER NOT NULL,"
    "  PRIMARY KEY (generation_id, role)"
    ") STRICT;"
    "CREATE TABLE IF NOT EXISTS network_policy ("
    "  generation_id INTEGER PRIMARY KEY REFERENCES generation(generation_id),"
    "  derived_policy TEXT NOT NULL"
    ") STRICT;"
    "CREATE TABLE IF NOT EXISTS session ("
    "  generation_id INTEGER NOT NULL REFERENCES generation(generation_id),"
    "  session_id TEXT NOT NULL,"
    "  cli_pid INTEGER NOT NULL,"
    "  interactive INTEGER NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('running','ended')),"
    "  started_at INTEGER NOT NULL,"
    "  ended_at INTEGER,"
    "  outcome TEXT,"
    "  exit_code INTEGER,"
    "  PRIMARY KEY (generation_id, session_id)"
    ") STRICT;"
    /* Host escalation requests (OR-2): one row per accepted request, ending
     * in exactly one of the five outcomes. Added to schema 1 without a
     * version change: CREATE TABLE IF NOT EXISTS adds it to older stores,
     * and nothing older reads it. */
    "CREATE TABLE IF NOT EXISTS escalation ("
    "  generation_id INTEGER NOT NULL REFERENCES generation(generation_id),"
    "  request_id TEXT NOT NULL,"
    "  session_id TEXT NOT NULL,"
    "  argv TEXT NOT NULL,"
    "  cwd TEXT NOT NULL,"
    "  justification TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('Pending','Running','Completed','Denied',"
    "                                       'TimedOut','Cancelled','Failed')),"
    "  decision TEXT,"
    "  exit_status INTEGER,"
    "  message TEXT,"
    "  received_at INTEGER NOT NULL,"
    "  decided_at INTEGER,"
    "  ended_at INTEGER,"
    "  PRIMARY KEY (generation_id, request_id)"
    ") STRICT;";

/* A refused statement: SQLite's message, and the errno of an I/O failure
 * (a full disk, EIO) so that the report says it. Call it before the
 * statement is finalized, while the message is the statement's. */
static int db_fail(lz_domain_store *s, lz_error **err, const char *what)
{
    int rc = sqlite3_extended_errcode(s->db);
    int e =
        (rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_FULL || (rc & 0xff) == SQLITE_CANTOPEN
            ? sqlite3_system_errno(s->db)
            : 0;
    lz_error_set(err, e, "Domain Store %s: %s: %s", s->label, what, sqlite3_errmsg(s->db));
    return lz_error_hint(err,
                         "if the file is damaged, end every session of this Domain and "
                         "remove %s (it holds only runtime bookkeeping)",
                         s->label);
}

static int exec_sql(lz_domain_store *s, const char *sql, lz_error **err)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        lz_error_set(err, 0, "Domain Store %s: %s", s->label, msg ? msg : "error");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int64_t now(void)
{
    return (int64_t) time(NULL);
}

int lz_domain_store_open(int domain_root_fd, const char *domain_id_hex, const char *profile,
                         const char *workspace, lz_domain_store **ret, lz_error **err)
{
    lz_domain_store *s = lz_xcalloc(1, sizeof(*s));
    /* SQLite opens by name and resolves symlinks itself, so it cannot be
     * handed the retained descriptor. Name the file by the canonical path of
     * the retained Domain Root, forbid symlinks anywhere in it
     * (SQLITE_OPEN_NOFOLLOW), and check afterwards that the file opened is
     * the one beneath the descriptor. The -wal and -shm files live beside. */
    char link[64], target[4096];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", domain_root_fd);
    ssize_t tn = readlink(link, target, sizeof(target) - 1);
    if (tn <= 0 || target[0] != '/') {
        int e = tn < 0 ? errno : 0;
        free(s);
        lz_error_set(err, e, "cannot locate the Domain Root (descriptor %d) to open its store",
                     domain_root_fd);
        return lz_error_hint(err, "/proc must be mounted; run the command again");
    }
    target[tn] = '\0';
    s->label = lz_xasprintf("%s/store.db", target);
    struct stat before;
    if (fstatat(domain_root_fd, "store.db", &before, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISREG(before.st_mode)) {
        lz_error_set(err, 0, "the Domain Store %s is not a regular file", s->label);
        lz_error_hint(err, "remove it; Lazaret creates it again");
        lz_domain_store_close(s);
        return -1;
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW |
                SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_EXRESCODE;
    mode_t old_umask = umask(0077);
    int rc = sqlite3_open_v2(s->label, &s->db, flags, NULL);
    umask(old_umask);
    if (rc != SQLITE_OK) {
        if (s->db)
            db_fail(s, err, "cannot open");
        else
            lz_error_set(err, 0, "cannot open the Domain Store %s", s->label);
        lz_domain_store_close(s);
        return -1;
    }
    sqlite3_busy_timeout(s->db, 5000);
    /* The file SQLite opened must be the one beneath the descriptor. */
    struct stat by_fd, by_name;
    if (fstatat(domain_root_fd, "store.db", &by_fd, AT_SYMLINK_NOFOLLOW) < 0 ||
        stat(s->label, &by_name) < 0 || by_fd.st_dev != by_name.st_dev ||
        by_fd.st_ino != by_name.st_ino) {
        lz_error_set(err, 0, "the Domain Store %s changed while it was being opened", s->label);
        lz_domain_store_close(s);
        return -1;
    }
    if (exec_sql(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
                 err) < 0 ||
        exec_sql(s, "BEGIN IMMEDIATE;", err) < 0 || exec_sql(s, schema_sql, err) < 0)
        goto fail;

    /* Metadata row and the Domain row, once. */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT schema_id, schema_version FROM store_metadata", -1, &st,
                           NULL) != SQLITE_OK) {
        db_fail(s, err, "cannot read metadata");
        goto fail_rollback;
    }
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *id = (const char *) sqlite3_column_text(st, 0);
        int version = sqlite3_column_int(st, 1);
        if (!id || strcmp(id, LZ_DOMAIN_STORE_SCHEMA_ID) != 0 ||
            version != LZ_DOMAIN_STORE_SCHEMA_VERSION) {
            lz_error_set(err, 0,
                         "Domain Store %s has schema %s version %d; this Lazaret reads %s "
                         "version %d",
                         s->label, id ? id : "?", version, LZ_DOMAIN_STORE_SCHEMA_ID,
                         LZ_DOMAIN_STORE_SCHEMA_VERSION);
            lz_error_hint(err, "use the Lazaret version that created it, or remove the file");
            sqlite3_finalize(st);
            goto fail_rollback;
        }
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) {
        st = NULL;
        if (sqlite3_prepare_v2(s->db, "INSERT INTO store_metadata VALUES (?, ?)", -1, &st, NULL) !=
            SQLITE_OK) {
            db_fail(s, err, "cannot write metadata");
            goto fail_rollback;
        }
        rc = sqlite3_bind_text(st, 1, LZ_DOMAIN_STORE_SCHEMA_ID, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int(st, 2, LZ_DOMAIN_STORE_SCHEMA_VERSION);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(st);
        if (rc != SQLITE_DONE)
            db_fail(s, err, "cannot write metadata");
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
            goto fail_rollback;
    }
    st = NULL;
    if (sqlite3_prepare_v2(s->db, "INSERT OR IGNORE INTO domain VALUES (?, ?, ?)", -1, &st, NULL) !=
        SQLITE_OK) {
        db_fail(s, err, "cannot write the Domain");
        goto fail_rollback;
    }
    rc = sqlite3_bind_text(st, 1, domain_id_hex, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, profile, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_blob(st, 3, workspace, (int) strlen(workspace), SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        db_fail(s, err, "cannot write the Domain");
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        goto fail_rollback;
    if (exec_sql(s, "COMMIT;", err) < 0)
        goto fail;
    *ret = s;
    return 0;

fail_rollback:
    sqlite3_exec(s->db, "ROLLBACK;", NULL, NULL, NULL);
fail:
    lz_domain_store_close(s);
    return -1;
}

void lz_domain_store_close(lz_domain_store *s)
{
    if (!s)
        return;
    if (s->db)
        sqlite3_close_v2(s->db);
    free(s->label);
    free(s);
}

/* How many rows a write must change to have recorded what it says. */
enum { ANY_ROWS = -1, ONE_ROW = 1 };

/* Run one write statement with bound values described by fmt: 'i' int64,
 * 't' text (NULL allowed). It fails when SQLite refuses to prepare, bind or
 * run it, and when it changed a number of rows other than `rows`: an UPDATE
 * of a row that is not there (a participant without its Intent, an unknown
 * generation) records nothing, which the caller must not take for a
 * record. */
static int run(lz_domain_store *s, lz_error **err, const char *what, int rows, const char *sql,
               const char *fmt, ...)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, err, what);
    va_list ap;
    va_start(ap, fmt);
    int rc = SQLITE_OK;
    for (int i = 0; fmt[i] && rc == SQLITE_OK; i++) {
        if (fmt[i] == 'i') {
            rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
        } else {
            const char *t = va_arg(ap, const char *);
            rc = t ? sqlite3_bind_text(st, i + 1, t, -1, SQLITE_TRANSIENT)
                   : sqlite3_bind_null(st, i + 1);
        }
    }
    va_end(ap);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
        /* SQLITE_ROW included: no write here returns rows. */
        db_fail(s, err, what);
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    int changed = sqlite3_changes(s->db);
    if (rows != ANY_ROWS && changed != rows) {
        lz_error_set(err, 0, "Domain Store %s: %s: %d rows changed, expected %d", s->label, what,
                     changed, rows);
        return lz_error_hint(err, "the store does not match this generation (it was changed "
                                  "or removed while the Domain ran): end every session of this "
                                  "Domain and run again");
    }
    return 0;
}

void lz_domain_summary_clear(lz_domain_summary *s)
{
    free(s->workspace);
    memset(s, 0, sizeof(*s));
}

static int open_readonly(int domain_root_fd, char **ret_label, sqlite3 **ret_db, lz_error **err);

int lz_store_read_summary(int domain_root_fd, lz_domain_summary *ret, lz_error **err)
{
    _cleanup_free_ char *label = NULL;
    sqlite3 *db = NULL;
    if (open_readonly(domain_root_fd, &label, &db, err) < 0)
        return -1;
    lz_domain_summary s = { 0 };
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT d.profile_name, d.canonical_workspace,"
                                /* ids only grow (AUTOINCREMENT) and the newest
                                 * is never pruned: the newest id counts every
                                 * generation ever begun */
                                " (SELECT coalesce(max(generation_id), 0) FROM generation),"
                                " (SELECT coalesce(max(generation_id), 0) FROM generation),"
                                " (SELECT coalesce(max(max(started_at, coalesce(ended_at, 0))), 0)"
                                "  FROM generation),"
                                " (SELECT count(*) FROM session)"
                                " FROM domain d LIMIT 1",
                                -1, &q, NULL);
    if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
        const char *p = (const char *) sqlite3_column_text(q, 0);
        const void *w = sqlite3_column_blob(q, 1);
        int wn = sqlite3_column_bytes(q, 1);
        if (p && strlen(p) < sizeof(s.profile) && w && wn > 0 && !memchr(w, '\0', (size_t) wn)) {
            snprintf(s.profile, sizeof(s.profile), "%s", p);
            s.workspace = lz_xstrndup(w, (size_t) wn);
            s.generations = sqlite3_column_int64(q, 2);
            s.last_generation = sqlite3_column_int64(q, 3);
            s.last_used = sqlite3_column_int64(q, 4);
            s.sessions = sqlite3_column_int64(q, 5);
        }
    }
    if (!s.workspace)
        lz_error_set(err, 0, "cannot read the Domain Store %s: %s", label, sqlite3_errmsg(db));
    sqlite3_finalize(q);
    sqlite3_close(db);
    if (!s.workspace)
        return -1;
    *ret = s;
    return 0;
}

int lz_store_prune(lz_domain_store *s, int keep, int64_t *ret_pruned, lz_error **err)
{
    if (keep < 1)
        return lz_error_set(err, EINVAL, "Domain Store %s: cannot keep %d generations", s->label,
                            keep);
    /* The victims: older than the keep-th newest generation (ids only grow:
     * AUTOINCREMENT), over, and with nothing left for recovery to release.
     * Fewer than `keep` generations: the subquery is NULL, nothing matches.
     * The dependent rows go first (their REFERENCES are enforced). */
    static const char fill[] =
        "INSERT INTO prune_victims "
        "SELECT g.generation_id FROM generation g WHERE g.state IN ('ended','recovered') "
        "AND g.generation_id < (SELECT generation_id FROM generation "
        "                       ORDER BY generation_id DESC LIMIT 1 OFFSET ?) "
        "AND NOT EXISTS (SELECT 1 FROM participant p WHERE p.generation_id = g.generation_id "
        "                AND p.state != 'Released')";
#define PRUNE_FROM(t)                                                                              \
    "DELETE FROM " t " WHERE generation_id IN (SELECT generation_id FROM prune_victims)"
    static const char *const deletes[] = { PRUNE_FROM("escalation"), PRUNE_FROM("session"),
                                           PRUNE_FROM("participant"), PRUNE_FROM("network_policy"),
                                           PRUNE_FROM("generation") };
#undef PRUNE_FROM
    if (exec_sql(s, "BEGIN IMMEDIATE;", err) < 0)
        return -1;
    if (run(s, err, "cannot prune old generations", ANY_ROWS,
            "CREATE TEMP TABLE IF NOT EXISTS prune_victims (generation_id INTEGER PRIMARY KEY)",
            "") < 0 ||
        run(s, err, "cannot prune old generations", ANY_ROWS, "DELETE FROM prune_victims", "") < 0)
        goto fail;
    if (run(s, err, "cannot prune old generations", ANY_ROWS, fill, "i", (int64_t) keep - 1) < 0)
        goto fail;
    int64_t pruned = sqlite3_changes(s->db);
    for (size_t i = 0; pruned > 0 && i < LZ_ARRAY_SIZE(deletes); i++)
        if (run(s, err, "cannot prune old generations", ANY_ROWS, deletes[i], "") < 0)
            goto fail;
    if (run(s, err, "cannot prune old generations", ANY_ROWS, "DELETE FROM prune_victims", "") <
            0 ||
        exec_sql(s, "COMMIT;", err) < 0)
        goto fail;
    if (ret_pruned)
        *ret_pruned = pruned;
    return 0;
fail:
    sqlite3_exec(s->db, "ROLLBACK;", NULL, NULL, NULL);
    return -1;
}

int lz_store_generation_begin(lz_domain_store *s, const char *fingerprint_hex,
                              int64_t *ret_generation, lz_error **err)
{
    /* Before the new row: a store that cannot delete cannot be trusted to
     * insert either, and the caller's generation id stays untouched. */
    if (lz_store_prune(s, LZ_STORE_KEEP_GENERATIONS, NULL, err) < 0)
        return -1;
    if (run(s, err, "cannot start a generation", ONE_ROW,
            "INSERT INTO generation (domain_id, configuration_fingerprint, state, started_at) "
            "SELECT domain_id, ?, 'starting', ? FROM domain LIMIT 1",
            "ti", fingerprint_hex, now()) < 0)
        return -1;
    *ret_generation = sqlite3_last_insert_rowid(s->db);
    return 0;
}

int lz_store_generation_set_state(lz_domain_store *s, int64_t generation, const char *state,
                                  lz_error **err)
{
    if (strcmp(state, "ended") == 0 || strcmp(state, "recovered") == 0)
        return run(s, err, "cannot update a generation", ONE_ROW,
                   "UPDATE generation SET state = ?, ended_at = ? WHERE generation_id = ?", "tii",
                   state, now(), generation);
    return run(s, err, "cannot update a generation", ONE_ROW,
               "UPDATE generation SET state = ? WHERE generation_id = ?", "ti", state, generation);
}

int lz_store_participant_intent(lz_domain_store *s, int64_t generation, lz_role role,
                                const char *resource, lz_error **err)
{
    return run(s, err, "cannot record a participant intent", ONE_ROW,
               "INSERT INTO participant (generation_id, role, state, resource, updated_at) "
               "VALUES (?, ?, 'Intent', ?, ?) ON CONFLICT (generation_id, role) DO UPDATE SET "
               "state = 'Intent', resource = excluded.resource, updated_at = excluded.updated_at",
               "itti", generation, lz_role_name(role), resource, now());
}

int lz_store_participant_held(lz_domain_store *s, int64_t generation, lz_role role,
                              const lz_process_identity *p, lz_error **err)
{
    if (!p)
        return run(s, err, "cannot record a participant", ONE_ROW,
                   "UPDATE participant SET state = 'LeaseHeld', updated_at = ? WHERE "
                   "generation_id = ? AND role = ?",
                   "iit", now(), generation, lz_role_name(role));
    return run(s, err, "cannot record a participant", ONE_ROW,
               "UPDATE participant SET state = 'LeaseHeld', boot_id = ?, host_pid = ?, "
               "start_time_ticks = ?, pidfs_dev = ?, pidfs_ino = ?, updated_at = ? WHERE "
               "generation_id = ? AND role = ?",
               "tiiiiiit", p->boot_id, (int64_t) p->pid, (int64_t) p->start_time_ticks,
               (int64_t) p->pidfs_dev, (int64_t) p->pidfs_ino, now(), generation,
               lz_role_name(role));
}

int lz_store_participant_released(lz_domain_store *s, int64_t generation, lz_role role,
                                  lz_error **err)
{
    return run(s, err, "cannot record a participant release", ONE_ROW,
               "UPDATE participant SET state = 'Released', updated_at = ? WHERE generation_id = ? "
               "AND role = ?",
               "iit", now(), generation, lz_role_name(role));
}

int lz_store_unreleased(lz_domain_store *s, lz_participant **ret, size_t *ret_count, lz_error **err)
{
    sqlite3_stmt *st = NULL;
    const char *sql =
        "SELECT p.generation_id, p.role, p.state, p.resource, p.boot_id, p.host_pid, "
        "p.start_time_ticks, p.pidfs_dev, p.pidfs_ino FROM participant p JOIN generation g "
        "USING (generation_id) WHERE p.state != 'Released' ORDER BY p.generation_id, p.rowid";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, err, "cannot read participants");
    lz_participant *out = NULL;
    size_t n = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        out = lz_xrealloc(out, n + 1, sizeof(*out));
        lz_participant *p = &out[n++];
        memset(p, 0, sizeof(*p));
        p->generation_id = sqlite3_column_int64(st, 0);
        const char *role = (const char *) sqlite3_column_text(st, 1);
        p->role = LZ_ROLE__COUNT;
        for (int r = 0; r < LZ_ROLE__COUNT; r++)
            if (role && strcmp(role, role_names[r]) == 0)
                p->role = (lz_role) r;
        const char *state = (const char *) sqlite3_column_text(st, 2);
        p->state = state && strcmp(state, "LeaseHeld") == 0 ? LZ_PARTICIPANT_LEASE_HELD
                                                            : LZ_PARTICIPANT_INTENT;
        const char *res = (const char *) sqlite3_column_text(st, 3);
        p->resource = res ? lz_xstrdup(res) : NULL;
        const char *boot = (const char *) sqlite3_column_text(st, 4);
        if (boot && sqlite3_column_type(st, 5) != SQLITE_NULL) {
            p->has_process = true;
            snprintf(p->process.boot_id, sizeof(p->process.boot_id), "%s", boot);
            p->process.pid = (pid_t) sqlite3_column_int64(st, 5);
            p->process.start_time_ticks = (uint64_t) sqlite3_column_int64(st, 6);
            p->process.pidfs_dev = (uint64_t) sqlite3_column_int64(st, 7);
            p->process.pidfs_ino = (uint64_t) sqlite3_column_int64(st, 8);
        }
    }
    if (rc != SQLITE_DONE) {
        db_fail(s, err, "cannot read participants");
        sqlite3_finalize(st);
        lz_participants_free(out, n);
        return -1;
    }
    sqlite3_finalize(st);
    *ret = out;
    *ret_count = n;
    return 0;
}

void lz_participants_free(lz_participant *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i].resource);
    free(p);
}

int lz_store_generations_mark_recovered(lz_domain_store *s, lz_error **err)
{
    if (run(s, err, "cannot mark generations recovered", ANY_ROWS,
            "UPDATE generation SET state = 'recovered', ended_at = ? WHERE state NOT IN "
            "('ended','recovered')",
            "i", now()) < 0)
        return -1;
    return run(s, err, "cannot close stale sessions", ANY_ROWS,
               "UPDATE session SET state = 'ended', ended_at = ?, outcome = 'lost' WHERE state = "
               "'running'",
               "i", now());
}

int lz_store_network_policy(lz_domain_store *s, int64_t generation, const char *policy_json,
                            lz_error **err)
{
    return run(s, err, "cannot record the network policy", ONE_ROW,
               "INSERT OR REPLACE INTO network_policy VALUES (?, ?)", "it", generation,
               policy_json);
}

int lz_store_session_begin(lz_domain_store *s, int64_t generation, const char *session_id,
                           pid_t cli_pid, bool interactive, lz_error **err)
{
    return run(s, err, "cannot record a session", ONE_ROW,
               "INSERT INTO session (generation_id, session_id, cli_pid, interactive, state, "
               "started_at) VALUES (?, ?, ?, ?, 'running', ?)",
               "itiii", generation, session_id, (int64_t) cli_pid, (int64_t) interactive, now());
}

int lz_store_session_end(lz_domain_store *s, int64_t generation, const char *session_id,
                         const char *outcome, int code, lz_error **err)
{
    return run(s, err, "cannot record a session end", ONE_ROW,
               "UPDATE session SET state = 'ended', ended_at = ?, outcome = ?, exit_code = ? "
               "WHERE generation_id = ? AND session_id = ?",
               "itiit", now(), outcome, (int64_t) code, generation, session_id);
}

int lz_store_escalation_begin(lz_domain_store *s, int64_t generation, const char *request_id,
                              const char *session_id, const char *argv_json, const char *cwd,
                              const char *why, const char *decision, lz_error **err)
{
    int64_t t = now();
    return run(s, err, "cannot record an escalation request", ONE_ROW,
               "INSERT INTO escalation (generation_id, request_id, session_id, argv, cwd, "
               "justification, state, decision, received_at, decided_at) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               "itttttttii", generation, request_id, session_id, argv_json, cwd, why,
               decision ? "Running" : "Pending", decision, t, decision ? t : (int64_t) -1);
}

int lz_store_escalation_decided(lz_domain_store *s, int64_t generation, const char *request_id,
                                const char *decision, lz_error **err)
{
    return run(s, err, "cannot record an escalation decision", ONE_ROW,
               "UPDATE escalation SET state = 'Running', decision = ?, decided_at = ? "
               "WHERE generation_id = ? AND request_id = ? AND state = 'Pending'",
               "tiit", decision, now(), generation, request_id);
}

int lz_store_escalation_end(lz_domain_store *s, int64_t generation, const char *request_id,
                            const char *outcome, const char *decision, int status,
                            const char *message, lz_error **err)
{
    /* COALESCE: a decision recorded when the command started stays. */
    return run(s, err, "cannot record an escalation outcome", ONE_ROW,
               "UPDATE escalation SET state = ?, decision = COALESCE(decision, ?), "
               "exit_status = ?, message = ?, ended_at = ? "
               "WHERE generation_id = ? AND request_id = ? AND state IN ('Pending','Running')",
               "ttitiit", outcome, decision, (int64_t) status, message, now(), generation,
               request_id);
}

/* ---- read-only views (lazaret state inspect / verify) ------------------- */

/* A read-only connection to <domain root>/store.db: never follows a
 * symlink, never creates the file, never writes (a running coordinator is
 * not disturbed: WAL readers do not block its writer). */
static int open_readonly(int domain_root_fd, char **ret_label, sqlite3 **ret_db, lz_error **err)
{
    char link[64], target[4096];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", domain_root_fd);
    ssize_t tn = readlink(link, target, sizeof(target) - 1);
    if (tn <= 0 || target[0] != '/')
        return lz_error_set(err, tn < 0 ? errno : 0, "cannot locate a Domain Root");
    target[tn] = '\0';
    char *label = lz_xasprintf("%s/store.db", target);
    struct stat st;
    if (fstatat(domain_root_fd, "store.db", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
        lz_error_set(err, 0, "the Domain Store %s is missing or not a regular file", label);
        free(label);
        return -1;
    }
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(label, &db,
                        SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_FULLMUTEX,
                        NULL) != SQLITE_OK) {
        lz_error_set(err, 0, "cannot open the Domain Store %s: %s", label,
                     db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        free(label);
        return -1;
    }
    sqlite3_busy_timeout(db, 2000);
    *ret_label = label;
    *ret_db = db;
    return 0;
}

static json_t *column_json(sqlite3_stmt *q, int c)
{
    switch (sqlite3_column_type(q, c)) {
    case SQLITE_INTEGER:
        return json_integer((json_int_t) sqlite3_column_int64(q, c));
    case SQLITE_TEXT: {
        /* The text may be the sandbox's (argv): jansson refuses invalid
         * UTF-8, which then reads as null rather than failing the view. */
        json_t *t = json_stringn((const char *) sqlite3_column_text(q, c),
                                 (size_t) sqlite3_column_bytes(q, c));
        return t ? t : json_null();
    }
    default:
        return json_null();
    }
}

/* Rows of q as objects with the given keys, one per column. */
static int rows_json(sqlite3 *db, sqlite3_stmt *q, const char *const *keys, size_t n_keys,
                     json_t *out, const char *label, lz_error **err)
{
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        json_t *o = json_object();
        for (size_t k = 0; k < n_keys; k++)
            json_object_set_new(o, keys[k], column_json(q, (int) k));
        json_array_append_new(out, o);
    }
    if (rc != SQLITE_DONE)
        return lz_error_set(err, 0, "cannot read the Domain Store %s: %s", label,
                            sqlite3_errmsg(db));
    return 0;
}

int lz_store_read_history(int domain_root_fd, int max_generations, int max_escalations,
                          json_t **ret, lz_error **err)
{
    char *label = NULL;
    sqlite3 *db = NULL;
    if (open_readonly(domain_root_fd, &label, &db, err) < 0)
        return -1;
    static const char *const gen_keys[] = { "id", "state", "started_at", "ended_at",
                                            "fingerprint" };
    static const char *const esc_keys[] = {
        "generation", "request_id",  "argv",        "decision",
        "state",      "exit_status", "received_at", "ended_at"
    };
    json_t *o = json_object(), *gens = json_array(), *escs = json_array();
    json_object_set_new(o, "generations", gens);
    json_object_set_new(o, "escalations", escs);
    sqlite3_stmt *q = NULL;
    int r = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM generation", -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW) {
        lz_error_set(err, 0, "cannot read the Domain Store %s: %s", label, sqlite3_errmsg(db));
        goto out;
    }
    json_object_set_new(o, "generations_kept", json_integer(sqlite3_column_int64(q, 0)));
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT generation_id, state, started_at, ended_at, "
                           "configuration_fingerprint FROM generation "
                           "ORDER BY generation_id DESC LIMIT ?",
                           -1, &q, NULL) != SQLITE_OK ||
        sqlite3_bind_int(q, 1, max_generations) != SQLITE_OK) {
        lz_error_set(err, 0, "cannot read the Domain Store %s: %s", label, sqlite3_errmsg(db));
        goto out;
    }
    if (rows_json(db, q, gen_keys, LZ_ARRAY_SIZE(gen_keys), gens, label, err) < 0)
        goto out;
    sqlite3_finalize(q);
    q = NULL;
    /* A store from before the escalation table has no such table: empty. */
    if (sqlite3_prepare_v2(db,
                           "SELECT generation_id, request_id, argv, decision, state, "
                           "exit_status, received_at, ended_at FROM escalation "
                           "ORDER BY received_at DESC, rowid DESC LIMIT ?",
                           -1, &q, NULL) == SQLITE_OK) {
        if (sqlite3_bind_int(q, 1, max_escalations) != SQLITE_OK ||
            rows_json(db, q, esc_keys, LZ_ARRAY_SIZE(esc_keys), escs, label, err) < 0)
            goto out;
    }
    r = 0;
out:
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(label);
    if (r < 0)
        json_decref(o);
    else
        *ret = o;
    return r;
}

int lz_store_check_health(int domain_root_fd, lz_store_health *ret, lz_error **err)
{
    char *label = NULL;
    sqlite3 *db = NULL;
    if (open_readonly(domain_root_fd, &label, &db, err) < 0)
        return -1;
    lz_store_health h = { 0 };
    sqlite3_stmt *q = NULL;
    int r = -1;
    /* integrity_check first: a file that is no database fails here, with
     * SQLite's reason, before anything else is read from it. */
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check(8)", -1, &q, NULL) != SQLITE_OK) {
        lz_error_set(err, 0, "cannot read the Domain Store %s: %s", label, sqlite3_errmsg(db));
        goto out;
    }
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW) {
        lz_error_set(err, 0, "cannot check the Domain Store %s: %s", label, sqlite3_errmsg(db));
        goto out;
    }
    const char *line = (const char *) sqlite3_column_text(q, 0);
    h.integrity_ok = line && strcmp(line, "ok") == 0;
    snprintf(h.integrity, sizeof(h.integrity), "%s", line ? line : "(no answer)");
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_prepare_v2(db, "SELECT schema_id, schema_version FROM store_metadata", -1, &q,
                           NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
        const char *id = (const char *) sqlite3_column_text(q, 0);
        snprintf(h.schema_id, sizeof(h.schema_id), "%s", id ? id : "");
        h.schema_version = sqlite3_column_int(q, 1);
        h.schema_ok = strcmp(h.schema_id, LZ_DOMAIN_STORE_SCHEMA_ID) == 0 &&
                      h.schema_version == LZ_DOMAIN_STORE_SCHEMA_VERSION;
    }
    *ret = h;
    r = 0;
out:
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(label);
    return r;
}
