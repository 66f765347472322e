/* systemd service notifications: READY=1, STATUS=, STOPPING=1, RELOADING=1 and
 * WATCHDOG=1 pings from a loop timer. All are no-ops when $NOTIFY_SOCKET is unset. */
#pragma once

#include <stdbool.h>
#include <uv.h>

#include "macro.h"

void notify_ready(void);
void notify_stopping(void);
void notify_reloading(void);
void notify_status(const char *fmt, ...) _printf_(1, 2);

struct watchdog {
    uv_timer_t timer;
    bool active;
};

/* Starts WATCHDOG=1 pings at half of the interval systemd asks for (none when the
 * watchdog is off). Returns 0 or a negative errno. */
int watchdog_start(struct watchdog *w, uv_loop_t *loop);
/* Closes the timer (no-op when not started). */
void watchdog_stop(struct watchdog *w);
