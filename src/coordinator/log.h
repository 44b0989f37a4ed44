/* SPDX-License-Identifier: Apache-2.0
 *
 * The coordinator's log, <Domain Root>/logs/coordinator.log: one line per
 * entry, UTC timestamp and pid first. The edge logs once (STYLE): library
 * code returns lz_error, the coordinator's files log here. Every line goes
 * through lz_vprintable, so names the sandbox chose cannot forge lines or
 * terminal escapes.
 */
#ifndef LAZARET_COORDINATOR_LOG_H
#define LAZARET_COORDINATOR_LOG_H

#include "common/error.h"
#include "coordinator/domain.h"

/* Open (create) logs/coordinator.log in the Domain Root and make it stderr
 * too, so what a library or a sanitizer prints lands in the log. Without a
 * log the coordinator runs on silently (c->log stays NULL). */
void clog_open(coord *c);
void clog_(coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "what: message: strerror" for e; nothing when e is NULL. */
void log_error(coord *c, const char *what, const lz_error *e);
/* The phase timing marks so far (common/timing.h), into the log. */
void clog_timing(coord *c);

#endif
