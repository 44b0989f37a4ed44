/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/runsc_info.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

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

