/* SPDX-License-Identifier: Apache-2.0 */
#include "export/yaml.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"

char *lz_yaml_quote(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *) str;
    /* Worst case per input byte: 6, a one-byte control character as
     * \uXXXX (\xNN is 4 a byte, \UXXXXXXXX 10 for 4 bytes); then the two
     * quotes and sprintf's terminating NUL. */
    char *out = lz_xmalloc(len * 6 + 3), *o = out;
    *o++ = '"';
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = lz_utf8_decode(s + i, len - i, &cp);
        if (n == 0) {
            o += sprintf(o, "\\x%02x", s[i]);
            i++;
            continue;
        }
        i += n;
        switch (cp) {
        case '"':
            o += sprintf(o, "\\\"");
            continue;
        case '\\':
            o += sprintf(o, "\\\\");
            continue;
        case '\n':
            o += sprintf(o, "\\n");
            continue;
        case '\t':
            o += sprintf(o, "\\t");
            continue;
        case '\r':
            o += sprintf(o, "\\r");
            continue;
        default:
            break;
        }
        if (cp >= 0x20 && cp < 0x7f)
            *o++ = (char) cp;
        else if (cp < 0x10000)
            o += sprintf(o, "\\u%04x", (unsigned) cp);
        else
            o += sprintf(o, "\\U%08x", (unsigned) cp);
    }
    *o++ = '"';
    *o = '\0';
    return out;
}

static void indent(FILE *out, int n)
{
    for (int i = 0; i < n; i++)
        fputc(' ', out);
}

static bool empty_collection(const json_t *v)
{
    return (json_is_object(v) && json_object_size(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0);
}

/* A scalar or an empty collection on the current line. */
static int write_inline(FILE *out, const json_t *v)
{
    if (json_is_string(v)) {
        _cleanup_free_ char *q = lz_yaml_quote(json_string_value(v), json_string_length(v));
        fputs(q, out);
    } else if (json_is_integer(v)) {
        fprintf(out, "%lld", (long long) json_integer_value(v));
    } else if (json_is_boolean(v)) {
        fputs(json_is_true(v) ? "true" : "false", out);
    } else if (json_is_object(v) && json_object_size(v) == 0) {
        fputs("{}", out);
    } else if (json_is_array(v) && json_array_size(v) == 0) {
        fputs("[]", out);
    } else {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

static int write_block(FILE *out, const json_t *v, int level);

/* A mapping at indentation level; when first_inline, its first key goes on
 * the current line (after a sequence's "- "). */
static int write_mapping(FILE *out, const json_t *obj, int level, bool first_inline)
{
    const char *key;
    json_t *val;
    bool first = true;
    json_object_foreach((json_t *) obj, key, val)
    {
        if (!(first && first_inline))
            indent(out, level);
        first = false;
        _cleanup_free_ char *q = lz_yaml_quote(key, strlen(key));
        bool plain = key[0] != '\0' &&
                     strspn(key, "abcdefghijklmnopqrstuvwxyz"
                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == strlen(key) &&
                     !(key[0] >= '0' && key[0] <= '9');
        /* Plain keys only where YAML cannot read them as anything else. */
        if (plain && strcmp(key, "true") && strcmp(key, "false") && strcmp(key, "null") &&
            strcmp(key, "yes") && strcmp(key, "no") && strcmp(key, "on") && strcmp(key, "off") &&
            strcmp(key, "y") && strcmp(key, "n"))
            fputs(key, out);
        else
            fputs(q, out);
        if (json_is_object(val) || json_is_array(val)) {
            if (empty_collection(val)) {
                fputs(": ", out);
                write_inline(out, val);
                fputc('\n', out);
            } else {
                fputs(":\n", out);
                if (write_block(out, val, level + 2) < 0)
                    return -1;
            }
        } else {
            fputs(": ", out);
            if (write_inline(out, val) < 0)
                return -1;
            fputc('\n', out);
        }
    }
    return 0;
}

static int write_block(FILE *out, const json_t *v, int level)
{
    if (json_is_object(v))
        return write_mapping(out, v, level, false);
    size_t i;
    json_t *item;
    json_array_foreach((json_t *) v, i, item)
    {
        indent(out, level);
        fputs("- ", out);
        if (json_is_object(item) && json_object_size(item) > 0) {
            if (write_mapping(out, item, level + 2, true) < 0)
                return -1;
        } else if (json_is_array(item) && json_array_size(item) > 0) {
            fputc('\n', out);
            if (write_block(out, item, level + 2) < 0)
                return -1;
        } else {
            if (write_inline(out, item) < 0)
                return -1;
            fputc('\n', out);
        }
    }
    return 0;
}

int lz_yaml_document(FILE *out, const json_t *doc)
{
    if (!json_is_object(doc)) {
        errno = EINVAL;
        return -1;
    }
    fputs("---\n", out);
    return write_mapping(out, doc, 0, false);
}
