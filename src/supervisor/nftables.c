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

/* nftables: forward only what the routing table sends out through slirp
 * (the resolver is lz-dns, on the router's own address), reject everything else at once,
 * masquerade, and accept nothing addressed to the router itself. Before anything goes out through
 * slirp: the never-routed ranges (lz_ipv4_never_routed: loopback, 0.0.0.0/8, Lazaret's own links,
 * multicast, reserved) and the host_local set (the host's own addresses, lz_network_watch adds new
 * ones) are rejected, also inside an allowed prefix such as 0.0.0.0/0. A UDP datagram is rejected
 * as port unreachable, not administratively prohibited: gVisor's netstack turns only the former
 * into an error on the sender's socket (ECONNREFUSED), so a denied DNS query fails at once instead
 * of after the client's timeout (docs/network.md "runsc's network stack"). */
static const char ruleset_head[] = "table ip lazaret {\n"
                                   "  chain prerouting {\n"
                                   "    type nat hook prerouting priority dstnat; policy accept;\n"
                                   "  }\n";

static const char ruleset_tail[] =
    "  chain forward {\n"
    "    type filter hook forward priority filter; policy drop;\n"
    "    iifname \"" SLIRP_IF "\" oifname \"" ROUTER_IF "\" ct state established,related accept\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @never_routed meta l4proto tcp reject with tcp reset\n"
    "    iifname \"" ROUTER_IF
    "\" ip daddr @never_routed meta l4proto udp reject with icmp type port-unreachable\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @never_routed reject with icmp type admin-prohibited\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @host_local meta l4proto tcp reject with tcp reset\n"
    "    iifname \"" ROUTER_IF
    "\" ip daddr @host_local meta l4proto udp reject with icmp type port-unreachable\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @host_local reject with icmp type admin-prohibited\n"
    "    iifname \"" ROUTER_IF "\" oifname \"" SLIRP_IF "\" accept\n"
    "    iifname \"" ROUTER_IF "\" meta l4proto tcp reject with tcp reset\n"
    "    iifname \"" ROUTER_IF "\" meta l4proto udp reject with icmp type port-unreachable\n"
    "    iifname \"" ROUTER_IF "\" reject with icmp type admin-prohibited\n"
    "  }\n"
    "  chain input {\n"
    "    type filter hook input priority filter; policy drop;\n"
    "    iifname \"lo\" accept\n"
    "    iifname \"" SLIRP_IF "\" ct state established,related accept\n"
    /* --publish: the sandbox answers connections the router's forwarder
     * made (the reply direction of a connection the router originated);
     * a connection the sandbox begins is new, in the original direction,
     * and rejected below. */
    "    iifname \"" ROUTER_IF "\" ip saddr " SANDBOX_ADDR " ct direction reply accept\n"
    /* The sandbox's resolver: lz-dns's sockets (supervisor/dns.c). */
    "    iifname \"" ROUTER_IF "\" ip daddr " ROUTER_ADDR
    " meta l4proto { tcp, udp } th dport 53 accept\n"
    "    iifname \"" ROUTER_IF "\" meta l4proto tcp reject with tcp reset\n"
    "    iifname \"" ROUTER_IF "\" meta l4proto udp reject with icmp type port-unreachable\n"
    "    iifname \"" ROUTER_IF "\" reject with icmp type admin-prohibited\n"
    "  }\n"
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

static const lz_ipv4_prefix *never_routed_item(const void *items, size_t i)
{
    return &((const lz_ipv4_reserved *) items)[i].prefix;
}

static const lz_ipv4_prefix *list_item(const void *items, size_t i)
{
    return &((const lz_ipv4_prefix *) items)[i];
}

char *sc_build_ruleset(const lz_ipv4_prefix_list *host_local, size_t *len)
{
    size_t cap = sizeof(ruleset_head) + sizeof(ruleset_tail) + 256 +
                 (LZ_IPV4_PREFIX_BUFSZ + 2) * (LZ_IPV4_NEVER_ROUTED_COUNT + host_local->count);
    char *s = lz_xmalloc(cap);
    /* The capacity is computed to fit; the clamps only keep a miscount from
     * writing past the buffer (nft then refuses the cut ruleset). */
#define CLAMP(o) ((o) < cap ? (o) : cap - 1)
    size_t o = CLAMP((size_t) snprintf(s, cap, "%s", ruleset_head));
    o = CLAMP(o + put_set(s + o, cap - o, "never_routed", never_routed_item, lz_ipv4_never_routed,
                          LZ_IPV4_NEVER_ROUTED_COUNT));
    o = CLAMP(
        o + put_set(s + o, cap - o, "host_local", list_item, host_local->items, host_local->count));
    o = CLAMP(o + (size_t) snprintf(s + o, cap - o, "%s", ruleset_tail));
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
