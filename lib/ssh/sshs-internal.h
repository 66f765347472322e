/* Internals shared by sshpool.c, sshs.c, sshexec.c and sshfile*.c: the copied
 * configuration, session setup, the blocking connect used by SFTP workers, and the
 * channel-user interface through which sshexec.c runs channels on pooled sessions.
 * Not for use outside lib/ssh/. */
#pragma once

#include <libssh/libssh.h>
#include <stdbool.h>
#include <stdint.h>

#include "sshs.h"

struct sshs_key {
    ssh_key key;
    unsigned refs; /* the loader's plus one per pool/sshfile configuration (atomic) */
};

struct sshs_key *sshs_key_ref(const struct sshs_key *key);

/* An owned copy of struct sshs_config with the defaults filled in. */
struct sshs_conf {
    char *host;
    uint16_t port;
    char *user;
    const struct sshs_key *key;
    char *pins;
    uint32_t connect_timeout_ms;
    uint32_t keepalive_ms;
    uint32_t idle_close_ms;
    uint32_t channels_per_session;
    bool exec_supervisor;
    void (*observe)(int event, unsigned session, void *userdata);
    void *observe_data;
};

int sshs_conf_copy(const struct sshs_config *cfg, struct sshs_conf *ret);
void sshs_conf_done(struct sshs_conf *c);

/* Checks the connected session's host key against the pins: 0, -EBADE or -EPROTO. Any
 * thread (touches only ssh). */
int sshs_check_host_key(ssh_session ssh, const char *pins);
/* Maps a failed ssh_connect() to an errno from libssh's error text. */
int sshs_connect_error(ssh_session ssh);

/* A new libssh session for conf's host, port and user that reads no configuration file
 * and no known_hosts and offers public key authentication only; NULL on ENOMEM. */
ssh_session sshs_new_session(const struct sshs_conf *conf);
/* TCP keepalives and a TCP_USER_TIMEOUT derived from keepalive_ms on a connected socket,
 * so that a silently dead peer is noticed. */
void sshs_tune_socket(int fd, uint32_t keepalive_ms);

/* Connects and authenticates a new session in blocking mode (for SFTP workers), with
 * SSH_OPTIONS_TIMEOUT = io_timeout_s for every later blocking call. */
int sshs_connect_blocking(const struct sshs_conf *conf, unsigned io_timeout_s, ssh_session *ret);

struct sshpool_session;
struct sshpool_chan;

struct sshpool_chan_ops {
    /* The chan got its session (right after attach) or its session had an event: resume the
     * pending steps. May call sshpool_release() on itself and finish. */
    void (*process)(struct sshpool_chan *c);
    /* The session was lost, the pool could not connect, or the pool is closing. The chan is
     * already detached (c->session == NULL); it must free its ssh_channel now (before the
     * session is freed) and finish with error. */
    void (*fail)(struct sshpool_chan *c, int error);
};

struct sshpool_chan {
    const struct sshpool_chan_ops *ops;
    struct sshpool *pool;
    struct sshpool_session *session; /* NULL while queued */
    struct sshpool_chan *prev, *next;
    bool queued;   /* in the pool's queue */
    bool attached; /* in a session's list */
    bool urgent;   /* kill channels: may use the spare channel slots */
};

/* Queues c; it is attached to a session from a later loop iteration. */
void sshpool_submit(struct sshpool *pool, struct sshpool_chan *c);
/* Takes c off the queue or its session (freeing the slot). Idempotent. */
void sshpool_release(struct sshpool_chan *c);
/* The libssh session a chan is attached to. */
ssh_session sshpool_chan_ssh(const struct sshpool_chan *c);
/* Channel callbacks call this so the session services its channels again before it
 * waits for the socket (packets for one channel are handled while serving another). */
void sshpool_chan_mark_dirty(struct sshpool_chan *c);
/* Asks for a service of c's session (every chan's process()) from a later loop iteration:
 * for a chan whose own events (a client socket) came outside the session's. */
void sshpool_chan_wake(struct sshpool_chan *c);
/* Re-arms the session's poll interest after writes. */
void sshpool_chan_flush(struct sshpool_chan *c);
uv_loop_t *sshpool_get_loop(const struct sshpool *pool);
/* Storage for sshexec.c's state of the exec helper in the pool's container (0 at first);
 * only sshexec.c's state setter writes it. */
int sshpool_get_nsexec(const struct sshpool *pool);
void sshpool_set_nsexec(struct sshpool *pool, int state);
/* The same for the exec supervisor's flags (sshexec.c), and whether it is on. */
int sshpool_get_super(const struct sshpool *pool);
void sshpool_set_super(struct sshpool *pool, int flags);
bool sshpool_exec_supervisor(const struct sshpool *pool);
/* Where it listens in the container and its token (sshexec.c sets them with state serving). */
void sshpool_set_super_addr(struct sshpool *pool, uint16_t port, const char *token);
uint16_t sshpool_get_super_port(const struct sshpool *pool);
const char *sshpool_get_super_token(const struct sshpool *pool);
