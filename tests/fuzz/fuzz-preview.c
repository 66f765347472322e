/* libFuzzer target over the request side of preview URLs (proto/preview-http.h): arbitrary
 * bytes, cut into pieces of sizes the first byte chooses, fed to the first-request-head
 * parser as the listener feeds what it reads; once the head is done, its Host is matched
 * against base_url patterns and its tokens parsed, and a URL is made back from a match.
 * Invariants that must hold for any input abort the run. */
#include "preview-http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static const char *const bases[] = {"http://{port}-{id}.preview.test:8090",
                                    "https://{id}.{port}.p.example", "http://x{port}{id}y/"};

static void check_done(const struct preview_head *h)
{
    const char *host = preview_head_host(h), *tokens[2];
    char id[PARAMS_ID_MAX + 1], pid[PREVIEW_ID_LEN + 1], mac[PREVIEW_MAC_HEX + 1];
    uint64_t exp;

    CHECK(strlen(host) <= PREVIEW_HOST_MAX);
    for (const char *c = host; *c; c++)
        CHECK(!(*c >= 'A' && *c <= 'Z'));
    CHECK(strlen(preview_head_target(h)) <= PREVIEW_HEAD_MAX);
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        unsigned port = 0;
        char *url;

        if (!preview_host_match(bases[i], host, &port, id))
            continue;
        CHECK(port >= 1 && port <= 65535);
        CHECK(strlen(id) >= 1 && strlen(id) <= PARAMS_ID_MAX);
        CHECK(strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(id));
        CHECK(preview_url(bases[i], port, id, "t", &url) == 0);
        free(url);
    }
    tokens[0] = preview_head_query_token(h);
    tokens[1] = preview_head_cookie_token(h);
    for (size_t i = 0; i < 2; i++) {
        if (!tokens[i])
            continue;
        CHECK(strlen(tokens[i]) <= PREVIEW_TOKEN_MAX);
        if (preview_token_parse(tokens[i], pid, &exp, mac) == 0)
            CHECK(strncmp(pid, "pv-", 3) == 0 && strlen(mac) == PREVIEW_MAC_HEX);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct preview_head *h;
    enum preview_head_state st = PREVIEW_HEAD_MORE;
    size_t piece, off = 1;

    if (size < 1)
        return 0;
    piece = data[0] ? data[0] : size;
    h = preview_head_new();
    CHECK(h);
    while (off < size && st == PREVIEW_HEAD_MORE) {
        size_t n = size - off < piece ? size - off : piece;

        st = preview_head_feed(h, (const char *)data + off, n);
        off += n;
    }
    if (st == PREVIEW_HEAD_DONE)
        check_done(h);
    CHECK(preview_head_feed(h, "x", 1) == st || st == PREVIEW_HEAD_MORE);
    preview_head_free(h);
    return 0;
}
