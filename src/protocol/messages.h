/* SPDX-License-Identifier: Apache-2.0
 *
 * The closed message vocabularies of Lazaret's two control channels, encoded
 * with wire.h.
 *
 * Session channel (CLI <-> Session Coordinator), a Unix SOCK_SEQPACKET
 * socket in the Domain's 0700 runtime directory, peer uid checked. It
 * begins in the clear with the enrolment, then runs TLS 1.3 with mutual
 * authentication inside its datagrams (trust/channel.h,
 * docs/session-channel.md); every message from HELLO on is TLS application
 * data:
 *
 *   CLI -> HC   ENROLL    in the clear: protocol version, the CLI's fresh
 *                         Ed25519 public key
 *   HC -> CLI   ENROLLED  in the clear: the session id and the client
 *                         certificate this generation's CA issued for that
 *                         key (or REFUSED, in the clear)
 *               ...       the TLS handshake (datagrams of TLS records)
 *   CLI -> HC   HELLO     protocol version, Domain ID, configuration fingerprint
 *               RUN       the session's command; non-interactive: fds stdin,
 *                         stdout, stderr; interactive: no fds (window size);
 *                         TERM, locale and the ports to publish in the
 *                         message for both
 *               STOP      instead of HELLO (`lazaret stop`): the Domain id;
 *                         every session is told and the Domain tears down
 *               SIGNAL    non-interactive: a signal the CLI got, for the
 *                         command (docs/runtime.md "Signals")
 *               INPUT     interactive: bytes typed (TerminalInput)
 *               RESIZE    interactive: new window size (TerminalResize)
 *               CLOSE     the client ends the session (SessionClose)
 *   HC -> CLI   PROGRESS  a line of startup progress for the terminal
 *               REFUSED   why the session cannot run, and what to do
 *               STARTED   session id: the command runs
 *               OUTPUT    interactive: bytes from the terminal (TerminalOutput)
 *               EXIT      how the command ended (SessionExit)
 *
 *   Order: HELLO, RUN, then PROGRESS* and exactly one of REFUSED or
 *   (STARTED, OUTPUT*, EXIT); INPUT/RESIZE/CLOSE only after RUN of an
 *   interactive session (CLOSE for either kind). Anything else is a
 *   protocol violation that ends the connection.
 *
 *   An interactive session's signals (Ctrl-C, Ctrl-Z, Ctrl-\) are not
 *   messages: they travel as bytes through the PTY, whose line discipline
 *   inside the sandbox decides.
 *
 * Supervisor channel (coordinator <-> Runtime Supervisor), a socketpair:
 *
 *   HC -> RS    SUP_START             create and start this generation's sandbox
 *               SUP_EXEC              run a session command in it; fds: stdio
 *               SUP_SIGNAL            signal a session's command (its client left)
 *               SUP_PUBLISH           relay a listening socket's connections to a
 *                                     sandbox port while a session runs; fd: the socket
 *               SUP_STOP              kill and delete the sandbox, then exit
 *   RS -> HC    SUP_MAILBOX           (right before SUP_STARTED) fd: the root of the
 *                                     escalation inbox's bounded tmpfs, which only
 *                                     the supervisor's mount namespace has
 *               SUP_STARTED / SUP_FAILED, SUP_EXEC_EXITED, SUP_STOPPED
 *
 *   The supervisor derives every host path from the resolved configuration
 *   it inherited; no message names a host path or a host program.
 */
#ifndef LAZARET_PROTOCOL_MESSAGES_H
#define LAZARET_PROTOCOL_MESSAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/wire.h"

/* 2: RUN carries the --publish ports (issue 12). A CLI of another version
 * is refused at ENROLL with "use the same Lazaret version". */
#define LZ_SESSION_PROTOCOL_VERSION 3 /* 3: RUN carries run -e values */

/* Bounds for untrusted fields. */
#define LZ_MSG_MAX_ARGS 1024
#define LZ_MSG_MAX_STR 4096
#define LZ_MSG_MAX_TEXT 8192

enum {
    LZ_MSG_HELLO = 1,
    LZ_MSG_RUN = 2,
    LZ_MSG_ENROLL = 3,    /* CLI -> coordinator, in the clear */
    LZ_MSG_STOP = 4,      /* CLI -> coordinator, instead of HELLO: Domain id; end the Domain */
    LZ_MSG_ENROLLED = 14, /* coordinator -> CLI, in the clear */
    LZ_MSG_PROGRESS = 10,
    LZ_MSG_REFUSED = 11,
    LZ_MSG_STARTED = 12,
    LZ_MSG_EXIT = 13,
    LZ_MSG_INPUT = 20,
    LZ_MSG_RESIZE = 21,
    LZ_MSG_CLOSE = 22,
    LZ_MSG_OUTPUT = 23,
    LZ_MSG_SIGNAL = 24, /* CLI -> coordinator, non-interactive: forward a signal */
    /* Host escalation prompts (docs/escalation.md "The prompt"). */
    LZ_MSG_PROMPT = 30,        /* coordinator -> CLI: u32 prompt no, text */
    LZ_MSG_PROMPT_CLOSED = 31, /* coordinator -> CLI: u32 prompt no, why */
    LZ_MSG_DECISION = 32,      /* CLI -> coordinator: u32 prompt no, u32 approve */

    LZ_SUP_START = 100,
    LZ_SUP_EXEC = 101,
    LZ_SUP_STOP = 102,
    LZ_SUP_SIGNAL = 103,
    LZ_SUP_PUBLISH = 104, /* session no, sandbox port; fd: the listening socket */
    LZ_SUP_STARTED = 110,
    LZ_SUP_FAILED = 111,
    LZ_SUP_EXEC_EXITED = 112,
    LZ_SUP_STOPPED = 113,
    LZ_SUP_MAILBOX = 114, /* no fields; fd: the inbox tmpfs's root directory */
};

/* Reasons for REFUSED. */
enum {
    LZ_REFUSE_PROTOCOL = 1,     /* malformed or unexpected message */
    LZ_REFUSE_MISMATCH = 2,     /* another configuration fingerprint is running */
    LZ_REFUSE_TEARING_DOWN = 3, /* the generation is ending: retry */
    LZ_REFUSE_START_FAILED = 4, /* the sandbox could not be started */
    LZ_REFUSE_EXEC_FAILED = 5,  /* the session command could not be started */
    LZ_REFUSE_STOPPED = 6,      /* the Domain was stopped (lazaret stop): do not retry */
};

/* SessionExitOutcome */
enum { LZ_EXIT_OUTCOME_EXITED = 0, LZ_EXIT_OUTCOME_TERMINATED = 1 };

typedef struct lz_msg_hello {
    uint32_t version;
    char *domain_id;
    char *fingerprint;
} lz_msg_hello;

/* A published port (`lazaret run --publish [ADDR:]HOSTPORT:PORT`,
 * docs/network.md "Publishing a port"): the coordinator listens on
 * addr:host_port (a loopback address, host byte order) in its network
 * namespace, and every connection made there is relayed to the sandbox's
 * TCP port `port`. */
#define LZ_MSG_MAX_PUBLISH 8
typedef struct lz_msg_publish {
    uint32_t addr;      /* inside 127.0.0.0/8, host byte order */
    uint16_t host_port; /* 1..65535 */
    uint16_t port;      /* 1..65535, in the sandbox */
} lz_msg_publish;

/* Parse "[ADDR:]HOSTPORT:PORT" (ADDR a dotted IPv4 address inside
 * 127.0.0.0/8, default 127.0.0.1; ports 1..65535, decimal, no sign or
 * leading zero). False with the reason in why. */
bool lz_msg_publish_parse(const char *spec, lz_msg_publish *ret, char *why, size_t why_len);

/* "127.0.0.1:8080" into buf (at least 22 bytes). */
void lz_msg_publish_host(const lz_msg_publish *p, char *buf, size_t len);

typedef struct lz_msg_run {
    bool interactive;
    uint32_t rows, cols;
    char *term;  /* TERM of the client, "" when none */
    char *cwd;   /* path relative to the workspace, "" for its root */
    char **argv; /* NULL-terminated; argc == 0 means the login shell */
    size_t argc;
    char **env; /* the client's locale: "LANG=…", "LC_*=…" only */
    size_t envc;
    lz_msg_publish publish[LZ_MSG_MAX_PUBLISH]; /* --publish, no host port twice */
    size_t n_publish;
    char **user_env; /* run -e: "NAME=value", lz_msg_user_env_ok; may be secrets */
    size_t user_envc;
} lz_msg_run;

/* Is `entry` a `run -e` value a client may set: "NAME=value" with NAME
 * matching [A-Za-z_][A-Za-z0-9_]* and not starting with LAZARET_ (the
 * escalation capability's namespace)? */
bool lz_msg_user_env_ok(const char *entry);

/* Largest payload of INPUT/OUTPUT. */
#define LZ_MSG_MAX_DATA (LZ_WIRE_MAX - 16)

/* Is `entry` ("NAME=value") a locale variable a client may pass through? */
bool lz_msg_locale_var_ok(const char *entry);

typedef struct lz_msg_refused {
    uint32_t code;
    char *message;
    char *hint;
} lz_msg_refused;

typedef struct lz_msg_exec {
    uint32_t session_no;
    bool interactive;
    char *cwd;   /* absolute sandbox path */
    char **argv; /* NULL-terminated; argc == 0: the login shell */
    size_t argc;
    char **env; /* extra "NAME=value" for this session, NULL-terminated */
    size_t envc;
} lz_msg_exec;

void lz_msg_hello_encode(lz_wbuf *b, const lz_msg_hello *m);
bool lz_msg_hello_decode(lz_rbuf *r, lz_msg_hello *m);
void lz_msg_hello_clear(lz_msg_hello *m);

void lz_msg_run_encode(lz_wbuf *b, const lz_msg_run *m);
bool lz_msg_run_decode(lz_rbuf *r, lz_msg_run *m);
void lz_msg_run_clear(lz_msg_run *m);

/* REFUSED or SUP_FAILED. */
void lz_msg_refused_encode(lz_wbuf *b, uint16_t type, const lz_msg_refused *m);
bool lz_msg_refused_decode(lz_rbuf *r, lz_msg_refused *m);
void lz_msg_refused_clear(lz_msg_refused *m);

void lz_msg_exec_encode(lz_wbuf *b, const lz_msg_exec *m);
bool lz_msg_exec_decode(lz_rbuf *r, lz_msg_exec *m);
void lz_msg_exec_clear(lz_msg_exec *m);

/* Single-string messages (PROGRESS, STARTED, SUP_FAILED uses refused). */
void lz_msg_text_encode(lz_wbuf *b, uint16_t type, const char *text);
char *lz_msg_text_decode(lz_rbuf *r);

/* Messages without fields: CLOSE, SUP_START, SUP_STOP, SUP_STOPPED. */
void lz_msg_empty_encode(lz_wbuf *b, uint16_t type);
bool lz_msg_empty_decode(lz_rbuf *r);

/* INPUT and OUTPUT: terminal bytes (at most LZ_MSG_MAX_DATA); *ret points
 * into the message. */
void lz_msg_data_encode(lz_wbuf *b, uint16_t type, const void *data, size_t n);
bool lz_msg_data_decode(lz_rbuf *r, const uint8_t **ret, size_t *ret_len);

/* STARTED: the session id (32 lowercase hex digits). Newly allocated or
 * NULL when malformed. */
void lz_msg_started_encode(lz_wbuf *b, const char *session_id);
char *lz_msg_started_decode(lz_rbuf *r);

/* SUP_STARTED: whether sessions get the statx shim preloaded. */
void lz_msg_sup_started_encode(lz_wbuf *b, bool statx_fix);
bool lz_msg_sup_started_decode(lz_rbuf *r, bool *ret_statx_fix);

/* The longest prompt text: a request whose prompt would be longer is not
 * shown cut, it fails (what the developer approves is shown in full). */
#define LZ_MSG_MAX_PROMPT (LZ_WIRE_MAX - 64)

/* PROMPT and PROMPT_CLOSED: a number and a text (at most LZ_MSG_MAX_PROMPT
 * bytes, resp. LZ_MSG_MAX_TEXT). *ret_text newly allocated. */
void lz_msg_prompt_encode(lz_wbuf *b, uint16_t type, uint32_t no, const char *text);
bool lz_msg_prompt_decode(lz_rbuf *r, uint16_t type, uint32_t *ret_no, char **ret_text);

/* ENROLL: the protocol version and a raw Ed25519 public key. */
#define LZ_MSG_ENROLL_KEY_LEN 32
void lz_msg_enroll_encode(lz_wbuf *b, uint32_t version, const uint8_t key[LZ_MSG_ENROLL_KEY_LEN]);
bool lz_msg_enroll_decode(lz_rbuf *r, uint32_t *ret_version,
                          uint8_t ret_key[LZ_MSG_ENROLL_KEY_LEN]);

/* ENROLLED: the session id (32 lowercase hex digits) and the client
 * certificate's DER (1..LZ_MSG_MAX_CERT bytes, *ret_der points into the
 * message). */
#define LZ_MSG_MAX_CERT 4096
void lz_msg_enrolled_encode(lz_wbuf *b, const char *session_id, const uint8_t *der, size_t len);
bool lz_msg_enrolled_decode(lz_rbuf *r, char ret_id[33], const uint8_t **ret_der, size_t *ret_len);

/* SIGNAL: a signal the non-interactive CLI received, for its command:
 * SIGINT, SIGTERM, SIGHUP, SIGQUIT, or SIGKILL (the second SIGINT). */
bool lz_msg_signal_forwardable(uint32_t sig);
void lz_msg_signal_encode(lz_wbuf *b, uint32_t sig);
bool lz_msg_signal_decode(lz_rbuf *r, uint32_t *ret_sig);

/* SUP_EXEC_EXITED's status is a wait status (at most 0xffff), or one of
 * these: the session ends with Lazaret's message and 125, not a status. */
#define LZ_SUP_EXEC_START_FAILED 0xffff0001u /* the command was not started (reason logged) */
#define LZ_SUP_EXEC_RUNSC_FAILED 0xffff0002u /* runsc exec died without its status */

/* Two-u32 messages (EXIT: outcome, code; SUP_EXEC_EXITED: session, status;
 * SUP_SIGNAL: session, signal; DECISION: prompt no, approve 0/1;
 * SUP_PUBLISH: session, sandbox port). */
void lz_msg_pair_encode(lz_wbuf *b, uint16_t type, uint32_t a, uint32_t c);
bool lz_msg_pair_decode(lz_rbuf *r, uint32_t *a, uint32_t *c);

#endif
