/* SPDX-License-Identifier: Apache-2.0
 *
 * The Escalation Mailbox's records (spec 3.8; docs/escalation.md): the only
 * bytes that travel between the sandbox's `lazaret-escalate` and the
 * coordinator. Each record is one regular file, written whole under a
 * temporary name and renamed into place (atomic), encoded with wire.h:
 *
 *   record := u16 type || u32 magic "LZMB" || u32 version (1) || fields
 *
 * Sandbox -> host, in the generation's inbox (sandbox-writable, so every
 * record is untrusted input: bounded, strict decoders, fuzzed by
 * tests/fuzz/fuzz_mailbox.c):
 *
 *   REQUEST   capability, request id, cwd, argv, justification
 *   CANCEL    capability, request id
 *   ACK       capability, request id, chunks consumed
 *
 * Host -> sandbox, in the generation's outbox (read-only inside), one
 * directory per request id:
 *
 *   CHUNK     request id, sequence number, stream, bytes
 *   RESULT    request id, outcome, exit status, number of chunks, message
 *
 * Identifiers are 32 lowercase hex digits (128 random bits): the
 * capability names the Client Session whose command asks (one per runsc
 * exec, SessionRequestCapability), the request id is chosen at random by
 * the client and never accepted twice in a generation (replay).
 *
 * Pure codecs: no I/O, no allocation beyond what a decoded record owns.
 * libc only (this directory builds for the static guest binaries too).
 */
#ifndef LAZARET_PROTOCOL_MAILBOX_H
#define LAZARET_PROTOCOL_MAILBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/wire.h"

#define LZ_MBX_MAGIC 0x4c5a4d42u /* "LZMB" */
#define LZ_MBX_VERSION 1u

enum {
    LZ_MBX_REQUEST = 200,
    LZ_MBX_CANCEL = 201,
    LZ_MBX_ACK = 202,
    LZ_MBX_CHUNK = 210,
    LZ_MBX_RESULT = 211,
};

/* Bounds of the untrusted fields. */
#define LZ_MBX_ID_LEN 32 /* hex digits of a capability or request id */
#define LZ_MBX_MAX_ARGS 256
#define LZ_MBX_MAX_ARG 4096         /* bytes of one argument */
#define LZ_MBX_MAX_ARGV_BYTES 32768 /* the arguments' bytes together, NULs not counted */
#define LZ_MBX_MAX_CWD 4096
#define LZ_MBX_MAX_WHY 1024
#define LZ_MBX_MAX_CHUNK 16384
#define LZ_MBX_MAX_MESSAGE 1024
/* Largest record file either side reads (a REQUEST at its bounds fits). */
#define LZ_MBX_MAX_RECORD 65536

/* EscalationOutcome: every request ends in exactly one. */
typedef enum lz_mbx_outcome {
    LZ_MBX_COMPLETED = 1, /* the host command ran; exit status is its own */
    LZ_MBX_DENIED = 2,    /* the developer, or an escalation-disabled profile, said no */
    LZ_MBX_TIMED_OUT = 3, /* nobody decided in time */
    LZ_MBX_CANCELLED = 4, /* the client, its session or the Domain ended it */
    LZ_MBX_FAILED = 5,    /* refused or could not run (message says why) */
} lz_mbx_outcome;

/* ResultStream */
enum { LZ_MBX_STDOUT = 1, LZ_MBX_STDERR = 2 };

typedef struct lz_mbx_request {
    char capability[LZ_MBX_ID_LEN + 1];
    char request_id[LZ_MBX_ID_LEN + 1];
    char *cwd;   /* absolute sandbox path, normalized */
    char **argv; /* NULL-terminated, argc >= 1, argv[0] absolute */
    size_t argc;
    char *why; /* the agent's justification, "" when none */
} lz_mbx_request;

/* CANCEL and ACK (acked: chunks the client consumed; 0 for CANCEL). */
typedef struct lz_mbx_control {
    char capability[LZ_MBX_ID_LEN + 1];
    char request_id[LZ_MBX_ID_LEN + 1];
    uint32_t acked;
} lz_mbx_control;

typedef struct lz_mbx_chunk {
    char request_id[LZ_MBX_ID_LEN + 1];
    uint32_t seq;        /* 0, 1, 2, … per request */
    uint32_t stream;     /* LZ_MBX_STDOUT or LZ_MBX_STDERR */
    const uint8_t *data; /* points into the decoded buffer */
    size_t len;
} lz_mbx_chunk;

typedef struct lz_mbx_result {
    char request_id[LZ_MBX_ID_LEN + 1];
    uint32_t outcome;  /* lz_mbx_outcome */
    uint32_t status;   /* COMPLETED: 0..255 exit code, or 128+N for signal N */
    uint32_t n_chunks; /* chunks written before the result */
    char *message;     /* what happened, for the client's stderr; "" when none */
} lz_mbx_result;

/* ---- the mailbox's places (SandboxLayoutV1, docs/escalation.md) -------
 *
 * Inside the sandbox (all under the product-owned /run/lazaret):
 *   LZ_MBX_GUEST_INBOX   read-write: the client renames records in here
 *   LZ_MBX_GUEST_OUTBOX  read-only:  one directory per accepted request id
 *   LZ_MBX_GUEST_CREDS   read-only:  LZ_MBX_CRED_FILE, exactly
 *                        LZ_MBX_CRED_LEN bytes: the sandbox's 32-byte
 *                        Ed25519 seed, the coordinator's 32-byte public key,
 *                        the generation nonce (32 lowercase hex digits) — one
 *                        file, as every open costs the client a millisecond or
 *                        two in gVisor (docs/performance.md)
 * Every record file is signed (trust/signature.h): payload || 64 bytes.
 *
 * Inbox names (a name starting with '.' is a temporary file, never read):
 *   <request id>.request   <request id>.cancel   <request id>.ack-<n>
 * (n: the client's own decimal counter, so every ACK has a fresh name; an
 * ACK is also the client's heartbeat, written at least every
 * LZ_MBX_HEARTBEAT_MS while it waits; a request silent for
 * LZ_MBX_SILENCE_MS is cancelled: the client died.)
 * Outbox, in <request id>/:  chunk-<seq> (decimal, from 0), then result. A
 * result is renamed in after every chunk it counts. At most
 * LZ_MBX_MAX_UNACKED chunks wait unacknowledged; the coordinator removes
 * chunks below the acknowledged count.
 */
#define LZ_MBX_GUEST_DIR "/run/lazaret/mailbox"
#define LZ_MBX_GUEST_INBOX "/run/lazaret/mailbox/inbox"
#define LZ_MBX_GUEST_OUTBOX "/run/lazaret/mailbox/outbox"
#define LZ_MBX_GUEST_CREDS "/run/lazaret/credentials"
#define LZ_MBX_CRED_FILE "client"
#define LZ_MBX_CRED_LEN 96
/* The per-runsc-exec SessionRequestCapability, in the command's environment. */
#define LZ_MBX_CAPABILITY_ENV "LAZARET_ESCALATE_CAPABILITY"
#define LZ_MBX_HEARTBEAT_MS 1000
#define LZ_MBX_SILENCE_MS 5000
#define LZ_MBX_MAX_UNACKED 64
/* How long the client waits for its request to be accepted (outbox
 * directory created) before it gives up: the coordinator is gone. */
#define LZ_MBX_ACCEPT_WAIT_MS 10000

/* What the sandbox can hold in the inbox at any moment, per Domain
 * generation (docs/escalation.md "The mailbox's bound"). The inbox is a
 * tmpfs of its own, mounted by the Runtime Supervisor in its mount
 * namespace with size= and nr_inodes= these values, so the kernel refuses
 * the excess (ENOSPC) however it is written: data pages of files (sparse
 * ones count only what is written), and inodes of every kind — files,
 * directories, symlinks, FIFOs, sockets — and every hard link (tmpfs
 * counts each link as an inode). Without it the inbox lay in
 * $XDG_RUNTIME_DIR, a tmpfs in RAM the sandbox could fill.
 *
 * Bytes: a tmpfs file takes whole 4 KiB pages, so a record of the maximal
 * size (LZ_MBX_MAX_RECORD + its 64-byte signature) takes 17 pages; 8 MiB
 * holds 120 of them at once (a REQUEST at every bound is about 39 KB:
 * 10 pages, so 200), or about 2000 small records (ACK, CANCEL: one page
 * each). Records stay only between the client's rename and the
 * coordinator's next scan (milliseconds) — but a record the coordinator
 * has removed keeps its inode and pages while gVisor still holds the file
 * open, and runsc's gofer client caches up to 1,000 dentries of the
 * inbox (measured: the first bound, 1024 entries, was full after about
 * 740 requests of test_escalation.py's 16 x 50; the cache lets go as it
 * evicts). So the bound is twice the cache in entries, and twice a
 * page per cached entry in bytes, with room for the ~16 clients that run
 * at once per Domain (docs/escalation.md "Limits"), each with at most one
 * record in flight and one being written.
 * Entries: 3 of them are the tmpfs's root and the coordinator's inbox/
 * and junk/ directories. */
#define LZ_MBX_INBOX_MAX_BYTES (8u << 20)
#define LZ_MBX_INBOX_MAX_ENTRIES 2048u
/* On the host: the tmpfs's mount point, relative to the generation
 * directory (an empty directory outside the supervisor's mount namespace),
 * and in the tmpfs the sandbox's inbox (bound at LZ_MBX_GUEST_INBOX) and the
 * coordinator's junk/ (what it took out of the inbox, out of the sandbox's
 * reach; on the same file system so that taking it out is a rename). */
#define LZ_MBX_HOST_SPOOL "mailbox/spool"
#define LZ_MBX_SPOOL_INBOX "inbox"
#define LZ_MBX_SPOOL_JUNK "junk"

/* lazaret-escalate's exit statuses for outcomes other than Completed (a
 * completed command's status is its own: 0..255, or 128+N for signal N).
 * Chosen above the range commands and shells use by convention (0..125,
 * 126/127, 128+N for N < 64). */
enum {
    LZ_ESC_EXIT_DENIED = 250,
    LZ_ESC_EXIT_TIMED_OUT = 251,
    LZ_ESC_EXIT_CANCELLED = 252,
    LZ_ESC_EXIT_FAILED = 253,
    LZ_ESC_EXIT_NOT_SENT = 254, /* usage error, CommandRequiresShell, no mailbox */
};

/* True for 32 lowercase hex digits. */
bool lz_mbx_id_ok(const char *id);

/* Why a request may not be sent or accepted: NULL when its ids, argv, cwd
 * and justification are acceptable, else a static reason. Both ids as
 * lz_mbx_id_ok; argv[0] must be an absolute path (no PATH lookup
 * anywhere), argv non-empty, every element UTF-8 and within bounds; cwd
 * UTF-8, absolute and normalized; why (NULL is "") UTF-8 within
 * LZ_MBX_MAX_WHY. A shell command string is not a
 * form the request language has: a relative argv[0] is CommandRequiresShell
 * territory and refused here. */
const char *lz_mbx_request_problem(const lz_mbx_request *m);

/* Encoders (b is reset). The request is checked by the caller with
 * lz_mbx_request_problem first. */
void lz_mbx_request_encode(lz_wbuf *b, const lz_mbx_request *m);
void lz_mbx_control_encode(lz_wbuf *b, uint16_t type, const lz_mbx_control *m);
void lz_mbx_chunk_encode(lz_wbuf *b, const lz_mbx_chunk *m);
void lz_mbx_result_encode(lz_wbuf *b, const lz_mbx_result *m);

/* Decoders of a whole record of len bytes. On success the record is
 * filled (what it owns: free with the matching _clear); on failure it is
 * zeroed and false returned. A decoder accepts exactly what its encoder
 * writes, within the bounds above, and lz_mbx_request_problem() == NULL
 * for a request. */
bool lz_mbx_request_decode(const uint8_t *data, size_t len, lz_mbx_request *m);
void lz_mbx_request_clear(lz_mbx_request *m);
bool lz_mbx_control_decode(const uint8_t *data, size_t len, uint16_t type, lz_mbx_control *m);
bool lz_mbx_chunk_decode(const uint8_t *data, size_t len, lz_mbx_chunk *m);
bool lz_mbx_result_decode(const uint8_t *data, size_t len, lz_mbx_result *m);
void lz_mbx_result_clear(lz_mbx_result *m);

/* The type of a record (0 when it has none, an unknown one, a wrong
 * magic/version, or len > LZ_MBX_MAX_RECORD). Only the header is read. */
uint16_t lz_mbx_record_type(const uint8_t *data, size_t len);

#endif
