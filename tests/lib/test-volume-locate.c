/* Tests for lib/state/volume-locate: where each volume is after a crash at any point of a
 * move between two containers, from their descriptions and configs alone. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "marker.h"
#include "volume-locate.h"

#include "tests/check-util.h"

#define HOLDER 100
#define SANDBOX 205

static struct marker_volume vol(const char *name, unsigned mp)
{
    struct marker_volume v = {.owner_uid = 1000, .size_gb = 2, .mp = mp};

    snprintf(v.name, sizeof v.name, "%s", name);
    return v;
}

/* A description with the lines of vs[0..n). */
static char *desc_of(const struct marker_volume *vs, size_t n)
{
    char *d = strdup("human text\n");

    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < n; i++) {
        char *next = NULL;

        ck_assert_int_eq(marker_volume_set(d, &vs[i], &next), 0);
        free(d);
        d = next;
    }
    return d;
}

static struct json_object *conf(const char *json)
{
    struct json_object *o = json_tokener_parse(json);

    ck_assert_ptr_nonnull(o);
    return o;
}

/* The move of volume "data" from the holder's mp3 to the sandbox's mp0, stopped after
 * `writes` of its three writes (target line, move, source line removed). */
static void located_after(int writes, uint32_t want_vmid, unsigned want_mp, uint32_t want_stale)
{
    struct marker_volume src = vol("data", 3), dst = vol("data", 0), other = vol("other", 0);
    struct marker_volume holder_lines[] = {other, src};
    _cleanup_free_ char *hd = desc_of(holder_lines, writes >= 3 ? 1 : 2);
    _cleanup_free_ char *sd = desc_of(&dst, writes >= 1 ? 1 : 0);
    struct json_object *hc = conf(writes >= 2 ? "{\"mp0\":\"local:vm-100-disk-1,mp=/o\"}"
                                              : "{\"mp0\":\"local:vm-100-disk-1,mp=/o\","
                                                "\"mp3\":\"local:vm-100-disk-4,mp=/data\"}");
    struct json_object *sc =
        conf(writes >= 2
                 ? "{\"rootfs\":\"local:vm-205-disk-0\",\"mp0\":\"local:vm-205-disk-1,mp=/data\"}"
                 : "{\"rootfs\":\"local:vm-205-disk-0\"}");
    const struct volume_ct cts[] = {{HOLDER, hd, hc}, {SANDBOX, sd, sc}};
    _cleanup_free_ struct volume_place *p = NULL;
    size_t n = 0;
    uint32_t bad = 1;

    ck_assert_int_eq(volume_locate(cts, 2, &p, &n, &bad), 0);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(p[0].v.name, "data");
    ck_assert_uint_eq(p[0].vmid, want_vmid);
    ck_assert_uint_eq(p[0].v.mp, want_mp);
    ck_assert_uint_eq(p[0].stale_vmid, want_stale);
    ck_assert(!p[0].missing);
    ck_assert_str_eq(p[1].v.name, "other");
    ck_assert_uint_eq(p[1].vmid, HOLDER);
    ck_assert_uint_eq(p[1].stale_vmid, 0);
    /* the same answer whatever order the containers are listed in */
    {
        const struct volume_ct rev[] = {cts[1], cts[0]};
        _cleanup_free_ struct volume_place *q = NULL;

        ck_assert_int_eq(volume_locate(rev, 2, &q, &n, &bad), 0);
        ck_assert_uint_eq(n, 2);
        ck_assert_uint_eq(q[0].vmid, want_vmid);
        ck_assert_uint_eq(q[0].v.mp, want_mp);
        ck_assert_uint_eq(q[0].stale_vmid, want_stale);
    }
    json_object_put(hc);
    json_object_put(sc);
}

START_TEST(test_move_each_point)
{
    located_after(0, HOLDER, 3, 0);       /* nothing written yet */
    located_after(1, HOLDER, 3, SANDBOX); /* target line written, not moved */
    located_after(2, SANDBOX, 0, HOLDER); /* moved, source line not removed yet */
    located_after(3, SANDBOX, 0, 0);      /* done */
}
END_TEST

START_TEST(test_missing_and_bad)
{
    struct marker_volume a = vol("a", 1);
    _cleanup_free_ char *d = desc_of(&a, 1);
    struct json_object *c = conf("{\"mp0\":\"local:vm-1-disk-1,mp=/x\"}");
    const struct volume_ct cts[] = {
        {300, "sandboxd-volume:v1 name=x owner=1 size=1 key=mp0 check=00000000\n", c},
        {301, d, c},
        {302, NULL, NULL},
    };
    _cleanup_free_ struct volume_place *p = NULL;
    size_t n = 0;
    uint32_t bad = 0;

    ck_assert_int_eq(volume_locate(cts, 3, &p, &n, &bad), 0);
    ck_assert_uint_eq(bad, 300);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(p[0].v.name, "a");
    ck_assert_uint_eq(p[0].vmid, 301);
    ck_assert(p[0].missing); /* its line says mp1, the config has no mp1 */
    ck_assert_int_eq(volume_locate(NULL, 1, &p, &n, &bad), -EINVAL);
    json_object_put(c);
}
END_TEST

START_TEST(test_free_mp)
{
    struct marker_volume a = vol("a", 1);
    _cleanup_free_ char *d = desc_of(&a, 1);
    struct json_object *c = conf("{\"mp0\":\"x\",\"unused2\":\"y\",\"mp4\":\"z\"}");
    struct json_object *full = json_object_new_object();
    unsigned mp = 99;

    ck_assert_int_eq(volume_free_mp(c, d, &mp), 0);
    ck_assert_uint_eq(mp, 3);
    ck_assert_int_eq(volume_free_mp(NULL, NULL, &mp), 0);
    ck_assert_uint_eq(mp, 0);
    ck_assert(volume_config_has_mp(c, 4));
    ck_assert(!volume_config_has_mp(c, 2));
    for (unsigned i = 0; i <= MARKER_VOLUME_MP_MAX; i++) {
        char key[16];

        snprintf(key, sizeof key, "mp%u", i);
        json_object_object_add(full, key, json_object_new_string("v"));
    }
    mp = 99;
    ck_assert_int_eq(volume_free_mp(full, NULL, &mp), -ENOSPC);
    ck_assert_uint_eq(mp, 99);
    ck_assert_int_eq(volume_free_mp(c, "sandboxd-volume:v1 broken\n", &mp), -EBADMSG);
    json_object_put(c);
    json_object_put(full);
}
END_TEST

/* volume_held(): a line whose key is a mount point holds; a line alone (its move not made, or
 * made away) does not; lines that do not parse count as holding; no description: none. */
START_TEST(test_held)
{
    struct marker_volume data = vol("data", 1), logs = vol("logs", 2), got = {0};
    struct marker_volume both[] = {data, logs};
    _cleanup_free_ char *d = desc_of(both, 2);
    struct json_object *c;
    char buf[4096];

    c = json_object_new_string(d);
    snprintf(buf, sizeof buf, "{\"description\":%s,\"mp2\":\"local:vm-205-disk-2,mp=/l\"}",
             json_object_to_json_string(c));
    json_object_put(c);
    c = conf(buf);
    ck_assert_int_eq(volume_held(c, &got), 1);
    ck_assert_str_eq(got.name, "logs");
    ck_assert_uint_eq(got.mp, 2);
    json_object_object_del(c, "mp2");
    ck_assert_int_eq(volume_held(c, &got), 0); /* lines without their mount points */
    json_object_object_add(c, "mp0", json_object_new_string("local:vm-205-disk-3,mp=/x"));
    ck_assert_int_eq(volume_held(c, &got), 0); /* a mount point of no line: not ours */
    json_object_object_add(c, "description",
                           json_object_new_string("sandboxd-volume:v1 name=data broken\n"));
    ck_assert_int_eq(volume_held(c, &got), -EBADMSG);
    json_object_object_add(c, "description", json_object_new_int(3));
    ck_assert_int_eq(volume_held(c, &got), -EBADMSG);
    json_object_put(c);
    c = conf("{\"mp0\":\"local:vm-205-disk-3,mp=/x\"}");
    ck_assert_int_eq(volume_held(c, &got), 0);
    json_object_put(c);
    ck_assert_str_eq(got.name, "logs"); /* written only on success */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("volume-locate");
    TCase *tc = tcase_create("volume-locate");

    tcase_add_test(tc, test_move_each_point);
    tcase_add_test(tc, test_missing_and_bad);
    tcase_add_test(tc, test_free_mp);
    tcase_add_test(tc, test_held);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
