/* Tests for lib/engine/placement: the choice of a node (free memory and CPU, the daemon's own
 * sandboxes, max_per_node, offline and failed nodes, nodes without the template), the spread
 * over equal nodes, and the parsing of /cluster/resources?type=node. */
#include <check.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

#define GIB (1024ull * 1024 * 1024)
#define MIB (1024ull * 1024)

static struct placement_node node(const char *name)
{
    return (struct placement_node){
        .name = name,
        .has_template = true,
        .state = {
            .online = true, .known = true, .maxmem = 8 * GIB, .mem_other = 512 * MIB, .cpu = 0.01}};
}

static size_t pick(struct placement_node *n, size_t count, unsigned cap)
{
    enum placement_refusal why = 0;
    size_t i = 99;

    ck_assert_int_eq(placement_pick(n, count, cap, 512 * MIB, &i, &why), 0);
    ck_assert_uint_lt(i, count);
    return i;
}

/* Places k sandboxes of 512 MiB one after another, as the engine accounts them. */
static void place_many(struct placement_node *n, size_t count, unsigned k, unsigned cap)
{
    for (unsigned j = 0; j < k; j++) {
        size_t i = pick(n, count, cap);

        n[i].live++;
        n[i].own_mem += 512 * MIB;
    }
}

START_TEST(test_equal_nodes_spread_within_one)
{
    struct placement_node n[3] = {node("a"), node("b"), node("c")};

    for (unsigned k = 1; k <= 64; k++) {
        unsigned lo, hi;

        place_many(n, 3, 1, 0);
        lo = hi = n[0].live;
        for (size_t i = 1; i < 3; i++) {
            lo = n[i].live < lo ? n[i].live : lo;
            hi = n[i].live > hi ? n[i].live : hi;
        }
        ck_assert_uint_le(hi - lo, 1);
    }
}
END_TEST

START_TEST(test_capacity_and_load)
{
    struct placement_node n[2] = {node("small"), node("big")};

    /* twice the memory takes about twice the sandboxes */
    n[1].state.maxmem = 16 * GIB;
    place_many(n, 2, 30, 0);
    ck_assert_uint_ge(n[1].live, 2 * n[0].live - 2);
    ck_assert_uint_le(n[1].live, 2 * n[0].live + 3);

    /* memory used by others counts; a busy CPU counts */
    struct placement_node m[2] = {node("used"), node("free")};
    m[0].state.mem_other = 4 * GIB;
    ck_assert_uint_eq(pick(m, 2, 0), 1);
    m[0].state.mem_other = m[1].state.mem_other;
    m[1].state.cpu = 0.9;
    ck_assert_uint_eq(pick(m, 2, 0), 0);

    /* a report off by less than one sandbox (one that just started) does not decide */
    struct placement_node l[2] = {node("lagging"), node("other")};
    l[0].state.mem_other += 400 * MIB;
    l[1].live = 1;
    l[1].own_mem = 512 * MIB;
    ck_assert_uint_eq(pick(l, 2, 0), 0);

    /* until every node is reported, the daemon's own count decides */
    struct placement_node u[2] = {node("x"), node("y")};
    u[0].state.known = false;
    u[1].state.mem_other = 6 * GIB;
    u[0].live = 2;
    u[1].live = 1;
    ck_assert_uint_eq(pick(u, 2, 0), 1);
}
END_TEST

START_TEST(test_exclusions)
{
    struct placement_node n[3] = {node("a"), node("b"), node("c")};
    enum placement_refusal why = 0;
    size_t i;

    n[0].state.online = false;
    n[1].state.failed = true;
    ck_assert_uint_eq(pick(n, 3, 0), 2);
    n[2].has_template = false;
    ck_assert_int_eq(placement_pick(n, 3, 0, 0, &i, &why), -EHOSTDOWN);
    ck_assert_int_eq(why, PLACEMENT_ALL_DOWN);
    for (size_t k = 0; k < 3; k++)
        n[k].has_template = false;
    ck_assert_int_eq(placement_pick(n, 3, 0, 0, &i, &why), -ENOENT);
    ck_assert_int_eq(why, PLACEMENT_NO_TEMPLATE);

    /* max_per_node: a full node is skipped even when it has the most room */
    struct placement_node m[2] = {node("full"), node("other")};
    m[0].state.maxmem = 64 * GIB;
    m[0].live = 4;
    m[1].live = 1;
    ck_assert_uint_eq(pick(m, 2, 0), 0);
    ck_assert_uint_eq(pick(m, 2, 4), 1);
    m[1].live = 4;
    ck_assert_int_eq(placement_pick(m, 2, 4, 0, &i, &why), -ENOSPC);
    ck_assert_int_eq(why, PLACEMENT_ALL_FULL);
    place_many(m, 2, 0, 4);
}
END_TEST

START_TEST(test_report_parse)
{
    struct placement_report r[4];
    json_object *data = json_tokener_parse(
        "[{\"id\":\"node/pve1\",\"type\":\"node\",\"node\":\"pve1\",\"status\":\"online\","
        "\"cpu\":0.25,\"maxcpu\":2,\"mem\":1073741824,\"maxmem\":8589934592},"
        "{\"id\":\"node/pve2\",\"type\":\"node\",\"node\":\"pve2\",\"status\":\"offline\"},"
        "{\"id\":\"lxc/100\",\"type\":\"lxc\",\"node\":\"pve1\",\"vmid\":100},"
        "{\"type\":\"node\",\"node\":\"\"}, 7]");
    json_object *bad = json_tokener_parse("{\"type\":\"node\"}");

    ck_assert_int_eq(placement_report_parse(data, r, 4), 2);
    ck_assert_str_eq(r[0].name, "pve1");
    ck_assert(r[0].online && r[0].sized);
    ck_assert_uint_eq(r[0].mem, GIB);
    ck_assert_uint_eq(r[0].maxmem, 8 * GIB);
    ck_assert(r[0].cpu > 0.24 && r[0].cpu < 0.26);
    ck_assert_str_eq(r[1].name, "pve2");
    ck_assert(!r[1].online && !r[1].sized);
    ck_assert_int_eq(placement_report_parse(data, r, 1), 1);
    ck_assert_int_eq(placement_report_parse(bad, r, 4), -EBADMSG);
    ck_assert_int_eq(placement_report_parse(NULL, r, 4), -EBADMSG);
    json_object_put(data);
    json_object_put(bad);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("placement");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_equal_nodes_spread_within_one);
    tcase_add_test(tc, test_capacity_and_load);
    tcase_add_test(tc, test_exclusions);
    tcase_add_test(tc, test_report_parse);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
