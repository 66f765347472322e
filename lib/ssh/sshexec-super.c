/* The exec supervisor's framing, the daemon's side. See sshexec-super.h and
 * nsexec/serve-proto.h (the format). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "serve-proto.h"
#include "buf.h"
#include "sshexec-internal.h"
#include "sshexec-super.h"

/* A request at every limit: the marker, cwd, the command (or argv with a tag per entry),
 * "/bin/sh" and "-c", env with a tag per entry. */
_Static_assert(2 * (SERVE_TOKEN_LEN + 2) + 2 + EXEC_CWD_MAX + 16 + EXEC_COMMAND_MAX +
                       EXEC_ARGV_BYTES_MAX + EXEC_ARGV_MAX + EXEC_ENV_BYTES_MAX +
                       3 * EXEC_ENV_MAX <=
                   SERVE_REQUEST_MAX,
               "a request at every exec limit must fit the supervisor's");
_Static_assert(SSHEXEC_STDIN_MAX <= SERVE_STDIN_MAX, "stdin must fit the supervisor's");

static void put_u32(unsigned char *b, uint32_t v)
{
    b[0] = (unsigned char)(v >> 24);
    b[1] = (unsigned char)(v >> 16);
    b[2] = (unsigned char)(v >> 8);
    b[3] = (unsigned char)v;
}

static int add_frame_header(struct buf *b, char type, size_t len)
{
    unsigned char h[5] = {(unsigned char)type};

    put_u32(h + 1, (uint32_t)len);
    return buf_append(b, h, sizeof(h));
}

static int add_entry(struct buf *b, char tag, const char *s)
{
    int r = buf_append(b, &tag, 1);

    return r < 0 ? r : buf_append(b, s, strlen(s) + 1);
}

static int request_entries(struct buf *b, const struct sshexec_params *p, const char *marker,
                           const char *token)
{
    int r = add_entry(b, 't', token);

    if (r == 0)
        r = add_entry(b, 'm', marker);
    if (r == 0 && p->cwd)
        r = add_entry(b, 'c', p->cwd);
    if (p->command) {
        if (r == 0)
            r = add_entry(b, 'a', "/bin/sh");
        if (r == 0)
            r = add_entry(b, 'a', "-c");
        if (r == 0)
            r = add_entry(b, 'a', p->command);
    } else {
        for (size_t i = 0; r == 0 && p->argv[i]; i++)
            r = add_entry(b, 'a', p->argv[i]);
    }
    for (size_t i = 0; r == 0 && p->env && p->env[i]; i++)
        r = add_entry(b, 'e', p->env[i]);
    return r;
}

int super_parse_line(const char *s, uint16_t *ret_port, char *ret_token)
{
    size_t n = strlen(SERVE_LINE);
    char *end;
    unsigned long port;

    if (!s || strncmp(s, SERVE_LINE, n))
        return -EINVAL;
    s += n;
    port = strtoul(s, &end, 10);
    if (end == s || port < SERVE_PORT_MIN || port > SERVE_PORT_MAX || *end != ' ' ||
        strspn(end + 1, "0123456789abcdef") != SERVE_TOKEN_LEN ||
        strcmp(end + 1 + SERVE_TOKEN_LEN, "\n"))
        return -EINVAL;
    *ret_port = (uint16_t)port;
    memcpy(ret_token, end + 1, SERVE_TOKEN_LEN);
    ret_token[SERVE_TOKEN_LEN] = '\0';
    return 0;
}

int super_request(const struct sshexec_params *params, const char *marker, const char *token,
                  char **ret, size_t *ret_len)
{
    struct buf b = {.max = SERVE_REQUEST_MAX + SSHEXEC_STDIN_MAX +
                           (SSHEXEC_STDIN_MAX / SERVE_CHUNK_MAX + 4) * 5};
    size_t len;
    int r = sshexec_params_validate(params);

    if (r < 0)
        return r;
    r = add_frame_header(&b, 'Q', 0);
    if (r == 0)
        r = request_entries(&b, params, marker, token);
    if (r < 0)
        goto fail;
    len = b.len - 5;
    if (len > SERVE_REQUEST_MAX) {
        r = -E2BIG;
        goto fail;
    }
    put_u32((unsigned char *)b.data + 1, (uint32_t)len);
    for (size_t off = 0; r == 0 && off < params->stdin_len; off += SERVE_CHUNK_MAX) {
        size_t n =
            params->stdin_len - off < SERVE_CHUNK_MAX ? params->stdin_len - off : SERVE_CHUNK_MAX;

        r = add_frame_header(&b, 'I', n);
        if (r == 0)
            r = buf_append(&b, (const char *)params->stdin_data + off, n);
    }
    if (r == 0)
        r = add_frame_header(&b, 'E', 0);
    if (r < 0)
        goto fail;
    *ret_len = b.len;
    *ret = buf_steal(&b);
    return 0;
fail:
    buf_clear(&b, true);
    return r;
}

void super_feed(struct super_parser *sp, const void *data, size_t len,
                const struct super_events *ev, void *ud)
{
    const unsigned char *p = data;

    while (len > 0 && !sp->error && !sp->ended) {
        if (sp->hlen < sizeof(sp->hdr)) {
            sp->hdr[sp->hlen++] = *p++;
            len--;
            if (sp->hlen < sizeof(sp->hdr))
                continue;
            sp->left = (uint32_t)sp->hdr[1] << 24 | (uint32_t)sp->hdr[2] << 16 |
                       (uint32_t)sp->hdr[3] << 8 | sp->hdr[4];
            sp->vlen = 0;
            switch (sp->hdr[0]) {
            case 'O':
            case 'R':
                sp->error = sp->left > SERVE_CHUNK_MAX;
                break;
            case 'X':
            case 'S':
                sp->error = sp->left != 4;
                break;
            default:
                sp->error = true;
            }
            if (sp->error)
                return;
        } else {
            size_t take = len < sp->left ? len : sp->left;

            if (sp->hdr[0] == 'O' || sp->hdr[0] == 'R') {
                ev->output(ud, sp->hdr[0] == 'R', p, take);
            } else {
                memcpy(sp->val + sp->vlen, p, take);
                sp->vlen += take;
            }
            sp->left -= (uint32_t)take;
            p += take;
            len -= take;
        }
        if (sp->left > 0)
            continue;
        sp->hlen = 0;
        if (sp->hdr[0] == 'X' || sp->hdr[0] == 'S') {
            int v = (int)((uint32_t)sp->val[0] << 24 | (uint32_t)sp->val[1] << 16 |
                          (uint32_t)sp->val[2] << 8 | sp->val[3]);

            sp->ended = true;
            if (sp->hdr[0] == 'X')
                ev->exited(ud, v);
            else
                ev->signalled(ud, v);
        }
    }
}

/* The supervisor hands the command, argv and env to execve() as they are: Linux refuses a
 * string of MAX_ARG_STRLEN (32 pages) or more, and all of them past ARG_MAX (a quarter of
 * the stack limit, 2 MiB by default). Bigger ones go the exec channel's way, whose wrapper
 * feeds a long command to the shell through its stdin. */
#define SUPER_ARG_STRLEN_MAX (128 * 1024 - 1)
#define SUPER_ARGS_MAX (1024 * 1024)

static bool strings_fit(const char *const *v, size_t *total)
{
    for (; v && *v; v++) {
        size_t n = strlen(*v);

        if (n > SUPER_ARG_STRLEN_MAX)
            return false;
        *total += n + 1 + sizeof(char *);
    }
    return true;
}

bool super_fits(const struct sshexec_params *params)
{
    const char *const cmd[] = {params->command, NULL};
    size_t total = 0;

    return strings_fit(cmd, &total) && strings_fit(params->argv, &total) &&
           strings_fit(params->env, &total) && total <= SUPER_ARGS_MAX;
}
