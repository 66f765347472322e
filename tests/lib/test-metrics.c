/* Tests for lib/base/metrics and lib/state/audit: series and their cap, histogram buckets, the JSON
 * daemon.metrics returns, and the audit record's logfmt line (quoting, absent fields,
 * log level, the per-event counter). */
#include <check.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "json-util.h"
#include "log.h"
#include "metrics.h"
#include "tests/check-util.h"

static void setup(void)
{
    metrics_free();
    log_set_max_level(LOG_INFO);
    log_set_prefix(false);
    audit_set_journal(0);
}

static void teardown(void)
{
    metrics_free();
}

/* The family named name in metrics_to_json()'s result (borrowed from root). */
static json_object *family(json_object *root, const char *name)
{
    json_object *arr, *n;

    ck_assert(json_object_object_get_ex(root, "metrics", &arr));
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *m = json_object_array_get_idx(arr, i);
        ck_assert(json_object_object_get_ex(m, "name", &n));
        if (strcmp(json_object_get_string(n), name) == 0)
            return m;
    }
    ck_abort_msg("no family %s", name);
    return NULL;
}

START_TEST(test_counters_and_gauges)
{
    metrics_add(M_CREATES, "ready", NULL, 1);
    metrics_add(M_CREATES, "ready", NULL, 2);
    metrics_add(M_CREATES, "failed", NULL, 1);
    ck_assert(metrics_get(M_CREATES, "ready", NULL) == 3);
    ck_assert(metrics_get(M_CREATES, "failed", NULL) == 1);
    ck_assert(metrics_get(M_CREATES, "other", NULL) == 0);
    metrics_set(M_SANDBOXES, "ready", "pve1", 4);
    metrics_set(M_SANDBOXES, "ready", "pve1", 2);
    ck_assert(metrics_get(M_SANDBOXES, "ready", "pve1") == 2);
    metrics_set(M_CREATES, "ready", NULL, 0); /* not a gauge: ignored */
    ck_assert(metrics_get(M_CREATES, "ready", NULL) == 3);
    metrics_clear(M_SANDBOXES);
    ck_assert(metrics_get(M_SANDBOXES, "ready", "pve1") == 0);
    metrics_pool_hit("debian");
    metrics_pool_miss("debian");
    ck_assert(metrics_get(M_POOL_HITS, "debian", NULL) == 1);
    ck_assert(metrics_get(M_POOL_MISSES, "debian", NULL) == 1);
}
END_TEST

START_TEST(test_series_cap)
{
    char label[32];

    for (unsigned i = 0; i < METRICS_SERIES_MAX + 50; i++) {
        snprintf(label, sizeof label, "ep%u", i);
        metrics_add(M_PVE_REQUESTS, label, "200", 1);
    }
    /* the first ones keep their own series; the rest share "_other" */
    ck_assert(metrics_get(M_PVE_REQUESTS, "ep0", "200") == 1);
    ck_assert(metrics_get(M_PVE_REQUESTS, "_other", "_other") == 51);
    _cleanup_json_ json_object *root = metrics_to_json();
    json_object *samples;
    ck_assert(json_object_object_get_ex(family(root, "sandboxd_proxmox_requests_total"), "samples",
                                        &samples));
    ck_assert_uint_eq(json_object_array_length(samples), METRICS_SERIES_MAX);
}
END_TEST

START_TEST(test_histogram)
{
    json_object *samples, *s, *buckets, *v;

    metrics_observe(M_REQUEST_SECONDS, "sandbox.exec", 0.003);
    metrics_observe(M_REQUEST_SECONDS, "sandbox.exec", 0.2);
    metrics_observe(M_REQUEST_SECONDS, "sandbox.exec", 1000); /* only in +Inf */
    metrics_add(M_REQUEST_SECONDS, "sandbox.exec", NULL, 5);  /* not a counter: ignored */
    _cleanup_json_ json_object *root = metrics_to_json();
    json_object *m = family(root, "sandboxd_request_seconds");
    ck_assert(json_object_object_get_ex(m, "type", &v));
    ck_assert_str_eq(json_object_get_string(v), "histogram");
    ck_assert(json_object_object_get_ex(m, "samples", &samples));
    ck_assert_uint_eq(json_object_array_length(samples), 1);
    s = json_object_array_get_idx(samples, 0);
    ck_assert(json_object_object_get_ex(s, "count", &v));
    ck_assert_int_eq(json_object_get_int64(v), 3);
    ck_assert(json_object_object_get_ex(s, "sum", &v));
    ck_assert(json_object_get_double(v) > 1000.2 && json_object_get_double(v) < 1000.21);
    ck_assert(json_object_object_get_ex(s, "buckets", &buckets));
    int64_t prev = 0;
    for (size_t i = 0; i < json_object_array_length(buckets); i++) {
        json_object *b = json_object_array_get_idx(buckets, i), *le, *c;
        ck_assert(json_object_object_get_ex(b, "le", &le));
        ck_assert(json_object_object_get_ex(b, "count", &c));
        ck_assert_int_ge(json_object_get_int64(c), prev); /* cumulative */
        prev = json_object_get_int64(c);
        if (json_object_get_double(le) == 0.005)
            ck_assert_int_eq(prev, 1);
        if (json_object_get_double(le) == 0.25)
            ck_assert_int_eq(prev, 2);
    }
    ck_assert_int_eq(prev, 2); /* the last bound is 300 s */
    /* a family without labels has its one series from the start */
    ck_assert(json_object_object_get_ex(family(root, "sandboxd_ssh_reconnects_total"), "samples",
                                        &samples));
    ck_assert_uint_eq(json_object_array_length(samples), 1);
}
END_TEST

START_TEST(test_audit_logfmt)
{
    struct audit_record rec = {.event = "sandbox.destroyed",
                               .priority = LOG_NOTICE,
                               .sandbox = "sb-0123456789ab",
                               .vmid = 1042,
                               .node = "pve1",
                               .caller_uid = 1000,
                               .owner_uid = 1001,
                               .reason = "a \"quoted\" reason=x \\ end"};
    const char *out;

    capture_begin();
    audit_emit(&rec, "two\nlines");
    out = capture_end();
    ck_assert_str_eq(out, "notice: [audit ] event=sandbox.destroyed sandbox=sb-0123456789ab "
                          "vmid=1042 node=pve1 caller_uid=1000 owner_uid=1001 "
                          "reason=\"a \\\"quoted\\\" reason=x \\\\ end\" message=\"two lines\"\n");
    ck_assert(metrics_get(M_AUDIT_EVENTS, "sandbox.destroyed", NULL) == 1);

    /* unknown fields are left out */
    rec = (struct audit_record){.event = "limit.hit",
                                .priority = LOG_NOTICE,
                                .caller_uid = AUDIT_NO_UID,
                                .owner_uid = AUDIT_NO_UID,
                                .reason = "quota"};
    capture_begin();
    audit_emit(&rec, "limit");
    out = capture_end();
    ck_assert_str_eq(out, "notice: [audit ] event=limit.hit reason=quota message=limit\n");

    /* below the log level: not written, still counted */
    log_set_max_level(LOG_WARNING);
    capture_begin();
    audit_emit(&rec, "limit");
    out = capture_end();
    ck_assert_str_eq(out, "");
    ck_assert(metrics_get(M_AUDIT_EVENTS, "limit.hit", NULL) == 2);
}
END_TEST

START_TEST(test_audit_helpers)
{
    const char *out;

    capture_begin();
    audit_limit("request_bytes", 0, "too long");
    audit_reconcile("destroy", "orphan", "sb-0123456789ab", 7, "pve", "not recorded");
    out = capture_end();
    ck_assert_ptr_nonnull(strstr(out, "notice: [audit ] event=limit.hit caller_uid=0 "
                                      "reason=request_bytes message=\"limit request_bytes hit by "
                                      "uid 0: too long\"\n"));
    ck_assert_ptr_nonnull(strstr(out, "event=reconcile.destroy sandbox=sb-0123456789ab vmid=7 "
                                      "node=pve reason=orphan"));
    ck_assert(metrics_get(M_LIMITS, "request_bytes", NULL) == 1);
    ck_assert(metrics_get(M_RECONCILE_ACTIONS, "destroy", NULL) == 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_counters_and_gauges);
    tcase_add_test(tc, test_series_cap);
    tcase_add_test(tc, test_histogram);
    tcase_add_test(tc, test_audit_logfmt);
    tcase_add_test(tc, test_audit_helpers);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
