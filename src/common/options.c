/* SPDX-License-Identifier: Apache-2.0 */
#include "common/options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void lz_opt_init(lz_opt_parser *p, const lz_option *table, size_t n_table, int argc, char **argv,
                 int first)
{
    memset(p, 0, sizeof(*p));
    p->table = table;
    p->n_table = n_table;
    p->argc = argc;
    p->argv = argv;
    p->next = first;
}

__attribute__((format(printf, 2, 3))) static int refuse(lz_opt_parser *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error, sizeof(p->error), fmt, ap);
    va_end(ap);
    return LZ_OPT_ERROR;
}

/* How messages name the option o: "--name", or "-x" when so written. */
static void shown_name(const lz_option *o, bool as_short, char *out, size_t n)
{
    if (as_short)
        snprintf(out, n, "-%c", o->short_name);
    else
        snprintf(out, n, "--%s", o->name);
}

static int take_value(lz_opt_parser *p, const lz_option *o, bool as_short, const char *inline_value)
{
    char name[64];
    shown_name(o, as_short, name, sizeof(name));
    p->option = o;
    p->value = NULL;
    if (!o->value) {
        if (inline_value)
            return refuse(p, "option %s takes no value", name);
        return o->id;
    }
    const char *v = inline_value;
    if (!v) {
        if (p->next >= p->argc)
            return refuse(p, "option %s needs a value (%s)", name, o->value);
        v = p->argv[p->next++];
    }
    if (!*v)
        return refuse(p, "option %s needs a non-empty value (%s)", name, o->value);
    p->value = v;
    return o->id;
}

int lz_opt_next(lz_opt_parser *p)
{
    p->option = NULL;
    p->value = NULL;
    p->arg = NULL;
    p->error[0] = '\0';
    if (p->next >= p->argc)
        return LZ_OPT_DONE;
    const char *a = p->argv[p->next++];
    p->arg = a;
    if (p->dashdash_seen || a[0] != '-' || a[1] == '\0')
        return LZ_OPT_ARGUMENT;
    if (strcmp(a, "--") == 0) {
        p->dashdash_seen = true;
        return p->stop_at_dashdash ? LZ_OPT_DONE : lz_opt_next(p);
    }
    if (a[1] == '-') {
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t) (eq - name) : strlen(name);
        for (size_t i = 0; i < p->n_table; i++) {
            const lz_option *o = &p->table[i];
            if (o->name && strlen(o->name) == len && strncmp(o->name, name, len) == 0)
                return take_value(p, o, false, eq ? eq + 1 : NULL);
        }
    } else if (a[2] == '\0') {
        for (size_t i = 0; i < p->n_table; i++)
            if (p->table[i].short_name && p->table[i].short_name == a[1])
                return take_value(p, &p->table[i], true, NULL);
    }
    return refuse(p, "unknown option '%s'", a);
}
