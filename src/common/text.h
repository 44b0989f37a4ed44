/* SPDX-License-Identifier: Apache-2.0
 *
 * Text that crosses a trust boundary. Names and bytes chosen by the sandbox,
 * by a tool's output or by a file on disk reach the developer's terminal, a
 * log, a prompt, a shell hint or a YAML document; each place has its own
 * rule, and each rule is written here once. Which to use:
 *
 *   flavour                where                         what survives
 *   lz_text_printable      terminal lines, logs, notices  printable UTF-8; C0/C1
 *                          (any text someone else chose)  controls, DEL, invisible
 *                                                         format characters and
 *                                                         invalid bytes as \xNN
 *   lz_text_quoted_ascii   the escalation prompt's items  '...' around printable
 *                                                         ASCII; \ and ' escaped
 *                                                         by \, every other byte
 *                                                         \xNN; cut at max bytes
 *   lz_text_line_ascii     one line of a tool's output    printable ASCII up to the
 *                          in `lazaret doctor`            first newline, '?' for
 *                                                         any other byte
 *   lz_text_shell_quote    copy-and-paste shell hints     the string, single-quoted
 *                                                         for a POSIX shell
 *
 * Kept beside their format, with the same decoder: the YAML double-quoted
 * scalar (src/export/yaml.c, lz_yaml_quote), the error renderer's last line
 * of defence (src/common/error.c, put_text: C0 controls as \xNN at print
 * time), the state-name escaping of Domain Root paths (the Domain Root's
 * owner). JSON goes through jansson with JSON_ENSURE_ASCII.
 */
#ifndef LAZARET_COMMON_TEXT_H
#define LAZARET_COMMON_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The one UTF-8 decoder (RFC 3629): the length of the sequence at s (of at
 * most n bytes, n >= 1) with its code point in *cp, or 0 when it is not a
 * valid shortest-form sequence of a Unicode scalar value (no overlongs, no
 * surrogates, nothing above U+10FFFF; *cp is then untouched). */
size_t lz_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Does buf[0..len) consist of valid UTF-8 (lz_utf8_decode's rules)? */
bool lz_utf8_valid(const char *buf, size_t len);

/* A copy of s safe to print on a terminal or write to a log line: every
 * byte that a terminal could act on — C0 controls (ESC, CR, LF, ...), DEL,
 * the C1 controls U+0080..U+009F, the format characters that reorder or
 * hide text (bidi overrides and isolates, zero-width characters, U+FEFF),
 * and bytes that are not valid UTF-8 — is
 * written as \xNN. The result is printable ASCII or harmless UTF-8, so
 * applying this twice changes nothing (a notice the coordinator escaped is
 * escaped again by the CLI). Names the sandbox chose (file names in reports
 * and errors) pass through this before they reach a developer's terminal. */
char *lz_text_printable(const char *s);

/* vasprintf, then lz_text_printable: a line for a log or a terminal whose
 * arguments may carry names the sandbox chose. */
char *lz_vprintable(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* s as the escalation prompt shows an item: in single quotes, backslash and
 * quote escaped by a backslash, every byte outside printable ASCII as \xNN
 * (so nothing inside can pass for the prompt's own quoting or labels, look-
 * alike quotes of other scripts included), cut after max bytes of s (0:
 * never) at a UTF-8 boundary with "… (N more bytes not shown)". */
char *lz_text_quoted_ascii(const char *s, size_t max);

/* The first line of s, at most max bytes, printable ASCII only ('?' for
 * any other byte): a tool's output quoted in a diagnosis. */
char *lz_text_line_ascii(const char *s, size_t max);

/* s single-quoted for a POSIX shell ('\'' for each quote), for a command
 * the user copies from a hint. */
char *lz_text_shell_quote(const char *s);

#endif
