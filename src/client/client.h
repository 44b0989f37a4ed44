/* SPDX-License-Identifier: Apache-2.0
 *
 * The client library: the CLI's side of the session channel
 * (docs/session-channel.md) under a small UI interface. It enrols on a
 * fresh connection and secures it with TLS (enrol.c), receives and handles
 * the coordinator's messages as the protocol table admits them in the
 * session's state (session.c), answers host escalation prompts (prompt.c)
 * and stops a running Domain over its channel (stop.c). What is shown to
 * the developer goes through lz_client_ui: the terminal's mode, its size,
 * and the streams the prompt, notices and output are written to; the CLI
 * (src/cli/terminal.c) provides the one real implementation.
 *
 * Errors of a live session are shown as they happen, on ui->notices, with
 * the terminal restored first: a session has no caller to return them to
 * while it relays (docs/errors.md "Terminal").
 */
#ifndef LAZARET_CLIENT_CLIENT_H
#define LAZARET_CLIENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "config/resolve.h"
#include "coordinator/bootstrap.h"
#include "common/io.h"
#include "protocol/messages.h"
#include "protocol/table.h"
#include "trust/channel.h"

typedef struct lz_client lz_client;
struct lz_screen;

typedef enum lz_attempt_result {
    LZ_ATTEMPT_DONE,  /* the session ended (EXIT, a refusal, a failure reported) */
    LZ_ATTEMPT_RETRY, /* the generation was tearing down before the start: join the next */
} lz_attempt_result;

typedef struct lz_client_ui {
    /* STARTED arrived: an interactive session's terminal goes raw and the
     * coordinator is told its size. */
    void (*started)(lz_client *cl);
    /* The terminal back in its original mode (EXIT, REFUSED, a failure). */
    void (*restore)(lz_client *cl);
    /* Is the terminal raw now (lines end in CR LF)? */
    bool (*raw)(const lz_client *cl);
    /* A line of the coordinator's before the start (image preparation). */
    lz_progress_fn progress;
    /* The size of the terminal the prompt is drawn on; 0 when unknown. */
    void (*prompt_size)(const lz_client *cl, unsigned *rows, unsigned *cols);
    /* Throw away what the developer typed and was not read yet. */
    void (*discard_typeahead)(const lz_client *cl);
    FILE *(*prompt_out)(void); /* the terminal the prompt is drawn on */
    FILE *(*notices)(void);    /* notices and errors */
    int output_fd;             /* where OUTPUT goes */
} lz_client_ui;

/* One connection's session: its state, which decides what the protocol
 * table admits (LZ_PS_CLIENT_*), and what the handlers learnt. */
struct lz_client {
    const lz_client_ui *ui;
    lz_resolved_config *cfg; /* NULL for a connection that runs nothing (stop) */
    /* Set once the session started and the profile's env values were
     * wiped (shared by every attempt of one run; NULL: nothing to wipe). */
    bool *env_forgotten;
    const char *log_label; /* the Domain's coordinator.log, full path, for messages */
    int sock;
    lz_tls_channel *tls; /* from enrolment on; NULL while enrolling */
    bool interactive;
    bool retry_silently; /* false on run's last attempt: every failure is reported */
    bool started;        /* STARTED arrived */
    bool exited;         /* EXIT arrived: *status holds the command's status */
    bool ended;          /* EXIT or REFUSED arrived, or the connection ended */
    int *status;
    lz_attempt_result result;
    bool heard; /* some message of the coordinator arrived */
    /* Enrolment (in the clear, before TLS): ENROLLED's session id and
     * client certificate. */
    bool enrolling, enrolled;
    char enrolled_id[33];
    uint8_t cert[LZ_MSG_MAX_CERT];
    size_t cert_len;
    /* An escalation prompt is up (FR-5): the terminal's keystrokes answer
     * it and go nowhere else; the coordinator holds the session's output
     * back meanwhile. */
    bool prompting;
    /* ... in place of a prompt: a request denied without being shown (too
     * large for the terminal), said until a key is pressed; the session's
     * output goes to the screen's copy only meanwhile. */
    bool prompt_is_notice;
    /* The terminal went away without a SIGHUP reaching us (we are not its
     * session leader nor in its foreground group): a read of 0 or EIO from
     * the raw terminal, or EIO writing to it. */
    bool terminal_gone;
    uint32_t prompt_no;
    char answer[8];
    size_t answer_len;
    struct timespec prompt_shown; /* keys before LZ_PROMPT_GRACE_MS after it are not answers */
    bool grace_keys;              /* some were ignored */
    bool withdrawn;               /* the last prompt was withdrawn, not answered */
    uint32_t withdrawn_no;
    /* An interactive session's screen as drawn (client/screen.h): fed
     * with its output from STARTED on; repainted after a prompt, reset
     * when the session ends other than by its program's exit. */
    struct lz_screen *screen;
    bool awaiting_cursor; /* the terminal's answer to LZ_SCREEN_ASK_CURSOR */
    /* Notices that arrived while the prompt was up (their text can be the
     * sandbox's choosing: Git Sentry names): shown after it. */
    char *held;
    size_t held_len;
    size_t held_dropped;
};

/* The coordinator's messages to a client and their handlers: every row of
 * the table addressed to the CLI has one (tests/unit/test_protocol.c). */
extern const lz_proto_handler_row lz_client_handlers[];
extern const size_t lz_client_n_handlers;

/* Text from the coordinator can carry names the sandbox chose (a
 * quarantined path, an ignored file): printed with terminal controls
 * escaped, so no session's terminal can be driven from the sandbox. */
void lz_print_remote(FILE *out, const char *prefix, const char *text, const char *suffix);

/* The enrolment and the TLS handshake of the session channel on cl->sock
 * (docs/session-channel.md): 0 with cl->tls set, or -1 with cl->result (a
 * refusal or failure was reported, or a silent retry). domain_hex: the
 * Domain ID; dirfd/dir_label: its runtime directory, which holds the Trust
 * Anchor's publication. The session's fields are reset for its first
 * message afterwards. */
int lz_client_secure(lz_client *cl, const char *domain_hex, int dirfd, const char *dir_label);

/* Send one message over the secured channel (lz_tls_proto_post). */
void lz_client_post(lz_client *cl, const lz_wbuf *b);

/* cl->sock is readable: receive and handle one message. Sets cl->ended
 * when the session is over for this connection (with a message on the
 * notices stream when that was not an EXIT or a REFUSED). */
void lz_client_receive(lz_client *cl);

/* Tell the coordinator the terminal's size (RESIZE). */
void lz_client_send_resize(lz_client *cl, unsigned rows, unsigned cols);

/* Keystrokes while a prompt is up (cl->prompting): y then Enter approves;
 * Enter after anything else, Ctrl-C or Ctrl-D denies. */
void lz_client_prompt_keys(lz_client *cl, const uint8_t *data, size_t n);

/* The screen's emulator works through the session's output in slices of
 * about this much time (client/screen.h lz_screen_queue, attack round a26
 * F4), so that keys and signals are read between them; a repaint waits
 * for it at most LZ_CLIENT_REPAINT_WAIT_NS. */
#define LZ_CLIENT_SCREEN_SLICE_NS 4000000
#define LZ_CLIENT_REPAINT_WAIT_NS 100000000

/* One slice of the screen's work, unless more output is waiting
 * (output_waiting) and less than LZ_CLIENT_SCREEN_BATCH is queued: output
 * that piles up is emulated in one go, lines scrolled off skipped (10 MiB/s
 * in 4 KiB messages at 50x200, over 200 MiB/s in 64 KiB ones, measured).
 * True while the screen is behind the output: the caller comes back
 * without waiting. */
#define LZ_CLIENT_SCREEN_BATCH (256u * 1024)
bool lz_client_screen_work(lz_client *cl, bool output_waiting);

/* A denial shown in place of a prompt goes away (a key, or the program's
 * exit): the session's screen comes back with what was printed meanwhile,
 * and (say_again: nobody pressed a key, maybe nobody saw it) the denial
 * once more below it. */
void lz_client_end_notice(lz_client *cl, bool say_again);

/* Forget what the session held (the notices a prompt held back). */
void lz_client_clear(lz_client *cl);

/* The session ended other than by its program's own exit (a stop, the
 * sandbox's end, a lost connection, a signal to this CLI): put back on the
 * terminal what the program changed and leave the cursor on a fresh line
 * (docs/errors.md "Terminal"). Then, and on an ordinary exit, the screen's
 * state is dropped (lz_client_drop_screen). */
void lz_client_reset_screen(lz_client *cl);
void lz_client_drop_screen(lz_client *cl);

/* Stop one running Domain over its session channel (enrolment, TLS, then
 * STOP instead of HELLO), never by a signal to a pid read from a file;
 * waits (30 s at most) until its Domain lock is free, so that what follows
 * finds no generation. dirfd/label: its runtime directory; log: its
 * coordinator.log for messages. 0 when stopped, 1 when it was ending by
 * itself already (and has ended), -1 after reporting why on ui's notices
 * stream. */
int lz_client_stop_domain(const lz_client_ui *ui, int dirfd, const char *label, const char *log,
                          const char *id, const char *profile);

#endif
