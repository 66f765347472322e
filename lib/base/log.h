/* Logging: one line per message on stderr, a fixed-width component tag, and
 * "<N>" priority prefixes when stderr is connected to the journal
 * ($JOURNAL_STREAM names stderr's device:inode). Levels are syslog's.
 * Library code logs at debug level only; the layer that decides logs once. */
#pragma once

#include <stdbool.h>
#include <syslog.h>

#include "macro.h"

void log_set_max_level(int level);
int log_get_max_level(void);
/* Parses "debug", "info", "notice", "warning", "err"/"error". Returns the level or -EINVAL. */
int log_level_from_string(const char *s);
const char *log_level_to_string(int level);
/* Forces journal-style "<N>" prefixes on or off (default: detected from $JOURNAL_STREAM). */
void log_set_prefix(bool on);
bool log_is_enabled(int level);
/* True when stderr is the journal's stream ($JOURNAL_STREAM names it). */
bool log_stderr_is_journal(void);

void log_emit(int level, const char *component, const char *fmt, ...) _printf_(3, 4);
/* Logs and returns r (a negative errno); "%m" in fmt refers to -r. */
int log_emit_errno(int level, int r, const char *component, const char *fmt, ...) _printf_(4, 5);

#define log_debug(comp, ...)                                                                       \
    do {                                                                                           \
        if (log_is_enabled(LOG_DEBUG))                                                             \
            log_emit(LOG_DEBUG, comp, __VA_ARGS__);                                                \
    } while (0)
#define log_info(comp, ...) log_emit(LOG_INFO, comp, __VA_ARGS__)
#define log_notice(comp, ...) log_emit(LOG_NOTICE, comp, __VA_ARGS__)
#define log_warning(comp, ...) log_emit(LOG_WARNING, comp, __VA_ARGS__)
#define log_error(comp, ...) log_emit(LOG_ERR, comp, __VA_ARGS__)
#define log_error_errno(r, comp, ...) log_emit_errno(LOG_ERR, r, comp, __VA_ARGS__)
#define log_warning_errno(r, comp, ...) log_emit_errno(LOG_WARNING, r, comp, __VA_ARGS__)
#define log_debug_errno(r, comp, ...) log_emit_errno(LOG_DEBUG, r, comp, __VA_ARGS__)
