/* SPDX-License-Identifier: Apache-2.0
 *
 * The Domain Root, <storage root>/domains/<Domain ID>/: the one place that
 * knows its layout, the names of persistent directories in it, the Domain
 * lock (in the Domain's runtime directory), and how a Domain is chosen
 * among those on disk (docs/runtime.md "State"). Below both the CLI and
 * the Runtime Supervisor: it reads the store's summary (domain_store.h)
 * and opens through descriptors (fs/), nothing above.
 *
 * What is under state/ and ignored/ was written by a sandbox: untrusted on
 * every later use (docs/security.md); nothing here follows a symlink.
 */
#ifndef LAZARET_STORE_DOMAIN_ROOT_H
#define LAZARET_STORE_DOMAIN_ROOT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The Domain Root's layout. */
#define LZ_DROOT_STATE "state"       /* state/<escaped path>/{upper,work}: the State Anchor */
#define LZ_DROOT_STATE_UPPER "upper" /* what the sandbox wrote (kept across generations) */
#define LZ_DROOT_STATE_WORK "work"   /* overlayfs's scratch */
#define LZ_DROOT_IGNORED "ignored"   /* the Domain's copies of git-ignored paths */
#define LZ_DROOT_LOGS "logs"
#define LZ_DROOT_STORE "store.db" /* the Domain Store (with -wal and -shm) */
/* The records of what the Domain isolated and of the placeholder
 * directories it made (src/gitsentry/ignored.c): a path once isolated
 * stays so, and the placeholder budget stays spent, until a reset. */
#define LZ_DROOT_IGNORED_RECORD "ignored.list"
#define LZ_DROOT_PLACEHOLDER_RECORD "placeholders"
/* The sandbox user its files were made for (coordinator/bootstrap.c
 * check_sandbox_user). */
#define LZ_SANDBOX_USER_RECORD "sandbox-user"

/* In the Domain runtime directory, $XDG_RUNTIME_DIR/lazaret/domains/<id>/:
 * held by the coordinator for its whole life (and by the bootstrap before
 * anything else), so that no two coordinators of a Domain run. */
#define LZ_DOMAIN_LOCK "lock"
/* Beside it: serialises the CLIs that would start the Domain's coordinator
 * (coordinator/bootstrap.c), so that only one starts it. */
#define LZ_BOOTSTRAP_LOCK "bootstrap.lock"

/* Is name a Domain ID (64 lowercase hex digits), as the directories of
 * <storage root>/domains/ are named? */
bool lz_domain_id_valid(const char *name);

/* A persistent directory's name in state/: "/usr/local" -> "usr%2Flocal",
 * one flat, unambiguous, readable name per path ('/' and '%' escaped as
 * %2F and %25). Newly allocated. */
char *lz_state_name_escape(const char *path);

/* lz_state_name_escape reversed: "usr%2Flocal" -> "/usr/local"; NULL for a
 * name Lazaret never writes (a bare '/' or '%', another escape). */
char *lz_state_name_unescape(const char *name);

/* Open (creating it, mode 0600, never through a symlink) the lock file
 * `name` — LZ_DOMAIN_LOCK or the bootstrap's lock — in the Domain runtime
 * directory dirfd; no lock is taken. Returns the fd, or -1 with *err. */
int lz_domain_lock_open(int dirfd, const char *name, lz_error **err);

/* Is the Domain lock in the Domain runtime directory dirfd held (by its
 * coordinator)? Takes no lock that outlives the call. */
bool lz_domain_lock_held(int dirfd);

/* The status.json of the running Domain whose runtime directory is dirfd
 * (its lock held), parsed; NULL when it does not run or the file is
 * missing or not JSON. json_decref it. */
struct json_t *lz_domain_running_status(int dirfd);

/* The Domain lock of Domain id, in runtime_dir/lazaret/domains/<id>/lock
 * (created like the bootstrap creates it; runtime_dir: $XDG_RUNTIME_DIR,
 * normalised), taken exclusively: while it is held no coordinator can
 * start (the bootstrap takes it before anything else) and none runs (a
 * coordinator holds it for its whole life). Waits at most wait_ms for a
 * coordinator that is ending. Returns the locked fd, or -1 with *err. */
int lz_domain_lock_take(const char *runtime_dir, const char *id, int wait_ms, lz_error **err);

/* Which Domain: by a prefix of its ID, by its exact ID (a profile's Domain
 * of a workspace), or every Domain whose store records the workspace. */
typedef struct lz_domain_choice {
    const char *id_prefix;
    const char *id;
    const char *workspace;
    const char *profile; /* for messages, with id */
} lz_domain_choice;

/* The one Domain of domains_fd (<storage root>/domains, domains_label)
 * that choice names: its ID in ret_id. LZ_DOMAIN_NONE with *err when none
 * matches, -1 with *err when several match (the error lists the
 * candidates with profile and workspace) or the directory cannot be read.
 * domains_fd < 0: there is no domains directory (no Domain). */
#define LZ_DOMAIN_NONE (-2)
int lz_domain_root_choose(int domains_fd, const char *domains_label, const lz_domain_choice *choice,
                          char ret_id[65], lz_error **err);

#endif
