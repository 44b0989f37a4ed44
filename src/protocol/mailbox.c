/* SPDX-License-Identifier: Apache-2.0
 *
 * Codecs of the Escalation Mailbox's records (mailbox.h). Field order:
 *
 *   header  := u16 type || u32 magic || u32 version
 *   REQUEST := header || str capability || str request_id || str cwd
 *              || u32 argc || str argv[0..argc) || str why
 *   CANCEL, ACK := header || str capability || str request_id || u32 acked
 *   CHUNK   := header || str request_id || u32 seq || u32 stream || bytes data
 *   RESULT  := header || str request_id || u32 outcome || u32 status
 *              || u32 n_chunks || str message
 *
 * (str and bytes are wire.h's u32 length || bytes.) Every decoder is
 * strict: one accepted encoding per record, so that what the coordinator
 * shows a developer and what it runs are the bytes the client wrote, and
 * nothing the encoder could not have produced gets through (the fuzzer
 * checks that re-encoding an accepted record gives the input back).
 *
 * The inbox is sandbox-writable: every bound is checked before the record
 * is used, and an id is copied into a fixed array only after its length
 * and alphabet were checked.
 */
#include "protocol/mailbox.h"

#include <string.h>

#include "common/text.h"
#include "common/util.h"

/* The largest REQUEST the bounds allow must fit one record (and one wbuf):
 * header, two ids, cwd, argc, every argument's length prefix and bytes,
 * why. The encoder therefore never overflows for a request that passed
 * lz_mbx_request_problem(). */
_Static_assert(10 + 2 * (4 + LZ_MBX_ID_LEN) + (4 + LZ_MBX_MAX_CWD) + 4 + 4 * LZ_MBX_MAX_ARGS +
                       LZ_MBX_MAX_ARGV_BYTES + (4 + LZ_MBX_MAX_WHY) <=
                   LZ_MBX_MAX_RECORD,
               "a REQUEST at its bounds does not fit LZ_MBX_MAX_RECORD");
_Static_assert(10 + (4 + LZ_MBX_ID_LEN) + 8 + 4 + LZ_MBX_MAX_CHUNK <= LZ_MBX_MAX_RECORD,
               "a CHUNK at its bounds does not fit LZ_MBX_MAX_RECORD");
_Static_assert(LZ_MBX_MAX_RECORD <= LZ_WIRE_MAX, "a record must fit an lz_wbuf");

/* Exit codes 0..255, or 128 + signal number (the shell convention) for a
 * command a signal ended; 255 + 128 covers both without a second field. */
#define LZ_MBX_MAX_STATUS (255u + 128u)

bool lz_mbx_id_ok(const char *id)
{
    if (!id)
        return false;
    /* Reads at most LZ_MBX_ID_LEN + 1 bytes: stops at the first byte that
     * is not a digit (a NUL included). */
    for (size_t i = 0; i < LZ_MBX_ID_LEN; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    return id[LZ_MBX_ID_LEN] == '\0';
}

/* Absolute, and no component that a resolver would treat specially or
 * that makes two spellings of one directory: no empty component ("//",
 * a trailing "/"), no "." and no "..". "/" itself is normalized. */
static bool path_normalized(const char *p)
{
    if (p[0] != '/')
        return false;
    if (p[1] == '\0')
        return true;
    const char *c = p + 1;
    for (;;) {
        const char *slash = strchr(c, '/');
        size_t n = slash ? (size_t) (slash - c) : strlen(c);
        if (n == 0)
            return false;
        if (n == 1 && c[0] == '.')
            return false;
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return false;
        if (!slash)
            return true;
        c = slash + 1;
    }
}

const char *lz_mbx_request_problem(const lz_mbx_request *m)
{
    if (!lz_mbx_id_ok(m->capability))
        return "the session capability is not 32 lowercase hex digits";
    if (!lz_mbx_id_ok(m->request_id))
        return "the request id is not 32 lowercase hex digits";
    if (!m->argv || m->argc == 0)
        return "the command is empty (argv needs at least the program)";
    if (m->argc > LZ_MBX_MAX_ARGS)
        return "the command has more than 256 arguments";
    size_t total = 0;
    for (size_t i = 0; i < m->argc; i++) {
        const char *a = m->argv[i];
        if (!a)
            return "the command has a missing argument";
        /* strnlen: a caller's overlong string is not scanned to its end */
        size_t n = strnlen(a, LZ_MBX_MAX_ARG + 1);
        if (n > LZ_MBX_MAX_ARG)
            return "an argument is longer than 4096 bytes";
        if (!lz_utf8_valid(a, n))
            return "an argument is not valid UTF-8";
        total += n;
        if (total > LZ_MBX_MAX_ARGV_BYTES)
            return "the arguments are longer than 32768 bytes together";
    }
    /* No PATH lookup anywhere, and no command-string form: "ls" or
     * "./x" or "make && rm -rf ~" as argv[0] would need a shell or a
     * search path to mean anything (CommandRequiresShell). */
    if (m->argv[0][0] != '/')
        return "the program is not an absolute path (no PATH lookup and no shell command "
               "strings: name the program as /usr/bin/...)";
    if (!m->cwd)
        return "the working directory is missing";
    size_t n = strnlen(m->cwd, LZ_MBX_MAX_CWD + 1);
    if (n > LZ_MBX_MAX_CWD)
        return "the working directory is longer than 4096 bytes";
    /* UTF-8 like argv: the developer approves what the prompt shows. */
    if (!lz_utf8_valid(m->cwd, n))
        return "the working directory is not valid UTF-8";
    if (m->cwd[0] != '/')
        return "the working directory is not an absolute path";
    if (!path_normalized(m->cwd))
        return "the working directory is not normalized (empty, \".\" or \"..\" component, "
               "or a trailing slash)";
    if (m->why) {
        n = strnlen(m->why, LZ_MBX_MAX_WHY + 1);
        if (n > LZ_MBX_MAX_WHY)
            return "the justification is longer than 1024 bytes";
        if (!lz_utf8_valid(m->why, n))
            return "the justification is not valid UTF-8";
    }
    return NULL;
}

/* ---- encoders ------------------------------------------------------------- */

static void put_header(lz_wbuf *b, uint16_t type)
{
    lz_wbuf_init(b, type);
    lz_wbuf_u32(b, LZ_MBX_MAGIC);
    lz_wbuf_u32(b, LZ_MBX_VERSION);
}

void lz_mbx_request_encode(lz_wbuf *b, const lz_mbx_request *m)
{
    put_header(b, LZ_MBX_REQUEST);
    lz_wbuf_str(b, m->capability);
    lz_wbuf_str(b, m->request_id);
    lz_wbuf_str(b, m->cwd);
    lz_wbuf_u32(b, (uint32_t) m->argc);
    for (size_t i = 0; i < m->argc; i++)
        lz_wbuf_str(b, m->argv[i]);
    lz_wbuf_str(b, m->why ? m->why : "");
}

void lz_mbx_control_encode(lz_wbuf *b, uint16_t type, const lz_mbx_control *m)
{
    put_header(b, type);
    lz_wbuf_str(b, m->capability);
    lz_wbuf_str(b, m->request_id);
    /* a CANCEL carries no count; its decoder accepts only 0 */
    lz_wbuf_u32(b, type == LZ_MBX_CANCEL ? 0 : m->acked);
}

void lz_mbx_chunk_encode(lz_wbuf *b, const lz_mbx_chunk *m)
{
    put_header(b, LZ_MBX_CHUNK);
    lz_wbuf_str(b, m->request_id);
    lz_wbuf_u32(b, m->seq);
    lz_wbuf_u32(b, m->stream);
    lz_wbuf_bytes(b, m->data, m->len);
}

void lz_mbx_result_encode(lz_wbuf *b, const lz_mbx_result *m)
{
    put_header(b, LZ_MBX_RESULT);
    lz_wbuf_str(b, m->request_id);
    lz_wbuf_u32(b, m->outcome);
    lz_wbuf_u32(b, m->status);
    lz_wbuf_u32(b, m->n_chunks);
    lz_wbuf_str(b, m->message ? m->message : "");
}

/* ---- decoders ------------------------------------------------------------- */

uint16_t lz_mbx_record_type(const uint8_t *data, size_t len)
{
    lz_rbuf r;
    if (len > LZ_MBX_MAX_RECORD || !lz_rbuf_init(&r, data, len))
        return 0;
    uint32_t magic = lz_rbuf_u32(&r);
    uint32_t version = lz_rbuf_u32(&r);
    if (r.bad || magic != LZ_MBX_MAGIC || version != LZ_MBX_VERSION)
        return 0;
    switch (r.type) {
    case LZ_MBX_REQUEST:
    case LZ_MBX_CANCEL:
    case LZ_MBX_ACK:
    case LZ_MBX_CHUNK:
    case LZ_MBX_RESULT:
        return r.type;
    default:
        return 0;
    }
}

/* Start reading a record of the given type: size, type, magic, version. */
static bool get_header(lz_rbuf *r, const uint8_t *data, size_t len, uint16_t type)
{
    if (lz_mbx_record_type(data, len) != type)
        return false;
    lz_rbuf_init(r, data, len);
    (void) lz_rbuf_u32(r); /* magic and version: checked above */
    (void) lz_rbuf_u32(r);
    return !r->bad;
}

/* An id field: exactly LZ_MBX_ID_LEN lowercase hex digits, copied into
 * ret[LZ_MBX_ID_LEN + 1] only once it is known to be one. */
static void get_id(lz_rbuf *r, char *ret)
{
    const uint8_t *p;
    size_t n;
    if (!lz_rbuf_bytes(r, &p, &n, LZ_MBX_ID_LEN))
        return;
    char id[LZ_MBX_ID_LEN + 1] = { 0 };
    if (n != LZ_MBX_ID_LEN) {
        r->bad = true;
        return;
    }
    memcpy(id, p, n);
    if (!lz_mbx_id_ok(id)) {
        r->bad = true;
        return;
    }
    memcpy(ret, id, sizeof(id));
}

static void free_argv(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

/* argc and the arguments (each NUL-free and at most LZ_MBX_MAX_ARG bytes;
 * UTF-8, argv[0] and the total are lz_mbx_request_problem's). The count is
 * bounded before anything is allocated for it. */
static char **get_argv(lz_rbuf *r, size_t *ret_n)
{
    uint32_t n = lz_rbuf_u32(r);
    if (r->bad || n == 0 || n > LZ_MBX_MAX_ARGS) {
        r->bad = true;
        return NULL;
    }
    char **v = lz_xcalloc((size_t) n + 1, sizeof(char *));
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        v[i] = lz_rbuf_str(r, LZ_MBX_MAX_ARG);
        if (!v[i]) {
            free_argv(v);
            return NULL;
        }
        /* stop early: a record of many maximal arguments is not copied
         * whole before it is refused */
        total += strlen(v[i]);
        if (total > LZ_MBX_MAX_ARGV_BYTES) {
            r->bad = true;
            free_argv(v);
            return NULL;
        }
    }
    *ret_n = n;
    return v;
}

/* A text field: NUL-free, at most max bytes, valid UTF-8. */
static char *get_text(lz_rbuf *r, size_t max)
{
    char *s = lz_rbuf_str(r, max);
    if (s && !lz_utf8_valid(s, strlen(s))) {
        r->bad = true;
        free(s);
        return NULL;
    }
    return s;
}

bool lz_mbx_request_decode(const uint8_t *data, size_t len, lz_mbx_request *m)
{
    memset(m, 0, sizeof(*m));
    lz_rbuf r;
    if (!get_header(&r, data, len, LZ_MBX_REQUEST))
        return false;
    get_id(&r, m->capability);
    get_id(&r, m->request_id);
    m->cwd = lz_rbuf_str(&r, LZ_MBX_MAX_CWD);
    if (!r.bad)
        m->argv = get_argv(&r, &m->argc);
    m->why = get_text(&r, LZ_MBX_MAX_WHY);
    if (!lz_rbuf_done(&r) || lz_mbx_request_problem(m)) {
        lz_mbx_request_clear(m);
        return false;
    }
    return true;
}

void lz_mbx_request_clear(lz_mbx_request *m)
{
    free(m->cwd);
    free_argv(m->argv);
    free(m->why);
    memset(m, 0, sizeof(*m));
}

bool lz_mbx_control_decode(const uint8_t *data, size_t len, uint16_t type, lz_mbx_control *m)
{
    memset(m, 0, sizeof(*m));
    if (type != LZ_MBX_CANCEL && type != LZ_MBX_ACK)
        return false;
    lz_rbuf r;
    if (!get_header(&r, data, len, type))
        return false;
    lz_mbx_control c = { 0 };
    get_id(&r, c.capability);
    get_id(&r, c.request_id);
    c.acked = lz_rbuf_u32(&r);
    if (!lz_rbuf_done(&r) || (type == LZ_MBX_CANCEL && c.acked != 0))
        return false;
    *m = c;
    return true;
}

bool lz_mbx_chunk_decode(const uint8_t *data, size_t len, lz_mbx_chunk *m)
{
    memset(m, 0, sizeof(*m));
    lz_rbuf r;
    if (!get_header(&r, data, len, LZ_MBX_CHUNK))
        return false;
    lz_mbx_chunk c = { 0 };
    get_id(&r, c.request_id);
    c.seq = lz_rbuf_u32(&r);
    c.stream = lz_rbuf_u32(&r);
    const uint8_t *p = NULL;
    size_t n = 0;
    bool have = lz_rbuf_bytes(&r, &p, &n, LZ_MBX_MAX_CHUNK);
    if (!have || !lz_rbuf_done(&r) || (c.stream != LZ_MBX_STDOUT && c.stream != LZ_MBX_STDERR))
        return false;
    c.data = p;
    c.len = n;
    *m = c;
    return true;
}

bool lz_mbx_result_decode(const uint8_t *data, size_t len, lz_mbx_result *m)
{
    memset(m, 0, sizeof(*m));
    lz_rbuf r;
    if (!get_header(&r, data, len, LZ_MBX_RESULT))
        return false;
    get_id(&r, m->request_id);
    m->outcome = lz_rbuf_u32(&r);
    m->status = lz_rbuf_u32(&r);
    m->n_chunks = lz_rbuf_u32(&r);
    m->message = get_text(&r, LZ_MBX_MAX_MESSAGE);
    bool ok = lz_rbuf_done(&r) && m->outcome >= LZ_MBX_COMPLETED && m->outcome <= LZ_MBX_FAILED;
    /* Only a command that ran has an exit status: one field, one meaning. */
    if (ok && m->outcome == LZ_MBX_COMPLETED)
        ok = m->status <= LZ_MBX_MAX_STATUS;
    else if (ok)
        ok = m->status == 0;
    if (!ok) {
        lz_mbx_result_clear(m);
        return false;
    }
    return true;
}

void lz_mbx_result_clear(lz_mbx_result *m)
{
    free(m->message);
    memset(m, 0, sizeof(*m));
}
