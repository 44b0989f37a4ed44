/* SPDX-License-Identifier: Apache-2.0
 *
 * A JSON value (jansson) written as block-style YAML, for `lazaret export
 * kubernetes` (docs/kubernetes.md "The output"). Deterministic: object
 * members in insertion order, one form per value. Every string is
 * double-quoted with every byte outside printable ASCII escaped (\n, \t,
 * \uXXXX, \UXXXXXXXX), so no string is ever read back as a number, a
 * Boolean, null, an anchor or a tag, and no byte a YAML reader treats as
 * non-printable is written raw. Integers and Booleans are plain; JSON
 * reals and nulls are not produced by the exporter and are refused.
 */
#ifndef LAZARET_EXPORT_YAML_H
#define LAZARET_EXPORT_YAML_H

#include <jansson.h>
#include <stdio.h>

/* Append doc as one YAML document ("---\n" then the value) to out.
 * Returns 0, or -1 with errno EINVAL when doc holds a real or a null or is
 * not an object. */
int lz_yaml_document(FILE *out, const json_t *doc);

/* The double-quoted YAML form of the UTF-8 string s[0..len) (invalid UTF-8
 * bytes as \xNN), newly allocated. */
char *lz_yaml_quote(const char *s, size_t len);

#endif
