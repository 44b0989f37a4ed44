/* SPDX-License-Identifier: Apache-2.0
 *
 * What the installed runsc can do. Lazaret probes rather than assumes
 * (docs/platform.md "runsc releases"): the release date decides between runsc's own network stack
 * and host networking inside a dedicated namespace; the statx behaviour is
 * probed in the running sandbox itself (supervisor.c).
 */
#ifndef LAZARET_SUPERVISOR_RUNSC_INFO_H
#define LAZARET_SUPERVISOR_RUNSC_INFO_H

/* Releases from this date on run --network=sandbox in a non-root network
 * namespace on current kernels; older ones decide "root namespace" by the
 * presence of /proc/sys/net/core/rmem_default and refuse. */
#define LZ_RUNSC_NETSTACK_OK_FROM 20230101L

/* The release date in "runsc version 0.0~20221219.0" (Debian) or
 * "runsc version release-20221219.0" (upstream) as YYYYMMDD; 0 if none. */
long lz_runsc_release_date(const char *version_output);

#endif
