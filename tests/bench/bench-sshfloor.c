/* bench-sshfloor: the SSH floor of an exec. One libssh session to a host, kept open; each
 * round opens an exec channel, runs COMMAND, reads its output to EOF, takes its exit status
 * and closes the channel. Prints p50 and p99 of the round trip in ms on one line:
 *
 *   bench-sshfloor HOST KEY_FILE N [COMMAND]    (user root, port 22; COMMAND default `true`)
 *
 * The host key is not checked (a measuring tool for the simulator's containers, never a
 * test). A measuring tool, not a test: it prints figures and asserts nothing. */
#include <libssh/libssh.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static int one_exec(ssh_session s, const char *command)
{
    ssh_channel ch = ssh_channel_new(s);
    char buf[4096];
    int status;

    if (!ch || ssh_channel_open_session(ch) != SSH_OK ||
        ssh_channel_request_exec(ch, command) != SSH_OK) {
        ssh_channel_free(ch);
        return -1;
    }
    while (ssh_channel_read(ch, buf, sizeof(buf), 0) > 0 ||
           ssh_channel_read(ch, buf, sizeof(buf), 1) > 0)
        ;
    status = ssh_channel_get_exit_status(ch);
    ssh_channel_send_eof(ch);
    ssh_channel_close(ch);
    ssh_channel_free(ch);
    return status;
}

int main(int argc, char **argv)
{
    ssh_session s;
    ssh_key key = NULL;
    double *lat;
    int n, port = 22;

    if (argc < 4 || (n = atoi(argv[3])) <= 0) {
        fprintf(stderr, "usage: bench-sshfloor HOST KEY_FILE N [COMMAND]\n");
        return 2;
    }
    const char *command = argc > 4 ? argv[4] : "true";
    s = ssh_new();
    ssh_options_set(s, SSH_OPTIONS_HOST, argv[1]);
    ssh_options_set(s, SSH_OPTIONS_PORT, &port);
    ssh_options_set(s, SSH_OPTIONS_USER, "root");
    ssh_options_set(s, SSH_OPTIONS_NODELAY, &(int){1}); /* as the daemon's sessions */
    if (ssh_connect(s) != SSH_OK || ssh_pki_import_privkey_file(argv[2], NULL, NULL, NULL, &key) ||
        ssh_userauth_publickey(s, NULL, key) != SSH_AUTH_SUCCESS) {
        fprintf(stderr, "bench-sshfloor: connect/auth: %s\n", ssh_get_error(s));
        return 1;
    }
    lat = calloc((size_t)n, sizeof(*lat));
    for (int i = 0; i < 20; i++)
        (void)one_exec(s, command);
    for (int i = 0; i < n; i++) {
        double t = now_ms();
        if (one_exec(s, command) < 0) {
            fprintf(stderr, "bench-sshfloor: exec failed: %s\n", ssh_get_error(s));
            return 1;
        }
        lat[i] = now_ms() - t;
    }
    qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
    printf("p50 %.2f ms  p99 %.2f ms  (n=%d)\n", lat[n / 2], lat[(n - 1) * 99 / 100], n);
    free(lat);
    ssh_key_free(key);
    ssh_disconnect(s);
    ssh_free(s);
    return 0;
}
