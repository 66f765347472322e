/* Per-sandbox host keys and what the marker carries besides ownership: lib/state/hostkey.c (the
 * rekey script's output, pin conversions), the marker's hostkey field, the labels line
 * (lib/state/marker-labels.c) and the registry record's host_key. The rekey itself against a real
 * sshd is tests/e2e/test_hostkeys.py. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostkey.h"
#include "json-util.h"
#include "macro.h"
#include "marker.h"
#include "registry.h"
#include "tests/check-util.h"

/* An ed25519 public key and its OpenSSH fingerprint (ssh-keygen -lf). */
#define PUB_B64 "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"

static char *pin_of(const char *publine)
{
    FILE *f = fopen("/tmp/test-hostkey.pub", "w");
    char *fp = NULL;

    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", publine);
    fclose(f);
    f = popen("ssh-keygen -lf /tmp/test-hostkey.pub | cut -d' ' -f2", "r");
    ck_assert_ptr_nonnull(f);
    fp = calloc(1, 128);
    ck_assert_ptr_nonnull(fgets(fp, 128, f));
    pclose(f);
    unlink("/tmp/test-hostkey.pub");
    fp[strcspn(fp, "\n")] = '\0';
    return fp;
}

START_TEST(test_pin_from_output)
{
    char pin[HOSTKEY_PIN_MAX];
    _cleanup_free_ char *want = pin_of("ssh-ed25519 " PUB_B64);
    const char *out = "some noise\nssh-ed25519 " PUB_B64 " \nmore\n";

    ck_assert_int_eq(hostkey_pin_from_output(out, strlen(out), pin), 0);
    ck_assert_str_eq(pin, want);
    ck_assert(hostkey_pin_is_valid(pin));
    /* no comment, no newline */
    out = "ssh-ed25519 " PUB_B64;
    ck_assert_int_eq(hostkey_pin_from_output(out, strlen(out), pin), 0);
    ck_assert_str_eq(pin, want);
    /* nothing usable: no line, another type, a broken key, a truncated output */
    ck_assert_int_eq(hostkey_pin_from_output("", 0, pin), -EBADMSG);
    out = "ssh-rsa " PUB_B64 "\n";
    ck_assert_int_eq(hostkey_pin_from_output(out, strlen(out), pin), -EBADMSG);
    out = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMq\n";
    ck_assert_int_eq(hostkey_pin_from_output(out, strlen(out), pin), -EBADMSG);
    out = "ssh-ed25519 " PUB_B64;
    ck_assert_int_eq(hostkey_pin_from_output(out, 20, pin), -EBADMSG);
    ck_assert_int_eq(hostkey_pin_from_output(NULL, 0, pin), -EBADMSG);
}
END_TEST

START_TEST(test_pin_hex)
{
    _cleanup_free_ char *pin = pin_of("ssh-ed25519 " PUB_B64);
    char hex[SHA256_HEX_SIZE], back[HOSTKEY_PIN_MAX];

    ck_assert_int_eq(hostkey_pin_to_hex(pin, hex), 0);
    ck_assert_uint_eq(strlen(hex), 64);
    ck_assert(hex_is_valid(hex, 64));
    ck_assert_int_eq(hostkey_hex_to_pin(hex, back), 0);
    ck_assert_str_eq(back, pin);
    ck_assert_int_eq(hostkey_pin_to_hex("SHA256:short", hex), -EINVAL);
    ck_assert_int_eq(hostkey_pin_to_hex("MD5:" PUB_B64, hex), -EINVAL);
    ck_assert_int_eq(hostkey_pin_to_hex("SHA256:Rw9jGAoZvD9XcKVPdZCTJ4V3f8jO7Bh8kUVF5vkFmP!", hex),
                     -EINVAL);
    ck_assert_int_eq(hostkey_hex_to_pin("00", back), -EINVAL);
    ck_assert_int_eq(hostkey_hex_to_pin(
                         "X123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", back),
                     -EINVAL);
    ck_assert(!hostkey_pin_is_valid(NULL));
    ck_assert(!hostkey_pin_is_valid("SHA256:"));
}
END_TEST

static struct marker sample(void)
{
    struct marker m = {
        .instance = "i-0123456789ab",
        .sandbox = "sb-7k2m9x4q0abc",
        .owner_uid = 1000,
        .created = 1796212800,
        .expires = 1796216400,
    };
    return m;
}

START_TEST(test_marker_hostkey)
{
    _cleanup_free_ char *pin = pin_of("ssh-ed25519 " PUB_B64), *desc = NULL, *upd = NULL;
    struct marker m = sample(), got;

    ck_assert_int_eq(hostkey_pin_to_hex(pin, m.hostkey), 0);
    ck_assert_int_eq(marker_set("a human's note\n", &m, &desc), 0);
    ck_assert_ptr_nonnull(strstr(desc, " hostkey="));
    ck_assert_int_eq(marker_parse(desc, &got), 0);
    ck_assert_str_eq(got.hostkey, m.hostkey);
    /* a renew keeps it */
    ck_assert_int_eq(marker_update_expiry(desc, 1796300000, &upd), 0);
    ck_assert_int_eq(marker_parse(upd, &got), 0);
    ck_assert_str_eq(got.hostkey, m.hostkey);
    /* a changed pin fails the check: not ours */
    {
        char *p = strstr(upd, " hostkey=") + strlen(" hostkey=");
        *p = *p == '0' ? '1' : '0';
        ck_assert_int_eq(marker_parse(upd, &got), -EBADMSG);
    }
    /* upper case is not hex */
    m.hostkey[0] = 'A';
    ck_assert_int_eq(marker_set(NULL, &m, &desc), -EINVAL);
}
END_TEST

START_TEST(test_labels_line)
{
    _cleanup_json_ json_object *l = json_object_new_object(), *got = NULL, *none = NULL;
    _cleanup_free_ char *line = NULL, *desc = NULL, *renewed = NULL;
    struct marker m = sample(), pm;
    char big[256];

    json_object_object_add(l, "task", json_object_new_string("t-91"));
    json_object_object_add(l, "a.b_c-d", json_object_new_string("sp ace+plus/slash=é\"q\\"));
    json_object_object_add(l, "empty", json_object_new_string(""));
    ck_assert_int_eq(marker_description(&m, l, &desc), 0);
    ck_assert_int_eq(marker_parse(desc, &pm), 0); /* the labels line is no marker candidate */
    ck_assert_int_eq(marker_labels_parse(desc, m.sandbox, &got), 0);
    ck_assert(json_object_equal(got, l));
    json_object_put(TAKE_PTR(got));
    /* survives a renew, '#' comment storage and a form round trip's '+' */
    ck_assert_int_eq(marker_update_expiry(desc, 1796300000, &renewed), 0);
    ck_assert_int_eq(marker_labels_parse(renewed, m.sandbox, &got), 0);
    ck_assert(json_object_equal(got, l));
    json_object_put(TAKE_PTR(got));
    for (char *p = renewed; *p; p++)
        if (*p == '\n' && p[1])
            p[1] = p[1] == 's' ? '#' : p[1]; /* "#andboxd-labels..." breaks the prefix */
    ck_assert_int_eq(marker_labels_parse(renewed, m.sandbox, &got), 0);
    ck_assert_int_eq(json_object_object_length(got), 0);
    json_object_put(TAKE_PTR(got));
    /* another sandbox's line is not ours; a tampered one is refused */
    ck_assert_int_eq(marker_labels_parse(desc, "sb-other", &got), 0);
    ck_assert_int_eq(json_object_object_length(got), 0);
    json_object_put(TAKE_PTR(got));
    {
        char *d = strstr(desc, " data=") + strlen(" data=");
        *d = *d == 'A' ? 'B' : 'A';
        ck_assert_int_eq(marker_labels_parse(desc, m.sandbox, &got), -EBADMSG);
    }
    /* no labels: no line */
    none = json_object_new_object();
    ck_assert_int_eq(marker_labels_format(m.sandbox, none, &line), 0);
    ck_assert_ptr_null(line);
    /* the protocol's largest labels fit the description with the marker */
    memset(big, 0xc3, 254);
    for (int i = 0; i < 254; i += 2)
        big[i + 1] = (char)0xa9; /* é */
    big[254] = '\0';
    json_object_put(l);
    l = json_object_new_object();
    for (int i = 0; i < 16; i++) {
        char k[64];
        snprintf(k, sizeof k, "%02d%s", i,
                 "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk");
        json_object_object_add(l, k, json_object_new_string(big));
    }
    free(TAKE_PTR(desc));
    strcpy(m.key, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    strcpy(m.params, m.key);
    strcpy(m.hostkey, m.key);
    ck_assert_int_eq(marker_description(&m, l, &desc), 0);
    ck_assert_uint_le(strlen(desc), MARKER_DESCRIPTION_MAX);
    ck_assert_int_eq(marker_labels_parse(desc, m.sandbox, &got), 0);
    ck_assert(json_object_equal(got, l));
}
END_TEST

START_TEST(test_registry_host_key)
{
    _cleanup_free_ char *pin = pin_of("ssh-ed25519 " PUB_B64), *js = NULL;
    _cleanup_record_ struct registry_record *r = registry_record_new(), *back = NULL, *dup = NULL;

    r->id = strdup("sb-7k2m9x4q0abc");
    r->instance = strdup("i-0123456789ab");
    r->owner_uid = 1000;
    r->state = REG_READY;
    r->created_at = 1796212800;
    r->expires_at = 1796216400;
    r->host_key = strdup(pin);
    ck_assert_int_eq(registry_record_to_json(r, &js), 0);
    ck_assert_int_eq(registry_record_from_json(js, strlen(js), &back), 0);
    ck_assert_str_eq(back->host_key, pin);
    dup = registry_record_dup(back);
    ck_assert_str_eq(dup->host_key, pin);
    free(r->host_key);
    r->host_key = strdup("SHA256:nope");
    ck_assert_int_eq(registry_record_validate(r), -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostkey");
    TCase *tc = tcase_create("hostkey");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_pin_from_output);
    tcase_add_test(tc, test_pin_hex);
    tcase_add_test(tc, test_marker_hostkey);
    tcase_add_test(tc, test_labels_line);
    tcase_add_test(tc, test_registry_host_key);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
