/* The daemon's side of the exec supervisor's framing (nsexec/serve-proto.h): the request's
 * bytes and the parsing of what comes back. Pure: no libssh, no loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sshexec.h"

/* The supervisor's folder in the container, next to the exec helper (sshexec.c). */
#define SUPER_DIR "/root/.sandboxd-serve-"
/* The kill frame ('K', no payload). */
#define SUPER_KILL_FRAME "K\0\0\0\0"
#define SUPER_KILL_FRAME_LEN 5

/* The whole stream the daemon sends for one exec: the request, the stdin frames, the end of
 * stdin (*ret, *ret_len bytes, to free). -EINVAL/-E2BIG as sshexec_start(). */
/* Whether params can go to the supervisor: each string under Linux's MAX_ARG_STRLEN and all
 * of them well under ARG_MAX (else the exec channel's wrapper runs it). */
bool super_fits(const struct sshexec_params *params);

int super_request(const struct sshexec_params *params, const char *marker, const char *token,
                  char **ret, size_t *ret_len);
/* Parses the supervisor's line (after the check line): 0 and *ret_port, ret_token (33 bytes)
 * set, or -EINVAL. */
int super_parse_line(const char *s, uint16_t *ret_port, char *ret_token);

struct super_parser {
    unsigned char hdr[5];
    size_t hlen;
    uint32_t left;
    unsigned char val[4];
    size_t vlen;
    bool ended; /* the exit or signal frame came */
    bool error; /* a frame no supervisor sends */
};

struct super_events {
    void (*output)(void *ud, bool is_stderr, const void *data, size_t len);
    void (*exited)(void *ud, int code);
    void (*signalled)(void *ud, int signo);
};

/* Feeds bytes of the stream; calls ev's callbacks as frames complete (output as it comes). */
void super_feed(struct super_parser *sp, const void *data, size_t len,
                const struct super_events *ev, void *ud);
