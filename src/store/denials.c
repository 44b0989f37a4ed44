/* SPDX-License-Identifier: Apache-2.0
 *
 * The Domain's denial log: the writer (the sidecar's keeper) and the
 * readers (`lazaret log`, `lazaret status`). The contract is in denials.h;
 * docs/network.md "Every denial is visible" is the user's side.
 *
 * Why the writer is shaped as it is:
 *  - A line costs a token of a bucket (LZ_DENIALS_RATE per second, burst
 *    LZ_DENIALS_BURST): a sandbox that floods refused queries makes at most
 *    that many lines, and every record past it costs a hash and a counter.
 *  - Identical records (kind, address, port, protocol, name, query type)
 *    within FOLD_WINDOW_MS of a written one are counted in a slot and
 *    written once as a record with "count" when the window ends (at the
 *    tick, at close, or when another record needs the slot).
 *  - Each line is one write(2) of the whole line on an O_APPEND descriptor,
 *    so a reader never sees two records interleaved; a write that fails is
 *    counted as dropped, never retried (recording must not block the
 *    sidecar). After a short write the next line begins with a newline, so
 *    only the torn record is lost.
 *  - No file is ever larger than the cap: a line that would cross it
 *    rotates the file first (renameat in the logs directory, replacing the
 *    one older file), and a line larger than the cap is dropped.
 */
#include "store/denials.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"

#define LZ_DENIALS_DEFAULT_CAP ((size_t) 1 << 20)
#define LZ_DENIALS_RATE 20   /* lines per second, sustained */
#define LZ_DENIALS_BURST 100 /* lines at once */
#define FOLD_WINDOW_MS 1000
#define FOLD_SLOTS 32
/* A text field longer than this is cut (host names are at most 253 bytes;
 * rules and allow lines quote one name). */
#define FIELD_MAX 320
/* How much of a file a reader reads: the writer's files are capped (1 MiB
 * by default); a larger file (a bigger cap, or not ours) is read from its
 * last READ_MAX bytes. */
#define READ_MAX ((size_t) 16 << 20)
/* How much of a text field a terminal line shows. */
#define SHOW_MAX 256

typedef struct fold_slot {
    bool used;
    uint64_t hash;
    lz_denial d;             /* strings owned */
    int64_t window_start_ms; /* monotonic */
    int64_t last_time_ms;    /* realtime of the newest folded record */
    uint64_t pending;        /* identical records not yet written */
} fold_slot;

struct lz_denial_log {
    int dirfd;
    int fd;
    size_t cap;
    int64_t tokens_milli; /* the bucket, in thousandths of a line */
    int64_t refill_ms;
    uint64_t dropped;
    int64_t summary_ms; /* when the last dropped-count record was written */
    bool torn;          /* the last write was short: begin the next with \n */
    fold_slot slots[FOLD_SLOTS];
};

static int64_t now_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *kind_name(lz_denial_kind k)
{
    switch (k) {
    case LZ_DENIAL_DNS:
        return "dns";
    case LZ_DENIAL_TCP:
        return "tcp";
    case LZ_DENIAL_UDP:
        return "udp";
    case LZ_DENIAL_NAME:
        return "name";
    case LZ_DENIAL_OTHER:
    default:
        break;
    }
    return "other";
}

/* ---- the writer -------------------------------------------------------- */

static int open_current(int dirfd)
{
    int fd = openat(dirfd, LZ_DENIALS_FILE,
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if ((st.st_mode & 07777) != 0600)
        lz_best_effort(fchmod(fd, 0600));
    return fd;
}

int lz_denial_log_open(int logs_dirfd, size_t cap_bytes, lz_denial_log **ret, lz_error **err)
{
    int dirfd = fcntl(logs_dirfd, F_DUPFD_CLOEXEC, 3);
    if (dirfd < 0)
        return lz_error_set(err, errno,
                            "cannot use the Domain's logs directory for the denial log");
    int fd = open_current(dirfd);
    if (fd < 0) {
        int e = errno;
        close(dirfd);
        lz_error_set(err, e, "cannot open the denial log %s in the Domain's logs directory",
                     LZ_DENIALS_FILE);
        return lz_error_hint(err, "run 'lazaret state verify' to check the Domain Root");
    }
    lz_denial_log *log = lz_xcalloc(1, sizeof *log);
    log->dirfd = dirfd;
    log->fd = fd;
    log->cap = cap_bytes ? cap_bytes : LZ_DENIALS_DEFAULT_CAP;
    log->tokens_milli = (int64_t) LZ_DENIALS_BURST * 1000;
    log->refill_ms = now_ms(CLOCK_MONOTONIC);
    *ret = log;
    return 0;
}

static bool take_token(lz_denial_log *log)
{
    int64_t now = now_ms(CLOCK_MONOTONIC);
    int64_t full = (int64_t) LZ_DENIALS_BURST * 1000;
    if (now > log->refill_ms) {
        int64_t gained = (now - log->refill_ms) * LZ_DENIALS_RATE;
        log->tokens_milli = gained >= full - log->tokens_milli ? full : log->tokens_milli + gained;
        log->refill_ms = now;
    }
    if (log->tokens_milli < 1000)
        return false;
    log->tokens_milli -= 1000;
    return true;
}

/* The current file is replaced by a new one; the old one becomes the one
 * older file (replacing the previous). */
static bool rotate(lz_denial_log *log)
{
    if (renameat(log->dirfd, LZ_DENIALS_FILE, log->dirfd, LZ_DENIALS_OLD_FILE) < 0)
        return false;
    int fd = open_current(log->dirfd);
    if (fd < 0)
        return false;
    close(log->fd);
    log->fd = fd;
    log->torn = false;
    return true;
}

/* Write one whole line (ending in \n), or count `weight` records dropped
 * and return false. */
static bool write_line(lz_denial_log *log, const char *line, size_t len, uint64_t weight)
{
    size_t need = len + (log->torn ? 1 : 0);
    struct stat st;
    if (need > log->cap || fstat(log->fd, &st) < 0) {
        log->dropped += weight;
        return false;
    }
    if ((size_t) st.st_size + need > log->cap && st.st_size > 0) {
        if (!rotate(log)) {
            log->dropped += weight;
            return false;
        }
        need = len;
    }
    const char *p = line;
    _cleanup_free_ char *joined = NULL;
    if (log->torn) {
        joined = lz_xasprintf("\n%s", line);
        p = joined;
    }
    ssize_t n = write(log->fd, p, need);
    if (n == (ssize_t) need) {
        log->torn = false;
        return true;
    }
    if (n > 0)
        log->torn = true;
    log->dropped += weight;
    return false;
}

static void format_time(int64_t ms, char buf[32])
{
    time_t s = (time_t) (ms / 1000);
    struct tm tm;
    size_t n = ms >= 0 && gmtime_r(&s, &tm) ? strftime(buf, 24, "%Y-%m-%dT%H:%M:%S", &tm) : 0;
    if (n == 0) {
        snprintf(buf, 32, "1970-01-01T00:00:00.000Z");
        return;
    }
    snprintf(buf + n, 32 - n, ".%03dZ", (int) (ms % 1000));
}

/* A text field as a JSON string: cut at FIELD_MAX bytes (on a UTF-8
 * boundary), and invalid UTF-8 (which JSON cannot hold) escaped as \xNN. */
static json_t *text_field(const char *s)
{
    if (!s)
        return json_null();
    size_t n = strnlen(s, FIELD_MAX + 1);
    bool cut = n > FIELD_MAX;
    if (cut)
        n = FIELD_MAX;
    while (cut && n > 0 && ((unsigned char) s[n] & 0xC0) == 0x80)
        n--;
    _cleanup_free_ char *copy = lz_xstrndup(s, n);
    if (!lz_utf8_valid(copy, n)) {
        _cleanup_free_ char *safe = lz_text_printable(copy);
        return json_string(safe);
    }
    if (cut) {
        char *more = lz_xasprintf("%s...", copy);
        free(copy);
        copy = more;
    }
    return json_string(copy);
}

static void write_record(lz_denial_log *log, const lz_denial *d, int64_t time_ms, uint64_t count)
{
    char t[32];
    format_time(time_ms, t);
    json_t *o = json_object();
    json_object_set_new(o, "time", json_string(t));
    json_object_set_new(o, "kind", json_string(kind_name(d->kind)));
    char addr[16];
    if (d->has_addr) {
        snprintf(addr, sizeof addr, "%u.%u.%u.%u", d->addr[0], d->addr[1], d->addr[2], d->addr[3]);
        json_object_set_new(o, "addr", json_string(addr));
    } else {
        json_object_set_new(o, "addr", json_null());
    }
    json_object_set_new(o, "port", d->port ? json_integer(d->port) : json_null());
    if (d->kind == LZ_DENIAL_OTHER)
        json_object_set_new(o, "proto", json_integer(d->proto));
    json_object_set_new(o, "name", text_field(d->name));
    json_object_set_new(o, "qtype", text_field(d->qtype));
    json_object_set_new(o, "rule", text_field(d->rule));
    json_object_set_new(o, "allow", text_field(d->allow));
    if (count > 1)
        json_object_set_new(o, "count", json_integer((json_int_t) count));
    char *body = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!body) {
        log->dropped += count;
        return;
    }
    size_t len = strlen(body);
    char *line = lz_xrealloc(body, len + 2, 1);
    line[len] = '\n';
    line[len + 1] = '\0';
    write_line(log, line, len + 1, count);
    free(line);
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_key(const lz_denial *a, const lz_denial *b)
{
    return a->kind == b->kind && a->has_addr == b->has_addr &&
           (!a->has_addr || memcmp(a->addr, b->addr, 4) == 0) && a->port == b->port &&
           a->proto == b->proto && same_str(a->name, b->name) && same_str(a->qtype, b->qtype) &&
           same_str(a->rule, b->rule); /* another reason is another denial */
}

/* FNV-1a over the fields that make two records identical. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint64_t key_hash(const lz_denial *d)
{
    uint64_t h = 14695981039346656037ULL;
    unsigned char fixed[9] = { (unsigned char) d->kind,
                               d->has_addr,
                               d->addr[0],
                               d->addr[1],
                               d->addr[2],
                               d->addr[3],
                               (unsigned char) (d->port >> 8),
                               (unsigned char) d->port,
                               d->proto };
    h = hash_bytes(h, fixed, sizeof fixed);
    if (d->name)
        h = hash_bytes(h, d->name, strnlen(d->name, FIELD_MAX + 1));
    h = hash_bytes(h, "\0", 1);
    if (d->qtype)
        h = hash_bytes(h, d->qtype, strnlen(d->qtype, FIELD_MAX + 1));
    h = hash_bytes(h, "\0", 1);
    if (d->rule)
        h = hash_bytes(h, d->rule, strnlen(d->rule, FIELD_MAX + 1));
    return h;
}

static char *dup_or_null(const char *s)
{
    return s ? lz_xstrndup(s, FIELD_MAX + 1) : NULL;
}

static void slot_clear(fold_slot *s)
{
    free((char *) s->d.name);
    free((char *) s->d.qtype);
    free((char *) s->d.rule);
    free((char *) s->d.allow);
    memset(s, 0, sizeof *s);
}

/* Write the slot's folded records as one record with their count. */
static void slot_flush(lz_denial_log *log, fold_slot *s)
{
    if (s->used && s->pending > 0) {
        if (take_token(log))
            write_record(log, &s->d, s->last_time_ms, s->pending);
        else
            log->dropped += s->pending;
    }
    s->pending = 0;
}

void lz_denial_log_record(lz_denial_log *log, const lz_denial *d)
{
    if (!log || !d)
        return;
    int64_t mono = now_ms(CLOCK_MONOTONIC);
    int64_t time_ms = d->time_ms ? d->time_ms : now_ms(CLOCK_REALTIME);
    uint64_t h = key_hash(d);
    fold_slot *s = &log->slots[h % FOLD_SLOTS];
    if (s->used && s->hash == h && same_key(&s->d, d) &&
        mono - s->window_start_ms < FOLD_WINDOW_MS) {
        s->pending++;
        s->last_time_ms = time_ms;
        return;
    }
    if (!take_token(log)) {
        log->dropped++;
        return;
    }
    slot_flush(log, s);
    slot_clear(s);
    write_record(log, d, time_ms, 1);
    s->used = true;
    s->hash = h;
    s->d = (lz_denial){ .kind = d->kind,
                        .has_addr = d->has_addr,
                        .port = d->port,
                        .proto = d->proto,
                        .name = dup_or_null(d->name),
                        .qtype = dup_or_null(d->qtype),
                        .rule = dup_or_null(d->rule),
                        .allow = dup_or_null(d->allow) };
    memcpy(s->d.addr, d->addr, 4);
    s->window_start_ms = mono;
    s->last_time_ms = time_ms;
}

static void write_dropped(lz_denial_log *log)
{
    if (log->dropped == 0)
        return;
    char t[32];
    format_time(now_ms(CLOCK_REALTIME), t);
    char line[96];
    int n = snprintf(line, sizeof line, "{\"time\":\"%s\",\"dropped\":%llu}\n", t,
                     (unsigned long long) log->dropped);
    uint64_t before = log->dropped;
    log->dropped = 0;
    /* A failed summary keeps its count for the next one. */
    if (n <= 0 || (size_t) n >= sizeof line || !write_line(log, line, (size_t) n, 0))
        log->dropped += before;
}

void lz_denial_log_count(lz_denial_log *log, uint64_t n)
{
    if (log)
        log->dropped += n;
}

void lz_denial_log_tick(lz_denial_log *log)
{
    if (!log)
        return;
    int64_t mono = now_ms(CLOCK_MONOTONIC);
    for (size_t i = 0; i < FOLD_SLOTS; i++) {
        fold_slot *s = &log->slots[i];
        if (s->used && mono - s->window_start_ms >= FOLD_WINDOW_MS) {
            slot_flush(log, s);
            slot_clear(s);
        }
    }
    /* At most one summary a second, however often the caller ticks. */
    if (log->summary_ms && mono - log->summary_ms < FOLD_WINDOW_MS)
        return;
    if (log->dropped) {
        write_dropped(log);
        log->summary_ms = mono;
    }
}

void lz_denial_log_close(lz_denial_log *log)
{
    if (!log)
        return;
    for (size_t i = 0; i < FOLD_SLOTS; i++) {
        slot_flush(log, &log->slots[i]);
        slot_clear(&log->slots[i]);
    }
    write_dropped(log);
    close(log->fd);
    close(log->dirfd);
    free(log);
}

/* ---- the readers ------------------------------------------------------- */

/* The kept file `name` whole (or its last READ_MAX bytes, from the first
 * line that begins there); NULL with *len 0 when it does not exist. */
static int read_file(int dirfd, const char *name, char **ret, size_t *ret_len, lz_error **err)
{
    *ret = NULL;
    *ret_len = 0;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return lz_error_set(err, errno, "cannot open the denial log %s", name);
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        lz_error_set(err, 0, "the denial log %s is not a regular file", name);
        return lz_error_hint(err, "run 'lazaret state verify' to check the Domain Root");
    }
    size_t size = (size_t) st.st_size;
    off_t from = 0;
    if (size > READ_MAX) {
        from = (off_t) (size - READ_MAX);
        size = READ_MAX;
    }
    char *buf = lz_xmalloc(size + 1);
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, buf + got, size - got, from + (off_t) got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return lz_error_set(err, e, "cannot read the denial log %s", name);
        }
        if (n == 0)
            break;
        got += (size_t) n;
    }
    close(fd);
    buf[got] = '\0';
    size_t skip = 0;
    if (from > 0) {
        char *nl = memchr(buf, '\n', got);
        skip = nl ? (size_t) (nl - buf) + 1 : got;
        memmove(buf, buf + skip, got - skip + 1);
    }
    *ret = buf;
    *ret_len = got - skip;
    return 0;
}

int lz_denial_lines_read(int logs_dirfd, lz_denial_line_fn fn, void *ctx, lz_error **err)
{
    static const char *const files[] = { LZ_DENIALS_OLD_FILE, LZ_DENIALS_FILE };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(files); f++) {
        char *buf;
        size_t len;
        if (read_file(logs_dirfd, files[f], &buf, &len, err) < 0)
            return -1;
        /* Only whole lines: a line still being written (or torn) has no
         * newline yet. */
        size_t at = 0;
        while (buf && at < len) {
            char *nl = memchr(buf + at, '\n', len - at);
            if (!nl)
                break;
            size_t n = (size_t) (nl - (buf + at));
            *nl = '\0';
            if (n > 0)
                fn(ctx, buf + at, n);
            at += n + 1;
        }
        free(buf);
    }
    return 0;
}

static json_t *parse_line(const char *line, size_t len)
{
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    if (o && !json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static uint64_t count_of(json_t *v)
{
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
    return n > 0 ? (uint64_t) n : 0;
}

uint64_t lz_denial_line_weight(const char *line, size_t len)
{
    json_t *o = parse_line(line, len);
    if (!o)
        return 0;
    uint64_t w;
    json_t *dropped = json_object_get(o, "dropped");
    if (dropped)
        w = count_of(dropped);
    else if (json_object_get(o, "count"))
        w = count_of(json_object_get(o, "count"));
    else
        w = json_is_string(json_object_get(o, "kind")) ? 1 : 0;
    json_decref(o);
    return w;
}

/* A string field for a terminal line: at most SHOW_MAX bytes of it (the
 * rest counted), "?" when absent; the whole line is escaped after. */
static char *shown(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s)
        return lz_xstrdup("?");
    size_t n = strlen(s);
    if (n <= SHOW_MAX)
        return lz_xstrdup(s);
    size_t keep = SHOW_MAX;
    while (keep > 0 && ((unsigned char) s[keep] & 0xC0) == 0x80)
        keep--;
    return lz_xasprintf("%.*s... (%zu more bytes)", (int) keep, s, n - keep);
}

static char *what_of(json_t *o)
{
    const char *kind = json_string_value(json_object_get(o, "kind"));
    _cleanup_free_ char *addr = shown(o, "addr");
    json_int_t port = json_integer_value(json_object_get(o, "port"));
    _cleanup_free_ char *name =
        json_is_string(json_object_get(o, "name")) ? shown(o, "name") : NULL;
    if (kind && strcmp(kind, "dns") == 0) {
        _cleanup_free_ char *qtype = shown(o, "qtype");
        return lz_xasprintf("DNS query %s %s", name ? name : "?", qtype);
    }
    const char *proto = NULL, *suffix = "";
    if (kind && strcmp(kind, "tcp") == 0)
        proto = "TCP";
    else if (kind && strcmp(kind, "udp") == 0)
        proto = "UDP";
    else if (kind && strcmp(kind, "name") == 0) {
        proto = "TCP";
        suffix = ", by the name check";
    }
    if (proto)
        return lz_xasprintf("%s %s:%lld%s%s%s%s", proto, addr, (long long) port, name ? " (" : "",
                            name ? name : "", name ? ")" : "", suffix);
    return lz_xasprintf("IP protocol %lld to %s%s%s%s",
                        (long long) json_integer_value(json_object_get(o, "proto")), addr,
                        name ? " (" : "", name ? name : "", name ? ")" : "");
}

char *lz_denial_line_text(const char *line, size_t len)
{
    json_t *o = parse_line(line, len);
    if (!o)
        return NULL;
    _cleanup_free_ char *time = shown(o, "time");
    char *text = NULL;
    json_t *dropped = json_object_get(o, "dropped");
    if (dropped) {
        text = lz_xasprintf("%s  denied  %llu more denials not recorded (rate limit)", time,
                            (unsigned long long) count_of(dropped));
    } else if (json_is_string(json_object_get(o, "kind"))) {
        _cleanup_free_ char *what = what_of(o);
        _cleanup_free_ char *rule = shown(o, "rule");
        _cleanup_free_ char *allow =
            json_is_string(json_object_get(o, "allow")) ? shown(o, "allow") : NULL;
        uint64_t count = count_of(json_object_get(o, "count"));
        _cleanup_free_ char *times =
            count > 1 ? lz_xasprintf("  (%llu times)", (unsigned long long) count) : NULL;
        text = lz_xasprintf("%s  denied  %s  rule: %s%s%s%s", time, what, rule,
                            allow ? "  allow with: " : "", allow ? allow : "", times ? times : "");
    }
    json_decref(o);
    if (!text)
        return NULL;
    char *safe = lz_text_printable(text);
    free(text);
    return safe;
}

char *lz_denial_line_json(const char *line, size_t len)
{
    json_t *o = parse_line(line, len);
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!s)
        return NULL;
    /* jansson leaves DEL as it is; a terminal gets \u007f instead. */
    size_t dels = 0;
    for (const char *p = s; *p; p++)
        dels += *p == 0x7f;
    if (dels == 0)
        return s;
    char *out = lz_xmalloc(strlen(s) + dels * 5 + 1);
    char *w = out;
    for (const char *p = s; *p; p++) {
        if (*p == 0x7f) {
            memcpy(w, "\\u007F", 6);
            w += 6;
        } else {
            *w++ = *p;
        }
    }
    *w = '\0';
    free(s);
    return out;
}

typedef struct summary_ctx {
    lz_denial_summary *s;
    size_t want; /* ring capacity */
    size_t next; /* ring position of the next line */
    size_t held;
} summary_ctx;

static int summary_line(void *ctx, const char *line, size_t len)
{
    summary_ctx *c = ctx;
    c->s->total += lz_denial_line_weight(line, len);
    if (c->want == 0)
        return 0;
    char *text = lz_denial_line_text(line, len);
    if (!text)
        return 0;
    free(c->s->last[c->next]);
    c->s->last[c->next] = text;
    c->next = (c->next + 1) % c->want;
    if (c->held < c->want)
        c->held++;
    return 0;
}

int lz_denial_summary_read(int logs_dirfd, size_t last, lz_denial_summary *ret, lz_error **err)
{
    lz_denial_summary s = { 0 };
    summary_ctx c = { .s = &s, .want = last > 65536 ? 65536 : last };
    if (c.want)
        s.last = lz_xcalloc(c.want, sizeof *s.last);
    if (lz_denial_lines_read(logs_dirfd, summary_line, &c, err) < 0) {
        s.n_last = c.want;
        lz_denial_summary_clear(&s);
        return -1;
    }
    /* The ring, oldest first. */
    if (c.want) {
        char **ordered = lz_xcalloc(c.want, sizeof *ordered);
        size_t start = c.held < c.want ? 0 : c.next;
        for (size_t i = 0; i < c.held; i++)
            ordered[i] = s.last[(start + i) % c.want];
        free(s.last);
        s.last = ordered;
    }
    s.n_last = c.held;
    *ret = s;
    return 0;
}

void lz_denial_summary_clear(lz_denial_summary *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_last; i++)
        free(s->last[i]);
    free(s->last);
    memset(s, 0, sizeof *s);
}
