/* Crash points for the recovery tests. See testhook.h. */
#include "testhook.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define COMP "testhook"

static void *crash_later(void *arg)
{
    usleep((useconds_t)(uintptr_t)arg * 1000);
    kill(getpid(), SIGKILL);
    return NULL;
}

void test_crash_point(const char *name)
{
    const char *hooks = getenv("SANDBOXD_TEST_HOOKS");
    const char *at = getenv("SANDBOXD_TEST_CRASH_AT");
    size_t n = strlen(name);
    unsigned long ms = 0;
    pthread_t t;

    if (!hooks || strcmp(hooks, "1") != 0 || !at || strncmp(at, name, n) != 0 ||
        (at[n] != '\0' && at[n] != ':'))
        return;
    if (at[n] == ':')
        ms = strtoul(at + n + 1, NULL, 10);
    log_debug(COMP, "test crash point %s reached (kill in %lu ms)", name, ms);
    if (ms == 0 || pthread_create(&t, NULL, crash_later, (void *)(uintptr_t)ms) != 0)
        kill(getpid(), SIGKILL);
    else
        pthread_detach(t);
}
