/* SPDX-License-Identifier: Apache-2.0
 *
 * Strict TOML 1.0 reader: a C view of a document parsed by toml++.
 *
 * toml++ (C++) is the only strict TOML parser Debian packages; this header is
 * the whole C ABI of the one C++ file (toml_shim.cpp) that wraps it. The shim
 * converts the parsed document into a plain owned C tree and nothing else: all
 * schema rules live in C (schema.c).
 *
 * What the parser itself refuses (TOML 1.0, no unreleased 1.1 features):
 * duplicate keys and tables, table redefinition, integer overflow, control
 * characters, invalid UTF-8, malformed values. The shim additionally refuses a
 * NUL in any key or string (reachable through "\u0000").
 */
#ifndef LAZARET_CONFIG_TOML_H
#define LAZARET_CONFIG_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lz_toml_type {
    LZ_TOML_TABLE,
    LZ_TOML_ARRAY,
    LZ_TOML_STRING,
    LZ_TOML_INTEGER,
    LZ_TOML_FLOAT,
    LZ_TOML_BOOLEAN,
    LZ_TOML_DATE,
    LZ_TOML_TIME,
    LZ_TOML_DATETIME,
} lz_toml_type;

typedef struct lz_toml_node lz_toml_node;

/* One key of a table, with the source position of the key itself. */
typedef struct lz_toml_entry {
    char *key;             /* UTF-8, NUL-free, NUL-terminated */
    unsigned line, column; /* 1-based; 0 when unknown */
    lz_toml_node *value;
} lz_toml_entry;

struct lz_toml_node {
    lz_toml_type type;
    unsigned line, column; /* 1-based source position of the value; 0 if unknown */
    union {
        struct { /* LZ_TOML_TABLE: entries sorted by key bytes */
            lz_toml_entry *entries;
            size_t count;
        } table;
        struct { /* LZ_TOML_ARRAY: items in document order */
            lz_toml_node **items;
            size_t count;
        } array;
        struct { /* LZ_TOML_STRING: UTF-8, NUL-free, NUL-terminated */
            char *bytes;
            size_t len;
        } string;
        int64_t integer;
        double floating;
        bool boolean;
    } u;
};

typedef struct lz_toml_diag {
    unsigned line, column; /* 1-based; 0 when unknown */
    char message[256];     /* the parser's description, NUL-terminated */
} lz_toml_diag;

/* Parse buf[0..len) (need not be NUL-terminated). On success returns 0 and
 * stores the root table in *ret_root (free with lz_toml_free()). On a syntax
 * or strictness violation returns -1 and fills *diag; *ret_root is untouched.
 * Never throws, never prints. */
int lz_toml_parse(const char *buf, size_t len, lz_toml_node **ret_root, lz_toml_diag *diag);

/* Free a tree returned by lz_toml_parse(); NULL is fine. */
void lz_toml_free(lz_toml_node *root);

/* Look up key in a table node; NULL when absent or node is not a table. */
const lz_toml_node *lz_toml_get(const lz_toml_node *table, const char *key);

/* Human name of a type, for diagnostics ("string", "table", ...). */
const char *lz_toml_type_name(lz_toml_type type);

#ifdef __cplusplus
}
#endif

#endif
