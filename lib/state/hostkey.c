/* Per-sandbox SSH host keys. See hostkey.h. */
#include "macro.h"

#include "hostkey.h"

#include <errno.h>
#include <libssh/libssh.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"

#define PIN_PREFIX "SHA256:"
#define PIN_B64_LEN 43 /* 32 bytes, unpadded */
#define KEY_TYPE "ssh-ed25519"

/* set -e: any failure before the reload leaves sshd presenting the old key, and the create
 * fails. The new key is written under a temporary name and renamed into place; every other
 * host key (the template's) is removed; sshd rereads its host keys on SIGHUP (re-exec),
 * keeping the sessions it serves. The re-executed sshd writes its pid file once it listens
 * again: waiting for it (at most 5 s) spares the reconnect a refused attempt and its retry
 * delay. */
const char HOSTKEY_REKEY_SCRIPT[] =
    "set -e; umask 077; d=/etc/ssh; k=$d/ssh_host_ed25519_key; mkdir -p $d; "
    "rm -f $k.sandboxd $k.sandboxd.pub; "
    "ssh-keygen -q -t ed25519 -N '' -C '' -f $k.sandboxd </dev/null >/dev/null; "
    "for f in $d/ssh_host_*_key; do rm -f \"$f\" \"$f.pub\"; done; "
    "mv -f $k.sandboxd.pub $k.pub; mv -f $k.sandboxd $k; cat $k.pub; "
    "if [ -s /run/sshd.pid ]; then p=$(cat /run/sshd.pid); rm -f /run/sshd.pid; kill -HUP \"$p\"; "
    "i=0; while [ ! -s /run/sshd.pid ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; "
    "elif command -v systemctl >/dev/null; then "
    "systemctl reload ssh 2>/dev/null || systemctl reload sshd; "
    "else echo 'sshd: no pid file and no systemctl' >&2; exit 3; fi";

static int pin_of_b64(const char *b64, size_t n, char ret[HOSTKEY_PIN_MAX])
{
    _cleanup_free_ char *s = strndup(b64, n);
    unsigned char *hash = NULL;
    ssh_key key = NULL;
    size_t hlen = 0;
    char *fp;
    int r = -EBADMSG;

    if (!s)
        return -ENOMEM;
    if (ssh_pki_import_pubkey_base64(s, SSH_KEYTYPE_ED25519, &key) != SSH_OK)
        return -EBADMSG;
    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) == SSH_OK) {
        fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
        if (fp && strlen(fp) < HOSTKEY_PIN_MAX && hostkey_pin_is_valid(fp)) {
            snprintf(ret, HOSTKEY_PIN_MAX, "%s", fp);
            r = 0;
        }
        ssh_string_free_char(fp);
        ssh_clean_pubkey_hash(&hash);
    }
    ssh_key_free(key);
    return r;
}

int hostkey_pin_from_output(const char *out, size_t n, char ret[HOSTKEY_PIN_MAX])
{
    const char *p = out, *end;

    if (!out)
        return -EBADMSG;
    n = MIN(n, (size_t)HOSTKEY_OUTPUT_MAX);
    end = out + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t tl = strlen(KEY_TYPE);

        if ((size_t)(le - p) > tl + 1 && memcmp(p, KEY_TYPE, tl) == 0 && p[tl] == ' ') {
            const char *b = p + tl + 1, *be = b;

            while (be < le && *be != ' ' && *be != '\r')
                be++;
            return pin_of_b64(b, (size_t)(be - b), ret);
        }
        p = le + 1;
    }
    return -EBADMSG;
}

bool hostkey_pin_is_valid(const char *pin)
{
    const char *b = pin ? startswith(pin, PIN_PREFIX) : NULL;

    if (!b || strlen(b) != PIN_B64_LEN)
        return false;
    for (const char *q = b; *q; q++)
        if (!(('A' <= *q && *q <= 'Z') || ('a' <= *q && *q <= 'z') || ('0' <= *q && *q <= '9') ||
              *q == '+' || *q == '/'))
            return false;
    return true;
}

int hostkey_pin_to_hex(const char *pin, char ret[SHA256_HEX_SIZE])
{
    static const char hexd[] = "0123456789abcdef";
    char padded[PIN_B64_LEN + 2];
    _cleanup_free_ uint8_t *raw = NULL;
    size_t n = 0;

    if (!hostkey_pin_is_valid(pin))
        return -EINVAL;
    snprintf(padded, sizeof padded, "%s=", pin + strlen(PIN_PREFIX));
    if (b64_decode(padded, strlen(padded), &raw, &n) < 0 || n != 32)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        ret[2 * i] = hexd[raw[i] >> 4];
        ret[2 * i + 1] = hexd[raw[i] & 15];
    }
    ret[64] = '\0';
    return 0;
}

static int hexval(char c)
{
    if ('0' <= c && c <= '9')
        return c - '0';
    if ('a' <= c && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int hostkey_hex_to_pin(const char *hex, char ret[HOSTKEY_PIN_MAX])
{
    uint8_t raw[32];
    _cleanup_free_ char *b = NULL;
    size_t bl = 0;

    if (!hex || strlen(hex) != 64)
        return -EINVAL;
    for (size_t i = 0; i < 32; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        raw[i] = (uint8_t)(hi << 4 | lo);
    }
    if (b64_encode(raw, sizeof raw, &b, &bl) < 0)
        return -ENOMEM;
    while (bl > 0 && b[bl - 1] == '=')
        b[--bl] = '\0';
    if (bl != PIN_B64_LEN)
        return -EINVAL;
    snprintf(ret, HOSTKEY_PIN_MAX, PIN_PREFIX "%s", b);
    return 0;
}
