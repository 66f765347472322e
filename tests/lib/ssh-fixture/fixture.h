/* Test helpers for the SSH tests: a throwaway sshd on 127.0.0.1 (sshd.sh beside this file),
 * the client key and the host key pin. Header only; included by tests/lib/test-ssh*.c and
 * tests/lib/test-sftp.c. */
#pragma once

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sshs.h"

struct sshd_fixture {
    char dir[256];
    char script[512];
    uint16_t port;
    struct sshs_key *key;
    char *pin;
};

static inline uint16_t fixture_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    uint16_t port;

    ck_assert_int_ge(fd, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static inline int fixture_sshd_run(struct sshd_fixture *f, const char *verb)
{
    char cmd[1024];

    if (strcmp(verb, "start") == 0)
        snprintf(cmd, sizeof(cmd), "sh '%s' start '%s' %u", f->script, f->dir, f->port);
    else
        snprintf(cmd, sizeof(cmd), "sh '%s' %s '%s'", f->script, verb, f->dir);
    return system(cmd);
}

/* Starts sshd; loads the client key and the host key pin. */
static inline void fixture_start(struct sshd_fixture *f)
{
    const char *src = getenv("SANDBOXD_SOURCE_ROOT");
    char path[512];

    memset(f, 0, sizeof(*f));
    snprintf(f->script, sizeof(f->script), "%s/tests/lib/ssh-fixture/sshd.sh", src ? src : ".");
    snprintf(f->dir, sizeof(f->dir), "/tmp/sandboxd-sshd-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    /* The port is free when probed; another test running beside this one may take it before
     * sshd binds it: then sshd fails to start, and another port is tried. */
    for (int attempt = 1;; attempt++) {
        f->port = fixture_free_port();
        if (fixture_sshd_run(f, "start") == 0)
            break;
        ck_assert_int_lt(attempt, 5);
    }
    snprintf(path, sizeof(path), "%s/client_ed25519", f->dir);
    ck_assert_int_eq(sshs_key_load_file(path, &f->key), 0);
    snprintf(path, sizeof(path), "%s/host_ed25519.pub", f->dir);
    ck_assert_int_eq(sshs_pubkey_file_fingerprint(path, &f->pin), 0);
}

static inline void fixture_stop(struct sshd_fixture *f)
{
    char cmd[600];

    (void)fixture_sshd_run(f, "stop");
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    (void)system(cmd);
    f->key = sshs_key_free(f->key);
    free(f->pin);
    f->pin = NULL;
}

static inline struct sshs_config fixture_config(const struct sshd_fixture *f)
{
    return (struct sshs_config){
        .host = "127.0.0.1",
        .port = f->port,
        .user = "root",
        .key = f->key,
        .host_key_pins = f->pin,
        .connect_timeout_ms = 5000,
    };
}

/* Runs the loop until *flag is set or timeout_ms passes (then fails the test). */
static inline void fixture_tick(uv_timer_t *t)
{
    (void)t;
}

static inline void fixture_run_until(uv_loop_t *loop, const bool *flag, uint64_t timeout_ms)
{
    uint64_t end = uv_hrtime() / 1000000u + timeout_ms;
    uv_timer_t tick;

    /* A ticking timer so UV_RUN_ONCE never sleeps past the deadline check. */
    uv_timer_init(loop, &tick);
    uv_timer_start(&tick, fixture_tick, 50, 50);
    while (!*flag) {
        ck_assert_msg(uv_hrtime() / 1000000u < end, "timed out waiting");
        uv_run(loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* Stops (or resumes) every per-connection process of the fixture's sshd: the sessions it
 * serves stop answering while their sockets stay open. Returns how many were signalled. */
static inline int fixture_freeze_sessions(const struct sshd_fixture *f, pid_t *pids, int max,
                                          int sig)
{
    char path[600], line[64];
    FILE *pf;
    pid_t listener;
    int n = 0;
    bool grew = true;

    if (sig == SIGCONT) {
        for (int i = 0; i < max; i++)
            (void)kill(pids[i], SIGCONT);
        return max;
    }
    snprintf(path, sizeof(path), "%s/sshd.pid", f->dir);
    pf = fopen(path, "r");
    ck_assert_ptr_nonnull(pf);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), pf));
    fclose(pf);
    listener = (pid_t)atoi(line);
    /* Descendants of the listener, found through each process's parent. */
    while (grew) {
        DIR *d = opendir("/proc");
        struct dirent *de;

        grew = false;
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)) && n < max) {
            pid_t pid = (pid_t)atoi(de->d_name), ppid = 0;
            bool known = false, parent_known = false;
            char stat[512], *p;

            if (pid <= 0)
                continue;
            snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
            pf = fopen(path, "r");
            if (!pf)
                continue;
            p = fgets(stat, sizeof(stat), pf) ? strrchr(stat, ')') : NULL;
            fclose(pf);
            if (!p || sscanf(p + 2, "%*c %d", &ppid) != 1)
                continue;
            for (int i = 0; i < n; i++) {
                known |= pids[i] == pid;
                parent_known |= pids[i] == ppid;
            }
            if (!known && (ppid == listener || parent_known)) {
                pids[n++] = pid;
                grew = true;
            }
        }
        closedir(d);
    }
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(kill(pids[i], sig), 0);
    return n;
}
