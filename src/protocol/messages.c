/* SPDX-License-Identifier: Apache-2.0 */
#include "protocol/messages.h"

#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

static void free_strv(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

static void put_strv(lz_wbuf *b, char *const *v, size_t n)
{
    lz_wbuf_u32(b, (uint32_t) n);
    for (size_t i = 0; i < n; i++)
        lz_wbuf_str(b, v[i]);
}

static char **get_strv(lz_rbuf *r, size_t *ret_n)
{
    uint32_t n = lz_rbuf_u32(r);
    if (r->bad || n > LZ_MSG_MAX_ARGS) {
        r->bad = true;
        return NULL;
    }
    char **v = lz_xcalloc(n + 1, sizeof(char *));
    for (uint32_t i = 0; i < n; i++) {
        v[i] = lz_rbuf_str(r, LZ_MSG_MAX_STR);
        if (!v[i]) {
            free_strv(v);
            return NULL;
        }
    }
    *ret_n = n;
    return v;
}

void lz_msg_hello_encode(lz_wbuf *b, const lz_msg_hello *m)
{
    lz_wbuf_init(b, LZ_MSG_HELLO);
    lz_wbuf_u32(b, m->version);
    lz_wbuf_str(b, m->domain_id);
    lz_wbuf_str(b, m->fingerprint);
}

bool lz_msg_hello_decode(lz_rbuf *r, lz_msg_hello *m)
{
    memset(m, 0, sizeof(*m));
    m->version = lz_rbuf_u32(r);
    m->domain_id = lz_rbuf_str(r, 64);
    m->fingerprint = lz_rbuf_str(r, 64);
    if (!lz_rbuf_done(r)) {
        lz_msg_hello_clear(m);
        return false;
    }
    return true;
}

void lz_msg_hello_clear(lz_msg_hello *m)
{
    free(m->domain_id);
    free(m->fingerprint);
    memset(m, 0, sizeof(*m));
}

void lz_msg_run_encode(lz_wbuf *b, const lz_msg_run *m)
{
    lz_wbuf_init(b, LZ_MSG_RUN);
    lz_wbuf_u32(b, m->interactive ? 1 : 0);
    lz_wbuf_u32(b, m->rows);
    lz_wbuf_u32(b, m->cols);
    lz_wbuf_str(b, m->term ? m->term : "");
    lz_wbuf_str(b, m->cwd ? m->cwd : "");
    put_strv(b, m->argv, m->argc);
    put_strv(b, m->env, m->envc);
    lz_wbuf_u32(b, (uint32_t) m->n_publish);
    for (size_t i = 0; i < m->n_publish; i++) {
        lz_wbuf_u32(b, m->publish[i].addr);
        lz_wbuf_u32(b, m->publish[i].host_port);
        lz_wbuf_u32(b, m->publish[i].port);
    }
    put_strv(b, m->user_env, m->user_envc);
}

/* A decimal port 1..65535: digits only, no leading zero. */
static bool parse_port(const char *s, size_t n, uint16_t *ret)
{
    if (n == 0 || n > 5 || s[0] == '0')
        return false;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint32_t) (s[i] - '0');
    }
    if (v > 65535)
        return false;
    *ret = (uint16_t) v;
    return true;
}

/* A dotted IPv4 address, four decimal octets without leading zeros (what
 * inet_pton accepts, without depending on it: this file is libc-only and
 * strict). */
static bool parse_ipv4(const char *s, size_t n, uint32_t *ret)
{
    uint32_t a = 0;
    size_t i = 0;
    for (int octet = 0; octet < 4; octet++) {
        if (octet) {
            if (i >= n || s[i] != '.')
                return false;
            i++;
        }
        size_t start = i;
        uint32_t v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && i - start < 3)
            v = v * 10 + (uint32_t) (s[i++] - '0');
        if (i == start || v > 255 || (i - start > 1 && s[start] == '0'))
            return false;
        a = a << 8 | v;
    }
    if (i != n)
        return false;
    *ret = a;
    return true;
}

bool lz_msg_publish_parse(const char *spec, lz_msg_publish *ret, char *why, size_t why_len)
{
    const char *c2 = strrchr(spec, ':');
    if (!c2) {
        snprintf(why, why_len, "'%s' is not HOSTPORT:PORT", spec);
        return false;
    }
    const char *c1 = NULL;
    for (const char *p = spec; p < c2; p++)
        if (*p == ':')
            c1 = p;
    lz_msg_publish p = { .addr = 0x7f000001u };
    const char *hp = c1 ? c1 + 1 : spec;
    if (c1 && !parse_ipv4(spec, (size_t) (c1 - spec), &p.addr)) {
        snprintf(why, why_len, "'%.*s' in '%s' is not an IPv4 address", (int) (c1 - spec), spec,
                 spec);
        return false;
    }
    if (c1 && strchr(spec, ':') != c1) {
        snprintf(why, why_len, "'%s' is not [ADDR:]HOSTPORT:PORT", spec);
        return false;
    }
    /* Loopback only: a published port is the sandbox's server answering on
     * the developer's machine, not on the network (docs/network.md). */
    if ((p.addr >> 24) != 127) {
        snprintf(why, why_len,
                 "'%.*s' is not a loopback address: a port is published on "
                 "127.0.0.0/8 only",
                 (int) (c1 - spec), spec);
        return false;
    }
    if (!parse_port(hp, (size_t) (c2 - hp), &p.host_port)) {
        snprintf(why, why_len, "host port '%.*s' in '%s' is not a number from 1 to 65535",
                 (int) (c2 - hp), hp, spec);
        return false;
    }
    if (!parse_port(c2 + 1, strlen(c2 + 1), &p.port)) {
        snprintf(why, why_len, "sandbox port '%s' in '%s' is not a number from 1 to 65535", c2 + 1,
                 spec);
        return false;
    }
    *ret = p;
    return true;
}

void lz_msg_publish_host(const lz_msg_publish *p, char *buf, size_t len)
{
    snprintf(buf, len, "%u.%u.%u.%u:%u", p->addr >> 24, (p->addr >> 16) & 0xff,
             (p->addr >> 8) & 0xff, p->addr & 0xff, p->host_port);
}

bool lz_msg_user_env_ok(const char *entry)
{
    const char *eq = strchr(entry, '=');
    if (!eq || eq == entry || strncmp(entry, "LAZARET_", 8) == 0)
        return false;
    for (const char *p = entry; p < eq; p++) {
        bool alpha = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_';
        if (!alpha && !(p > entry && *p >= '0' && *p <= '9'))
            return false;
    }
    return true;
}

bool lz_msg_locale_var_ok(const char *entry)
{
    const char *eq = strchr(entry, '=');
    if (!eq)
        return false;
    size_t n = (size_t) (eq - entry);
    if (n == 4 && strncmp(entry, "LANG", 4) == 0)
        return true;
    if (n == 8 && strncmp(entry, "LANGUAGE", 8) == 0)
        return true;
    if (n == 9 && strncmp(entry, "COLORTERM", 9) == 0)
        return true;
    if (n > 3 && strncmp(entry, "LC_", 3) == 0) {
        for (size_t i = 3; i < n; i++)
            if (!((entry[i] >= 'A' && entry[i] <= 'Z') || entry[i] == '_'))
                return false;
        return true;
    }
    return false;
}

bool lz_msg_run_decode(lz_rbuf *r, lz_msg_run *m)
{
    memset(m, 0, sizeof(*m));
    uint32_t flags = lz_rbuf_u32(r);
    m->interactive = flags & 1;
    m->rows = lz_rbuf_u32(r);
    m->cols = lz_rbuf_u32(r);
    m->term = lz_rbuf_str(r, 256);
    m->cwd = lz_rbuf_str(r, LZ_MSG_MAX_STR);
    m->argv = get_strv(r, &m->argc);
    if (m->argv)
        m->env = get_strv(r, &m->envc);
    bool env_ok = true;
    for (size_t i = 0; m->env && i < m->envc; i++)
        env_ok = env_ok && lz_msg_locale_var_ok(m->env[i]);
    /* Published ports: bounded, loopback, ports 1..65535, no host address
     * and port twice (the second bind would fail anyway; say so here). */
    uint32_t np = m->env ? lz_rbuf_u32(r) : 0;
    bool pub_ok = np <= LZ_MSG_MAX_PUBLISH;
    for (uint32_t i = 0; pub_ok && i < np; i++) {
        uint32_t addr = lz_rbuf_u32(r), hp = lz_rbuf_u32(r), port = lz_rbuf_u32(r);
        pub_ok = (addr >> 24) == 127 && hp >= 1 && hp <= 65535 && port >= 1 && port <= 65535;
        m->publish[i] = (lz_msg_publish){ addr, (uint16_t) hp, (uint16_t) port };
        for (uint32_t j = 0; pub_ok && j < i; j++)
            pub_ok = m->publish[j].addr != addr || m->publish[j].host_port != hp;
    }
    m->n_publish = pub_ok ? np : 0;
    if (m->env)
        m->user_env = get_strv(r, &m->user_envc);
    for (size_t i = 0; m->user_env && i < m->user_envc; i++)
        env_ok = env_ok && lz_msg_user_env_ok(m->user_env[i]);
    if (!m->user_env || !lz_rbuf_done(r) || !pub_ok || flags > 1 || m->rows > 65535 ||
        m->cols > 65535 || !env_ok) {
        lz_msg_run_clear(m);
        return false;
    }
    return true;
}

void lz_msg_run_clear(lz_msg_run *m)
{
    free(m->term);
    free(m->cwd);
    free_strv(m->argv);
    free_strv(m->env);
    for (size_t i = 0; m->user_env && i < m->user_envc; i++)
        explicit_bzero(m->user_env[i], strlen(m->user_env[i])); /* may be secrets */
    free_strv(m->user_env);
    memset(m, 0, sizeof(*m));
}

void lz_msg_refused_encode(lz_wbuf *b, uint16_t type, const lz_msg_refused *m)
{
    lz_wbuf_init(b, type);
    lz_wbuf_u32(b, m->code);
    lz_wbuf_str(b, m->message ? m->message : "");
    lz_wbuf_str(b, m->hint ? m->hint : "");
}

bool lz_msg_refused_decode(lz_rbuf *r, lz_msg_refused *m)
{
    memset(m, 0, sizeof(*m));
    m->code = lz_rbuf_u32(r);
    m->message = lz_rbuf_str(r, LZ_MSG_MAX_TEXT);
    m->hint = lz_rbuf_str(r, LZ_MSG_MAX_TEXT);
    if (!lz_rbuf_done(r)) {
        lz_msg_refused_clear(m);
        return false;
    }
    return true;
}

void lz_msg_refused_clear(lz_msg_refused *m)
{
    free(m->message);
    free(m->hint);
    memset(m, 0, sizeof(*m));
}

void lz_msg_exec_encode(lz_wbuf *b, const lz_msg_exec *m)
{
    lz_wbuf_init(b, LZ_SUP_EXEC);
    lz_wbuf_u32(b, m->session_no);
    lz_wbuf_u32(b, m->interactive ? 1 : 0);
    lz_wbuf_str(b, m->cwd);
    put_strv(b, m->argv, m->argc);
    put_strv(b, m->env, m->envc);
}

bool lz_msg_exec_decode(lz_rbuf *r, lz_msg_exec *m)
{
    memset(m, 0, sizeof(*m));
    m->session_no = lz_rbuf_u32(r);
    uint32_t flags = lz_rbuf_u32(r);
    m->interactive = flags & 1;
    m->cwd = lz_rbuf_str(r, LZ_MSG_MAX_STR);
    m->argv = get_strv(r, &m->argc);
    if (m->argv)
        m->env = get_strv(r, &m->envc);
    if (!lz_rbuf_done(r) || flags > 1) {
        lz_msg_exec_clear(m);
        return false;
    }
    return true;
}

void lz_msg_exec_clear(lz_msg_exec *m)
{
    free(m->cwd);
    free_strv(m->argv);
    for (size_t i = 0; m->env && i < m->envc; i++)
        explicit_bzero(m->env[i], strlen(m->env[i])); /* run -e values may be secrets */
    free_strv(m->env);
    memset(m, 0, sizeof(*m));
}

void lz_msg_text_encode(lz_wbuf *b, uint16_t type, const char *text)
{
    lz_wbuf_init(b, type);
    lz_wbuf_str(b, text);
}

char *lz_msg_text_decode(lz_rbuf *r)
{
    char *t = lz_rbuf_str(r, LZ_MSG_MAX_TEXT);
    if (!lz_rbuf_done(r)) {
        free(t);
        return NULL;
    }
    return t;
}

void lz_msg_pair_encode(lz_wbuf *b, uint16_t type, uint32_t a, uint32_t c)
{
    lz_wbuf_init(b, type);
    lz_wbuf_u32(b, a);
    lz_wbuf_u32(b, c);
}

bool lz_msg_pair_decode(lz_rbuf *r, uint32_t *a, uint32_t *c)
{
    *a = lz_rbuf_u32(r);
    *c = lz_rbuf_u32(r);
    return lz_rbuf_done(r);
}

void lz_msg_empty_encode(lz_wbuf *b, uint16_t type)
{
    lz_wbuf_init(b, type);
}

bool lz_msg_empty_decode(lz_rbuf *r)
{
    return lz_rbuf_done(r);
}

void lz_msg_data_encode(lz_wbuf *b, uint16_t type, const void *data, size_t n)
{
    lz_wbuf_init(b, type);
    lz_wbuf_bytes(b, data, n);
}

bool lz_msg_data_decode(lz_rbuf *r, const uint8_t **ret, size_t *ret_len)
{
    const uint8_t *p;
    size_t n;
    if (!lz_rbuf_bytes(r, &p, &n, LZ_MSG_MAX_DATA) || !lz_rbuf_done(r))
        return false;
    *ret = p;
    *ret_len = n;
    return true;
}

void lz_msg_started_encode(lz_wbuf *b, const char *session_id)
{
    lz_wbuf_init(b, LZ_MSG_STARTED);
    lz_wbuf_str(b, session_id);
}

char *lz_msg_started_decode(lz_rbuf *r)
{
    char *id = lz_rbuf_str(r, 64);
    bool ok = id && lz_rbuf_done(r) && strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32;
    if (!ok) {
        free(id);
        return NULL;
    }
    return id;
}

bool lz_msg_signal_forwardable(uint32_t sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT || sig == SIGKILL;
}

void lz_msg_signal_encode(lz_wbuf *b, uint32_t sig)
{
    lz_wbuf_init(b, LZ_MSG_SIGNAL);
    lz_wbuf_u32(b, sig);
}

bool lz_msg_signal_decode(lz_rbuf *r, uint32_t *ret_sig)
{
    uint32_t sig = lz_rbuf_u32(r);
    if (!lz_rbuf_done(r) || !lz_msg_signal_forwardable(sig))
        return false;
    *ret_sig = sig;
    return true;
}

void lz_msg_enroll_encode(lz_wbuf *b, uint32_t version, const uint8_t key[LZ_MSG_ENROLL_KEY_LEN])
{
    lz_wbuf_init(b, LZ_MSG_ENROLL);
    lz_wbuf_u32(b, version);
    lz_wbuf_bytes(b, key, LZ_MSG_ENROLL_KEY_LEN);
}

bool lz_msg_enroll_decode(lz_rbuf *r, uint32_t *ret_version, uint8_t ret_key[LZ_MSG_ENROLL_KEY_LEN])
{
    uint32_t v = lz_rbuf_u32(r);
    const uint8_t *k;
    size_t n;
    if (!lz_rbuf_bytes(r, &k, &n, LZ_MSG_ENROLL_KEY_LEN) || n != LZ_MSG_ENROLL_KEY_LEN ||
        !lz_rbuf_done(r))
        return false;
    *ret_version = v;
    memcpy(ret_key, k, LZ_MSG_ENROLL_KEY_LEN);
    return true;
}

void lz_msg_enrolled_encode(lz_wbuf *b, const char *session_id, const uint8_t *der, size_t len)
{
    lz_wbuf_init(b, LZ_MSG_ENROLLED);
    lz_wbuf_str(b, session_id);
    lz_wbuf_bytes(b, der, len);
}

bool lz_msg_enrolled_decode(lz_rbuf *r, char ret_id[33], const uint8_t **ret_der, size_t *ret_len)
{
    const uint8_t *id, *der;
    size_t id_len, der_len;
    if (!lz_rbuf_bytes(r, &id, &id_len, 32) || id_len != 32 ||
        !lz_rbuf_bytes(r, &der, &der_len, LZ_MSG_MAX_CERT) || der_len == 0 || !lz_rbuf_done(r))
        return false;
    for (size_t i = 0; i < 32; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    memcpy(ret_id, id, 32);
    ret_id[32] = '\0';
    *ret_der = der;
    *ret_len = der_len;
    return true;
}

void lz_msg_sup_started_encode(lz_wbuf *b, bool statx_fix)
{
    lz_wbuf_init(b, LZ_SUP_STARTED);
    lz_wbuf_u32(b, statx_fix ? 1 : 0);
}

bool lz_msg_sup_started_decode(lz_rbuf *r, bool *ret_statx_fix)
{
    uint32_t v = lz_rbuf_u32(r);
    if (!lz_rbuf_done(r) || v > 1)
        return false;
    *ret_statx_fix = v == 1;
    return true;
}

void lz_msg_prompt_encode(lz_wbuf *b, uint16_t type, uint32_t no, const char *text)
{
    lz_wbuf_init(b, type);
    lz_wbuf_u32(b, no);
    lz_wbuf_str(b, text);
}

bool lz_msg_prompt_decode(lz_rbuf *r, uint16_t type, uint32_t *ret_no, char **ret_text)
{
    *ret_no = lz_rbuf_u32(r);
    char *t = lz_rbuf_str(r, type == LZ_MSG_PROMPT ? LZ_MSG_MAX_PROMPT : LZ_MSG_MAX_TEXT);
    if (!t || !lz_rbuf_done(r)) {
        free(t);
        *ret_text = NULL;
        return false;
    }
    *ret_text = t;
    return true;
}
