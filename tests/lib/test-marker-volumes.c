/* Tests for lib/state/marker-volumes: the volume lines of a Proxmox description. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "marker.h"
#include "tests/check-util.h"

static struct marker_volume vol(const char *name, unsigned mp)
{
    struct marker_volume v = {.owner_uid = 1000, .size_gb = 4, .mp = mp};

    snprintf(v.name, sizeof v.name, "%s", name);
    return v;
}

static void assert_volume_eq(const struct marker_volume *a, const struct marker_volume *b)
{
    ck_assert_str_eq(a->name, b->name);
    ck_assert_uint_eq(a->owner_uid, b->owner_uid);
    ck_assert_uint_eq(a->size_gb, b->size_gb);
    ck_assert_uint_eq(a->mp, b->mp);
}

START_TEST(test_format_exact)
{
    struct marker_volume v = vol("data-1", 3);
    char line[MARKER_VOLUME_LINE_MAX], check[SHA256_HEX_SIZE], want[256];
    const char *body = "sandboxd-volume:v1 name=data-1 owner=1000 size=4 key=mp3";

    ck_assert_int_eq(marker_volume_format(&v, line, sizeof line), 0);
    ck_assert_int_eq(sha256_hex(body, strlen(body), check), 0);
    snprintf(want, sizeof want, "%s check=%.8s", body, check);
    ck_assert_str_eq(line, want);
    /* too small a buffer, invalid fields */
    ck_assert_int_eq(marker_volume_format(&v, line, 20), -ENOBUFS);
    v.size_gb = 0;
    ck_assert_int_eq(marker_volume_format(&v, line, sizeof line), -EINVAL);
    v = vol("Data", 0);
    ck_assert_int_eq(marker_volume_format(&v, line, sizeof line), -EINVAL);
    v = vol("d", MARKER_VOLUME_MP_MAX + 1);
    ck_assert_int_eq(marker_volume_format(&v, line, sizeof line), -EINVAL);
    v = vol("d", 0);
    v.owner_uid = (uid_t)-1;
    ck_assert_int_eq(marker_volume_format(&v, line, sizeof line), -EINVAL);
    v = vol("d", MARKER_VOLUME_MP_MAX);
    v.size_gb = MARKER_VOLUME_SIZE_MAX;
    ck_assert_int_eq(marker_volume_format(&v, line, sizeof line), 0);
}
END_TEST

/* Lines survive the marker, the labels, human text and Proxmox's storage of the
 * description (comment lines, '+' for spaces, '\r'). */
START_TEST(test_roundtrip)
{
    struct marker m = {.instance = "i-0123456789ab",
                       .sandbox = "sb-1",
                       .owner_uid = 1000,
                       .created = 1796212800,
                       .expires = 1796216400};
    struct marker_volume a = vol("alpha", 0), b = vol("beta", 7), c = vol("gamma", 1);
    _cleanup_free_ char *d0 = NULL, *d1 = NULL, *d2 = NULL, *d3 = NULL, *d4 = NULL, *d5 = NULL,
                        *plus = NULL;
    _cleanup_free_ struct marker_volume *got = NULL;
    struct marker mk;
    size_t n = 0;

    b.owner_uid = 0;
    b.size_gb = 100;
    ck_assert_int_eq(marker_set("notes\n\n", &m, &d0), 0);
    ck_assert_int_eq(marker_volume_set(d0, &a, &d1), 0);
    ck_assert_int_eq(marker_volume_set(d1, &b, &d2), 0);
    ck_assert_int_eq(marker_volumes_parse(d2, &got, &n), 0);
    ck_assert_uint_eq(n, 2);
    assert_volume_eq(&got[0], &a);
    assert_volume_eq(&got[1], &b);
    free(got);
    got = NULL;
    /* the marker is still there, and a new marker keeps the volume lines */
    ck_assert_int_eq(marker_parse(d2, &mk), 0);
    m.expires++;
    ck_assert_int_eq(marker_set(d2, &m, &d3), 0);
    ck_assert_int_eq(marker_volumes_parse(d3, &got, &n), 0);
    ck_assert_uint_eq(n, 2);
    free(got);
    got = NULL;
    /* a line replaced in place (same name, new key), one removed */
    a.mp = 2;
    ck_assert_int_eq(marker_volume_set(d3, &a, &d4), 0);
    ck_assert_int_eq(marker_volume_remove(d4, "beta", &d5), 0);
    ck_assert_int_eq(marker_volumes_parse(d5, &got, &n), 0);
    ck_assert_uint_eq(n, 1);
    assert_volume_eq(&got[0], &a);
    ck_assert_int_eq(marker_parse(d5, &mk), 0);
    ck_assert_ptr_nonnull(strstr(d5, "notes\n"));
    free(got);
    got = NULL;
    /* stored as comments with '+' for spaces and "\r\n" */
    ck_assert_int_ge(asprintf(&plus, "#notes\r\n# %s\r\n", strchr(d2, 's')), 0);
    for (char *p = plus; *p; p++)
        if (*p == ' ')
            *p = '+';
    ck_assert_int_eq(marker_volumes_parse(plus, &got, &n), 0);
    ck_assert_uint_eq(n, 2);
    assert_volume_eq(&got[1], &b);
    free(got);
    got = NULL;
    /* nothing there */
    ck_assert_int_eq(marker_volumes_parse(NULL, &got, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(got);
    ck_assert_int_eq(marker_volumes_parse("sandboxd-labels:v1 x\n", &got, &n), 0);
    ck_assert_uint_eq(n, 0);
    (void)c;
}
END_TEST

START_TEST(test_idempotent_remove)
{
    struct marker_volume a = vol("alpha", 0);
    _cleanup_free_ char *d1 = NULL, *d2 = NULL, *d3 = NULL, *d4 = NULL;

    ck_assert_int_eq(marker_volume_set("text\n", &a, &d1), 0);
    ck_assert_int_eq(marker_volume_set(d1, &a, &d2), 0);
    ck_assert_str_eq(d1, d2);
    ck_assert_int_eq(marker_volume_remove(d2, "alpha", &d3), 0);
    ck_assert_str_eq(d3, "text\n");
    ck_assert_int_eq(marker_volume_remove(d3, "alpha", &d4), 0);
    ck_assert_str_eq(d4, "text\n");
    ck_assert_int_eq(marker_volume_remove(d3, "Bad name", &d4), -EINVAL);
}
END_TEST

/* A damaged or ambiguous description: an error, and never rewritten. */
START_TEST(test_damaged)
{
    struct marker_volume a = vol("alpha", 0), b = vol("beta", 0), a2 = vol("alpha", 1);
    char la[MARKER_VOLUME_LINE_MAX], lb[MARKER_VOLUME_LINE_MAX], la2[MARKER_VOLUME_LINE_MAX];
    char desc[1024];
    _cleanup_free_ char *d1 = NULL, *out = NULL;
    _cleanup_free_ struct marker_volume *got = NULL;
    size_t n = 0;

    ck_assert_int_eq(marker_volume_format(&a, la, sizeof la), 0);
    ck_assert_int_eq(marker_volume_format(&b, lb, sizeof lb), 0);
    ck_assert_int_eq(marker_volume_format(&a2, la2, sizeof la2), 0);
    /* one key for two names, one name twice */
    snprintf(desc, sizeof desc, "%s\n%s\n", la, lb);
    ck_assert_int_eq(marker_volumes_parse(desc, &got, &n), -EBADMSG);
    ck_assert_int_eq(marker_volume_remove(desc, "alpha", &out), -EBADMSG);
    snprintf(desc, sizeof desc, "%s\n%s\n", la, la2);
    ck_assert_int_eq(marker_volumes_parse(desc, &got, &n), -EBADMSG);
    /* a changed value fails the check */
    snprintf(desc, sizeof desc, "%s\n", la);
    *strstr(desc, "size=4") = 'S';
    ck_assert_int_eq(marker_volumes_parse(desc, &got, &n), -EBADMSG);
    snprintf(desc, sizeof desc, "%s\n", la);
    strstr(desc, "size=4")[5] = '5';
    ck_assert_int_eq(marker_volumes_parse(desc, &got, &n), -EBADMSG);
    /* leading zeros, a trailing field, another version */
    ck_assert_int_eq(marker_volumes_parse("sandboxd-volume:v1 name=a owner=01 size=4 key=mp0 "
                                          "check=00000000\n",
                                          &got, &n),
                     -EBADMSG);
    snprintf(desc, sizeof desc, "%s x=1\n", la);
    ck_assert_int_eq(marker_volumes_parse(desc, &got, &n), -EBADMSG);
    ck_assert_int_eq(marker_volumes_parse("sandboxd-volume:v2 name=a\n", &got, &n),
                     -EPROTONOSUPPORT);
    ck_assert_ptr_null(got);
    /* setting a line on a key another volume has */
    ck_assert_int_eq(marker_volume_set("", &a, &d1), 0);
    ck_assert_int_eq(marker_volume_set(d1, &b, &out), -EEXIST);
    ck_assert_ptr_null(out);
}
END_TEST

/* The description's limit: lines that would not fit are refused. */
START_TEST(test_full)
{
    _cleanup_free_ char *desc = strdup("");
    unsigned fitted = 0;

    for (unsigned i = 0; i <= MARKER_VOLUME_MP_MAX; i++) {
        struct marker_volume v = vol("", i);
        char *next = NULL;
        int r;

        snprintf(v.name, sizeof v.name, "volume-%u-%s", i,
                 "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
        r = marker_volume_set(desc, &v, &next);
        if (r == -E2BIG)
            break;
        ck_assert_int_eq(r, 0);
        free(desc);
        desc = next;
        fitted++;
    }
    ck_assert_uint_gt(fitted, 32);
    ck_assert_uint_lt(fitted, MARKER_VOLUME_MP_MAX);
    ck_assert_uint_le(strlen(desc), MARKER_DESCRIPTION_MAX);
}
END_TEST

/* xorshift64*: deterministic inputs. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

/* Mutations of a description with two volume lines: whatever parses means exactly what was
 * written (each line's check guards its values), or a line is gone whole. */
START_TEST(test_fuzz)
{
    struct marker_volume vs[] = {vol("alpha", 0), vol("beta-2", 17)};
    _cleanup_free_ char *base = NULL, *d1 = NULL;
    static const char alphabet[] = "sandboxd-volume:v1 =\n#+\t\r0123456789abcdefkmp";
    char buf[1024];
    unsigned parsed = 0;

    ck_assert_int_eq(marker_volume_set("human text\n", &vs[0], &d1), 0);
    ck_assert_int_eq(marker_volume_set(d1, &vs[1], &base), 0);
    for (int i = 0; i < 20000; i++) {
        size_t n = strlen(base);
        _cleanup_free_ struct marker_volume *got = NULL;
        size_t k = 0;

        memcpy(buf, base, n + 1);
        for (int e = 1 + (int)(rnd() % 3); e > 0; e--) {
            size_t pos = rnd() % (n + 1);
            char c = alphabet[rnd() % (sizeof(alphabet) - 1)];

            if (rnd() % 2 && pos < n)
                buf[pos] = c;
            else if (n + 1 < sizeof(buf) - 1) {
                memmove(buf + pos + 1, buf + pos, n - pos + 1);
                buf[pos] = c;
                n++;
            }
        }
        if (marker_volumes_parse(buf, &got, &k) < 0)
            continue;
        parsed++;
        for (size_t j = 0; j < k; j++)
            assert_volume_eq(&got[j], &vs[strcmp(got[j].name, "alpha") == 0 ? 0 : 1]);
    }
    ck_assert_uint_gt(parsed, 100);
    fprintf(stderr, "fuzz: %u of 20000 mutated descriptions parse, every value unchanged\n",
            parsed);
}
END_TEST

/* The volume holder's line: exact, found among other lines and after Proxmox's round trips,
 * another instance's or a damaged one is not this daemon's holder, and it is never a
 * marker candidate (marker_parse() sees no marker: the reconcile leaves the holder alone). */
START_TEST(test_holder_line)
{
    char line[MARKER_HOLDER_LINE_MAX], check[SHA256_HEX_SIZE], want[256], desc[512];
    const char *body = "sandboxd-holder:v1 instance=i-abc123";
    struct marker m;

    ck_assert_int_eq(marker_holder_format("i-abc123", line, sizeof line), 0);
    ck_assert_int_eq(sha256_hex(body, strlen(body), check), 0);
    snprintf(want, sizeof want, "%s check=%.8s", body, check);
    ck_assert_str_eq(line, want);
    ck_assert_int_eq(marker_holder_format("I-bad", line, sizeof line), -EINVAL);
    ck_assert_int_eq(marker_holder_format("i-abc123", line, 10), -ENOBUFS);
    ck_assert_int_eq(marker_holder_format("i-abc123", line, sizeof line), 0);

    snprintf(desc, sizeof desc, "a note\n%s\nsandboxd-volume:v1 x\n", line);
    ck_assert(marker_holder_is(desc, "i-abc123"));
    ck_assert(!marker_holder_is(desc, "i-abc124"));
    ck_assert_int_eq(marker_parse(desc, &m), -ENOENT);
    /* Proxmox's comment form, a form round trip's '+', blanks and '\r' */
    snprintf(desc, sizeof desc, "#  sandboxd-holder:v1+instance=i-abc123 \tcheck=%.8s\r\n", check);
    ck_assert(marker_holder_is(desc, "i-abc123"));
    /* a wrong check, a missing field, trailing text: not the holder */
    snprintf(desc, sizeof desc, "sandboxd-holder:v1 instance=i-abc123 check=%.8s", "00000000");
    ck_assert(strcmp(check, "00000000") == 0 || !marker_holder_is(desc, "i-abc123"));
    snprintf(desc, sizeof desc, "sandboxd-holder:v1 check=%.8s", check);
    ck_assert(!marker_holder_is(desc, "i-abc123"));
    snprintf(desc, sizeof desc, "%s x", line);
    ck_assert(!marker_holder_is(desc, "i-abc123"));
    ck_assert(!marker_holder_is(NULL, "i-abc123"));
    ck_assert(!marker_holder_is("", "i-abc123"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("marker-volumes");
    TCase *tc = tcase_create("marker-volumes");

    tcase_add_test(tc, test_format_exact);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_idempotent_remove);
    tcase_add_test(tc, test_damaged);
    tcase_add_test(tc, test_full);
    tcase_add_test(tc, test_fuzz);
    tcase_add_test(tc, test_holder_line);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
