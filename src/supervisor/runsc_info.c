/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/runsc_info.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/cache_record.h"
#include "lazaret-version.h"

/* The release date in "runsc version 0.0~20221219.0" (Debian) or
 * "runsc version release-20221219.0" (upstream) as YYYYMMDD; 0 if none. */
long lz_runsc_release_date(const char *out)
{
    static const char key[] = "runsc version ";
    const char *v = strstr(out, key);
    if (!v)
        return 0;
    v += sizeof(key) - 1;
    const char *eol = strchrnul(v, '\n');
    for (const char *p = v; p < eol;) {
        if (!isdigit((unsigned char) *p)) {
            p++;
            continue;
        }
        size_t n = 0;
        while (p + n < eol && isdigit((unsigned char) p[n]))
            n++;
        if (n == 8) {
            long date = strtol(p, NULL, 10);
            long y = date / 10000, m = date / 100 % 100, dd = date % 100;
            if (y >= 2018 && y <= 2199 && m >= 1 && m <= 12 && dd >= 1 && dd <= 31)
                return date;
        }
        p += n;
    }
    return 0;
}

int lz_runsc_facts_key(const char *runsc_path, char *buf, size_t size)
{
    /* Lazaret's own binary too (this process is a fork of it, never an
     * exec): every build has the same version string, and the probe it
     * runs (lazaret-exec, built with it) may change (attack round i13b). */
    struct stat st, me;
    if (strchr(LAZARET_VERSION, ' ') || stat(runsc_path, &st) < 0 ||
        stat("/proc/self/exe", &me) < 0)
        return -1;
    char me_id[LZ_CACHE_IDENTITY_MAX], runsc_id[LZ_CACHE_IDENTITY_MAX];
    lz_cache_file_identity(&me, me_id);
    lz_cache_file_identity(&st, runsc_id);
    int n = snprintf(buf, size, "lazaret-runsc-facts-v1 lazaret=%s:%s runsc=%s", LAZARET_VERSION,
                     me_id, runsc_id);
    return n > 0 && (size_t) n < size ? 0 : -1;
}

static void facts_value(const lz_runsc_facts *f, char *buf, size_t size)
{
    snprintf(buf, size, "date=%ld,statx=%d", f->release_date, f->statx_ok ? 1 : 0);
}

bool lz_runsc_facts_parse_value(const char *value, lz_runsc_facts *ret)
{
    long date;
    int statx_ok, end = -1;
    if (sscanf(value, "date=%8ld,statx=%1d%n", &date, &statx_ok, &end) != 2 || end < 0 ||
        value[end] != '\0' || date < 0 || (statx_ok != 0 && statx_ok != 1))
        return false;
    lz_runsc_facts f = { date, statx_ok == 1 };
    /* Canonical form only: the value must be what facts_value writes. */
    char canon[64];
    facts_value(&f, canon, sizeof(canon));
    if (strcmp(canon, value) != 0)
        return false;
    *ret = f;
    return true;
}

int lz_runsc_facts_load(int dir_fd, const char *key, lz_runsc_facts *ret)
{
    char value[64];
    if (lz_cache_record_load(dir_fd, LZ_RUNSC_FACTS_FILE, key, value, sizeof(value)) < 0)
        return -1;
    return lz_runsc_facts_parse_value(value, ret) ? 0 : -1;
}

void lz_runsc_facts_store(int dir_fd, const char *key, const lz_runsc_facts *f)
{
    char value[64];
    facts_value(f, value, sizeof(value));
    lz_cache_record_store(dir_fd, LZ_RUNSC_FACTS_FILE, key, value);
}
