/* SPDX-License-Identifier: Apache-2.0
 *
 * The router's nftables: the ruleset (forward only what a route sends
 * to slirp, reject the rest at once, masquerade, the never-routed ranges
 * and the host_local set), and additions to host_local.
 */
#include "supervisor/sidecar_internal.h"

#include <stdio.h>
#include <unistd.h>

#include "common/util.h"

#define STRINGIFY_(x) #x
#define LZ_STRINGIFY(x) STRINGIFY_(x)

/* nftables: forward only what the routing table sends out through slirp
 * (the resolver is lz-dns, on the router's own address: accepted in the
 * input chain), reject everything else at once, masquerade, and accept
 * nothing else addressed to the router itself. Before anything goes out
 * through slirp: the never-routed ranges (lz_ipv4_never_routed: loopback,
 * 0.0.0.0/8, Lazaret's own links, multicast, reserved) and the host_local
 * set (the host's own addresses, lz_network_watch adds new ones) are
 * rejected, also inside an allowed prefix such as 0.0.0.0/0. A UDP
 * datagram is rejected as port unreachable, not administratively
 * prohibited: gVisor's netstack turns only the former into an error on the
 * sender's socket (ECONNREFUSED), so a denied DNS query fails at once
 * instead of after the client's timeout (docs/network.md "runsc's network
 * stack").
 *
 * Each group of rejects is preceded by a log rule: the packet goes to the
 * keeper over NFLOG (group DENY_NFLOG_GROUP) with a prefix naming the
 * group, for the denial log. The kernel limits the rate per rule, so a
 * flood of denied packets costs the keeper at most that many wake-ups; the
 * reject after it applies to every packet, logged or not, and counts it in
 * the named counter REJECTED_COUNTER. The keeper reads that counter once a
 * second and counts what its log did not bring as denials not itemised, so
 * totals are exact (attack round a25, S5). The counter is after the log
 * rule on purpose: a packet is logged before it is counted (keeper.c
 * sc_keeper_count). */
#define FROM_SANDBOX "    iifname \"" ROUTER_IF "\" "
#define LOG_DENIED(what)                                                                           \
    " limit rate 20/second burst 40 packets log group " LZ_STRINGIFY(                              \
        DENY_NFLOG_GROUP) " prefix \"" what "\"\n"
#define COUNTED "counter name \"" REJECTED_COUNTER "\" "
#define REJECT_ALL(match)                                                                          \
    FROM_SANDBOX match "meta l4proto tcp " COUNTED "reject with tcp reset\n" FROM_SANDBOX match    \
                       "meta l4proto udp " COUNTED                                                 \
                       "reject with icmp type port-unreachable\n" FROM_SANDBOX match COUNTED       \
                       "reject with icmp type admin-prohibited\n"

/* The learned set (host rules only): addresses the keeper admitted for an
 * allowed name, each with its own timeout. Their packets are marked in
 * prerouting, before the routing decision, so that the ip rule for
 * LEARNED_MARK routes them out through slirp (table LEARNED_TABLE) where
 * the main table would send them to the deny link; TCP to ports 80 and 443
 * is redirected to the name check instead (the sidecar's lz-namecheck,
 * listening on the router's address). Never for a host-local address:
 * the watcher may add one to host_local after the keeper learned it. */
static const char learned_set[] = "  set " LEARNED_SET " {\n"
                                  "    type ipv4_addr; flags timeout;\n"
                                  "  }\n";

/* The connection remembers it was opened to a learned address (its
 * conntrack mark), and each of its packets gets the routing mark from
 * there: a connection outlives its address's element, while a new one to
 * the expired address is rejected. */
static const char learned_mark[] =
    "  chain mark_learned {\n"
    "    type filter hook prerouting priority mangle; policy accept;\n" FROM_SANDBOX
    "ct state new ip daddr @" LEARNED_SET
    " ct mark set " LZ_STRINGIFY(LEARNED_MARK) "\n" FROM_SANDBOX "ct mark " LZ_STRINGIFY(
        LEARNED_MARK) " meta mark set " LZ_STRINGIFY(LEARNED_MARK) "\n"
                                                                   "  }\n";

static const char learned_redirect[] =
    FROM_SANDBOX "ip daddr @" LEARNED_SET " ip daddr != @host_local ip daddr != @never_routed "
                 "tcp dport { 80, 443 } redirect to :" LZ_STRINGIFY(NAMECHECK_PORT) "\n";

/* deny_hosts with prefix-allowed addresses: a name deny_hosts refuses is
 * refused on the connection too, even to an address an allow prefix opens
 * (docs/network.md "The name on the connection"). Never for a host-local
 * or never-routed address: those are rejected at once in forward, and the
 * set holds no never-routed range anyway. */
static const char prefix_allowed_redirect[] =
    FROM_SANDBOX "ip daddr @prefix_allowed ip daddr != @host_local ip daddr != @never_routed "
                 "tcp dport { 80, 443 } redirect to :" LZ_STRINGIFY(NAMECHECK_PORT) "\n";

static const char forward_head[] =
    "  chain forward {\n"
    "    type filter hook forward priority filter; policy drop;\n"
    "    iifname \"" SLIRP_IF "\" oifname \"" ROUTER_IF "\" ct state established,related accept\n";

static const char forward_never_reachable[] =
    FROM_SANDBOX "ip daddr @never_routed" LOG_DENIED("never_routed")
        REJECT_ALL("ip daddr @never_routed ") FROM_SANDBOX
    "ip daddr @host_local" LOG_DENIED("host_local") REJECT_ALL("ip daddr @host_local ");

/* QUIC to a learned address: its name cannot be checked without
 * decrypting, and clients fall back to TCP, where it is. */
static const char forward_quic[] =
    FROM_SANDBOX "ip daddr @" LEARNED_SET " udp dport 443" LOG_DENIED("quic") FROM_SANDBOX
    "ip daddr @" LEARNED_SET " udp dport 443 " COUNTED "reject with icmp type port-unreachable\n";

/* QUIC to a prefix-allowed address when deny_hosts exist: a denied name's
 * SNI would travel in a QUIC Initial no rule reads (attack round a25b, F3);
 * clients fall back to TCP, where the name check reads it. */
static const char forward_quic_prefix_allowed[] =
    FROM_SANDBOX "ip daddr @prefix_allowed udp dport 443" LOG_DENIED("quic") FROM_SANDBOX
    "ip daddr @prefix_allowed udp dport 443 " COUNTED "reject with icmp type port-unreachable\n";

/* DNS to a learned address (an allowed host that also answers DNS — the
 * upstream resolver itself, say): names would leave without lz-dns, also
 * unlisted ones in strict mode (attack round a25, S3). Port 53 over UDP and
 * TCP, and DNS over TLS (853). */
static const char forward_dns_learned[] = FROM_SANDBOX
    "ip daddr @" LEARNED_SET
    " meta l4proto { tcp, udp } th dport { 53, 853 }" LOG_DENIED("dns_learned") FROM_SANDBOX
    "ip daddr @" LEARNED_SET " tcp dport { 53, 853 } " COUNTED
    "reject with tcp reset\n" FROM_SANDBOX "ip daddr @" LEARNED_SET
    " udp dport { 53, 853 } " COUNTED "reject with icmp type port-unreachable\n";

static const char forward_tail[] = FROM_SANDBOX
    "oifname \"" SLIRP_IF "\" accept\n" FROM_SANDBOX LOG_DENIED("policy") REJECT_ALL("") "  }\n";

static const char input_head[] =
    "  chain input {\n"
    "    type filter hook input priority filter; policy drop;\n"
    "    iifname \"lo\" accept\n"
    "    iifname \"" SLIRP_IF "\" ct state established,related accept\n";

/* lz-dns's sockets, made in this namespace (dns.c). */
static const char input_dns[] =
    FROM_SANDBOX "ip daddr " ROUTER_ADDR " meta l4proto { tcp, udp } th dport 53 accept\n";

/* Only what the redirect above sent here: a connection the sandbox makes
 * to the port itself is not accepted. */
static const char input_namecheck[] = FROM_SANDBOX
    "ip daddr " ROUTER_ADDR " tcp dport " LZ_STRINGIFY(NAMECHECK_PORT) " ct status dnat accept\n";

static const char ruleset_tail[] =
    /* --publish: the sandbox answers connections the router's forwarder
     * made (the reply direction of a connection the router originated);
     * a connection the sandbox begins is new, in the original direction,
     * and rejected below. */
    FROM_SANDBOX
    "ip saddr " SANDBOX_ADDR " ct direction reply accept\n" FROM_SANDBOX LOG_DENIED("router")
        REJECT_ALL("") "  }\n"
                       /* What the router itself sends: only to the sandbox's address (the
                        * forwarder's connections, and the resets and ICMP errors of the
                        * forward chain's rejects, which leave through this hook). Nothing
                        * of the router's own reaches slirp4netns, whatever a subverted
                        * forwarder asks for; forwarded traffic does not pass here. */
                       "  chain output {\n"
                       "    type filter hook output priority filter; policy drop;\n"
                       "    oifname \"lo\" accept\n"
                       "    oifname \"" ROUTER_IF "\" ip daddr " SANDBOX_ADDR " accept\n"
                       "  }\n"
                       "  chain postrouting {\n"
                       "    type nat hook postrouting priority srcnat; policy accept;\n"
                       "    oifname \"" SLIRP_IF "\" masquerade\n"
                       "  }\n"
                       "}\n";

/* An interval set; auto-merge lets overlapping elements (127.0.0.0/8 and
 * 127.0.0.1) and later additions of covered ones be accepted. */
static size_t put_set(char *s, size_t cap, const char *name,
                      const lz_ipv4_prefix *(*item)(const void *, size_t), const void *items,
                      size_t count)
{
    size_t o = (size_t) snprintf(s, cap,
                                 "  set %s {\n    type ipv4_addr; flags interval; "
                                 "auto-merge;\n",
                                 name);
    for (size_t i = 0; i < count && o < cap; i++) {
        char b[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(item(items, i), b);
        o += (size_t) snprintf(s + o, cap - o, "%s%s", i ? ", " : "    elements = { ", b);
    }
    if (o < cap)
        o += (size_t) snprintf(s + o, cap - o, "%s  }\n", count ? " }\n" : "");
    return o;
}

/* An interval set of address ranges (a.b.c.d-e.f.g.h). */
static size_t put_range_set(char *s, size_t cap, const char *name, const lz_ipv4_range *r,
                            size_t count)
{
    size_t o = (size_t) snprintf(s, cap, "  set %s {\n    type ipv4_addr; flags interval;\n", name);
    for (size_t i = 0; i < count && o < cap; i++) {
        uint32_t f = r[i].first, l = r[i].last;
        o += (size_t) snprintf(s + o, cap - o, "%s%u.%u.%u.%u-%u.%u.%u.%u",
                               i ? ", " : "    elements = { ", f >> 24, (f >> 16) & 0xff,
                               (f >> 8) & 0xff, f & 0xff, l >> 24, (l >> 16) & 0xff,
                               (l >> 8) & 0xff, l & 0xff);
    }
    if (o < cap)
        o += (size_t) snprintf(s + o, cap - o, "%s  }\n", count ? " }\n" : "");
    return o;
}

static const lz_ipv4_prefix *never_routed_item(const void *items, size_t i)
{
    return &((const lz_ipv4_reserved *) items)[i].prefix;
}

static const lz_ipv4_prefix *list_item(const void *items, size_t i)
{
    return &((const lz_ipv4_prefix *) items)[i];
}

char *sc_build_ruleset(const lz_ipv4_prefix_list *host_local, const sc_ruleset_opts *opts,
                       size_t *len)
{
    size_t cap = 8192 +
                 (LZ_IPV4_PREFIX_BUFSZ + 2) * (LZ_IPV4_NEVER_ROUTED_COUNT + host_local->count) +
                 (2 * LZ_IPV4_PREFIX_BUFSZ + 2) * opts->n_prefix_allowed;
    char *s = lz_xmalloc(cap);
    /* The capacity is computed to fit; the clamps only keep a miscount from
     * writing past the buffer (nft then refuses the cut ruleset). */
#define CLAMP(o) ((o) < cap ? (o) : cap - 1)
#define PUT(text) (o = CLAMP(o + (size_t) snprintf(s + o, cap - o, "%s", text)))
    size_t o = 0;
    PUT("table ip lazaret {\n"
        "  counter " REJECTED_COUNTER " {\n  }\n");
    /* Sets first: the chains below refer to them. */
    o = CLAMP(o + put_set(s + o, cap - o, "never_routed", never_routed_item, lz_ipv4_never_routed,
                          LZ_IPV4_NEVER_ROUTED_COUNT));
    o = CLAMP(
        o + put_set(s + o, cap - o, "host_local", list_item, host_local->items, host_local->count));
    if (opts->n_prefix_allowed)
        o = CLAMP(o + put_range_set(s + o, cap - o, "prefix_allowed", opts->prefix_allowed,
                                    opts->n_prefix_allowed));
    if (opts->host_rules) {
        PUT(learned_set);
        PUT(learned_mark);
    }
    PUT("  chain prerouting {\n"
        "    type nat hook prerouting priority dstnat; policy accept;\n");
    if (opts->host_rules)
        PUT(learned_redirect);
    if (opts->n_prefix_allowed)
        PUT(prefix_allowed_redirect);
    PUT("  }\n");
    PUT(forward_head);
    PUT(forward_never_reachable);
    if (opts->host_rules) {
        PUT(forward_quic);
        PUT(forward_dns_learned);
    }
    if (opts->n_prefix_allowed)
        PUT(forward_quic_prefix_allowed);
    PUT(forward_tail);
    PUT(input_head);
    PUT(input_dns);
    if (opts->host_rules || opts->n_prefix_allowed)
        PUT(input_namecheck);
    PUT(ruleset_tail);
#undef PUT
#undef CLAMP
    *len = o;
    return s;
}

int sc_router_nft(void *arg, char *why, size_t why_len)
{
    nft_args *a = arg;
    char *const argv[] = { (char *) "nft", (char *) "-f", (char *) a->ruleset_path, NULL };
    lz_spawn_options opt = { .merge_stderr = true };
    lz_spawn_output out = { 0 };
    lz_error *e = NULL;
    int status = lz_spawn_capture(a->nft, argv, &opt, &out, &e);
    if (status != 0) {
        while (out.len && out.data[out.len - 1] == '\n')
            out.data[--out.len] = '\0';
        snprintf(why, why_len, "nftables: %s",
                 status < 0 && e ? e->message
                 : out.data      ? out.data
                                 : "failed");
        lz_error_free(e);
        lz_spawn_output_free(&out);
        return -1;
    }
    lz_spawn_output_free(&out);
    return 0;
}

/* Add prefixes to the router's host_local set (the caller is in the router's
 * namespace). */
int sc_nft_add_host_local(const char *nft, const lz_ipv4_prefix *items, size_t count)
{
    size_t cap = 64 + (LZ_IPV4_PREFIX_BUFSZ + 2) * count;
    _cleanup_free_ char *cmd = lz_xmalloc(cap);
    size_t o = (size_t) snprintf(cmd, cap, "add element ip lazaret host_local {");
    for (size_t i = 0; i < count && o < cap; i++) {
        char b[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(&items[i], b);
        o += (size_t) snprintf(cmd + o, cap - o, "%s %s", i ? "," : "", b);
    }
    if (o >= cap - 2)
        return -1;
    snprintf(cmd + o, cap - o, " }");
    char *const argv[] = { (char *) "nft", cmd, NULL };
    lz_spawn_options opt = { .merge_stderr = true };
    lz_spawn_output out = { 0 };
    int status = lz_spawn_capture(nft, argv, &opt, &out, NULL);
    lz_spawn_output_free(&out);
    return status == 0 ? 0 : -1;
}
