/* SPDX-License-Identifier: Apache-2.0 */
#include "trust/publication.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/atomic.h"
#include "protocol/wire.h"

int lz_trust_publish(const lz_trust_anchor *a, int dirfd, const char *dir_label, lz_error **err)
{
    const lz_trust_manifest *m = lz_trust_anchor_manifest(a);
    static lz_wbuf b;
    uint8_t der[8192];
    size_t der_len;
    if (lz_tls_cert_to_der(lz_trust_anchor_ca_cert(a), der, sizeof(der), &der_len, err) < 0)
        return -1;
    lz_wbuf_init(&b, LZ_TRUST_PUBLICATION_TYPE);
    lz_wbuf_u32(&b, m->protocol_version);
    lz_wbuf_str(&b, m->agent_profile);
    lz_wbuf_str(&b, m->domain_id);
    lz_wbuf_str(&b, m->generation_id);
    lz_wbuf_bytes(&b, der, der_len);
    if (b.overflow || b.len > LZ_TRUST_PUBLICATION_MAX)
        return lz_error_set(err, EMSGSIZE, "the Trust Anchor publication is too large");
    /* Runtime directory (tmpfs): a publication does not outlive the boot. */
    _cleanup_free_ char *what =
        lz_xasprintf("the Trust Anchor publication %s/%s", dir_label, LZ_TRUST_PUBLICATION_FILE);
    return lz_write_atomic(dirfd, LZ_TRUST_PUBLICATION_FILE, b.data, b.len, 0600, LZ_ATOMIC_NO_SYNC,
                           what, err);
}

void lz_trust_unpublish(int dirfd)
{
    unlinkat(dirfd, LZ_TRUST_PUBLICATION_FILE, 0);
}

static bool copy_field(lz_rbuf *r, char *out, size_t cap)
{
    const uint8_t *p;
    size_t n;
    if (!lz_rbuf_bytes(r, &p, &n, cap - 1) || n == 0 || memchr(p, '\0', n))
        return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

int lz_trust_publication_decode(const uint8_t *data, size_t len, lz_trust_publication *ret,
                                lz_error **err)
{
    lz_trust_publication p = { 0 };
    lz_rbuf r;
    const uint8_t *der = NULL;
    size_t der_len = 0;
    bool ok = len <= LZ_TRUST_PUBLICATION_MAX && lz_rbuf_init(&r, data, len) &&
              r.type == LZ_TRUST_PUBLICATION_TYPE;
    if (ok) {
        p.protocol_version = lz_rbuf_u32(&r);
        ok = copy_field(&r, p.agent_profile, sizeof(p.agent_profile)) &&
             copy_field(&r, p.domain_id, sizeof(p.domain_id)) &&
             copy_field(&r, p.generation_id, sizeof(p.generation_id)) &&
             lz_rbuf_bytes(&r, &der, &der_len, LZ_TRUST_PUBLICATION_MAX) && der_len > 0 &&
             lz_rbuf_done(&r);
    }
    if (!ok)
        return lz_error_set(err, EPROTO, "the Domain's Trust Anchor publication is malformed");
    /* Strict: exactly the certificate's DER, as lz_trust_publish wrote it. */
    p.ca = lz_x509_from_exact_der(der, der_len);
    if (!p.ca)
        return lz_tls_error(err, NULL,
                            "the Domain's Trust Anchor publication holds no valid "
                            "CA certificate");
    *ret = p;
    return 0;
}

int lz_trust_publication_read(int dirfd, const char *dir_label, lz_trust_publication *ret,
                              lz_error **err)
{
    _cleanup_close_ int fd =
        openat(dirfd, LZ_TRUST_PUBLICATION_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        lz_error_set(err, errno, "cannot read the Domain's Trust Anchor publication %s/%s",
                     dir_label, LZ_TRUST_PUBLICATION_FILE);
        return lz_error_hint(err, "the Domain's coordinator may have just ended; run the "
                                  "command again");
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
        st.st_size > LZ_TRUST_PUBLICATION_MAX)
        return lz_error_set(err, EPERM, "%s/%s is not a Trust Anchor publication of yours",
                            dir_label, LZ_TRUST_PUBLICATION_FILE);
    static uint8_t buf[LZ_TRUST_PUBLICATION_MAX + 1];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return lz_error_set(err, errno, "cannot read %s/%s", dir_label,
                                LZ_TRUST_PUBLICATION_FILE);
        if (n == 0 || len + (size_t) n == sizeof(buf)) {
            len += (size_t) n;
            break;
        }
        len += (size_t) n;
    }
    return lz_trust_publication_decode(buf, len, ret, err);
}

void lz_trust_publication_clear(lz_trust_publication *p)
{
    X509_free(p->ca);
    memset(p, 0, sizeof(*p));
}
