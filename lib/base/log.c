#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int max_level = LOG_INFO;
static int prefix_mode = -1; /* -1: not yet detected */

static const char *const level_names[] = {
    [LOG_EMERG] = "emerg", [LOG_ALERT] = "alert",   [LOG_CRIT] = "crit",
    [LOG_ERR] = "err",     [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
    [LOG_INFO] = "info",   [LOG_DEBUG] = "debug",
};

void log_set_max_level(int level)
{
    max_level = level;
}

int log_get_max_level(void)
{
    return max_level;
}

bool log_is_enabled(int level)
{
    return level <= max_level;
}

int log_level_from_string(const char *s)
{
    if (!s)
        return -EINVAL;
    if (strcmp(s, "error") == 0)
        return LOG_ERR;
    for (size_t i = 0; i < ELEMENTSOF(level_names); i++)
        if (level_names[i] && strcmp(s, level_names[i]) == 0)
            return (int)i;
    return -EINVAL;
}

const char *log_level_to_string(int level)
{
    if (level < 0 || (size_t)level >= ELEMENTSOF(level_names))
        return "unknown";
    return level_names[level];
}

void log_set_prefix(bool on)
{
    prefix_mode = on;
}

bool log_stderr_is_journal(void)
{
    const char *e = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;

    if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
        return false;
    if (fstat(STDERR_FILENO, &st) < 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static void log_write(int level, const char *component, const char *fmt, va_list ap)
{
    char msg[2048];
    int saved = errno;

    if (prefix_mode < 0)
        prefix_mode = log_stderr_is_journal();
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* One message, one line: newlines inside would split it in the journal. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (prefix_mode)
        fprintf(stderr, "<%d>[%-6s] %s\n", level, component ? component : "", msg);
    else
        fprintf(stderr, "%s: [%-6s] %s\n", log_level_to_string(level), component ? component : "",
                msg);
    errno = saved;
}

void log_emit(int level, const char *component, const char *fmt, ...)
{
    va_list ap;

    if (!log_is_enabled(level))
        return;
    va_start(ap, fmt);
    log_write(level, component, fmt, ap);
    va_end(ap);
}

int log_emit_errno(int level, int r, const char *component, const char *fmt, ...)
{
    va_list ap;

    if (!log_is_enabled(level))
        return r;
    errno = r < 0 ? -r : r;
    va_start(ap, fmt);
    log_write(level, component, fmt, ap);
    va_end(ap);
    return r;
}
