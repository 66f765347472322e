/* The build file parser of `sandboxctl template build` (clients/cli/sandboxctl-buildfile.c):
 * every instruction in its forms, continuations and comments, and the refusals with their
 * line numbers. */
#include "sandboxctl-buildfile.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *text, struct buildfile *f, struct buildfile_error *err)
{
    *err = (struct buildfile_error){};
    return buildfile_parse(text, strlen(text), f, err);
}

START_TEST(test_all_instructions)
{
    const char *text = "# a comment\n"
                       "from tools\n"
                       "\n"
                       "RUN apt-get update && \\\n"
                       "    # a comment between continued lines\n"
                       "    apt-get install -y jq\n"
                       "RUN [\"echo\", \"a b\"]\n"
                       "COPY app.py lib/ /srv/app/\n"
                       "COPY [\"with space.txt\", \"/tmp/x\"]\r\n"
                       "ENV A=1 B=\"two words\" C='x y'\\ z\n"
                       "ENV LONG the rest of the line\n"
                       "WORKDIR /srv/app\n"
                       "USER ann\n";
    struct buildfile f;
    struct buildfile_error err;

    ck_assert_int_eq(parse(text, &f, &err), 0);
    ck_assert_uint_eq(f.n_steps, 9);
    ck_assert_int_eq(f.steps[0].kind, BUILDFILE_FROM);
    ck_assert_str_eq(f.steps[0].arg, "tools");
    ck_assert_uint_eq(f.steps[0].line, 2);
    ck_assert_int_eq(f.steps[1].kind, BUILDFILE_RUN);
    ck_assert_uint_eq(f.steps[1].line, 4);
    ck_assert_str_eq(f.steps[1].arg, "apt-get update &&     apt-get install -y jq");
    ck_assert_ptr_null(f.steps[1].words);
    ck_assert_uint_eq(f.steps[2].n_words, 2);
    ck_assert_str_eq(f.steps[2].words[1], "a b");
    ck_assert_uint_eq(f.steps[3].line, 8);
    ck_assert_uint_eq(f.steps[3].n_words, 3);
    ck_assert_str_eq(f.steps[3].words[2], "/srv/app/");
    ck_assert_str_eq(f.steps[4].words[0], "with space.txt");
    ck_assert_uint_eq(f.steps[5].n_words, 6);
    ck_assert_str_eq(f.steps[5].words[3], "two words");
    ck_assert_str_eq(f.steps[5].words[5], "x y z");
    ck_assert_str_eq(f.steps[6].words[0], "LONG");
    ck_assert_str_eq(f.steps[6].words[1], "the rest of the line");
    ck_assert_int_eq(f.steps[7].kind, BUILDFILE_WORKDIR);
    ck_assert_str_eq(f.steps[7].arg, "/srv/app");
    ck_assert_int_eq(f.steps[8].kind, BUILDFILE_USER);
    ck_assert_str_eq(f.steps[8].arg, "ann");
    ck_assert_str_eq(f.steps[8].text, "USER ann");
    ck_assert_uint_eq(f.steps[8].line, 13);
    buildfile_done(&f);
}
END_TEST

/* Each refusal: the text, the line it names, a word of its message. */
static const struct {
    const char *text;
    unsigned line;
    const char *says;
} bad[] = {
    {"FROM tools\nRUN true\nEXPOSE 80\n", 3, "unknown instruction \"EXPOSE\""},
    {"FROM tools\n\nCOPY ../secret /x\n", 3, "outside the context"},
    {"FROM tools\nCOPY /etc/passwd /x\n", 2, "outside the context"},
    {"FROM tools\nCOPY a/../../b /x\n", 2, "outside the context"},
    {"FROM tools\nCOPY --chown=1 a /x\n", 2, "flags are not supported"},
    {"FROM tools\nCOPY onlyone\n", 2, "a source and a destination"},
    {"RUN true\n", 1, "must start with FROM"},
    {"# nothing\n\n", 0, "no FROM"},
    {"FROM a\nFROM b\n", 2, "second FROM"},
    {"FROM a AS b\n", 1, "multi-stage"},
    {"FROM Bad_Name\n", 1, "template name"},
    {"FROM a\nENV 1A=x\n", 2, "NAME=VALUE"},
    {"FROM a\nENV A=\"open\n", 2, "unterminated quote"},
    {"FROM a\nENV A\n", 2, "NAME VALUE"},
    {"FROM a\nUSER ann:staff\n", 2, "user:group"},
    {"FROM a\nWORKDIR\n", 2, "needs arguments"},
    {"FROM a\nRUN a \\\n  b\nBOGUS\n", 4, "unknown instruction"},
};

START_TEST(test_refused)
{
    struct buildfile f = {};
    struct buildfile_error err;

    ck_assert_int_eq(parse(bad[_i].text, &f, &err), -EINVAL);
    ck_assert_msg(err.line == bad[_i].line, "%s: line %u, want %u", bad[_i].text, err.line,
                  bad[_i].line);
    ck_assert_msg(strstr(err.message, bad[_i].says), "%s: \"%s\"", bad[_i].text, err.message);
    ck_assert_ptr_null(f.steps);
}
END_TEST

START_TEST(test_sources)
{
    ck_assert(buildfile_source_ok("a"));
    ck_assert(buildfile_source_ok("a/b/c.txt"));
    ck_assert(buildfile_source_ok("./a"));
    ck_assert(buildfile_source_ok("a..b"));
    ck_assert(!buildfile_source_ok(""));
    ck_assert(!buildfile_source_ok("/a"));
    ck_assert(!buildfile_source_ok(".."));
    ck_assert(!buildfile_source_ok("a/.."));
    ck_assert(!buildfile_source_ok("a/../../b"));
}
END_TEST

START_TEST(test_nul_and_size)
{
    struct buildfile f;
    struct buildfile_error err;
    char *big = malloc(BUILDFILE_MAX_BYTES + 2);

    ck_assert_int_eq(buildfile_parse("FROM a\0\n", 8, &f, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "NUL"));
    memset(big, '#', BUILDFILE_MAX_BYTES + 1);
    ck_assert_int_eq(buildfile_parse(big, BUILDFILE_MAX_BYTES + 1, &f, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "larger than"));
    free(big);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("buildfile");
    TCase *tc = tcase_create("parse");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_all_instructions);
    tcase_add_loop_test(tc, test_refused, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, test_sources);
    tcase_add_test(tc, test_nul_and_size);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
