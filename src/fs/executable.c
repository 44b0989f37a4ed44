/* SPDX-License-Identifier: Apache-2.0 */
#include "fs/executable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

const char *lz_executable_problem(int fd, const lz_identity *id, const char *label, char **ret_fix)
{
    const char *problem = NULL;
    char *fix = NULL;
    if (!S_ISREG(id->mode)) {
        problem = "is not a regular file";
        fix = lz_xstrdup("point executable at a regular program file");
    } else if (id->nlink != 1) {
        problem = "has more than one hard link";
        fix = lz_xasprintf("v1 accepts only single-link executables (hardlinked package "
                           "layouts are refused on purpose); use a copy: install -m 0755 '%s' "
                           "~/bin/",
                           label);
    } else if (id->uid != 0 && id->uid != getuid()) {
        problem = "is owned by another user";
        fix = lz_xstrdup("use a program owned by root or by you");
    } else if (id->mode & (S_IWGRP | S_IWOTH)) {
        problem = "is writable by group or others";
        fix = lz_xasprintf("chmod go-w '%s'", label);
    } else if (faccessat(fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0) {
        problem = "is not executable by you";
        fix = lz_xasprintf("chmod u+x '%s' (if you own it)", label);
    }
    if (problem)
        *ret_fix = fix;
    return problem;
}

int lz_executable_pin(const lz_path_plan *plan, lz_identity *ret_id, lz_error **err)
{
    int fd = lz_plan_open(plan, O_PATH, true, err);
    if (fd < 0)
        return lz_error_prefix(err,
                               "the executable %s changed since the configuration was "
                               "loaded",
                               plan->label);
    lz_identity id;
    if (lz_identity_of(fd, &id, err) < 0) {
        close(fd);
        return -1;
    }
    char *fix = NULL;
    const char *problem = lz_executable_problem(fd, &id, plan->label, &fix);
    if (problem) {
        close(fd);
        lz_error_set(err, 0, "the executable %s %s", plan->label, problem);
        lz_error_hint(err, "%s", fix);
        free(fix);
        return -1;
    }
    *ret_id = id;
    return fd;
}
