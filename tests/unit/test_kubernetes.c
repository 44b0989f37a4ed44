/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/export/kubernetes.c: the registry reference grammar
 * (accepting and refusing cases; every string over a small alphabet of the
 * grammar's own characters is decided, so a loop that does not advance
 * hangs this test instead of a user's export).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "export/kubernetes.h"

static void test_references(void **state)
{
    (void) state;
    static const char *const good[] = {
        "debian",
        "debian:bookworm",
        "library/debian",
        "docker.io/library/debian:12.5-slim",
        "localhost/a",
        "localhost:5000/a/b:1.0",
        "Registry.Example:443/team/x__y--z.w:v1",
        "a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "a:_t",
        "r.example:65535/a",
    };
    static const char *const bad[] = {
        "",
        "a b",
        "A/B",
        "registry.example/Team/a",
        "a:",
        "a@sha256:abc",
        "reg..example/a",
        "r.example:65536/a",
        "r.example:/a",
        "a/-b",
        "a/b..c",
        "a/b.",
        "a//b",
        "/a",
        "a/",
        "a:-t",
        "-r.example/a",
        "r.example/",
        "a@md5:00",
        "a:t@",
        "\x01",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!lz_k8s_registry_reference(good[i]))
            fail_msg("refused: '%s'", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (lz_k8s_registry_reference(bad[i]))
            fail_msg("accepted: '%s'", bad[i]);
}

static void test_every_string_is_decided(void **state)
{
    (void) state;
    static const char alphabet[] = "aZ0._-/:@ ";
    char s[9];
    srand(14);
    for (int n = 0; n < 200000; n++) {
        size_t len = (size_t) (rand() % 8) + 1;
        for (size_t i = 0; i < len; i++)
            s[i] = alphabet[rand() % (int) (sizeof(alphabet) - 1)];
        s[len] = '\0';
        (void) lz_k8s_registry_reference(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_references),
        cmocka_unit_test(test_every_string_is_decided),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
