/* SPDX-License-Identifier: Apache-2.0
 *
 * SandboxLayoutV1: the closed set of product-owned sandbox destinations that
 * configuration may not claim (schema "SandboxLayoutV1"). There is no public
 * unchecked constructor: lz_sandbox_layout_production() is the only way to
 * obtain one, and it always contains /workspace.
 */
#ifndef LAZARET_OCI_LAYOUT_H
#define LAZARET_OCI_LAYOUT_H

#include <stddef.h>

typedef struct lz_sandbox_layout lz_sandbox_layout;

/* The production layout (a static, immutable value). */
const lz_sandbox_layout *lz_sandbox_layout_production(void);

size_t lz_sandbox_layout_count(const lz_sandbox_layout *layout);
const char *lz_sandbox_layout_at(const lz_sandbox_layout *layout, size_t i);

/* The protected destination that `path` equals or is an ancestor/descendant
 * of, or NULL when it intersects none. */
const char *lz_sandbox_layout_conflict(const lz_sandbox_layout *layout, const char *path);

#endif
