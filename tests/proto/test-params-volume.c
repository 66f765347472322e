/* Tests for proto/params-volume: volume.create, volume.delete, sandbox.create's volumes,
 * sandbox.attach and sandbox.detach. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "params-volume.h"
#include "tests/check-util.h"

static json_object *js(const char *s)
{
    json_object *o = json_tokener_parse(s);

    ck_assert_ptr_nonnull(o);
    return o;
}

static int create(const char *s, struct params_volume_create *p, struct params_error *e)
{
    json_object *o = js(s);
    int r = params_volume_create_spec.parse(o, p, e);

    json_object_put(o);
    return r;
}

START_TEST(test_create)
{
    struct params_volume_create p;
    struct params_volume_name d;
    struct params_error e;
    json_object *o;

    ck_assert_int_eq(create("{\"name\":\"data-1\",\"size_gb\":4}", &p, &e), 0);
    ck_assert_str_eq(p.name, "data-1");
    ck_assert_int_eq(p.size_gb, 4);
    ck_assert_int_eq(create("{\"name\":\"data\"}", &p, &e), -EINVAL);
    ck_assert_str_eq(e.param, "size_gb");
    ck_assert_int_eq(create("{\"name\":\"data\",\"size_gb\":0}", &p, &e), -EINVAL);
    ck_assert_int_eq(create("{\"name\":\"data\",\"size_gb\":1025}", &p, &e), -EINVAL);
    ck_assert_int_eq(create("{\"name\":\"Data\",\"size_gb\":1}", &p, &e), -EINVAL);
    ck_assert_str_eq(e.param, "name");
    ck_assert_int_eq(create("{\"name\":\"\",\"size_gb\":1}", &p, &e), -EINVAL);
    ck_assert_int_eq(
        create("{\"name\":\"a23456789012345678901234567890123\",\"size_gb\":1}", &p, &e), -EINVAL);
    ck_assert_int_eq(
        create("{\"name\":\"a2345678901234567890123456789012\",\"size_gb\":1}", &p, &e), 0);
    ck_assert_int_eq(create("{\"name\":\"d\",\"size_gb\":1,\"x\":1}", &p, &e), -EINVAL);
    ck_assert_str_eq(e.param, "x");
    o = js("{\"name\":\"d\"}");
    ck_assert_int_eq(params_volume_name_spec.parse(o, &d, &e), 0);
    ck_assert_str_eq(d.name, "d");
    json_object_put(o);
    o = js("{\"name\":\"d\",\"size_gb\":1}");
    ck_assert_int_eq(params_volume_name_spec.parse(o, &d, &e), -EINVAL);
    json_object_put(o);
}
END_TEST

/* sandbox.attach (detach: false) or sandbox.detach; 0 or -EINVAL with e->param. */
static int attach(bool detach, const char *s, struct params_sandbox_attach *p,
                  struct params_error *e)
{
    json_object *o = js(s);
    int r = (detach ? params_sandbox_detach_spec : params_sandbox_attach_spec).parse(o, p, e);

    json_object_put(o);
    return r;
}

START_TEST(test_attach_detach)
{
    struct params_sandbox_attach p;
    struct params_error e;
    static const struct {
        const char *json, *param;
    } bad[] = {
        {"{\"volume\":\"v\",\"path\":\"/a\"}", "id"},
        {"{\"id\":\"sb-1\",\"path\":\"/a\"}", "volume"},
        {"{\"id\":\"sb-1\",\"volume\":\"V\",\"path\":\"/a\"}", "volume"},
        {"{\"id\":\"sb-1\",\"volume\":\"v\"}", "path"},
        {"{\"id\":\"sb-1\",\"volume\":\"v\",\"path\":\"a\"}", "path"},
        {"{\"id\":\"sb-1\",\"volume\":\"v\",\"path\":\"/a/../b\"}", "path"},
        {"{\"id\":\"sb-1\",\"volume\":\"v\",\"path\":\"/a,ro=1\"}", "path"},
        {"{\"id\":\"sb-1\",\"volume\":\"v\",\"path\":\"/a\",\"read_only\":1}", "read_only"},
        {"{\"id\":\"sb-1\",\"volume\":\"v\",\"path\":\"/a\",\"name\":\"v\"}", "name"},
    };

    ck_assert_int_eq(
        attach(false, "{\"id\":\"sb-1\",\"volume\":\"v-1\",\"path\":\"/mnt/v\"}", &p, &e), 0);
    ck_assert_str_eq(p.id, "sb-1");
    ck_assert_str_eq(p.volume, "v-1");
    ck_assert_str_eq(p.path, "/mnt/v");
    ck_assert(!p.read_only);
    ck_assert_int_eq(attach(false,
                            "{\"id\":\"sb-1\",\"volume\":\"v\",\"path\":\"/v\",\"read_only\":true}",
                            &p, &e),
                     0);
    ck_assert(p.read_only);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(attach(false, bad[i].json, &p, &e), -EINVAL);
        ck_assert_str_eq(e.param, bad[i].param);
    }
    ck_assert_int_eq(attach(true, "{\"id\":\"sb-1\",\"volume\":\"v\"}", &p, &e), 0);
    ck_assert_str_eq(p.volume, "v");
    ck_assert_int_eq(attach(true, "{\"id\":\"sb-1\"}", &p, &e), -EINVAL);
    ck_assert_str_eq(e.param, "volume");
    ck_assert_int_eq(attach(true, "{\"id\":\"sb-1\",\"volume\":\"v\",\"path\":\"/a\"}", &p, &e),
                     -EINVAL);
    ck_assert_str_eq(e.param, "path");
}
END_TEST

START_TEST(test_paths)
{
    static const char *const good[] = {"/data", "/home/user/work", "/a.b/c_d-e", "/..x", "/x.."};
    static const char *const bad[] = {"",       "/",       "data", "/data/", "//data", "/a//b",
                                      "/a/./b", "/a/../b", "/..",  "/a/.",   "/a,b",   "/a=b",
                                      "/a b",   "/a\nb",   "/a:b", NULL};
    char longest[PARAMS_VOLUME_PATH_MAX + 2];

    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
        ck_assert_msg(params_volume_path_valid(good[i]), "%s", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        ck_assert_msg(!params_volume_path_valid(bad[i]), "%s", bad[i] ? bad[i] : "NULL");
    memset(longest, 'a', sizeof(longest));
    longest[0] = '/';
    longest[PARAMS_VOLUME_PATH_MAX] = '\0';
    ck_assert(params_volume_path_valid(longest));
    longest[PARAMS_VOLUME_PATH_MAX] = 'a';
    longest[PARAMS_VOLUME_PATH_MAX + 1] = '\0';
    ck_assert(!params_volume_path_valid(longest));
}
END_TEST

static int mounts(const char *s, struct params_volume_mount *m, size_t *n, struct params_error *e)
{
    json_object *o = js(s);
    int r = params_volume_mounts(o, m, n, e);

    json_object_put(o);
    return r;
}

START_TEST(test_mounts)
{
    struct params_volume_mount m[PARAMS_VOLUMES_MAX];
    struct params_error e;
    size_t n = 99;

    ck_assert_int_eq(mounts("{}", m, &n, &e), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(mounts("{\"volumes\":[{\"name\":\"a\",\"path\":\"/data\"},"
                            "{\"name\":\"b\",\"path\":\"/srv/b\",\"read_only\":true}]}",
                            m, &n, &e),
                     0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(m[0].name, "a");
    ck_assert_str_eq(m[0].path, "/data");
    ck_assert(!m[0].read_only);
    ck_assert(m[1].read_only);
    n = 99;
    ck_assert_int_eq(mounts("{\"volumes\":{}}", m, &n, &e), -EINVAL);
    ck_assert_str_eq(e.param, "volumes");
    ck_assert_uint_eq(n, 99);
    ck_assert_int_eq(mounts("{\"volumes\":[{\"name\":\"a\",\"path\":\"/x\"},"
                            "{\"name\":\"a\",\"path\":\"/y\"}]}",
                            m, &n, &e),
                     -EINVAL);
    ck_assert_str_eq(e.param, "volumes");
    ck_assert_int_eq(mounts("{\"volumes\":[{\"name\":\"a\",\"path\":\"/x\"},"
                            "{\"name\":\"b\",\"path\":\"/x\"}]}",
                            m, &n, &e),
                     -EINVAL);
    ck_assert_int_eq(mounts("{\"volumes\":[{\"name\":\"a\",\"path\":\"/x/\"}]}", m, &n, &e),
                     -EINVAL);
    ck_assert_str_eq(e.param, "volumes[0].path");
    ck_assert_int_eq(mounts("{\"volumes\":[{\"path\":\"/x\"}]}", m, &n, &e), -EINVAL);
    ck_assert_str_eq(e.param, "volumes[0].name");
    ck_assert_int_eq(
        mounts("{\"volumes\":[{\"name\":\"a\",\"path\":\"/x\",\"ro\":true}]}", m, &n, &e), -EINVAL);
    ck_assert_str_eq(e.param, "volumes[0].ro");
    ck_assert_int_eq(
        mounts("{\"volumes\":[{\"name\":\"a\",\"path\":\"/x\",\"read_only\":1}]}", m, &n, &e),
        -EINVAL);
    ck_assert_str_eq(e.param, "volumes[0].read_only");
    ck_assert_int_eq(mounts("{\"volumes\":[1]}", m, &n, &e), -EINVAL);
    ck_assert_int_eq(mounts("{\"volumes\":[{\"name\":\"a\",\"path\":\"/1\"},{\"name\":\"b\","
                            "\"path\":\"/2\"},{\"name\":\"c\",\"path\":\"/3\"},{\"name\":\"d\","
                            "\"path\":\"/4\"},{\"name\":\"e\",\"path\":\"/5\"},{\"name\":\"f\","
                            "\"path\":\"/6\"},{\"name\":\"g\",\"path\":\"/7\"},{\"name\":\"h\","
                            "\"path\":\"/8\"},{\"name\":\"i\",\"path\":\"/9\"}]}",
                            m, &n, &e),
                     -EINVAL);
    ck_assert_str_eq(e.param, "volumes");
    ck_assert_uint_eq(n, 99);
}
END_TEST

/* sandbox.create keeps its volumes (owned by the params), compares them for idempotency, and
 * refuses bad ones with the entry's field named. */
START_TEST(test_sandbox_create)
{
    struct params_sandbox_create a, b;
    struct params_error e;
    json_object *o;

    o = js("{\"volumes\":[{\"name\":\"data\",\"path\":\"/data\"},"
           "{\"name\":\"cache\",\"path\":\"/srv/cache\",\"read_only\":true}]}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(o, &a, &e), 0);
    ck_assert_int_eq(params_sandbox_create_spec.parse(o, &b, &e), 0);
    json_object_put(o);
    ck_assert_uint_eq(a.n_volumes, 2);
    ck_assert_str_eq(a.volumes[0].name, "data");
    ck_assert_str_eq(a.volumes[1].path, "/srv/cache");
    ck_assert(!a.volumes[0].read_only && a.volumes[1].read_only);
    ck_assert(params_sandbox_create_equal(&a, &b));
    b.volumes[1].read_only = false;
    ck_assert(!params_sandbox_create_equal(&a, &b));
    params_sandbox_create_done(&b);
    o = js("{}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(o, &b, &e), 0);
    json_object_put(o);
    ck_assert_uint_eq(b.n_volumes, 0);
    ck_assert_ptr_null(b.volumes);
    ck_assert(!params_sandbox_create_equal(&a, &b));
    params_sandbox_create_done(&a);
    params_sandbox_create_done(&b);
    o = js("{\"volumes\":[{\"name\":\"data\",\"path\":\"relative\"}]}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(o, &a, &e), -EINVAL);
    json_object_put(o);
    ck_assert_str_eq(e.param, "volumes[0].path");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("params-volume");
    TCase *tc = tcase_create("params-volume");

    tcase_add_test(tc, test_create);
    tcase_add_test(tc, test_paths);
    tcase_add_test(tc, test_mounts);
    tcase_add_test(tc, test_sandbox_create);
    tcase_add_test(tc, test_attach_detach);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
