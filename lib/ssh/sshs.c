/* Establishing SSH sessions, apart from the pool: client keys, host key pins and
 * fingerprints, the copied configuration, a configured libssh session, socket
 * tuning and the blocking connect of SFTP workers. See sshs.h and sshs-internal.h. */
#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "log.h"
#include "macro.h"
#include "sshs-internal.h"
#include "config.h"
#include "sshs.h"

#define COMP "ssh"

/* ---- keys, pins, fingerprints ---- */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void on_libssh_log(int priority, const char *function, const char *buffer, void *userdata)
{
    log_debug("libssh", "%s: %s", strna(function), strna(buffer));
}

static void setup_libssh_log(void)
{
    ssh_set_log_callback(on_libssh_log);
}

static void libssh_init_once(void)
{
    (void)pthread_once(&log_once, setup_libssh_log);
    /* libssh's level is per thread; keep it quiet unless debugging. */
    ssh_set_log_level(log_is_enabled(LOG_DEBUG) ? SSH_LOG_WARNING : SSH_LOG_NOLOG);
}

int sshs_key_load_memory(const void *data, size_t len, struct sshs_key **ret)
{
    _cleanup_free_ char *text = NULL;
    ssh_key key = NULL;
    struct sshs_key *k;

    if (!data || !ret)
        return -EINVAL;
    if (len > SSHS_KEY_FILE_MAX)
        return -EFBIG;
    if (memchr(data, 0, len))
        return -EINVAL;
    text = malloc(len + 1);
    if (!text)
        return -ENOMEM;
    memcpy(text, data, len);
    text[len] = 0;
    libssh_init_once();
    if (ssh_pki_import_privkey_base64(text, NULL, NULL, NULL, &key) != SSH_OK)
        return -EINVAL;
    if (!ssh_key_is_private(key)) {
        ssh_key_free(key);
        return -EINVAL;
    }
    k = calloc(1, sizeof(*k));
    if (!k) {
        ssh_key_free(key);
        return -ENOMEM;
    }
    k->key = key;
    k->refs = 1;
    explicit_bzero(text, len);
    *ret = k;
    return 0;
}

int sshs_key_load_file(const char *path, struct sshs_key **ret)
{
    char *buf = NULL;
    size_t len = 0;
    int r;

    if (!path || !ret)
        return -EINVAL;
    r = config_read_secret_file(path, SSHS_KEY_FILE_MAX, &buf, &len);
    if (r < 0)
        return r;
    r = sshs_key_load_memory(buf, len, ret);
    explicit_bzero(buf, len);
    free(buf);
    return r;
}

struct sshs_key *sshs_key_ref(const struct sshs_key *key)
{
    struct sshs_key *k = (struct sshs_key *)key;

    __atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED);
    return k;
}

struct sshs_key *sshs_key_free(struct sshs_key *key)
{
    if (!key)
        return NULL;
    if (__atomic_sub_fetch(&key->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return NULL;
    ssh_key_free(key->key);
    free(key);
    return NULL;
}

static bool is_pin_sep(char c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

#define PIN_PREFIX "SHA256:"
#define PIN_B64_LEN 43

/* Calls f for each pin; returns the count or -EINVAL. */
static int pins_foreach(const char *pins, bool (*f)(const char *pin, size_t len, void *ud),
                        void *ud)
{
    const char *p = pins;
    int n = 0;

    if (!pins)
        return -EINVAL;
    for (;;) {
        const char *start;
        size_t len;

        while (*p && is_pin_sep(*p))
            p++;
        if (!*p)
            break;
        start = p;
        while (*p && !is_pin_sep(*p))
            p++;
        len = (size_t)(p - start);
        if (len != strlen(PIN_PREFIX) + PIN_B64_LEN ||
            strncmp(start, PIN_PREFIX, strlen(PIN_PREFIX)) != 0)
            return -EINVAL;
        for (size_t i = strlen(PIN_PREFIX); i < len; i++)
            if (!isalnum((unsigned char)start[i]) && start[i] != '+' && start[i] != '/')
                return -EINVAL;
        if (++n > (int)SSHS_PINS_MAX)
            return -EINVAL;
        if (f && f(start, len, ud))
            return n;
    }
    return n > 0 ? n : -EINVAL;
}

int sshs_pins_validate(const char *pins)
{
    return pins_foreach(pins, NULL, NULL);
}

static int key_fingerprint(ssh_key key, char **ret)
{
    unsigned char *hash = NULL;
    size_t hlen = 0;
    char *fp;

    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) != SSH_OK)
        return -EPROTO;
    fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
    ssh_clean_pubkey_hash(&hash);
    if (!fp)
        return -ENOMEM;
    /* libssh allocates with malloc(); hand out a copy so callers can free() it. */
    *ret = strdup(fp);
    ssh_string_free_char(fp);
    return *ret ? 0 : -ENOMEM;
}

int sshs_pubkey_file_fingerprint(const char *path, char **ret)
{
    ssh_key key = NULL;
    int r;

    if (!path || !ret)
        return -EINVAL;
    if (access(path, R_OK) < 0)
        return -errno;
    if (ssh_pki_import_pubkey_file(path, &key) != SSH_OK)
        return -EINVAL;
    r = key_fingerprint(key, ret);
    ssh_key_free(key);
    return r;
}

struct pin_match {
    const char *fp;
    bool found;
};

static bool pin_match_one(const char *pin, size_t len, void *ud)
{
    struct pin_match *m = ud;

    if (strlen(m->fp) == len && memcmp(m->fp, pin, len) == 0)
        m->found = true;
    return m->found;
}

int sshs_check_host_key(ssh_session ssh, const char *pins)
{
    _cleanup_free_ char *fp = NULL;
    ssh_key srv = NULL;
    struct pin_match m = {};
    int r;

    if (ssh_get_server_publickey(ssh, &srv) != SSH_OK)
        return -EPROTO;
    r = key_fingerprint(srv, &fp);
    ssh_key_free(srv);
    if (r < 0)
        return r;
    m.fp = fp;
    r = pins_foreach(pins, pin_match_one, &m);
    if (r < 0)
        return -EBADE;
    if (!m.found) {
        log_debug(COMP, "host key %s matches no pinned fingerprint", fp);
        return -EBADE;
    }
    return 0;
}

bool sshs_error_is_ssh(int error)
{
    switch (error) {
    case -EBADE:
    case -EKEYREJECTED:
    case -ECONNREFUSED:
    case -EHOSTUNREACH:
    case -ENETUNREACH:
    case -ETIMEDOUT:
    case -ECONNRESET:
    case -ECONNABORTED:
    case -ENOTCONN:
    case -EPIPE:
    case -EPROTO:
        return true;
    default:
        return false;
    }
}

int sshs_connect_error(ssh_session ssh)
{
    const char *msg = ssh_get_error(ssh);

    if (!msg)
        return -EPROTO;
    if (strstr(msg, "refused"))
        return -ECONNREFUSED;
    if (strstr(msg, "No route to host"))
        return -EHOSTUNREACH;
    if (strstr(msg, "unreachable"))
        return -ENETUNREACH;
    if (strstr(msg, "imeout") || strstr(msg, "timed out"))
        return -ETIMEDOUT;
    if (strstr(msg, "reset") || strstr(msg, "closed") || strstr(msg, "EOF"))
        return -ECONNRESET;
    return -EPROTO;
}

/* ---- configuration ---- */

static bool is_numeric_host(const char *h)
{
    unsigned char buf[sizeof(struct in6_addr)];

    return h && (inet_pton(AF_INET, h, buf) == 1 || inet_pton(AF_INET6, h, buf) == 1);
}

void sshs_conf_done(struct sshs_conf *c)
{
    if (c->key)
        sshs_key_free((struct sshs_key *)c->key);
    free(c->host);
    free(c->user);
    free(c->pins);
    *c = (struct sshs_conf){};
}

int sshs_conf_copy(const struct sshs_config *cfg, struct sshs_conf *ret)
{
    struct sshs_conf c = {};

    if (!cfg || !is_numeric_host(cfg->host) || !cfg->user || !*cfg->user ||
        strlen(cfg->user) > 255 || !cfg->key || !cfg->key->key)
        return -EINVAL;
    if (sshs_pins_validate(cfg->host_key_pins) < 0)
        return -EINVAL;
    if (cfg->channels_per_session > SSHS_CHANNELS_PER_SESSION_MAX)
        return -EINVAL;
    c.host = strdup(cfg->host);
    c.user = strdup(cfg->user);
    c.pins = strdup(cfg->host_key_pins);
    if (!c.host || !c.user || !c.pins) {
        sshs_conf_done(&c);
        return -ENOMEM;
    }
    c.port = cfg->port ? cfg->port : 22;
    c.observe = cfg->observe;
    c.exec_supervisor = cfg->exec_supervisor;
    c.observe_data = cfg->observe_data;
    c.key = sshs_key_ref(cfg->key);
    c.connect_timeout_ms =
        cfg->connect_timeout_ms ? cfg->connect_timeout_ms : SSHS_CONNECT_TIMEOUT_MS_DEFAULT;
    c.keepalive_ms = cfg->keepalive_ms ? cfg->keepalive_ms : SSHS_KEEPALIVE_MS_DEFAULT;
    c.idle_close_ms = cfg->idle_close_ms ? cfg->idle_close_ms : SSHS_IDLE_CLOSE_MS_DEFAULT;
    c.channels_per_session =
        cfg->channels_per_session ? cfg->channels_per_session : SSHS_CHANNELS_PER_SESSION_DEFAULT;
    *ret = c;
    return 0;
}

ssh_session sshs_new_session(const struct sshs_conf *conf)
{
    ssh_session ssh;
    int off = 0, on = 1;
    unsigned port = conf->port;

    libssh_init_once();
    ssh = ssh_new();
    if (!ssh)
        return NULL;
    /* No config files, no known_hosts, no ~ expansion: everything is explicit. */
    if (ssh_options_set(ssh, SSH_OPTIONS_PROCESS_CONFIG, &off) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_HOST, conf->host) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_PORT, &port) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_USER, conf->user) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_SSH_DIR, "/nonexistent/sandboxd") < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_KNOWNHOSTS, "/dev/null") < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_NODELAY, &on) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_PASSWORD_AUTH, &off) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_KBDINT_AUTH, &off) < 0 ||
        ssh_options_set(ssh, SSH_OPTIONS_GSSAPI_AUTH, &off) < 0) {
        ssh_free(ssh);
        return NULL;
    }
    return ssh;
}

void sshs_tune_socket(int fd, uint32_t keepalive_ms)
{
    int on = 1;
    unsigned user_timeout = keepalive_ms * 3u + 5000u;

    /* Keepalives (SSH_MSG_IGNORE) need an ACK; unacked data past this limit drops the
     * connection, which is how a silently dead peer is noticed. */
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

int sshs_connect_blocking(const struct sshs_conf *conf, unsigned io_timeout_s, ssh_session *ret)
{
    ssh_session ssh;
    long connect_s = (conf->connect_timeout_ms + 999) / 1000;
    long io_s = io_timeout_s;
    int r, rc;

    ssh = sshs_new_session(conf);
    if (!ssh)
        return -ENOMEM;
    if (ssh_options_set(ssh, SSH_OPTIONS_TIMEOUT, &connect_s) < 0) {
        ssh_free(ssh);
        return -ENOMEM;
    }
    if (ssh_connect(ssh) != SSH_OK) {
        r = sshs_connect_error(ssh);
        log_debug(COMP, "%s:%u: connect: %s", conf->host, conf->port, ssh_get_error(ssh));
        ssh_free(ssh);
        return r;
    }
    r = sshs_check_host_key(ssh, conf->pins);
    if (r < 0) {
        ssh_disconnect(ssh);
        ssh_free(ssh);
        return r;
    }
    sshs_tune_socket(ssh_get_fd(ssh), conf->keepalive_ms);
    rc = ssh_userauth_publickey(ssh, NULL, conf->key->key);
    if (rc != SSH_AUTH_SUCCESS) {
        r = rc == SSH_AUTH_ERROR ? sshs_connect_error(ssh) : -EKEYREJECTED;
        ssh_disconnect(ssh);
        ssh_free(ssh);
        return r;
    }
    (void)ssh_options_set(ssh, SSH_OPTIONS_TIMEOUT, &io_s);
    *ret = ssh;
    return 0;
}
