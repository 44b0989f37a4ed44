/* SPDX-License-Identifier: Apache-2.0
 *
 * The production SandboxLayoutV1: every sandbox destination Lazaret itself
 * mounts or owns. Configuration may not place a persistent directory or a
 * volume on, above or below any of them.
 */
#include "oci/layout.h"

#include "fs/confined.h"

struct lz_sandbox_layout {
    const char *const *destinations;
    size_t count;
};

/* Keep sorted and in sync with the OCI spec builder: /workspace (the Agent
 * Workspace, spec-fixed), /run/lazaret (escalation client, its credentials
 * and the mailbox), and the kernel and runtime file systems the runtime
 * mounts itself. */
static const char *const production_destinations[] = {
    "/dev", "/proc", "/run/lazaret", "/sys", "/workspace",
};

static const lz_sandbox_layout production = {
    production_destinations,
    sizeof(production_destinations) / sizeof(production_destinations[0]),
};

const lz_sandbox_layout *lz_sandbox_layout_production(void)
{
    return &production;
}

size_t lz_sandbox_layout_count(const lz_sandbox_layout *layout)
{
    return layout->count;
}

const char *lz_sandbox_layout_at(const lz_sandbox_layout *layout, size_t i)
{
    return i < layout->count ? layout->destinations[i] : NULL;
}

const char *lz_sandbox_layout_conflict(const lz_sandbox_layout *layout, const char *path)
{
    for (size_t i = 0; i < layout->count; i++)
        if (lz_path_overlaps(layout->destinations[i], path))
            return layout->destinations[i];
    return NULL;
}
