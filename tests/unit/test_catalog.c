/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/oci/catalog.c: the Storage Catalog's records. A
 * record keeps an image from `lazaret image prune` and lets a start go
 * offline, so a malformed, foreign or misnamed one must read as absent,
 * never as another image; each rule has an accepting and a refusing case.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit_tmpdir.h"

#include "common/util.h"
#include "oci/catalog.h"

#define D1 "1bdb82c968659c9b76277a84ca45600625fd6e30b284aa1e495f89acdd31baa9"
#define D2 "f1105da002cad3b291e261c257690c5f14c0b0f0cb6580d2706d64a62e468da2"

static int setup(void **state)
{
    (void) state;
    return unit_tmpdir_setup("/tmp/lz-catalog-", O_RDONLY);
}
#define teardown unit_tmpdir_teardown

static void test_entry_names(void **state)
{
    (void) state;
    char d[65];
    bool keep_id = true;
    assert_true(lz_catalog_entry_parse(D1, d, &keep_id));
    assert_string_equal(d, D1);
    assert_false(keep_id);
    assert_true(lz_catalog_entry_parse(D1 ".keep-id-1000-1000", d, &keep_id));
    assert_true(keep_id);
    const char *bad[] = {
        D1 "x",     D1 ".keep-id-1000",     D1 ".keep-id-1000-1000/", D1 ".keep-id-a-b",
        ".tmp-123", "ref-0123456789abcdef", D1 ".keep-id-1-2-3",      ""
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(lz_catalog_entry_parse(bad[i], d, &keep_id));
}

static void test_reference_round_trip(void **state)
{
    (void) state;
    const char *src = "docker://127.0.0.1:5000/lz/busybox:v1";
    lz_catalog_ref r = { .checked = 1700000000, .used = 1700000100 }, got;
    memcpy(r.digest_hex, D1, 65);
    lz_catalog_ref_store(dir_fd, src, &r);
    assert_int_equal(lz_catalog_ref_load(dir_fd, src, &got), 0);
    assert_string_equal(got.digest_hex, D1);
    assert_int_equal(got.checked, 1700000000);
    assert_int_equal(got.used, 1700000100);
    /* Another reference's record is not this one's. */
    assert_int_equal(lz_catalog_ref_load(dir_fd, "docker://127.0.0.1:5000/lz/busybox:v2", &got),
                     -1);
    char name[24];
    lz_catalog_ref_name(src, name);
    char *source = NULL;
    assert_int_equal(lz_catalog_ref_read(dir_fd, name, &source, &got), 0);
    assert_string_equal(source, src);
    free(source);
    /* The right text under another reference's name is refused. */
    char text[256];
    snprintf(text, sizeof(text), "lazaret-image-ref-v1 source=%s " D2 ",checked=1,used=2\n", src);
    write_file("ref-0000000000000000", text);
    assert_int_equal(lz_catalog_ref_read(dir_fd, "ref-0000000000000000", &source, &got), -1);
    /* Malformed values. */
    const char *bad[] = { D2 ",checked=1,used=2x", D2 ",used=2,checked=1", D2 "0,checked=1,used=2",
                          D2 ",checked=-1,used=2", "XYZ,checked=1,used=2" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(text, sizeof(text), "lazaret-image-ref-v1 source=%s %s\n", src, bad[i]);
        write_file(name, text);
        assert_int_equal(lz_catalog_ref_load(dir_fd, src, &got), -1);
        assert_int_equal(lz_catalog_ref_read(dir_fd, name, &source, &got), -1);
    }
}

static void test_use_record(void **state)
{
    (void) state;
    lz_catalog_use u = { .source = (char *) "oci:/x y/layout:tag", .started = 42, .offline = true },
                   got = { 0 };
    memcpy(u.digest_hex, D1, 65);
    snprintf(u.entry, sizeof(u.entry), "%s", D1 ".keep-id-1000-1000");
    assert_int_equal(lz_catalog_use_read(dir_fd, &got), 0); /* absent */
    lz_error *err = NULL;
    assert_int_equal(lz_catalog_use_write(dir_fd, dir, &u, &err), 0);
    assert_int_equal(lz_catalog_use_read(dir_fd, &got), 1);
    assert_string_equal(got.digest_hex, D1);
    assert_string_equal(got.entry, D1 ".keep-id-1000-1000");
    assert_string_equal(got.source, "oci:/x y/layout:tag");
    assert_int_equal(got.started, 42);
    assert_true(got.offline);
    lz_catalog_use_clear(&got);
    /* An entry of another digest, a truncated record, a second line of source. */
    const char *bad[] = {
        "digest " D1 "\nentry " D2 "\nstarted 1\noffline 0\nsource a\n",
        "digest " D1 "\nentry " D1 "\nstarted 1\noffline 0\n",
        "digest " D1 "\nentry " D1 "\nstarted 1\noffline 0\nsource a\nb\n",
        "digest " D1 "\nentry " D1 "\nstarted 1\noffline 0\nsource a",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_file(LZ_CATALOG_USE_RECORD, bad[i]);
        errno = 0;
        assert_int_equal(lz_catalog_use_read(dir_fd, &got), -1);
        assert_int_equal(errno, EINVAL);
    }
    write_file(LZ_CATALOG_USE_RECORD,
               "digest " D1 "\nentry " D1 "\nstarted 1\noffline 0\nsource a\n");
    assert_int_equal(lz_catalog_use_read(dir_fd, &got), 1); /* control */
    lz_catalog_use_clear(&got);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_entry_names),
        T(test_reference_round_trip),
        T(test_use_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
