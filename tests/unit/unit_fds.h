/* SPDX-License-Identifier: Apache-2.0
 *
 * Shared by the unit tests that check no descriptor leaks: the number of
 * entries of /proc/self/fd (the directory stream's own descriptor and the
 * "." and ".." entries included: compare counts, not absolute numbers).
 */
#ifndef LAZARET_TESTS_UNIT_FDS_H
#define LAZARET_TESTS_UNIT_FDS_H

#include <dirent.h>

static inline int count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

#endif
