/* SPDX-License-Identifier: Apache-2.0
 *
 * Shared by the unit tests that work in a scratch directory of their own:
 * dir (its path) and dir_fd (opened with the flags the test names), made
 * by the setup and removed with everything in it by the teardown; and
 * write_file, a file of that directory with the given text.
 */
#ifndef LAZARET_TESTS_UNIT_TMPDIR_H
#define LAZARET_TESTS_UNIT_TMPDIR_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[64];
static int dir_fd = -1;

/* prefix: "/tmp/lz-NAME-" (the XXXXXX is added). */
static inline int unit_tmpdir_setup(const char *prefix, int open_flags)
{
    snprintf(dir, sizeof(dir), "%sXXXXXX", prefix);
    if (!mkdtemp(dir))
        return -1;
    dir_fd = open(dir, open_flags | O_DIRECTORY | O_CLOEXEC);
    return dir_fd < 0 ? -1 : 0;
}

static inline int unit_tmpdir_teardown(void **state)
{
    (void) state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
    close(dir_fd);
    return system(cmd) == 0 ? 0 : -1;
}

static inline void write_file(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

#endif
