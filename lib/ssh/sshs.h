/* SSH sessions on the loop: libssh in non-blocking mode, one uv_poll_t per session, and a
 * small pool of sessions per sandbox (sshpool) that exec channels (sshexec.h) run on.
 *
 * Owns: the private key object, host key pinning, connect + auth as resumable steps with a
 * deadline, keepalives, loss detection and lazy reconnection.
 * Never: resolves names (the host must be a numeric address), reads OpenSSH config files,
 * connects without a pinned host key, logs above debug.
 * Threading: every function here runs on the loop thread, except sshs_key_* (any thread) and
 * the internal blocking connect helper used by the SFTP workers (sshfile.c).
 *
 * Errors (negative errno, translated once from libssh):
 *   -EBADE         the server's host key matches none of the pinned fingerprints
 *   -EKEYREJECTED  public key authentication refused
 *   -ECONNREFUSED, -EHOSTUNREACH, -ENETUNREACH   TCP connect failed
 *   -ETIMEDOUT     connect + key exchange + auth did not finish within connect_timeout_ms
 *   -ECONNRESET    the session was lost (EOF, socket error, keepalive failure) while in use
 *   -EPROTO        other SSH protocol failure (libssh SSH_ERROR)
 *   -ECANCELED     the pool was closed, or the operation was cancelled
 * sshs_error_is_ssh() says whether an error is one of the SSH-level ones above (the daemon
 * maps those to -32005; -ECANCELED and plain errno values are not SSH-level). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define SSHS_CONNECT_TIMEOUT_MS_DEFAULT 10000u
#define SSHS_KEEPALIVE_MS_DEFAULT 15000u
/* A pool's ready sessions beyond one are closed after this long without a channel (each
 * holds libssh's buffers and cipher contexts, about 23 KiB); the pool connects them again
 * when every ready session is full. */
#define SSHS_IDLE_CLOSE_MS_DEFAULT 60000u
/* OpenSSH's sshd allows MaxSessions (default 10) channels per connection; keep two spare
 * for the kill channels that enforce exec timeouts. */
#define SSHS_CHANNELS_PER_SESSION_DEFAULT 8u
#define SSHS_CHANNELS_PER_SESSION_MAX 1024u
#define SSHS_SESSIONS_MAX 16u
#define SSHS_PINS_MAX 8u
#define SSHS_KEY_FILE_MAX (64u * 1024u)

/* A private key, loaded once and shared (read-only) by every session that uses it. It is
 * reference counted: each pool and sshfile keeps its own reference, so sshs_key_free() (which
 * drops the loader's reference) may be called while they still run. */
struct sshs_key;

/* Loads an OpenSSH or PEM private key (unencrypted). -ENOENT/-EACCES from opening the file,
 * -EINVAL when it is not a key, -EFBIG past SSHS_KEY_FILE_MAX. */
int sshs_key_load_file(const char *path, struct sshs_key **ret);
/* Same from memory: the key file's text (PEM/OpenSSH armour included). */
int sshs_key_load_memory(const void *data, size_t len, struct sshs_key **ret);
struct sshs_key *sshs_key_free(struct sshs_key *key);

/* Validates a pin list: one or more OpenSSH fingerprints "SHA256:<base64, no padding>"
 * (43 characters after the colon), separated by commas and/or whitespace, at most
 * SSHS_PINS_MAX. Returns the number of pins, or -EINVAL. */
int sshs_pins_validate(const char *pins);
/* The OpenSSH-style SHA256 fingerprint of a public key file (e.g. a host key's .pub), as
 * "SHA256:..." in *ret (caller frees). For tools and tests. */
int sshs_pubkey_file_fingerprint(const char *path, char **ret);

/* True for the SSH-level errors listed at the top of this file. */
bool sshs_error_is_ssh(int error);

struct sshs_config {
    const char *host;              /* numeric IPv4 or IPv6 literal; names are refused (-EINVAL) */
    uint16_t port;                 /* 0 = 22 */
    const char *user;              /* e.g. "root" */
    const struct sshs_key *key;    /* pools and sshfiles take their own reference */
    const char *host_key_pins;     /* required, see sshs_pins_validate() */
    uint32_t connect_timeout_ms;   /* 0 = default; one attempt: TCP + kex + host key + auth */
    uint32_t keepalive_ms;         /* 0 = default; idle sessions send SSH_MSG_IGNORE this often */
    uint32_t idle_close_ms;        /* 0 = default; see SSHS_IDLE_CLOSE_MS_DEFAULT */
    uint32_t channels_per_session; /* 0 = default; exec channels open at once per session */
    bool exec_supervisor;          /* execs through the container's exec supervisor where it
                                    * can run (sshexec.h); false: exec channels only */
    /* Optional observer of a pool's sessions (loop thread; never once the pool closes):
     * SSHS_EVENT_LOST when a ready session is lost, SSHS_EVENT_RESTORED when a session that
     * was lost is ready again. */
    void (*observe)(int event, unsigned session, void *userdata);
    void *observe_data;
};
enum { SSHS_EVENT_LOST = 1, SSHS_EVENT_RESTORED };

/* A pool of N sessions to one host. Exec channels go to the least loaded ready session;
 * when none is ready the pool connects (lazily) and queues the request. A lost session fails
 * the execs in flight on it with -ECONNRESET and is reconnected for the next request. */
struct sshpool;

enum sshpool_state {
    SSHPOOL_STATE_DISCONNECTED, /* no socket; connected on demand */
    SSHPOOL_STATE_CONNECTING,   /* TCP connect + key exchange (ssh_connect() resumed) */
    SSHPOOL_STATE_AUTHENTICATING,
    SSHPOOL_STATE_READY,
    SSHPOOL_STATE_CLOSING, /* handle closing; the libssh session is freed in the close callback */
    _SSHPOOL_STATE_MAX,
};
const char *sshpool_state_to_string(enum sshpool_state s);

typedef void (*sshpool_connect_cb)(struct sshpool *pool, int error, void *userdata);
typedef void (*sshpool_close_cb)(void *userdata);

/* Copies cfg (strings included; takes a reference on the key). n_sessions in 1..SSHS_SESSIONS_MAX.
 * Does not connect yet. -EINVAL for a bad host/pins/user/n_sessions. */
int sshpool_new(uv_loop_t *loop, const struct sshs_config *cfg, unsigned n_sessions,
                struct sshpool **ret);

/* Connects the pool's sessions and calls cb once: with 0 as soon as one session is
 * authenticated, or with an error when deadline_ms (from now) passes. Connection refused,
 * unreachable and per-attempt timeouts are retried (sshd may still be starting); -EBADE and
 * -EKEYREJECTED are final and reported at once. -EBUSY if a connect is already running.
 * The remaining sessions keep connecting in the background. */
int sshpool_connect(struct sshpool *pool, uint64_t deadline_ms, sshpool_connect_cb cb,
                    void *userdata);

/* Asynchronous teardown: fails every queued or running exec with -ECANCELED (their done
 * callbacks run, each once), cancels a pending connect (cb with -ECANCELED), kills nothing
 * remotely, disconnects and frees every session, frees the pool, then calls cb (may be
 * NULL) from a later loop iteration. The pool must not be used after this call. Safe to call
 * from any sshpool/sshexec callback. */
void sshpool_close(struct sshpool *pool, sshpool_close_cb cb, void *userdata);

struct sshpool_stats {
    unsigned sessions;       /* configured */
    unsigned sessions_ready; /* authenticated now */
    unsigned channels;       /* exec channels open (kill channels included) */
    unsigned queued;         /* execs waiting for a channel slot or a session */
    uint64_t connects;       /* successful connects so far (first ones included) */
    uint64_t sessions_lost;
};
void sshpool_get_stats(const struct sshpool *pool, struct sshpool_stats *ret);
/* The last connect/session error text from libssh ("" if none); valid until the next loop
 * iteration. For the daemon's error data, never for decisions. */
const char *sshpool_last_error(const struct sshpool *pool);
