/* SPDX-License-Identifier: Apache-2.0
 *
 * The set keeper (issue 25; docs/network.md "Addresses learned for allowed
 * names"): the half of name-based egress that holds privileges. It runs in
 * lz-netwatch (netwatch.c), in the router's network namespace, and owns
 * two nfnetlink sockets made there:
 *
 *   - nftables: the addresses lz-dns learned for an allowed name go into
 *     the router's `learned` set, each with its timeout, before lz-dns may
 *     release the answer (SC_DNS_LEARN / SC_DNS_LEARNED);
 *   - NFLOG group DENY_NFLOG_GROUP: the packets the forward chain rejects
 *     (rate-limited by the kernel), which become records of the denial
 *     log, as do lz-dns's refused queries and lz-namecheck's refused
 *     connections.
 *
 * Raw nfnetlink over libmnl, already a dependency, rather than libnftnl and
 * libnetfilter_log: the keeper sends one message kind (set elements) and
 * reads one (a logged packet), both a few attributes deep, and every byte
 * it reads is checked here with bounds.
 *
 * lz-dns and lz-namecheck parse untrusted bytes: their messages are
 * checked again (a canonical name, the name still allowed by the host
 * rules, each address decided by the prefix policy) before anything enters
 * the set.
 */
#include "supervisor/sidecar_internal.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <poll.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/util.h"

/* nfnetlink messages: a batch of LZ_DNS_MAX_ADDRS elements three times,
 * acknowledgements, logged packets of SC_KEEPER_COPY_RANGE bytes. */
#define SC_KEEPER_BUFSZ 16384

/* ---- the address -> name table ----------------------------------------- */

static void names_put(sc_keeper *k, const uint8_t addr[4], const char *name)
{
    if (!name[0])
        return;
    for (size_t i = 0; i < SC_KEEPER_NAMES; i++) {
        sc_keeper_name *e = &k->names[i];
        if (e->used && memcmp(e->addr, addr, 4) == 0) {
            snprintf(e->name, sizeof(e->name), "%s", name);
            return;
        }
    }
    /* The oldest entry goes: a ring, bounded whatever the sandbox asks. */
    sc_keeper_name *e = &k->names[k->names_next];
    k->names_next = (k->names_next + 1) % SC_KEEPER_NAMES;
    e->used = true;
    memcpy(e->addr, addr, 4);
    snprintf(e->name, sizeof(e->name), "%s", name);
}

static const char *names_get(const sc_keeper *k, const uint8_t addr[4])
{
    for (size_t i = 0; i < SC_KEEPER_NAMES; i++)
        if (k->names[i].used && memcmp(k->names[i].addr, addr, 4) == 0)
            return k->names[i].name;
    return NULL;
}

/* ---- nfnetlink --------------------------------------------------------- */

static struct mnl_socket *nfnl_open(void)
{
    struct mnl_socket *s = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
    if (s && mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0) {
        mnl_socket_close(s);
        return NULL;
    }
    /* No answer within a second is a failure (fail closed), never a hang
     * of lz-dns waiting for LEARNED. */
    struct timeval tv = { .tv_sec = 1 };
    if (s && setsockopt(mnl_socket_get_fd(s), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
        mnl_socket_close(s);
        return NULL;
    }
    return s;
}

static struct nlmsghdr *nfnl_put(char *buf, uint16_t type, uint16_t flags, uint8_t family,
                                 uint16_t res_id, uint32_t seq)
{
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | flags;
    h->nlmsg_seq = seq;
    struct nfgenmsg *g = mnl_nlmsg_put_extra_header(h, sizeof(*g));
    g->nfgen_family = family;
    g->version = NFNETLINK_V0;
    g->res_id = htons(res_id);
    return h;
}

/* Wait for `expected` acknowledgements of messages sent on s (sequence
 * numbers first..first+expected-1). Any error, or silence, fails. */
static int nfnl_acks(struct mnl_socket *s, uint32_t first, unsigned expected)
{
    char buf[SC_KEEPER_BUFSZ];
    unsigned got = 0;
    while (got < expected) {
        ssize_t n = mnl_socket_recvfrom(s, buf, sizeof(buf));
        if (n < 0)
            return -1;
        int len = (int) n;
        for (const struct nlmsghdr *h = (const struct nlmsghdr *) buf; mnl_nlmsg_ok(h, len);
             h = mnl_nlmsg_next(h, &len)) {
            if (h->nlmsg_seq < first || h->nlmsg_seq >= first + expected)
                continue; /* a late answer to an earlier, failed exchange */
            if (h->nlmsg_type != NLMSG_ERROR ||
                h->nlmsg_len < mnl_nlmsg_size(sizeof(struct nlmsgerr))) {
                errno = EPROTO;
                return -1;
            }
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
            if (e->error != 0) {
                errno = -e->error;
                return -1;
            }
            got++;
        }
    }
    return 0;
}

/* One set-element message: NEWSETELEM (with the timeout) or DELSETELEM
 * for addrs, in the router's `learned` set. */
static void put_elems(struct mnl_nlmsg_batch *b, uint16_t msg, uint32_t seq, uint8_t addrs[][4],
                      size_t n, uint32_t timeout_s)
{
    struct nlmsghdr *h =
        nfnl_put(mnl_nlmsg_batch_current(b), (NFNL_SUBSYS_NFTABLES << 8) | msg,
                 NLM_F_ACK | (msg == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0), NFPROTO_IPV4, 0, seq);
    mnl_attr_put_strz(h, NFTA_SET_ELEM_LIST_TABLE, "lazaret");
    mnl_attr_put_strz(h, NFTA_SET_ELEM_LIST_SET, LEARNED_SET);
    struct nlattr *list = mnl_attr_nest_start(h, NFTA_SET_ELEM_LIST_ELEMENTS);
    for (size_t i = 0; i < n; i++) {
        struct nlattr *el = mnl_attr_nest_start(h, NFTA_LIST_ELEM);
        struct nlattr *key = mnl_attr_nest_start(h, NFTA_SET_ELEM_KEY);
        mnl_attr_put(h, NFTA_DATA_VALUE, 4, addrs[i]);
        mnl_attr_nest_end(h, key);
        if (msg == NFT_MSG_NEWSETELEM)
            mnl_attr_put_u64(h, NFTA_SET_ELEM_TIMEOUT, htobe64((uint64_t) timeout_s * 1000));
        mnl_attr_nest_end(h, el);
    }
    mnl_attr_nest_end(h, list);
    mnl_nlmsg_batch_next(b);
}

/* Put addrs (distinct) into the learned set with a fresh timeout, in one
 * nftables transaction: add (creates a missing element), delete, add
 * again. The kernel commits the batch at once or not at all, so a present
 * element is never absent for a packet in between, and it comes out with
 * the new timeout whatever the kernel's handling of an add of a present
 * element (before Linux 6.10 such an add kept the old expiry). */
int sc_keeper_set_add(sc_keeper *k, uint8_t addrs[][4], size_t n, uint32_t timeout_s)
{
    if (n == 0)
        return 0;
    static char buf[2 * SC_KEEPER_BUFSZ];
    struct mnl_nlmsg_batch *b = mnl_nlmsg_batch_start(buf, sizeof(buf));
    if (!b)
        return -1;
    uint32_t first = ++k->seq;
    nfnl_put(mnl_nlmsg_batch_current(b), NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES,
             first);
    mnl_nlmsg_batch_next(b);
    uint32_t elems = ++k->seq;
    put_elems(b, NFT_MSG_NEWSETELEM, elems, addrs, n, timeout_s);
    put_elems(b, NFT_MSG_DELSETELEM, ++k->seq, addrs, n, 0);
    put_elems(b, NFT_MSG_NEWSETELEM, ++k->seq, addrs, n, timeout_s);
    nfnl_put(mnl_nlmsg_batch_current(b), NFNL_MSG_BATCH_END, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES,
             ++k->seq);
    mnl_nlmsg_batch_next(b);
    ssize_t sent = mnl_socket_sendto(k->nft, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b));
    mnl_nlmsg_batch_stop(b);
    if (sent < 0)
        return -1;
    return nfnl_acks(k->nft, elems, 3);
}

static int nflog_config(struct mnl_socket *s, uint32_t seq, uint8_t cmd, bool mode)
{
    char buf[256];
    struct nlmsghdr *h = nfnl_put(buf, (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG, NLM_F_ACK,
                                  AF_INET, DENY_NFLOG_GROUP, seq);
    if (mode) {
        /* The headers are enough: addresses and ports. */
        struct nfulnl_msg_config_mode m = { .copy_range = htonl(SC_KEEPER_COPY_RANGE),
                                            .copy_mode = NFULNL_COPY_PACKET };
        mnl_attr_put(h, NFULA_CFG_MODE, sizeof(m), &m);
        /* Each packet at once, not batched until a buffer fills or a
         * second passes: the name of an address is looked up when the
         * packet arrives, and a keeper ended with the Domain would lose
         * what waited in the kernel. */
        mnl_attr_put_u32(h, NFULA_CFG_QTHRESH, htonl(1));
        mnl_attr_put_u32(h, NFULA_CFG_TIMEOUT, htonl(0));
    } else {
        struct nfulnl_msg_config_cmd c = { .command = cmd };
        mnl_attr_put(h, NFULA_CFG_CMD, sizeof(c), &c);
    }
    if (mnl_socket_sendto(s, h, h->nlmsg_len) < 0)
        return -1;
    return nfnl_acks(s, seq, 1);
}

int sc_keeper_open(sc_keeper *k, const lz_resolved_config *cfg, lz_denial_log *log, char *why,
                   size_t why_len)
{
    memset(k, 0, sizeof(*k));
    k->cfg = cfg;
    k->log = log;
    k->seq = (uint32_t) time(NULL);
    k->nft = nfnl_open();
    if (!k->nft) {
        snprintf(why, why_len, "cannot open an nftables socket: %s", strerror(errno));
        return -1;
    }
    k->nflog = nfnl_open();
    if (!k->nflog || nflog_config(k->nflog, ++k->seq, NFULNL_CFG_CMD_BIND, false) < 0 ||
        nflog_config(k->nflog, ++k->seq, 0, true) < 0) {
        snprintf(why, why_len, "cannot read the router's rejected packets (NFLOG group %d): %s",
                 DENY_NFLOG_GROUP, strerror(errno));
        sc_keeper_close(k);
        return -1;
    }
    /* Logged packets arrive unasked: no timeout on their reads (poll says
     * when), and a queue large enough for the kernel's rate limit. */
    struct timeval none = { 0 };
    int size = 1 << 18;
    setsockopt(mnl_socket_get_fd(k->nflog), SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
    setsockopt(mnl_socket_get_fd(k->nflog), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    return 0;
}

void sc_keeper_close(sc_keeper *k)
{
    if (k->nft)
        mnl_socket_close(k->nft);
    if (k->nflog)
        mnl_socket_close(k->nflog);
    k->nft = k->nflog = NULL;
}

int sc_keeper_nflog_fd(const sc_keeper *k)
{
    return mnl_socket_get_fd(k->nflog);
}

/* ---- messages from lz-dns and lz-namecheck ------------------------------ */

static bool not_a_name(const sc_dns_msg *m)
{
    return m->type == SC_DNS_DENIED && m->why == SC_DNS_WHY_NOT_A_NAME;
}

/* A message of the right size whose name is NUL-terminated, canonical or
 * empty (or the log form of a question that is no name), and whose
 * address count is in bounds. */
static bool msg_valid(const sc_dns_msg *m)
{
    if (m->n_addrs > LZ_DNS_MAX_ADDRS || !memchr(m->name, '\0', sizeof(m->name)))
        return false;
    if (!m->name[0])
        return true;
    if (not_a_name(m)) {
        /* lz-dns's log form of a question that is no host name (an SRV
         * name, an underscore, a quote): lowercase letters, digits, '.',
         * '-', '_' and '?' for every other byte. Recorded, never decided
         * on (attack round a25, S4: these denials went unrecorded). */
        for (const char *c = m->name; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || strchr(".-_?", *c)))
                return false;
        return true;
    }
    char canon[LZ_HOST_NAME_MAX + 1];
    size_t len = strlen(m->name);
    return lz_host_name_canonical(m->name, len, canon) && strcmp(canon, m->name) == 0;
}

static bool host_local(const sc_keeper *k, const lz_ipv4_prefix_list *known, const uint8_t a[4])
{
    (void) k;
    lz_ipv4_prefix p = lz_ipv4_prefix_make(a, 32);
    return lz_ipv4_list_covers(known, &p);
}

void sc_keeper_learn(sc_keeper *k, const lz_ipv4_prefix_list *known, const sc_dns_msg *in,
                     sc_dns_msg *out)
{
    memset(out, 0, sizeof(*out));
    out->type = SC_DNS_LEARNED;
    out->serial = in->serial;
    if (!msg_valid(in) || !in->name[0])
        return;
    /* lz-dns asks only for allowed names; one that is not (a subverted
     * lz-dns) learns nothing. */
    if (lz_host_decide(&k->cfg->allow_hosts, &k->cfg->deny_hosts, in->name, NULL) !=
        LZ_HOST_ALLOWED)
        return;
    uint32_t timeout = in->timeout_s < SC_LEARN_TTL_MIN   ? SC_LEARN_TTL_MIN
                       : in->timeout_s > SC_LEARN_TTL_MAX ? SC_LEARN_TTL_MAX
                                                          : in->timeout_s;
    uint8_t add[LZ_DNS_MAX_ADDRS][4];
    size_t n_add = 0;
    uint32_t want = 0;
    for (size_t i = 0; i < in->n_addrs; i++) {
        const uint8_t *a = in->addrs[i];
        names_put(k, a, in->name);
        if (host_local(k, known, a))
            continue;
        lz_prefix_verdict v = lz_ipv4_policy_decide(&k->cfg->allow, &k->cfg->deny, a, NULL, NULL);
        if (v == LZ_PREFIX_ALLOWED) {
            /* The routes already let it through: no element. */
            out->admitted |= 1u << i;
        } else if (v == LZ_PREFIX_DEFAULT) {
            want |= 1u << i;
            bool dup = false;
            for (size_t j = 0; j < n_add && !dup; j++)
                dup = memcmp(add[j], a, 4) == 0;
            if (!dup)
                memcpy(add[n_add++], a, 4);
        }
    }
    /* A failed add admits none of them. */
    if (sc_keeper_set_add(k, add, n_add, timeout) == 0)
        out->admitted |= want;
}

/* ---- denials ----------------------------------------------------------- */

/* The configuration line that would allow one address. */
static void allow_egress_line(char *buf, size_t size, const uint8_t addr[4])
{
    snprintf(buf, size, "allow_egress = [\"%u.%u.%u.%u/32\"]", addr[0], addr[1], addr[2], addr[3]);
}

static void record(sc_keeper *k, const lz_denial *d)
{
    if (k->log)
        lz_denial_log_record(k->log, d);
}

static const char *dns_why(uint8_t why)
{
    switch (why) {
    case SC_DNS_WHY_UNLISTED:
        return "not in allow_hosts (strict DNS)";
    case SC_DNS_WHY_DENIED_HOST:
        return "deny_hosts";
    case SC_DNS_WHY_NOT_A_NAME:
        return "not a host name";
    case SC_DNS_WHY_TYPE:
        return "record type not answered";
    case SC_DNS_WHY_ADDRESSES:
        return "no address of the answer may be reached (prefix rules)";
    default:
        return "refused";
    }
}

static const char *name_why(uint8_t why)
{
    switch (why) {
    case SC_NAME_WHY_NOT_ALLOWED:
        return "name check: not in allow_hosts";
    case SC_NAME_WHY_NO_NAME:
        return "name check: no SNI / Host";
    case SC_NAME_WHY_ENCRYPTED:
        return "name check: encrypted ClientHello";
    case SC_NAME_WHY_ADDRESS:
        return "name check: an address the host rules may not open (a prefix rule or this "
               "host's own)";
    case SC_NAME_WHY_RETRY_NAME:
        return "name check: the name changed after a HelloRetryRequest";
    case SC_NAME_WHY_SERVER_HELLO:
        return "name check: the server did not answer the ClientHello with one ServerHello "
               "(a second HelloRetryRequest, or not TLS)";
    default:
        return "name check: not TLS / HTTP, too large or too slow";
    }
}

/* The deny_hosts pattern that decides name, as "deny_hosts \"p\"" in buf,
 * or NULL when the host rules do not deny it. */
static const char *deny_rule(const sc_keeper *k, const char *name, char *buf, size_t len)
{
    const lz_host_pattern *p = NULL;
    if (!name || !name[0] ||
        lz_host_decide(&k->cfg->allow_hosts, &k->cfg->deny_hosts, name, &p) != LZ_HOST_DENIED || !p)
        return NULL;
    char pat[LZ_HOST_NAME_MAX + 3];
    lz_host_pattern_format(p, pat);
    snprintf(buf, len, "deny_hosts \"%s\"", pat);
    return buf;
}

void sc_keeper_denied(sc_keeper *k, const sc_dns_msg *m)
{
    /* The peer's count of refusals it could not report: a number only
     * (what a subverted peer could inflate is a count in a log). */
    if (m->unsent && k->log)
        lz_denial_log_count(k->log, m->unsent);
    if (!msg_valid(m) || (m->type != SC_DNS_DENIED && m->type != SC_NAME_DENIED))
        return;
    char rule[LZ_HOST_NAME_MAX + 32], allow[LZ_HOST_NAME_MAX + 32];
    lz_denial d = { .name = m->name[0] ? m->name : NULL };
    const char *denied = not_a_name(m) ? NULL : deny_rule(k, m->name, rule, sizeof(rule));
    bool can_allow = m->name[0] && !denied;
    if (m->type == SC_DNS_DENIED) {
        d.kind = LZ_DENIAL_DNS;
        d.qtype = lz_dns_type_name(m->qtype);
        d.rule = denied ? denied : dns_why(m->why);
        can_allow = can_allow && m->why == SC_DNS_WHY_UNLISTED;
        if (m->why == SC_DNS_WHY_ADDRESSES && m->n_addrs) {
            d.has_addr = true;
            memcpy(d.addr, m->addrs[0], 4);
            allow_egress_line(allow, sizeof(allow), d.addr);
            d.allow = allow;
        }
    } else {
        d.kind = LZ_DENIAL_NAME;
        d.rule = denied ? denied : name_why(m->why);
        d.port = m->port;
        if (m->n_addrs) {
            d.has_addr = true;
            memcpy(d.addr, m->addrs[0], 4);
        }
        can_allow = can_allow && m->why == SC_NAME_WHY_NOT_ALLOWED;
    }
    if (can_allow) {
        snprintf(allow, sizeof(allow), "allow_hosts = [\"%s\"]", m->name);
        d.allow = allow;
    }
    record(k, &d);
}

/* One logged packet: its IPv4 header and, for TCP and UDP, the
 * destination port, read with bounds from the bytes the kernel copied. */
static void packet_denied(sc_keeper *k, const char *prefix, const uint8_t *p, size_t len)
{
    if (len < 20 || (p[0] >> 4) != 4)
        return;
    size_t ihl = (size_t) (p[0] & 0x0f) * 4;
    if (ihl < 20 || ihl > len)
        return;
    lz_denial d = { .has_addr = true, .proto = p[9] };
    memcpy(d.addr, p + 16, 4);
    bool first_fragment = ((p[6] & 0x1f) | p[7]) == 0;
    if ((d.proto == IPPROTO_TCP || d.proto == IPPROTO_UDP) && first_fragment && len >= ihl + 4) {
        d.kind = d.proto == IPPROTO_TCP ? LZ_DENIAL_TCP : LZ_DENIAL_UDP;
        d.port = (uint16_t) (p[ihl + 2] << 8 | p[ihl + 3]);
    } else {
        d.kind = d.proto == IPPROTO_TCP   ? LZ_DENIAL_TCP
                 : d.proto == IPPROTO_UDP ? LZ_DENIAL_UDP
                                          : LZ_DENIAL_OTHER;
    }
    d.name = names_get(k, d.addr);
    char rule[96], allow[LZ_HOST_NAME_MAX + 32];
    const lz_ipv4_prefix *by = NULL;
    const lz_ipv4_reserved *reserved = NULL;
    lz_prefix_verdict v =
        lz_ipv4_policy_decide(&k->cfg->allow, &k->cfg->deny, d.addr, &by, &reserved);
    if (strcmp(prefix, "router") == 0) {
        d.rule = "the sidecar's router: it serves only DNS to the sandbox";
    } else if (strcmp(prefix, "never_routed") == 0 || v == LZ_PREFIX_NEVER_ROUTED) {
        snprintf(rule, sizeof(rule), "never routed: %s",
                 reserved ? reserved->what : "a reserved range");
        d.rule = rule;
    } else if (strcmp(prefix, "host_local") == 0) {
        d.rule = "never routed: an address of this host";
    } else if (strcmp(prefix, "quic") == 0) {
        d.rule = "QUIC (UDP 443) to an address checked by name: the name cannot be read";
    } else if (strcmp(prefix, "dns_learned") == 0) {
        d.rule = "DNS to a learned address: names are asked only through the sidecar";
    } else if (v == LZ_PREFIX_DENIED && by) {
        char b[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(by, b);
        snprintf(rule, sizeof(rule), "deny prefix %s", b);
        d.rule = rule;
        allow_egress_line(allow, sizeof(allow), d.addr);
        d.allow = allow;
    } else {
        d.rule = d.name ? "default deny (not learned, or expired)" : "default deny";
        if (d.name)
            snprintf(allow, sizeof(allow), "allow_hosts = [\"%s\"]", d.name);
        else
            allow_egress_line(allow, sizeof(allow), d.addr);
        d.allow = allow;
    }
    k->packets_itemised++;
    record(k, &d);
}

static int nflog_attr(const struct nlattr *a, void *data)
{
    const struct nlattr **tb = data;
    uint16_t t = mnl_attr_get_type(a);
    if (mnl_attr_type_valid(a, NFULA_MAX) > 0)
        tb[t] = a;
    return MNL_CB_OK;
}

static int nflog_msg(const struct nlmsghdr *h, void *data)
{
    sc_keeper *k = data;
    if (h->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
        return MNL_CB_OK;
    const struct nlattr *tb[NFULA_MAX + 1] = { 0 };
    if (mnl_attr_parse(h, sizeof(struct nfgenmsg), nflog_attr, tb) < 0 || !tb[NFULA_PAYLOAD])
        return MNL_CB_OK;
    char prefix[32] = "";
    if (tb[NFULA_PREFIX]) {
        size_t n = mnl_attr_get_payload_len(tb[NFULA_PREFIX]);
        if (n >= sizeof(prefix))
            n = sizeof(prefix) - 1;
        memcpy(prefix, mnl_attr_get_payload(tb[NFULA_PREFIX]), n);
        prefix[n] = '\0';
    }
    packet_denied(k, prefix, mnl_attr_get_payload(tb[NFULA_PAYLOAD]),
                  mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]));
    return MNL_CB_OK;
}

int sc_keeper_nflog_read(sc_keeper *k)
{
    static char buf[SC_KEEPER_BUFSZ];
    ssize_t n = recv(mnl_socket_get_fd(k->nflog), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0)
        /* Overflow: the kernel dropped log messages, not packets' verdicts. */
        return errno == EAGAIN || errno == EINTR || errno == ENOBUFS ? 0 : -1;
    if (n == 0)
        return -1;
    mnl_cb_run(buf, (size_t) n, 0, 0, nflog_msg, k);
    return 0;
}

/* ---- exact totals ------------------------------------------------------ */

static int counter_attr(const struct nlattr *a, void *data)
{
    const struct nlattr **tb = data;
    if (mnl_attr_type_valid(a, NFTA_OBJ_MAX) > 0)
        tb[mnl_attr_get_type(a)] = a;
    return MNL_CB_OK;
}

static int counter_data_attr(const struct nlattr *a, void *data)
{
    const struct nlattr **tb = data;
    if (mnl_attr_type_valid(a, NFTA_COUNTER_MAX) > 0)
        tb[mnl_attr_get_type(a)] = a;
    return MNL_CB_OK;
}

static bool nflog_pending(const sc_keeper *k)
{
    struct pollfd p = { .fd = mnl_socket_get_fd(k->nflog), .events = POLLIN };
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* The packets of the router's named counter `rejected` (nftables.c): one
 * GETOBJ, its NEWOBJ answer. */
static int rejected_packets(sc_keeper *k, uint64_t *ret)
{
    char buf[SC_KEEPER_BUFSZ];
    uint32_t seq = ++k->seq;
    struct nlmsghdr *h =
        nfnl_put(buf, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETOBJ, 0, NFPROTO_IPV4, 0, seq);
    mnl_attr_put_strz(h, NFTA_OBJ_TABLE, "lazaret");
    mnl_attr_put_strz(h, NFTA_OBJ_NAME, REJECTED_COUNTER);
    mnl_attr_put_u32(h, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));
    if (mnl_socket_sendto(k->nft, h, h->nlmsg_len) < 0)
        return -1;
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(k->nft, buf, sizeof(buf));
        if (n < 0)
            return -1;
        int len = (int) n;
        for (const struct nlmsghdr *r = (const struct nlmsghdr *) buf; mnl_nlmsg_ok(r, len);
             r = mnl_nlmsg_next(r, &len)) {
            if (r->nlmsg_seq != seq)
                continue; /* a late answer to an earlier, failed exchange */
            if (r->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = mnl_nlmsg_get_payload(r);
                errno = r->nlmsg_len >= mnl_nlmsg_size(sizeof(*e)) && e->error ? -e->error : EPROTO;
                return -1;
            }
            if (r->nlmsg_type != ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWOBJ))
                continue;
            const struct nlattr *tb[NFTA_OBJ_MAX + 1] = { 0 };
            const struct nlattr *cb[NFTA_COUNTER_MAX + 1] = { 0 };
            if (mnl_attr_parse(r, sizeof(struct nfgenmsg), counter_attr, tb) < 0 ||
                !tb[NFTA_OBJ_DATA] ||
                mnl_attr_parse_nested(tb[NFTA_OBJ_DATA], counter_data_attr, cb) < 0 ||
                !cb[NFTA_COUNTER_PACKETS] ||
                mnl_attr_validate(cb[NFTA_COUNTER_PACKETS], MNL_TYPE_U64) < 0) {
                errno = EPROTO;
                return -1;
            }
            *ret = be64toh(mnl_attr_get_u64(cb[NFTA_COUNTER_PACKETS]));
            return 0;
        }
    }
}

int sc_keeper_count(sc_keeper *k)
{
    uint64_t rejected = 0;
    if (rejected_packets(k, &rejected) < 0)
        return -1;
    /* The log rule comes before the counting reject (nftables.c), so every
     * packet counted above was logged (or kept back by the limit, or lost
     * by a full queue) before it was counted: reading the queue now brings
     * the keeper's own count level with the counter's, or past it for
     * packets rejected since. What is still missing then was never
     * itemised. Bounded: a flood does not keep the keeper here. */
    for (int i = 0; i < 4096 && nflog_pending(k); i++)
        if (sc_keeper_nflog_read(k) < 0)
            break;
    uint64_t seen = k->packets_itemised + k->packets_uncounted_reported;
    if (rejected > seen) {
        if (k->log)
            lz_denial_log_count(k->log, rejected - seen);
        k->packets_uncounted_reported += rejected - seen;
    }
    return 0;
}
