/* The test hooks test.sleep, test.notify and test.clock_step. See methods-test.h. */
#include "methods-test.h"

#include <stdlib.h>

#include "util.h"
#include "rpc.h"

#define TEST_SLEEP_MAX_MS 60000
#define TEST_NOTIFY_MAX 10000

/* test.sleep {"ms": N}: replies {"slept_ms": N} after N ms. Only registered when
 * SANDBOXD_TEST_HOOKS=1: the tests use it to hold requests in flight. */
struct sleeper {
    uv_timer_t timer;
    struct req *req;
    int64_t ms;
};

static void sleeper_closed(uv_handle_t *h)
{
    free(h->data);
}

static void sleeper_finish(struct sleeper *sl, bool cancelled)
{
    struct req *r = sl->req;
    json_object *o;

    sl->req = NULL;
    uv_close((uv_handle_t *)&sl->timer, sleeper_closed);
    if (cancelled) {
        req_error(r, RPC_SHUTTING_DOWN, "cancelled");
        return;
    }
    o = json_object_new_object();
    json_object_object_add(o, "slept_ms", json_object_new_int64(sl->ms));
    req_reply(r, o);
}

static void sleeper_fired(uv_timer_t *t)
{
    sleeper_finish(t->data, false);
}

static void sleeper_disconnected(struct req *r, void *userdata)
{
    struct sleeper *sl = userdata;

    (void)r;
    if (sl->req)
        sleeper_finish(sl, true);
}

/* The integer member `name` of params in 0..max, or -1. */
static int64_t test_int_param(json_object *params, const char *name, int64_t max)
{
    json_object *v = NULL;

    if (!params || !json_object_is_type(params, json_type_object) ||
        !json_object_object_get_ex(params, name, &v) || !json_object_is_type(v, json_type_int) ||
        json_object_get_int64(v) < 0 || json_object_get_int64(v) > max)
        return -1;
    return json_object_get_int64(v);
}

void method_test_sleep(struct req *r, void *params, void *userdata)
{
    int64_t ms = test_int_param(params, "ms", TEST_SLEEP_MAX_MS);
    struct sleeper *sl;

    (void)userdata;
    if (ms < 0) {
        req_invalid_params(r, "ms", "an integer 0..60000 is required");
        return;
    }
    sl = calloc(1, sizeof *sl);
    if (!sl) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    sl->req = r;
    sl->ms = ms;
    uv_timer_init(req_loop(r), &sl->timer);
    sl->timer.data = sl;
    req_on_disconnect(r, sleeper_disconnected, sl);
    uv_timer_start(&sl->timer, sleeper_fired, (uint64_t)sl->ms, 0);
}

/* test.notify {"count": N}: sends N server notifications "test.event" with params
 * {"request_id": <id>, "seq": i} on the caller's connection, then replies
 * {"sent": N}. Test hook, like test.sleep. */
void method_test_notify(struct req *r, void *params, void *userdata)
{
    int64_t n = test_int_param(params, "count", TEST_NOTIFY_MAX), sent = 0;
    json_object *o;

    (void)userdata;
    if (n < 0) {
        req_invalid_params(r, "count", "an integer 0..10000 is required");
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        json_object *p = json_object_new_object();

        json_object_object_add(p, "request_id", json_object_get(req_id(r)));
        json_object_object_add(p, "seq", json_object_new_int64(i));
        if (req_notify(r, "test.event", p) == 0)
            sent++;
    }
    o = json_object_new_object();
    json_object_object_add(o, "sent", json_object_new_int64(sent));
    req_reply(r, o);
}

/* test.clock_step {"seconds": N}: the engine's wall clock jumps by N seconds (-10^8..10^8),
 * as an NTP step would; replies {"stepped": N}. Test hook, like test.sleep. */
void method_test_clock_step(struct req *r, void *params, void *userdata)
{
    json_object *v = NULL, *o;
    int64_t n;

    (void)userdata;
    if (!params || !json_object_is_type(params, json_type_object) ||
        !json_object_object_get_ex(params, "seconds", &v) ||
        !json_object_is_type(v, json_type_int) || (n = json_object_get_int64(v)) < -100000000 ||
        n > 100000000) {
        req_invalid_params(r, "seconds", "an integer -100000000..100000000 is required");
        return;
    }
    now_realtime_test_step(n);
    o = json_object_new_object();
    json_object_object_add(o, "stepped", json_object_new_int64(n));
    req_reply(r, o);
}
