/* Tests for lib/state/marker: the ownership marker in a Proxmox description. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "marker.h"
#include "tests/check-util.h"

#define KEY_HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define PARAMS_HEX "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static struct marker sample(bool optional)
{
    struct marker m = {
        .instance = "i-0123456789ab",
        .sandbox = "sb-7k2m9x4q0abc",
        .owner_uid = 1000,
        .created = 1796212800,
        .expires = 1796216400,
    };
    if (optional) {
        strcpy(m.key, KEY_HEX);
        strcpy(m.params, PARAMS_HEX);
    }
    return m;
}

static void assert_marker_eq(const struct marker *a, const struct marker *b)
{
    ck_assert_str_eq(a->instance, b->instance);
    ck_assert_str_eq(a->sandbox, b->sandbox);
    ck_assert_uint_eq(a->owner_uid, b->owner_uid);
    ck_assert_int_eq(a->created, b->created);
    ck_assert_int_eq(a->expires, b->expires);
    ck_assert_str_eq(a->key, b->key);
    ck_assert_str_eq(a->params, b->params);
    ck_assert_str_eq(a->template, b->template);
    ck_assert_int_eq(a->pool, b->pool);
    ck_assert_int_eq(a->paused, b->paused);
}

static char *line_of(const struct marker *m)
{
    char *buf = malloc(MARKER_LINE_MAX);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(marker_format(m, buf, MARKER_LINE_MAX), 0);
    return buf;
}

static char *strjoin(const char *a, const char *b, const char *c)
{
    char *s;
    ck_assert_int_ge(asprintf(&s, "%s%s%s", a, b, c), 0);
    return s;
}

/* What Proxmox does to a description: split on '\n' dropping trailing empty
 * fields (Perl split), store each as a '#' line, give back each line + '\n'. */
static char *pve_roundtrip(const char *d)
{
    size_t n = strlen(d);
    char *out;

    while (n > 0 && d[n - 1] == '\n')
        n--;
    out = malloc(n + 2);
    ck_assert_ptr_nonnull(out);
    memcpy(out, d, n);
    if (n > 0)
        out[n++] = '\n';
    out[n] = '\0';
    return out;
}

/* application/x-www-form-urlencoded */
static char *form_encode(const char *s)
{
    char *out = malloc(strlen(s) * 3 + 1), *o = out;
    ck_assert_ptr_nonnull(out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~", *p))
            *o++ = (char)*p;
        else if (*p == ' ')
            *o++ = '+';
        else
            o += sprintf(o, "%%%02X", *p);
    }
    *o = '\0';
    return out;
}

static char *form_decode(const char *s, bool plus_is_space)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    ck_assert_ptr_nonnull(out);
    for (const char *p = s; *p; p++) {
        if (*p == '+' && plus_is_space) {
            *o++ = ' ';
        } else if (*p == '%' && p[1] && p[2]) {
            unsigned v;
            ck_assert_int_eq(sscanf(p + 1, "%2x", &v), 1);
            *o++ = (char)v;
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

START_TEST(test_format_exact)
{
    uv_loop_t loop;
    struct marker m = sample(false), bad;
    char buf[MARKER_LINE_MAX];
    _cleanup_free_ char *line = NULL;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(marker_format(&m, buf, sizeof(buf)), 0);
    /* The format is a contract with every earlier daemon's containers. */
    ck_assert_msg(strncmp(buf,
                          "sandboxd:v1 instance=i-0123456789ab sandbox=sb-7k2m9x4q0abc owner=1000 "
                          "created=1796212800 expires=1796216400 check=",
                          strlen(buf) - 8) == 0,
                  "got %s", buf);
    ck_assert_uint_eq(strlen(buf), 123);
    ck_assert(hex_is_valid(buf + strlen(buf) - 8, 8));
    m = sample(true);
    line = line_of(&m);
    ck_assert_ptr_nonnull(strstr(line, " key=" KEY_HEX " params=" PARAMS_HEX " check="));
    ck_assert_uint_lt(strlen(line), MARKER_LINE_MAX);
    /* only [a-z0-9:=-] and spaces */
    for (const char *p = line; *p; p++)
        ck_assert_msg(strchr("abcdefghijklmnopqrstuvwxyz0123456789:=- ", *p), "char %c", *p);

    ck_assert_int_eq(marker_format(&m, buf, 20), -ENOBUFS);
    bad = m;
    strcpy(bad.sandbox, "SB-X");
    ck_assert_int_eq(marker_format(&bad, buf, sizeof(buf)), -EINVAL);
    bad = m;
    bad.instance[0] = '\0';
    ck_assert_int_eq(marker_format(&bad, buf, sizeof(buf)), -EINVAL);
    bad = m;
    bad.owner_uid = (uid_t)-1;
    ck_assert_int_eq(marker_format(&bad, buf, sizeof(buf)), -EINVAL);
    bad = m;
    bad.expires = -1;
    ck_assert_int_eq(marker_format(&bad, buf, sizeof(buf)), -EINVAL);
    bad = m;
    strcpy(bad.key, "abc");
    ck_assert_int_eq(marker_format(&bad, buf, sizeof(buf)), -EINVAL);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_roundtrip)
{
    uv_loop_t loop;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    for (int opt = 0; opt < 2; opt++) {
        struct marker m = sample(opt), got;
        _cleanup_free_ char *line = line_of(&m);

        memset(&got, 0xaa, sizeof(got));
        ck_assert_int_eq(marker_parse(line, &got), 0);
        assert_marker_eq(&m, &got);

        /* extremes */
        m.owner_uid = 0;
        m.created = 0;
        m.expires = INT64_MAX;
        memset(m.sandbox, 'z', ID_MAX);
        m.sandbox[ID_MAX] = '\0';
        free(line);
        line = line_of(&m);
        ck_assert_int_eq(marker_parse(line, &got), 0);
        assert_marker_eq(&m, &got);
        m.owner_uid = UINT32_MAX - 1;
        free(line);
        line = line_of(&m);
        ck_assert_int_eq(marker_parse(line, &got), 0);
        assert_marker_eq(&m, &got);
    }
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_template_pool)
{
    struct marker m = sample(true), got;
    _cleanup_free_ char *line = NULL, *desc = NULL, *upd = NULL, *bad = NULL;
    char *p;

    strcpy(m.template, "py-3");
    m.pool = true;
    line = line_of(&m);
    ck_assert_ptr_nonnull(strstr(line, " params=" PARAMS_HEX " template=py-3 pool=1 check="));
    ck_assert_int_eq(marker_parse(line, &got), 0);
    assert_marker_eq(&m, &got);
    /* Taken from the pool: the flag goes, the template stays, a new check. */
    m.pool = false;
    ck_assert_int_eq(marker_set(line, &m, &desc), 0);
    ck_assert_ptr_null(strstr(desc, "pool="));
    ck_assert_int_eq(marker_parse(desc, &got), 0);
    assert_marker_eq(&m, &got);
    /* A renew keeps both fields. */
    m.pool = true;
    ck_assert_int_eq(marker_update_expiry(line, 1796299999, &upd), 0);
    ck_assert_int_eq(marker_parse(upd, &got), 0);
    ck_assert_str_eq(got.template, "py-3");
    ck_assert(got.pool);
    ck_assert_int_eq(got.expires, 1796299999);
    /* pool is only ever "1"; a template is an id; a changed value fails the check. */
    bad = strdup(line);
    p = strstr(bad, "pool=1");
    p[5] = '2';
    ck_assert_int_eq(marker_parse(bad, &got), -EBADMSG);
    strcpy(bad, line);
    p = strstr(bad, "template=py-3");
    p[9] = 'P';
    ck_assert_int_eq(marker_parse(bad, &got), -EBADMSG);
    strcpy(bad, line);
    p = strstr(bad, "template=py-3");
    p[12] = '4';
    ck_assert_int_eq(marker_parse(bad, &got), -EBADMSG);
    strcpy(m.template, "Py");
    ck_assert_int_eq(marker_format(&m, (char[MARKER_LINE_MAX]){0}, MARKER_LINE_MAX), -EINVAL);
}
END_TEST

START_TEST(test_template_itself)
{
    struct marker m = sample(true), got;
    _cleanup_free_ char *line = NULL, *pub = NULL;
    char buf[MARKER_LINE_MAX];

    strcpy(m.template, "tools");
    m.is_template = true;
    line = line_of(&m);
    ck_assert_ptr_nonnull(strstr(line, " template=tools tmpl=1 check="));
    ck_assert_int_eq(marker_parse(line, &got), 0);
    ck_assert(got.is_template && !got.published && !got.pool);
    ck_assert_str_eq(got.template, "tools");
    m.published = true;
    pub = line_of(&m);
    ck_assert_ptr_nonnull(strstr(pub, " tmpl=1 pub=1 check="));
    ck_assert_int_eq(marker_parse(pub, &got), 0);
    ck_assert(got.is_template && got.published);
    /* a sandbox's marker has neither; tmpl needs a name, pub needs tmpl, no pool member */
    m.is_template = false;
    ck_assert_int_eq(marker_format(&m, buf, sizeof buf), -EINVAL);
    m.is_template = true;
    m.template[0] = '\0';
    ck_assert_int_eq(marker_format(&m, buf, sizeof buf), -EINVAL);
    strcpy(m.template, "tools");
    m.pool = true;
    ck_assert_int_eq(marker_format(&m, buf, sizeof buf), -EINVAL);
    /* tmpl is only ever "1" (a changed value also fails the check) */
    line[strstr(line, "tmpl=1") - line + 5] = '2';
    ck_assert_int_eq(marker_parse(line, &got), -EBADMSG);
}
END_TEST

/* A configured template's replica: tmpl=1 repl=1, never published, never without tmpl. */
START_TEST(test_replica)
{
    struct marker m = sample(true), got;
    _cleanup_free_ char *line = NULL;
    char buf[MARKER_LINE_MAX];

    strcpy(m.template, "py");
    m.is_template = true;
    m.replica = true;
    line = line_of(&m);
    ck_assert_ptr_nonnull(strstr(line, " template=py tmpl=1 repl=1 check="));
    ck_assert_int_eq(marker_parse(line, &got), 0);
    ck_assert(got.is_template && got.replica && !got.published);
    ck_assert_str_eq(got.template, "py");
    m.published = true;
    ck_assert_int_eq(marker_format(&m, buf, sizeof buf), -EINVAL);
    m.published = false;
    m.is_template = false;
    ck_assert_int_eq(marker_format(&m, buf, sizeof buf), -EINVAL);
    /* a template made from a sandbox is no replica */
    m.is_template = true;
    m.replica = false;
    ck_assert_int_ge(marker_format(&m, buf, sizeof buf), 0);
    ck_assert_int_eq(marker_parse(buf, &got), 0);
    ck_assert(!got.replica);
}
END_TEST

/* sandbox.pause: paused=1 says the container was stopped on purpose (reconcile never starts
 * it); a renew keeps it, a resume drops it. */
START_TEST(test_paused)
{
    struct marker m = sample(true), got;
    _cleanup_free_ char *line = NULL, *upd = NULL, *desc = NULL, *bad = NULL;

    m.paused = true;
    line = line_of(&m);
    ck_assert_ptr_nonnull(strstr(line, " paused=1 check="));
    ck_assert_int_eq(marker_parse(line, &got), 0);
    assert_marker_eq(&m, &got);
    ck_assert_int_eq(marker_update_expiry(line, 1796299999, &upd), 0);
    ck_assert_int_eq(marker_parse(upd, &got), 0);
    ck_assert(got.paused);
    m.paused = false;
    ck_assert_int_eq(marker_set(line, &m, &desc), 0);
    ck_assert_ptr_null(strstr(desc, "paused="));
    ck_assert_int_eq(marker_parse(desc, &got), 0);
    ck_assert(!got.paused);
    bad = strdup(line);
    strstr(bad, "paused=1")[7] = '0';
    ck_assert_int_eq(marker_parse(bad, &got), -EBADMSG);
}
END_TEST

START_TEST(test_surroundings)
{
    uv_loop_t loop;
    struct marker m = sample(true), got;
    _cleanup_free_ char *line = line_of(&m);
    const char *fmts[] = {
        "%s\n",                                       /* Proxmox's trailing newline */
        "%s\r\n",                                     /* CRLF */
        "Build box for task t-91.\n\n%s\n",           /* human text before */
        "%s\nDo not edit the line above.\n",          /* after */
        "Notes:\n  %s  \nmore notes\nsandboxd rocks", /* indented */
        "# %s\n",                                     /* a raw config comment */
        "#%s",                                        /* ... without a space */
        "\t%s\t\n",
        "line with sandboxd:v1 in the middle\n%s\n", /* mention mid-line is text */
    };

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    for (size_t i = 0; i < ELEMENTSOF(fmts); i++) {
        _cleanup_free_ char *d = NULL;
        ck_assert_int_ge(asprintf(&d, fmts[i], line), 0);
        memset(&got, 0, sizeof(got));
        ck_assert_msg(marker_parse(d, &got) == 0, "case %zu: %s", i, d);
        assert_marker_eq(&m, &got);
    }

    /* The Proxmox storage round trip and form encoding round trips. */
    {
        _cleanup_free_ char *d = NULL, *set = NULL, *back = NULL, *enc = NULL, *dec = NULL,
                            *sloppy = NULL;
        d = strjoin("A sandbox of sandboxd (+ some 100% human text: a=b&c=d).\n", "", "");
        ck_assert_int_eq(marker_set(d, &m, &set), 0);
        back = pve_roundtrip(set);
        ck_assert_str_eq(back, set);
        ck_assert_int_eq(marker_parse(back, &got), 0);
        assert_marker_eq(&m, &got);
        enc = form_encode(set);
        dec = form_decode(enc, true);
        ck_assert_str_eq(dec, set);
        /* a decoder that leaves '+' alone: spaces come back as '+' */
        sloppy = form_decode(enc, false);
        ck_assert_str_ne(sloppy, set);
        ck_assert_int_eq(marker_parse(sloppy, &got), 0);
        assert_marker_eq(&m, &got);
    }
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_foreign)
{
    uv_loop_t loop;
    struct marker m = sample(true), got;
    _cleanup_free_ char *line = line_of(&m);
    char *p;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    /* no marker at all: foreign */
    ck_assert_int_eq(marker_parse(NULL, &got), -ENOENT);
    ck_assert_int_eq(marker_parse("", &got), -ENOENT);
    ck_assert_int_eq(marker_parse("\n", &got), -ENOENT);
    ck_assert_int_eq(marker_parse("my database server\n", &got), -ENOENT);
    ck_assert_int_eq(marker_parse("made with sandboxd:v1 instance=x\n", &got), -ENOENT);
    ck_assert_int_eq(marker_parse("Sandboxd:v1 instance=x", &got), -ENOENT);
    ck_assert_int_eq(marker_parse("sandboxd v1", &got), -ENOENT);

    /* look-alikes and malformed: never ours */
    static const char *const bad[] = {
        "sandboxd:",
        "sandboxd: managed by hand, please keep",
        "sandboxd:v",
        "sandboxd:v1",
        "sandboxd:vx instance=a",
        "sandboxd:v01 instance=a",
        "sandboxd:v1instance=i-1",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        ck_assert_msg(marker_parse(bad[i], &got) == -EBADMSG, "accepted %s", bad[i]);
    ck_assert_int_eq(marker_parse("sandboxd:v2 instance=i-1 whatever", &got), -EPROTONOSUPPORT);
    ck_assert_int_eq(marker_parse("sandboxd:v0 x", &got), -EPROTONOSUPPORT);

    /* each field changed without recomputing the check */
    {
        static const char *const edits[][2] = {
            {"owner=1000", "owner=0"},
            {"expires=1796216400", "expires=1796216401"},
            {"created=1796212800", "created=1796212801"},
            {"sandbox=sb-7k2m9x4q0abc", "sandbox=sb-7k2m9x4q0abd"},
            {"instance=i-0123456789ab", "instance=i-0123456789ac"},
            {"key=0", "key=1"},
        };
        for (size_t i = 0; i < ELEMENTSOF(edits); i++) {
            _cleanup_free_ char *d = strdup(line);
            ck_assert_ptr_nonnull(d);
            p = strstr(d, edits[i][0]);
            ck_assert_ptr_nonnull(p);
            memcpy(p, edits[i][1], strlen(edits[i][1]));
            ck_assert_msg(marker_parse(d, &got) == -EBADMSG, "accepted %s", d);
        }
    }
    /* structural damage */
    {
        static const char *const damage[][2] = {
            {" owner=1000", ""},                     /* missing required field */
            {" check=", " chekc="},                  /* unknown field */
            {"owner=1000", "owner=01000"},           /* leading zero */
            {"owner=1000", "owner=4294967295"},      /* (uid_t)-1 */
            {"owner=1000", "owner=99999999999"},     /* overflow */
            {"owner=1000", "owner=-1000"},           /* sign */
            {"owner=1000", "owner=1000 owner=1000"}, /* duplicated field */
            {"owner=1000", "owner="},                /* empty value */
            {"owner=1000", "owner"},                 /* no '=' */
            {"sandbox=sb", "sandbox=SB"},            /* charset */
            {" key=", " key=x"},                     /* short hash */
            {"expires=1796216400", "expires=99999999999999999999"},
        };
        for (size_t i = 0; i < ELEMENTSOF(damage); i++) {
            _cleanup_free_ char *d = NULL;
            p = strstr(line, damage[i][0]);
            ck_assert_ptr_nonnull(p);
            ck_assert_int_ge(asprintf(&d, "%.*s%s%s", (int)(p - line), line, damage[i][1],
                                      p + strlen(damage[i][0])),
                             0);
            ck_assert_msg(marker_parse(d, &got) == -EBADMSG, "accepted %s", d);
        }
    }
    /* truncated at every length */
    for (size_t n = 0; n < strlen(line); n++) {
        _cleanup_free_ char *d = strndup(line, n);
        int r = marker_parse(d, &got);
        ck_assert_msg(r == -EBADMSG || r == -ENOENT, "prefix of %zu: %d", n, r);
    }
    /* duplicated markers, identical or not */
    {
        _cleanup_free_ char *d = strjoin(line, "\n", line);
        ck_assert_int_eq(marker_parse(d, &got), -EBADMSG);
    }
    {
        struct marker m2 = sample(false);
        _cleanup_free_ char *l2 = line_of(&m2);
        _cleanup_free_ char *d = strjoin(line, "\nnotes\n", l2);
        ck_assert_int_eq(marker_parse(d, &got), -EBADMSG);
        free(d);
        d = strjoin(line, "\n", "sandboxd: hello");
        ck_assert_int_eq(marker_parse(d, &got), -EBADMSG);
    }
    /* too long overall, or one overlong line */
    {
        char *d = malloc(MARKER_INPUT_MAX + 2);
        ck_assert_ptr_nonnull(d);
        memset(d, 'x', MARKER_INPUT_MAX + 1);
        d[MARKER_INPUT_MAX + 1] = '\0';
        ck_assert_int_eq(marker_parse(d, &got), -EMSGSIZE);
        memcpy(d, line, strlen(line));
        d[strlen(line)] = ' ';
        d[MARKER_INPUT_MAX - 1] = '\0';
        ck_assert_int_eq(marker_parse(d, &got), -EBADMSG);
        free(d);
    }
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_set_update)
{
    uv_loop_t loop;
    struct marker m = sample(false), got;
    _cleanup_free_ char *line = line_of(&m);

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    /* on an empty description */
    {
        _cleanup_free_ char *d = NULL, *want = strjoin(line, "\n", "");
        ck_assert_int_eq(marker_set(NULL, &m, &d), 0);
        ck_assert_str_eq(d, want);
        free(d);
        ck_assert_int_eq(marker_set("", &m, &d), 0);
        ck_assert_str_eq(d, want);
        free(d);
        ck_assert_int_eq(marker_set("\n\n", &m, &d), 0);
        ck_assert_str_eq(d, want);
    }
    /* appended after human text; trailing blank lines dropped; idempotent */
    {
        _cleanup_free_ char *d = NULL, *d2 = NULL, *want = NULL;
        want = strjoin("Template for CI.\n\n  indented\n", line, "\n");
        ck_assert_int_eq(marker_set("Template for CI.\n\n  indented\n\n\n", &m, &d), 0);
        ck_assert_str_eq(d, want);
        ck_assert_int_eq(marker_set(d, &m, &d2), 0);
        ck_assert_str_eq(d2, d);
    }
    /* an existing marker line is replaced in place, look-alikes dropped */
    {
        _cleanup_free_ char *d = NULL, *in = NULL, *want = NULL;
        struct marker old = sample(true);
        _cleanup_free_ char *oldline = line_of(&old);
        ck_assert_int_ge(asprintf(&in, "top\n%s\nmiddle\nsandboxd: junk\nend", oldline), 0);
        ck_assert_int_ge(asprintf(&want, "top\n%s\nmiddle\nend\n", line), 0);
        ck_assert_int_eq(marker_set(in, &m, &d), 0);
        ck_assert_str_eq(d, want);
    }
    /* update of the expiry keeps every other byte */
    {
        _cleanup_free_ char *in = NULL, *out = NULL, *want = NULL;
        struct marker m2 = m;
        m2.expires = 1796299999;
        _cleanup_free_ char *line2 = line_of(&m2);
        ck_assert_int_ge(asprintf(&in, "Owner: CI\n  spaced  \n%s\nafter: a=b\n", line), 0);
        ck_assert_int_ge(asprintf(&want, "Owner: CI\n  spaced  \n%s\nafter: a=b\n", line2), 0);
        ck_assert_int_eq(marker_update_expiry(in, 1796299999, &out), 0);
        ck_assert_str_eq(out, want);
        ck_assert_int_eq(marker_parse(out, &got), 0);
        ck_assert_int_eq(got.expires, 1796299999);
        ck_assert_int_eq(got.created, m.created);
        ck_assert_str_eq(got.sandbox, m.sandbox);
    }
    /* not ours: update refuses and returns nothing */
    {
        char *out = (char *)0x1;
        ck_assert_int_eq(marker_update_expiry("foreign box\n", 5, &out), -ENOENT);
        ck_assert_int_eq(marker_update_expiry("sandboxd: junk\n", 5, &out), -EBADMSG);
        ck_assert_int_eq(marker_update_expiry(NULL, 5, &out), -ENOENT);
        ck_assert_ptr_eq(out, (char *)0x1);
        ck_assert_int_eq(marker_update_expiry(line, -5, &out), -EINVAL);
    }
    /* size limit: Proxmox takes at most 8192 */
    {
        size_t room = MARKER_DESCRIPTION_MAX - strlen(line) - 1;
        char *text = malloc(room + 2);
        char *out = NULL;
        ck_assert_ptr_nonnull(text);
        memset(text, 'a', room);
        text[room - 1] = '\n';
        text[room] = '\0';
        ck_assert_int_eq(marker_set(text, &m, &out), 0);
        ck_assert_uint_eq(strlen(out), MARKER_DESCRIPTION_MAX);
        free(out);
        out = NULL;
        text[room - 1] = 'a';
        text[room] = '\n';
        text[room + 1] = '\0';
        ck_assert_int_eq(marker_set(text, &m, &out), -E2BIG);
        ck_assert_ptr_null(out);
        free(text);
    }
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_key_hash)
{
    uv_loop_t loop;
    char a[SHA256_HEX_SIZE], b[SHA256_HEX_SIZE], want[SHA256_HEX_SIZE];
    struct marker m = sample(false), got;
    _cleanup_free_ char *line = NULL;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(marker_key_hash(1000, "task-91", a), 0);
    ck_assert_int_eq(sha256_hex("1000\ntask-91", 12, want), 0);
    ck_assert_str_eq(a, want);
    ck_assert_int_eq(marker_key_hash(1001, "task-91", b), 0);
    ck_assert_str_ne(a, b);
    ck_assert_int_eq(marker_key_hash(1000, "task-92", b), 0);
    ck_assert_str_ne(a, b);
    ck_assert_int_eq(marker_key_hash(1000, "", b), -EINVAL);
    ck_assert_int_eq(marker_key_hash(1000, NULL, b), -EINVAL);
    /* and it goes into a marker */
    strcpy(m.key, a);
    line = line_of(&m);
    ck_assert_int_eq(marker_parse(line, &got), 0);
    ck_assert_str_eq(got.key, a);
    ck_assert_str_eq(got.params, "");
    check_loop_done(&loop);
}
END_TEST

/* xorshift64*: deterministic inputs for the fuzz-ish tests. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

START_TEST(test_fuzz)
{
    uv_loop_t loop;
    struct marker m = sample(true), got;
    _cleanup_free_ char *base = NULL;
    char buf[2048];
    unsigned accepted = 0, mutated_ok = 0;
    static const char alphabet[] = "sandboxd:v1 =\n#+-\t\r0123456789abcdefik";

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(marker_set("human text\n", &m, &base), 0);

    /* random bytes: never crash */
    for (int i = 0; i < 10000; i++) {
        size_t n = rnd() % (sizeof(buf) - 1);
        for (size_t j = 0; j < n; j++)
            buf[j] = (char)(rnd() % 2 ? alphabet[rnd() % (sizeof(alphabet) - 1)]
                                      : (char)(1 + rnd() % 255));
        buf[n] = '\0';
        if (marker_parse(buf, &got) == 0)
            accepted++;
    }
    ck_assert_uint_eq(accepted, 0);

    /* Mutations of a valid description: whatever parses must mean exactly
     * what was written (the check guards every value). */
    for (int i = 0; i < 20000; i++) {
        size_t n = strlen(base);
        int edits = 1 + (int)(rnd() % 3);
        char *out = NULL;
        memcpy(buf, base, n + 1);
        for (int e = 0; e < edits; e++) {
            size_t pos = rnd() % (n + 1);
            char c = alphabet[rnd() % (sizeof(alphabet) - 1)];
            switch (rnd() % 3) {
            case 0: /* replace */
                if (pos < n)
                    buf[pos] = c;
                break;
            case 1: /* insert */
                if (n + 1 < sizeof(buf) - 1) {
                    memmove(buf + pos + 1, buf + pos, n - pos + 1);
                    buf[pos] = c;
                    n++;
                }
                break;
            default: /* delete */
                if (pos < n) {
                    memmove(buf + pos, buf + pos + 1, n - pos);
                    n--;
                }
            }
        }
        if (marker_parse(buf, &got) == 0) {
            mutated_ok++;
            assert_marker_eq(&m, &got);
            /* and an update of such a description stays ours */
            ck_assert_int_eq(marker_update_expiry(buf, 42, &out), 0);
            ck_assert_int_eq(marker_parse(out, &got), 0);
            ck_assert_int_eq(got.expires, 42);
            free(out);
        }
    }
    /* harmless mutations (in the human text, separators) do happen */
    ck_assert_uint_gt(mutated_ok, 100);
    fprintf(stderr, "fuzz: %u of 20000 mutated descriptions still parse, all unchanged\n",
            mutated_ok);
    check_loop_done(&loop);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("marker");
    TCase *tc = tcase_create("marker");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_format_exact);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_template_pool);
    tcase_add_test(tc, test_template_itself);
    tcase_add_test(tc, test_replica);

    tcase_add_test(tc, test_paused);
    tcase_add_test(tc, test_surroundings);
    tcase_add_test(tc, test_foreign);
    tcase_add_test(tc, test_set_update);
    tcase_add_test(tc, test_key_hash);
    tcase_add_test(tc, test_fuzz);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
