#include "notify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

#include "log.h"

#define COMP "notify"

void notify_ready(void)
{
    (void)sd_notify(0, "READY=1");
}

void notify_stopping(void)
{
    (void)sd_notify(0, "STOPPING=1");
}

void notify_reloading(void)
{
    (void)sd_notify(0, "RELOADING=1");
}

void notify_status(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int n;

    n = snprintf(buf, sizeof buf, "STATUS=");
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    (void)sd_notify(0, buf);
}

static void on_watchdog(uv_timer_t *t)
{
    (void)sd_notify(0, "WATCHDOG=1");
}

int watchdog_start(struct watchdog *w, uv_loop_t *loop)
{
    uint64_t usec = 0;
    uint64_t ms;
    int r;

    w->active = false;
    r = sd_watchdog_enabled(0, &usec);
    if (r < 0)
        return log_warning_errno(r, COMP, "watchdog settings: %m, ignoring");
    if (r == 0 || usec == 0)
        return 0;
    ms = usec / 2000; /* half the interval, in ms */
    if (ms == 0)
        ms = 1;
    r = uv_timer_init(loop, &w->timer);
    if (r < 0)
        return r;
    w->active = true;
    (void)sd_notify(0, "WATCHDOG=1");
    uv_timer_start(&w->timer, on_watchdog, ms, ms);
    log_debug(COMP, "watchdog ping every %" PRIu64 " ms", ms);
    return 0;
}

void watchdog_stop(struct watchdog *w)
{
    if (!w->active)
        return;
    w->active = false;
    uv_close((uv_handle_t *)&w->timer, NULL);
}
