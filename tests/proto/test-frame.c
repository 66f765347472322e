/* proto/frame: newline framing with a hard cap, fed in every kind of split. */
#include "frame.h"
#include "tests/check-util.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

static uv_loop_t loop;

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
}

static void teardown(void)
{
    check_loop_done(&loop);
}

/* Collects every line of `in` fed in the given chunk sizes (0-terminated list
 * cycled), joined with '|'. Returns the last framing result (<0 on overflow). */
static int feed(struct frame_buf *f, const char *in, size_t n, const size_t *chunks, char *out,
                size_t out_size, size_t *ret_lines)
{
    size_t pos = 0, ci = 0, lines = 0, o = 0;
    int r = 0;

    out[0] = '\0';
    while (pos < n) {
        size_t k = chunks[ci] ? chunks[ci++] : (ci = 0, chunks[ci++]);
        char *line;
        size_t len;

        if (k > n - pos)
            k = n - pos;
        r = frame_buf_append(f, in + pos, k);
        pos += k;
        if (r < 0)
            break;
        while ((r = frame_buf_next(f, &line, &len)) == 1) {
            ck_assert_uint_eq(strlen(line), len); /* NUL-terminated in place */
            ck_assert_uint_lt(o + len + 2, out_size);
            memcpy(out + o, line, len);
            o += len;
            out[o++] = '|';
            out[o] = '\0';
            lines++;
        }
        if (r < 0)
            break;
    }
    *ret_lines = lines;
    return r;
}

START_TEST(test_byte_by_byte)
{
    static const char in[] = "{\"a\":1}\n\n[2]\nhello world\npartial";
    static const size_t one[] = {1, 0};
    struct frame_buf f;
    char out[256];
    size_t lines;

    frame_buf_init(&f, 64);
    ck_assert_int_eq(feed(&f, in, strlen(in), one, out, sizeof(out), &lines), 0);
    ck_assert_str_eq(out, "{\"a\":1}||[2]|hello world|");
    ck_assert_uint_eq(lines, 4);
    ck_assert_uint_eq(frame_buf_pending(&f), strlen("partial"));
    /* Each byte was looked at once: the pending partial line is fully scanned. */
    ck_assert_uint_eq(f.scanned, strlen("partial"));
    ck_assert_int_eq(frame_buf_append(&f, "!\n", 2), 0);
    char *line;
    size_t len;
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
    ck_assert_str_eq(line, "partial!");
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 0);
    ck_assert_uint_eq(frame_buf_pending(&f), 0);
    frame_buf_done(&f);
}
END_TEST

START_TEST(test_random_splits)
{
    char in[8192], expect[9000], out[9000];
    size_t n = 0, e = 0;
    uint32_t seed = 0x5eed1234u;

    /* 40 lines of 0..149 bytes built from a fixed seed, fed in 200 different
     * seeded splits of 1..700 bytes. */
    for (int i = 0; i < 40; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t len = (seed >> 16) % 150;
        for (size_t j = 0; j < len; j++) {
            char c = (char)('a' + (j + (size_t)i) % 26);
            in[n++] = c;
            expect[e++] = c;
        }
        in[n++] = '\n';
        expect[e++] = '|';
    }
    expect[e] = '\0';

    for (int round = 0; round < 200; round++) {
        size_t chunks[17];
        struct frame_buf f;
        size_t lines;

        for (int k = 0; k < 16; k++) {
            seed = seed * 1103515245u + 12345u;
            chunks[k] = 1 + (seed >> 16) % 700;
        }
        chunks[16] = 0;
        frame_buf_init(&f, 1024);
        ck_assert_int_eq(feed(&f, in, n, chunks, out, sizeof(out), &lines), 0);
        ck_assert_str_eq(out, expect);
        ck_assert_uint_eq(lines, 40);
        ck_assert_uint_eq(frame_buf_pending(&f), 0);
        frame_buf_done(&f);
    }
}
END_TEST

START_TEST(test_max_line_boundary)
{
    struct frame_buf f;
    char buf[130];
    char *line;
    size_t len;

    /* Exactly max_line bytes (then '\n') is accepted ... */
    memset(buf, 'x', 128);
    buf[128] = '\n';
    frame_buf_init(&f, 128);
    ck_assert_int_eq(frame_buf_append(&f, buf, 129), 0);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
    ck_assert_uint_eq(len, 128);
    /* ... and an unterminated line of exactly max_line bytes is still pending. */
    ck_assert_int_eq(frame_buf_append(&f, buf, 128), 0);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 0);
    /* One more byte: the pending line is too long, sticky, data dropped. */
    ck_assert_int_eq(frame_buf_append(&f, "y", 1), -EMSGSIZE);
    ck_assert(f.overflow);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), -EMSGSIZE);
    ck_assert_int_eq(frame_buf_append(&f, "\n", 1), -EMSGSIZE);
    ck_assert_uint_eq(frame_buf_pending(&f), 0);
    ck_assert_ptr_null(f.data);
    frame_buf_done(&f);

    /* max_line + 1 arriving at once with its '\n': refused at append. */
    memset(buf, 'x', 129);
    buf[129] = '\n';
    frame_buf_init(&f, 128);
    ck_assert_int_eq(frame_buf_append(&f, buf, 130), -EMSGSIZE);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), -EMSGSIZE);
    frame_buf_done(&f);

    /* A good line followed by an oversize one in the same chunk: the good one
     * is delivered, then the error. */
    char big[300];
    memcpy(big, "ok\n", 3);
    memset(big + 3, 'z', 200);
    big[203] = '\n';
    frame_buf_init(&f, 128);
    ck_assert_int_eq(frame_buf_append(&f, big, 204), 0);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
    ck_assert_str_eq(line, "ok");
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), -EMSGSIZE);
    frame_buf_done(&f);
}
END_TEST

START_TEST(test_crlf)
{
    struct frame_buf f;
    char *line;
    size_t len;

    frame_buf_init(&f, 16);
    ck_assert_int_eq(frame_buf_append(&f, "abc\r\n\r\nd\r", 9), 0);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
    ck_assert_uint_eq(len, 4);
    ck_assert_mem_eq(line, "abc\r", 5); /* '\r' kept, NUL where '\n' was */
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
    ck_assert_uint_eq(len, 1);
    ck_assert_str_eq(line, "\r");
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 0);
    ck_assert_int_eq(frame_buf_append(&f, "\n", 1), 0);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
    ck_assert_str_eq(line, "d\r");
    frame_buf_done(&f);

    /* The '\r' counts towards max_line. */
    frame_buf_init(&f, 3);
    ck_assert_int_eq(frame_buf_append(&f, "abc\r\n", 5), -EMSGSIZE);
    frame_buf_done(&f);
}
END_TEST

START_TEST(test_memory_bounded)
{
    /* A 20 MiB line without newline, fed in 64 KiB reads, against a 1 MiB cap:
     * refused once the pending line passes the cap, never holding more than
     * the cap plus about one read. */
    static char chunk[65536];
    struct frame_buf f;
    size_t fed = 0, max_cap = 0;
    int r = 0;

    memset(chunk, 'q', sizeof(chunk));
    frame_buf_init(&f, 1 << 20);
    while (fed < (size_t)20 << 20) {
        r = frame_buf_append(&f, chunk, sizeof(chunk));
        fed += sizeof(chunk);
        if (f.cap > max_cap)
            max_cap = f.cap;
        if (r < 0)
            break;
    }
    ck_assert_int_eq(r, -EMSGSIZE);
    ck_assert_uint_le(fed, (1 << 20) + sizeof(chunk));
    ck_assert_uint_le(max_cap, (1 << 20) + 1 + sizeof(chunk));
    frame_buf_done(&f);
}
END_TEST

START_TEST(test_no_rescan)
{
    /* Appending a long partial line in many small pieces keeps `scanned` at
     * the end: no byte is scanned twice (checked through the invariant). */
    struct frame_buf f;
    char *line;
    size_t len;

    frame_buf_init(&f, 100000);
    for (int i = 0; i < 50000; i++) {
        ck_assert_int_eq(frame_buf_append(&f, "a", 1), 0);
        ck_assert_uint_eq(f.scanned, (size_t)i + 1);
    }
    ck_assert_int_eq(frame_buf_append(&f, "\nb\n", 3), 0);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
    ck_assert_uint_eq(len, 50000);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
    ck_assert_str_eq(line, "b");
    /* Compaction: after consuming everything the buffer starts from 0 again. */
    ck_assert_uint_eq(f.start, 0);
    ck_assert_uint_eq(f.len, 0);
    frame_buf_done(&f);
    frame_buf_done(NULL);
}
END_TEST

START_TEST(test_resync)
{
    /* Resync mode: an overlong line is reported once, in its place, and skipped up
     * to its '\n'; the lines around it come through, however the input is split. */
    static const size_t splits[][3] = {{1, 0}, {3, 0}, {7, 2, 0}, {64, 0}, {1000, 0}};
    char in[200];
    size_t n = 0;

    n += (size_t)sprintf(in + n, "a\n");
    memset(in + n, 'x', 40); /* over the cap of 16, complete */
    n += 40;
    in[n++] = '\n';
    n += (size_t)sprintf(in + n, "b\nc\n");
    memset(in + n, 'y', 30); /* over the cap, then the end of input */
    n += 30;
    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        struct frame_buf f;
        char out[256] = "";
        size_t pos = 0, ci = 0, o = 0;
        char *line;
        size_t len;
        int r;

        frame_buf_init(&f, 16);
        frame_buf_set_resync(&f, true);
        while (pos < n) {
            size_t k = splits[s][ci] ? splits[s][ci++] : (ci = 0, splits[s][ci++]);

            k = k > n - pos ? n - pos : k;
            ck_assert_int_eq(frame_buf_append(&f, in + pos, k), 0);
            pos += k;
            while ((r = frame_buf_next(&f, &line, &len)) != 0)
                o += (size_t)sprintf(out + o, "%s|", r < 0 ? "!" : line);
        }
        ck_assert_str_eq(out, "a|!|b|c|!|");
        ck_assert_int_eq(frame_buf_finish(&f, &line, &len), 0); /* the rest was skipped */
        ck_assert_int_eq(frame_buf_append(&f, "d\ne", 3), 0);
        ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
        ck_assert_str_eq(line, "d");
        frame_buf_done(&f);
    }
}
END_TEST

START_TEST(test_finish)
{
    /* At the end of input an unterminated last line counts; an empty rest is none. */
    struct frame_buf f;
    char *line;
    size_t len;

    frame_buf_init(&f, 8);
    ck_assert_int_eq(frame_buf_append(&f, "one\ntwo", 7), 0);
    ck_assert_int_eq(frame_buf_finish(&f, &line, &len), -EINVAL); /* "one" not taken yet */
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 1);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), 0);
    ck_assert_int_eq(frame_buf_finish(&f, &line, &len), 1);
    ck_assert_uint_eq(len, 3);
    ck_assert_str_eq(line, "two");
    ck_assert_int_eq(frame_buf_finish(&f, &line, &len), 0);
    ck_assert_uint_eq(frame_buf_pending(&f), 0);
    /* Exactly the capacity: the NUL still fits. */
    ck_assert_int_eq(frame_buf_append(&f, "12345678", 8), 0);
    ck_assert_int_eq(frame_buf_finish(&f, &line, &len), 1);
    ck_assert_str_eq(line, "12345678");
    frame_buf_done(&f);
}
END_TEST

static Suite *frame_suite(void)
{
    Suite *s = suite_create("frame");
    TCase *tc = tcase_create("frame");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_byte_by_byte);
    tcase_add_test(tc, test_random_splits);
    tcase_add_test(tc, test_resync);
    tcase_add_test(tc, test_finish);
    tcase_add_test(tc, test_max_line_boundary);
    tcase_add_test(tc, test_crlf);
    tcase_add_test(tc, test_memory_bounded);
    tcase_add_test(tc, test_no_rescan);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(frame_suite());
}
