/* Tests for lib/state/registry: durable sandbox records, the instance id, loading
 * after crashes, and the params hash. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "registry.h"
#include "tests/check-util.h"

static char tmpdir[256];
static char state_dir[300];

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/test-registry-XXXXXX", t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(state_dir, sizeof(state_dir), "%s/lib/sandboxd", tmpdir);
}

static void teardown(void)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void path_of(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/sandboxes/%s", state_dir, name);
}

static bool exists(const char *name)
{
    char p[512];
    path_of(p, sizeof(p), name);
    return access(p, F_OK) == 0;
}

static void write_raw(const char *name, const char *data, size_t n)
{
    char p[512];
    FILE *f;
    path_of(p, sizeof(p), name);
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static char *read_raw(const char *name)
{
    char p[512];
    char *data = NULL;
    path_of(p, sizeof(p), name);
    ck_assert_int_eq(read_file_max(AT_FDCWD, p, 1 << 20, &data, NULL), 0);
    return data;
}

static size_t count_files(void)
{
    char p[512];
    DIR *d;
    struct dirent *de;
    size_t n = 0;

    snprintf(p, sizeof(p), "%s/sandboxes", state_dir);
    d = opendir(p);
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static struct registry_record *full_record(const char *id)
{
    struct registry_record *r = registry_record_new();
    ck_assert_ptr_nonnull(r);
    r->id = strdup(id);
    r->instance = strdup("i-0123456789ab");
    r->owner_uid = 1000;
    r->idempotency_key = strdup("task-91 \"quoted\" \\ ünïcode");
    r->params_hash = strdup("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    r->vmid = 4017;
    r->node = strdup("pve");
    r->state = REG_CONNECTING;
    r->upid = strdup("UPID:pve:0000A1B2:0012C3D4:6745A0B1:vzstart:4017:root@pam!sandboxd:");
    r->hostname = strdup(id);
    r->ip = strdup("10.10.0.23");
    r->cores = 2;
    r->memory_mb = 2048;
    r->disk_gb = 16;
    r->internet = true;
    r->labels = json_tokener_parse("{\"task\": \"t-91\", \"team\": \"red / blue\"}");
    r->created_at = 1796212800;
    r->expires_at = 1796216400;
    r->error = strdup("");
    r->template = strdup("py-3");
    r->fork_snapshot = strdup("sandboxd-fork-abcd2345");
    r->detaching = strdup("data-1");
    r->pool = true;
    r->resume_on_use = true;
    r->auto_pause_s = 600;
    r->env = json_tokener_parse("{\"API_TOKEN\": \"s3cret\", \"A_1\": \"x=y\"}");
    ck_assert_ptr_nonnull(r->labels);
    ck_assert_ptr_nonnull(r->env);
    return r;
}

static struct registry_record *min_record(const char *id)
{
    struct registry_record *r = registry_record_new();
    ck_assert_ptr_nonnull(r);
    r->id = strdup(id);
    r->instance = strdup("i-0123456789ab");
    r->owner_uid = 0;
    r->state = REG_PENDING;
    r->created_at = 1796212800;
    r->expires_at = 1796212800;
    return r;
}

static void assert_record_eq(const struct registry_record *a, const struct registry_record *b)
{
    ck_assert_str_eq(a->id, b->id);
    ck_assert_str_eq(a->instance, b->instance);
    ck_assert_uint_eq(a->owner_uid, b->owner_uid);
    ck_assert_pstr_eq(a->idempotency_key, b->idempotency_key);
    ck_assert_pstr_eq(a->params_hash, b->params_hash);
    ck_assert_int_eq(a->vmid, b->vmid);
    ck_assert_pstr_eq(a->node, b->node);
    ck_assert_int_eq(a->state, b->state);
    ck_assert_pstr_eq(a->upid, b->upid);
    ck_assert_pstr_eq(a->hostname, b->hostname);
    ck_assert_pstr_eq(a->ip, b->ip);
    ck_assert_uint_eq(a->cores, b->cores);
    ck_assert_uint_eq(a->memory_mb, b->memory_mb);
    ck_assert_uint_eq(a->disk_gb, b->disk_gb);
    ck_assert_int_eq(a->internet, b->internet);
    ck_assert_int_eq(a->created_at, b->created_at);
    ck_assert_int_eq(a->expires_at, b->expires_at);
    ck_assert_pstr_eq(a->error, b->error);
    ck_assert_pstr_eq(a->template, b->template);
    ck_assert_pstr_eq(a->fork_snapshot, b->fork_snapshot);
    ck_assert_pstr_eq(a->detaching, b->detaching);
    ck_assert_int_eq(a->pool, b->pool);
    ck_assert_int_eq(a->resume_on_use, b->resume_on_use);
    ck_assert_uint_eq(a->auto_pause_s, b->auto_pause_s);
    ck_assert_int_eq(!!a->labels, !!b->labels);
    if (a->labels)
        ck_assert(json_object_equal(a->labels, b->labels));
    ck_assert_int_eq(!!a->env, !!b->env);
    if (a->env)
        ck_assert(json_object_equal(a->env, b->env));
}

static struct registry *open_reg(void)
{
    struct registry *reg = NULL;
    ck_assert_int_eq(registry_open(state_dir, &reg), 0);
    ck_assert_ptr_nonnull(reg);
    return reg;
}

START_TEST(test_states)
{
    uv_loop_t loop;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    for (int s = 0; s < _REG_STATE_MAX; s++) {
        ck_assert_ptr_nonnull(registry_state_to_string(s));
        ck_assert_int_eq(registry_state_from_string(registry_state_to_string(s)), s);
    }
    ck_assert_str_eq(registry_state_to_string(REG_PENDING), "pending");
    ck_assert_str_eq(registry_state_to_string(REG_WAITING_IP), "waiting_ip");
    ck_assert_str_eq(registry_state_to_string(REG_READY), "ready");
    ck_assert_str_eq(registry_state_to_string(REG_PAUSED), "paused");
    ck_assert_ptr_null(registry_state_to_string(_REG_STATE_MAX));
    ck_assert_int_eq(registry_state_from_string("gone"), -EINVAL);
    ck_assert_int_eq(registry_state_from_string(NULL), -EINVAL);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_open_instance)
{
    uv_loop_t loop;
    struct registry *reg;
    char id[ID_MAX + 1], p[512];
    struct stat st;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    reg = open_reg();
    ck_assert(id_is_valid(registry_instance_id(reg)));
    ck_assert_ptr_nonnull(startswith(registry_instance_id(reg), "i-"));
    ck_assert_str_eq(registry_state_dir(reg), state_dir);
    strcpy(id, registry_instance_id(reg));
    reg = registry_free(reg);

    /* folders 0700, instance file 0600 with the id and a newline */
    ck_assert_int_eq(stat(state_dir, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0700);
    snprintf(p, sizeof(p), "%s/sandboxes", state_dir);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0700);
    snprintf(p, sizeof(p), "%s/instance", state_dir);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    {
        _cleanup_free_ char *data = NULL;
        ck_assert_int_eq(read_file_max(AT_FDCWD, p, 100, &data, NULL), 0);
        ck_assert_uint_eq(strlen(data), strlen(id) + 1);
        ck_assert(strncmp(data, id, strlen(id)) == 0);
    }

    /* stable across reopen */
    reg = open_reg();
    ck_assert_str_eq(registry_instance_id(reg), id);
    reg = registry_free(reg);

    /* a file written by hand (or an older daemon) is kept as it is */
    ck_assert_int_eq(atomic_write_file(AT_FDCWD, p, "i-handmade\n", 11, 0600), 0);
    reg = open_reg();
    ck_assert_str_eq(registry_instance_id(reg), "i-handmade");
    reg = registry_free(reg);

    /* state folder lost: the id comes back (derived from the machine id) */
    ck_assert_int_eq(unlink(p), 0);
    reg = open_reg();
    if (access("/etc/machine-id", R_OK) == 0)
        ck_assert_str_eq(registry_instance_id(reg), id);
    else
        ck_assert(id_is_valid(registry_instance_id(reg)));
    reg = registry_free(reg);

    /* a corrupt instance file is moved aside and replaced */
    ck_assert_int_eq(atomic_write_file(AT_FDCWD, p, "not an id!\n", 11, 0600), 0);
    reg = open_reg();
    ck_assert(id_is_valid(registry_instance_id(reg)));
    reg = registry_free(reg);
    snprintf(p, sizeof(p), "%s/instance.corrupt", state_dir);
    ck_assert_int_eq(access(p, F_OK), 0);

    /* another state folder on the same machine: another instance */
    {
        char other[400];
        snprintf(other, sizeof(other), "%s/other", tmpdir);
        ck_assert_int_eq(registry_open(other, &reg), 0);
        ck_assert_str_ne(registry_instance_id(reg), id);
        reg = registry_free(reg);
    }

    /* errors */
    ck_assert_int_eq(registry_open("", &reg), -EINVAL);
    ck_assert_int_eq(registry_open(NULL, &reg), -EINVAL);
    snprintf(p, sizeof(p), "%s/instance", state_dir);
    {
        char below[600];
        struct registry *r2 = (struct registry *)0x1;
        snprintf(below, sizeof(below), "%s/x", p);
        ck_assert_int_eq(registry_open(below, &r2), -ENOTDIR);
        ck_assert_ptr_eq(r2, (struct registry *)0x1);
    }
    ck_assert_ptr_null(registry_free(NULL));
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_roundtrip)
{
    uv_loop_t loop;
    struct registry *reg;
    struct registry_record *full = full_record("sb-full0000001"),
                           *min = min_record("sb-min00000001");
    struct registry_record **v = NULL;
    struct registry_problem *probs = NULL;
    size_t n = 0, np = 0;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    reg = open_reg();
    ck_assert_int_eq(registry_load(reg, &v, &n, &probs, &np), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(np, 0);
    v = registry_records_free(v, n);
    probs = registry_problems_free(probs, np);

    ck_assert_int_eq(registry_save(reg, full), 0);
    ck_assert_int_eq(registry_save(reg, min), 0);
    ck_assert(exists("sb-full0000001.json"));
    reg = registry_free(reg);

    reg = open_reg();
    ck_assert_int_eq(registry_load(reg, &v, &n, &probs, &np), 0);
    ck_assert_uint_eq(np, 0);
    ck_assert_uint_eq(n, 2);
    /* sorted by id */
    assert_record_eq(v[0], full);
    assert_record_eq(v[1], min);
    ck_assert_ptr_null(v[1]->node);
    ck_assert_ptr_null(v[1]->labels);
    v = registry_records_free(v, n);

    /* a state change rewrites the record */
    full->state = REG_READY;
    free(full->upid);
    full->upid = NULL;
    full->expires_at += 3600;
    ck_assert_int_eq(registry_save(reg, full), 0);
    ck_assert_int_eq(registry_load(reg, &v, &n, NULL, NULL), 0);
    ck_assert_uint_eq(n, 2);
    assert_record_eq(v[0], full);
    v = registry_records_free(v, n);

    /* the file is readable JSON with the documented names */
    {
        _cleanup_free_ char *raw = read_raw("sb-full0000001.json");
        json_object *o = json_tokener_parse(raw), *x;
        ck_assert_ptr_nonnull(o);
        ck_assert(json_object_object_get_ex(o, "version", &x));
        ck_assert_int_eq(json_object_get_int(x), 1);
        ck_assert(json_object_object_get_ex(o, "expires_at", &x));
        ck_assert_str_eq(json_object_get_string(x), "2026-12-02T14:00:00Z");
        ck_assert(json_object_object_get_ex(o, "state", &x));
        ck_assert_str_eq(json_object_get_string(x), "ready");
        ck_assert(!json_object_object_get_ex(o, "upid", &x));
        json_object_put(o);
    }

    /* dup is deep */
    {
        struct registry_record *c = registry_record_dup(full);
        ck_assert_ptr_nonnull(c);
        ck_assert_ptr_ne(c->id, full->id);
        ck_assert_ptr_ne(c->labels, full->labels);
        assert_record_eq(c, full);
        registry_record_free(c);
    }

    registry_record_free(full);
    registry_record_free(min);
    registry_free(reg);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_invalid_save)
{
    uv_loop_t loop;
    struct registry *reg = open_reg();
    struct registry_record *r = min_record("sb-valid000001");

    ck_assert_int_eq(uv_loop_init(&loop), 0);
#define EXPECT_INVALID(stmt, undo)                                                                 \
    do {                                                                                           \
        stmt;                                                                                      \
        ck_assert_int_eq(registry_save(reg, r), -EINVAL);                                          \
        undo;                                                                                      \
    } while (0)
    EXPECT_INVALID(free(r->id); r->id = strdup("../../etc/passwd"), (void)0);
    EXPECT_INVALID(free(r->id); r->id = strdup("SB-x"), (void)0);
    free(r->id);
    r->id = strdup("sb-valid000001");
    EXPECT_INVALID(r->owner_uid = (uid_t)-1, r->owner_uid = 0);
    EXPECT_INVALID(r->vmid = 99, r->vmid = 0);
    EXPECT_INVALID(r->state = _REG_STATE_MAX, r->state = REG_PENDING);
    EXPECT_INVALID(r->params_hash = strdup("xyz"), (free(r->params_hash), r->params_hash = NULL));
    EXPECT_INVALID(r->node = strdup("pve\nx"), (free(r->node), r->node = NULL));
    EXPECT_INVALID(r->idempotency_key = strdup(""),
                   (free(r->idempotency_key), r->idempotency_key = NULL));
    EXPECT_INVALID(r->labels = json_tokener_parse("{\"a\": 1}"),
                   (json_object_put(r->labels), r->labels = NULL));
    EXPECT_INVALID(r->labels = json_tokener_parse("[\"a\"]"),
                   (json_object_put(r->labels), r->labels = NULL));
    EXPECT_INVALID(r->env = json_tokener_parse("{\"9A\": \"x\"}"),
                   (json_object_put(r->env), r->env = NULL));
    EXPECT_INVALID(r->env = json_tokener_parse("{\"A\": 1}"),
                   (json_object_put(r->env), r->env = NULL));
    EXPECT_INVALID(r->expires_at = -1, r->expires_at = 0);
    EXPECT_INVALID(r->cores = 100000, r->cores = 0);
    EXPECT_INVALID(r->detaching = strdup("../data"), (free(r->detaching), r->detaching = NULL));
    EXPECT_INVALID(r->detaching = strdup("a234567890123456789012345678901234"),
                   (free(r->detaching), r->detaching = NULL));
#undef EXPECT_INVALID
    ck_assert_uint_eq(count_files(), 0);
    ck_assert_int_eq(registry_save(reg, r), 0);
    ck_assert_uint_eq(count_files(), 1);
    ck_assert_int_eq(registry_save(reg, NULL), -EINVAL);
    registry_record_free(r);
    registry_free(reg);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_remove)
{
    uv_loop_t loop;
    struct registry *reg = open_reg();
    struct registry_record *r = min_record("sb-gone0000001");
    struct registry_record **v = NULL;
    size_t n = 0;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(registry_save(reg, r), 0);
    ck_assert(exists("sb-gone0000001.json"));
    ck_assert_int_eq(registry_remove(reg, "sb-gone0000001"), 0);
    ck_assert(!exists("sb-gone0000001.json"));
    ck_assert_int_eq(registry_remove(reg, "sb-gone0000001"), -ENOENT);
    ck_assert_int_eq(registry_remove(reg, "../instance"), -EINVAL);
    ck_assert_int_eq(registry_remove(reg, NULL), -EINVAL);
    ck_assert_int_eq(registry_load(reg, &v, &n, NULL, NULL), 0);
    ck_assert_uint_eq(n, 0);
    registry_records_free(v, n);
    registry_record_free(r);
    registry_free(reg);
    check_loop_done(&loop);
}
END_TEST

static bool has_problem(struct registry_problem *p, size_t n, const char *file, int error)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].file, file) == 0 && p[i].error == error && p[i].reason && p[i].moved_to &&
            exists(p[i].moved_to))
            return true;
    return false;
}

START_TEST(test_crash_leftovers)
{
    uv_loop_t loop;
    struct registry *reg = open_reg();
    struct registry_record *old = full_record("sb-crash000001"),
                           *good = min_record("sb-good0000001");
    struct registry_record **v = NULL;
    struct registry_problem *p = NULL;
    size_t n = 0, np = 0;
    _cleanup_free_ char *json = NULL;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(registry_save(reg, old), 0);
    ck_assert_int_eq(registry_save(reg, good), 0);

    /* crash between write and rename of a newer version: a temp file with
     * half of the new record; the old record stays authoritative */
    old->state = REG_READY;
    ck_assert_int_eq(registry_record_to_json(old, &json), 0);
    write_raw(".#sb-crash000001.json.k2m9x4q0", json, strlen(json) / 2);
    /* a crash in the middle of a write on a file system without ordered
     * metadata: the record itself is torn */
    write_raw("sb-torn0000001.json", json, strlen(json) / 3);
    /* and a zero-length record */
    write_raw("sb-empty000001.json", "", 0);

    ck_assert_int_eq(registry_load(reg, &v, &n, &p, &np), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(v[0]->id, "sb-crash000001");
    ck_assert_int_eq(v[0]->state, REG_CONNECTING); /* the old version */
    ck_assert_str_eq(v[1]->id, "sb-good0000001");
    ck_assert_uint_eq(np, 2);
    ck_assert(has_problem(p, np, "sb-torn0000001.json", -EBADMSG));
    ck_assert(has_problem(p, np, "sb-empty000001.json", -EBADMSG));
    ck_assert(!exists(".#sb-crash000001.json.k2m9x4q0"));
    ck_assert(!exists("sb-torn0000001.json"));
    ck_assert(exists("sb-torn0000001.json.corrupt"));
    v = registry_records_free(v, n);
    p = registry_problems_free(p, np);

    /* the next load is clean: moved-aside files are not reported again */
    ck_assert_int_eq(registry_load(reg, &v, &n, &p, &np), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(np, 0);
    v = registry_records_free(v, n);
    p = registry_problems_free(p, np);

    /* the same name torn again: moved aside without overwriting the first */
    write_raw("sb-torn0000001.json", "{", 1);
    ck_assert_int_eq(registry_load(reg, &v, &n, &p, &np), 0);
    ck_assert_uint_eq(np, 1);
    ck_assert_str_eq(p[0].moved_to, "sb-torn0000001.json.corrupt.1");
    ck_assert(exists("sb-torn0000001.json.corrupt"));
    v = registry_records_free(v, n);
    p = registry_problems_free(p, np);

    registry_record_free(old);
    registry_record_free(good);
    registry_free(reg);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_corrupt_records)
{
    uv_loop_t loop;
    struct registry *reg = open_reg();
    struct registry_record *good = full_record("sb-good0000001");
    struct registry_record **v = NULL;
    struct registry_problem *p = NULL;
    size_t n = 0, np = 0;
    _cleanup_free_ char *json = NULL;
    json_object *o;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(registry_save(reg, good), 0);
    ck_assert_int_eq(registry_record_to_json(good, &json), 0);

    /* variants of a good record, each under a file name matching its id */
    static const struct {
        const char *id;
        const char *mutation; /* key to change */
        const char *value;    /* JSON value, NULL = remove the key */
        int error;
    } cases[] = {
        {"sb-ver2", "version", "2", -EPROTONOSUPPORT},
        {"sb-ver0", "version", "\"1\"", -EBADMSG},
        {"sb-noexp", "expires_at", NULL, -EBADMSG},
        {"sb-noinst", "instance", NULL, -EBADMSG},
        {"sb-noowner", "owner_uid", NULL, -EBADMSG},
        {"sb-nostate", "state", NULL, -EBADMSG},
        {"sb-badstate", "state", "\"exploded\"", -EBADMSG},
        {"sb-badtime", "created_at", "\"yesterday\"", -EBADMSG},
        {"sb-badowner", "owner_uid", "-5", -EBADMSG},
        {"sb-strowner", "owner_uid", "\"1000\"", -EBADMSG},
        {"sb-badvmid", "vmid", "12", -EBADMSG},
        {"sb-badlabels", "labels", "{\"a\": [1]}", -EBADMSG},
        {"sb-badinternet", "internet", "1", -EBADMSG},
        {"sb-badhash", "params_hash", "\"abc\"", -EBADMSG},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        char name[128];
        const char *s;
        o = json_tokener_parse(json);
        ck_assert_ptr_nonnull(o);
        json_object_object_add(o, "id", json_object_new_string(cases[i].id));
        if (cases[i].value)
            json_object_object_add(o, cases[i].mutation, json_tokener_parse(cases[i].value));
        else
            json_object_object_del(o, cases[i].mutation);
        s = json_object_to_json_string(o);
        snprintf(name, sizeof(name), "%s.json", cases[i].id);
        write_raw(name, s, strlen(s));
        json_object_put(o);
    }
    /* not JSON, not an object, trailing garbage, a name that does not match */
    write_raw("sb-garbage.json", "\x01\xff garbage", 10);
    write_raw("sb-array.json", "[1,2]", 5);
    write_raw("sb-trailing.json", "{} {}", 5);
    {
        _cleanup_free_ char *t = NULL;
        ck_assert_int_ge(asprintf(&t, "%s\nxx", json), 0);
        write_raw("sb-good0000002.json", t, strlen(t));
    }
    write_raw("sb-other.json", json, strlen(json)); /* id is sb-good0000001 */
    /* too large */
    {
        size_t big = REG_RECORD_MAX + 1;
        char *b = malloc(big);
        ck_assert_ptr_nonnull(b);
        memset(b, ' ', big);
        write_raw("sb-huge.json", b, big);
        free(b);
    }
    /* not ours to read: unknown files, folders, earlier corrupt files */
    write_raw("README", "x", 1);
    write_raw("sb-old.json.corrupt", "x", 1);
    {
        char d[512];
        path_of(d, sizeof(d), "sb-dir.json");
        ck_assert_int_eq(mkdir(d, 0700), 0);
    }

    ck_assert_int_eq(registry_load(reg, &v, &n, &p, &np), 0);
    ck_assert_uint_eq(n, 1);
    assert_record_eq(v[0], good);
    ck_assert_uint_eq(np, ELEMENTSOF(cases) + 6);
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        char name[128];
        snprintf(name, sizeof(name), "%s.json", cases[i].id);
        ck_assert_msg(has_problem(p, np, name, cases[i].error), "%s not reported", name);
        ck_assert(!exists(name));
    }
    ck_assert(has_problem(p, np, "sb-garbage.json", -EBADMSG));
    ck_assert(has_problem(p, np, "sb-array.json", -EBADMSG));
    ck_assert(has_problem(p, np, "sb-trailing.json", -EBADMSG));
    ck_assert(has_problem(p, np, "sb-good0000002.json", -EBADMSG));
    ck_assert(has_problem(p, np, "sb-other.json", -EBADMSG));
    ck_assert(has_problem(p, np, "sb-huge.json", -EFBIG));
    ck_assert(exists("README"));
    ck_assert(exists("sb-old.json.corrupt"));
    ck_assert(exists("sb-dir.json"));
    v = registry_records_free(v, n);
    p = registry_problems_free(p, np);

    /* without a problem list the load still succeeds and moves them aside */
    write_raw("sb-late.json", "{", 1);
    ck_assert_int_eq(registry_load(reg, &v, &n, NULL, NULL), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert(exists("sb-late.json.corrupt"));
    v = registry_records_free(v, n);

    registry_record_free(good);
    registry_free(reg);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_many)
{
    enum { N = 1000, SAVED = 50 };
    uv_loop_t loop;
    struct registry *reg = open_reg();
    struct registry_record *r = full_record("sb-x");
    struct registry_record **v = NULL;
    size_t n = 0;
    uint64_t t0, t_save, t_load, worst = 0;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    /* SAVED records through registry_save() (timed, with both fsyncs); the rest
     * written as the same JSON without fsync to keep the test short. */
    t0 = now_monotonic_us();
    for (int i = 0; i < N; i++) {
        char id[ID_MAX + 1];
        uint64_t a = now_monotonic_us();
        ck_assert_int_eq(id_random(id, sizeof(id), "sb-"), 0);
        free(r->id);
        r->id = strdup(id);
        r->vmid = 1000 + i;
        if (i == SAVED) {
            t_save = now_monotonic_us() - t0;
        } else if (i > SAVED) {
            _cleanup_free_ char *json = NULL;
            char name[128];
            ck_assert_int_eq(registry_record_to_json(r, &json), 0);
            snprintf(name, sizeof(name), "%s.json", id);
            write_raw(name, json, strlen(json));
            continue;
        }
        ck_assert_int_eq(registry_save(reg, r), 0);
        worst = MAX(worst, now_monotonic_us() - a);
    }
    registry_free(reg);

    reg = open_reg();
    t0 = now_monotonic_us();
    ck_assert_int_eq(registry_load(reg, &v, &n, NULL, NULL), 0);
    t_load = now_monotonic_us() - t0;
    ck_assert_uint_eq(n, N);
    for (size_t i = 1; i < n; i++)
        ck_assert_int_lt(strcmp(v[i - 1]->id, v[i]->id), 0);
    fprintf(stderr,
            "registry: %d saves: %.3f ms per save (worst %.3f ms), load of %d records %.1f ms\n",
            SAVED, t_save / 1000.0 / SAVED, worst / 1000.0, N, t_load / 1000.0);
    registry_records_free(v, n);

    /* removing some: the rest goes with the test folder */
    t0 = now_monotonic_us();
    ck_assert_int_eq(registry_load(reg, &v, &n, NULL, NULL), 0);
    for (size_t i = 0; i < 50; i++)
        ck_assert_int_eq(registry_remove(reg, v[i]->id), 0);
    fprintf(stderr, "registry: %.3f ms per remove\n", (now_monotonic_us() - t0) / 1000.0 / 50);
    registry_records_free(v, n);
    ck_assert_uint_eq(count_files(), N - 50);

    registry_record_free(r);
    registry_free(reg);
    check_loop_done(&loop);
}
END_TEST

struct async_log {
    int order[64];
    int result[64];
    int n;
};
static struct async_log alog;

static void async_cb(int r, void *userdata)
{
    int idx = (int)(intptr_t)userdata;
    ck_assert_int_lt(alog.n, 64);
    alog.order[alog.n] = idx;
    alog.result[alog.n] = r;
    alog.n++;
}

START_TEST(test_async)
{
    static const enum registry_state states[] = {REG_PENDING,  REG_CLONING,    REG_CONFIGURING,
                                                 REG_STARTING, REG_WAITING_IP, REG_CONNECTING,
                                                 REG_READY,    REG_DESTROYING};
    uv_loop_t loop, other;
    struct registry *reg = open_reg();
    struct registry_record *r = full_record("sb-async000001");
    struct registry_record **v = NULL;
    size_t n = 0;
    uint64_t t0, t_calls = 0, t_first = 0;
    int calls = 0;

    memset(&alog, 0, sizeof(alog));
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(uv_loop_init(&other), 0);

    /* one sandbox through its states, issued back to back: indexes 0..7 */
    for (size_t i = 0; i < ELEMENTSOF(states); i++) {
        r->state = states[i];
        t0 = now_monotonic_us();
        ck_assert_int_eq(registry_save_async(reg, &loop, r, async_cb, (void *)(intptr_t)i), 0);
        if (i == 0) /* starts the writer thread */
            t_first = now_monotonic_us() - t0;
        else {
            t_calls += now_monotonic_us() - t0;
            calls++;
        }
    }
    /* other sandboxes meanwhile: indexes 10..29 */
    for (int i = 0; i < 20; i++) {
        char id[ID_MAX + 1];
        struct registry_record *o = min_record("sb-x");
        snprintf(id, sizeof(id), "sb-other%06d", i);
        free(o->id);
        o->id = strdup(id);
        t0 = now_monotonic_us();
        ck_assert_int_eq(registry_save_async(reg, &loop, o, async_cb, (void *)(intptr_t)(10 + i)),
                         0);
        t_calls += now_monotonic_us() - t0;
        calls++;
        registry_record_free(o); /* serialised at the call */
    }
    /* remove one of them after its save, and one that never existed */
    ck_assert_int_eq(registry_remove_async(reg, &loop, "sb-other000003", async_cb, (void *)30), 0);
    ck_assert_int_eq(registry_remove_async(reg, &loop, "sb-never000001", async_cb, (void *)31), 0);
    ck_assert_uint_eq(registry_pending(reg), ELEMENTSOF(states) + 22);

    /* refused up front, callback never called */
    {
        struct registry_record *bad = min_record("BAD");
        ck_assert_int_eq(registry_save_async(reg, &loop, bad, async_cb, (void *)40), -EINVAL);
        registry_record_free(bad);
    }
    ck_assert_int_eq(registry_remove_async(reg, &loop, "../x", async_cb, (void *)41), -EINVAL);
    ck_assert_int_eq(registry_save_async(reg, &other, r, async_cb, (void *)42), -EINVAL);
    ck_assert_uint_eq(registry_pending(reg), ELEMENTSOF(states) + 22);
    ck_assert_int_eq(alog.n, 0); /* nothing completes before the loop runs */

    t0 = now_monotonic_us();
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    fprintf(stderr,
            "registry async: first call %.1f us (thread start), then %.1f us per call on the "
            "loop thread; %d writes done in %.1f ms\n",
            (double)t_first, (double)t_calls / calls, calls + 3,
            (now_monotonic_us() - t0) / 1000.0);
    ck_assert_uint_eq(registry_pending(reg), 0);
    ck_assert_int_eq(alog.n, (int)ELEMENTSOF(states) + 22);

    /* per id, completion order is issue order; results as expected */
    {
        int last = -1, seen_remove = 0;
        bool other3_saved = false;
        for (int i = 0; i < alog.n; i++) {
            int idx = alog.order[i];
            if (idx < 10) {
                ck_assert_int_eq(idx, last + 1);
                last = idx;
                ck_assert_int_eq(alog.result[i], 0);
            } else if (idx == 13) {
                other3_saved = true;
                ck_assert_int_eq(alog.result[i], 0);
            } else if (idx == 30) {
                ck_assert(other3_saved);
                ck_assert_int_eq(alog.result[i], 0);
                seen_remove++;
            } else if (idx == 31) {
                ck_assert_int_eq(alog.result[i], -ENOENT);
                seen_remove++;
            } else {
                ck_assert_int_eq(alog.result[i], 0);
            }
        }
        ck_assert_int_eq(last, (int)ELEMENTSOF(states) - 1);
        ck_assert_int_eq(seen_remove, 2);
    }
    ck_assert(!exists("sb-other000003.json"));
    ck_assert_int_eq(registry_load(reg, &v, &n, NULL, NULL), 0);
    ck_assert_uint_eq(n, 20);
    ck_assert_str_eq(v[0]->id, "sb-async000001");
    ck_assert_int_eq(v[0]->state, REG_DESTROYING); /* the last one issued */
    v = registry_records_free(v, n);

    /* a load while saves are in flight leaves their temp files alone */
    memset(&alog, 0, sizeof(alog));
    for (int i = 0; i < 8; i++) {
        r->expires_at += 1;
        ck_assert_int_eq(registry_save_async(reg, &loop, r, async_cb, (void *)(intptr_t)(60 + i)),
                         0);
    }
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(registry_load(reg, &v, &n, NULL, NULL), 0);
        v = registry_records_free(v, n);
    }
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(alog.n, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(alog.result[i], 0);

    /* registry_free with work pending: it finishes, callbacks run, then it is freed */
    memset(&alog, 0, sizeof(alog));
    r->state = REG_FAILED;
    ck_assert_int_eq(registry_save_async(reg, &loop, r, async_cb, (void *)50), 0);
    ck_assert_int_eq(registry_remove_async(reg, &loop, "sb-other000004", async_cb, (void *)51), 0);
    reg = registry_free(reg);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(alog.n, 2);
    ck_assert_int_eq(alog.result[0], 0);
    ck_assert_int_eq(alog.result[1], 0);
    ck_assert(!exists("sb-other000004.json"));
    reg = open_reg();
    ck_assert_int_eq(registry_load(reg, &v, &n, NULL, NULL), 0);
    ck_assert_uint_eq(n, 19);
    ck_assert_int_eq(v[0]->state, REG_FAILED);
    v = registry_records_free(v, n);

    registry_record_free(r);
    registry_free(reg);
    check_loop_done(&other);
    check_loop_done(&loop);
}
END_TEST

/* Work items that hold every thread of libuv's pool until released. */
static uv_mutex_t hog_mu;
static uv_cond_t hog_cond;
static bool hog_release;
static int hog_started, hog_done;

static void hog_work(uv_work_t *w)
{
    (void)w;
    uv_mutex_lock(&hog_mu);
    hog_started++;
    uv_cond_broadcast(&hog_cond);
    while (!hog_release)
        uv_cond_wait(&hog_cond, &hog_mu);
    uv_mutex_unlock(&hog_mu);
}

static void hog_after(uv_work_t *w, int status)
{
    (void)w, (void)status;
    hog_done++;
}

static void on_bound(uv_timer_t *t)
{
    (void)t;
}

/* Durable writes do not wait for libuv's thread pool: with every pool thread blocked (as by
 * remote file I/O), saves and removes still complete, in order. */
START_TEST(test_async_pool_busy)
{
    enum { N_HOGS = 16 };
    static uv_work_t hogs[N_HOGS];
    uv_loop_t loop;
    uv_timer_t bound;
    struct registry *reg = open_reg();
    struct registry_record *r = full_record("sb-busy0000001");
    uint64_t t0;

    memset(&alog, 0, sizeof(alog));
    hog_release = false;
    hog_started = hog_done = 0;
    ck_assert_int_eq(uv_mutex_init(&hog_mu), 0);
    ck_assert_int_eq(uv_cond_init(&hog_cond), 0);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(uv_timer_init(&loop, &bound), 0);
    /* More items than the pool has threads (UV_THREADPOOL_SIZE, default 4): all of them busy,
     * the rest queued behind. */
    for (int i = 0; i < N_HOGS; i++)
        ck_assert_int_eq(uv_queue_work(&loop, &hogs[i], hog_work, hog_after), 0);
    uv_mutex_lock(&hog_mu);
    while (hog_started == 0)
        uv_cond_wait(&hog_cond, &hog_mu);
    uv_mutex_unlock(&hog_mu);

    t0 = now_monotonic_us();
    for (int i = 0; i < 4; i++) {
        r->state = i % 2 ? REG_READY : REG_STARTING;
        ck_assert_int_eq(registry_save_async(reg, &loop, r, async_cb, (void *)(intptr_t)i), 0);
    }
    ck_assert_int_eq(registry_remove_async(reg, &loop, "sb-busy0000001", async_cb, (void *)4), 0);
    /* Bounded: at most 10 s of loop, one iteration at a time. */
    uv_timer_start(&bound, on_bound, 50, 50);
    while (alog.n < 5 && now_monotonic_us() - t0 < 10 * 1000000ull)
        uv_run(&loop, UV_RUN_ONCE);
    uv_timer_stop(&bound);
    ck_assert_int_eq(alog.n, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(alog.order[i], i);
        ck_assert_int_eq(alog.result[i], 0);
    }
    ck_assert_int_eq(hog_done, 0); /* the pool was blocked the whole time */
    ck_assert(!exists("sb-busy0000001.json"));
    fprintf(stderr, "registry async with the thread pool blocked: 5 writes in %.1f ms\n",
            (now_monotonic_us() - t0) / 1000.0);

    uv_mutex_lock(&hog_mu);
    hog_release = true;
    uv_cond_broadcast(&hog_cond);
    uv_mutex_unlock(&hog_mu);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_NOWAIT) >= 0, 1);
    uv_close((uv_handle_t *)&bound, NULL);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(hog_done, N_HOGS);
    ck_assert_uint_eq(registry_pending(reg), 0);
    registry_record_free(r);
    registry_free(reg);
    check_loop_done(&loop);
    uv_cond_destroy(&hog_cond);
    uv_mutex_destroy(&hog_mu);
}
END_TEST

/* xorshift64*: deterministic mutations */
static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

START_TEST(test_fuzz_records)
{
    uv_loop_t loop;
    struct registry_record *good = full_record("sb-fuzz0000001");
    _cleanup_free_ char *json = NULL;
    static const char alphabet[] = "{}[]\":,0123456789-. \\tnulfaseu\x01\xff";
    char buf[4096];
    unsigned parsed = 0;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(registry_record_to_json(good, &json), 0);
    ck_assert_uint_lt(strlen(json), sizeof(buf) - 16);
    for (int i = 0; i < 10000; i++) {
        size_t n = strlen(json);
        struct registry_record *r = NULL;
        int edits = 1 + (int)(rnd() % 4), k;
        memcpy(buf, json, n + 1);
        for (int e = 0; e < edits; e++) {
            size_t pos = rnd() % (n + 1);
            char c = alphabet[rnd() % (sizeof(alphabet) - 1)];
            if (rnd() % 2 && pos < n)
                buf[pos] = c;
            else if (pos < n) {
                memmove(buf + pos, buf + pos + 1, n - pos);
                n--;
            }
        }
        k = registry_record_from_json(buf, n, &r);
        if (k == 0) {
            parsed++;
            ck_assert_int_eq(registry_record_validate(r), 0);
            registry_record_free(r);
        } else {
            ck_assert_ptr_null(r);
            ck_assert(k == -EBADMSG || k == -EPROTONOSUPPORT);
        }
    }
    fprintf(stderr, "registry fuzz: %u of 10000 mutated records still valid\n", parsed);
    registry_record_free(good);
    check_loop_done(&loop);
}
END_TEST

static void hash_of(const char *json, char out[SHA256_HEX_SIZE])
{
    json_object *o = json_tokener_parse(json);
    ck_assert_msg(o != NULL || strcmp(json, "null") == 0, "bad test JSON %s", json);
    ck_assert_int_eq(registry_params_hash(o, out), 0);
    json_object_put(o);
}

START_TEST(test_params_hash)
{
    uv_loop_t loop;
    char a[SHA256_HEX_SIZE], b[SHA256_HEX_SIZE], want[SHA256_HEX_SIZE];

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    /* the canonical form is exactly this string */
    hash_of("{ \"b\": [true, null, \"x\"], \"a\": 1 }", a);
    {
        const char *canon = "{\"a\":1,\"b\":[true,null,\"x\"]}";
        ck_assert_int_eq(sha256_hex(canon, strlen(canon), want), 0);
        ck_assert_str_eq(a, want);
    }

    static const char *const same[][2] = {
        {"{\"cores\":2,\"memory_mb\":512,\"internet\":false,\"labels\":{\"x\":\"1\",\"y\":\"2\"}}",
         "{\"labels\":{\"y\":\"2\",\"x\":\"1\"},\"internet\":false,\"memory_mb\":512,\"cores\":2}"},
        {"{\"a\":1}", "{\"a\":1.0}"},
        {"{\"s\":\"\\u00e9\\/\"}", "{\"s\":\"é/\"}"},
        {"{\"n\":{\"z\":{\"b\":1,\"a\":2}}}", "{\"n\":{\"z\":{\"a\":2,\"b\":1}}}"},
        {"{}", "{ }"},
    };
    for (size_t i = 0; i < ELEMENTSOF(same); i++) {
        hash_of(same[i][0], a);
        hash_of(same[i][1], b);
        ck_assert_msg(strcmp(a, b) == 0, "differ: %s / %s", same[i][0], same[i][1]);
    }
    static const char *const differ[][2] = {
        {"{\"cores\":2}", "{\"cores\":3}"},
        {"{\"cores\":2}", "{\"cores\":\"2\"}"},
        {"{\"a\":[1,2]}", "{\"a\":[2,1]}"},
        {"{\"a\":null}", "{}"},
        {"{\"a\":true}", "{\"a\":1}"},
        {"{\"a\":1.5}", "{\"a\":1}"},
        {"{\"ab\":\"c\"}", "{\"a\":\"bc\"}"},
        {"{\"a\":\"x\\\"\"}", "{\"a\":\"x\\\\\"}"},
        {"{\"l\":{\"x\":\"1\"}}", "{\"l\":{\"x\":\"1\",\"y\":\"\"}}"},
    };
    for (size_t i = 0; i < ELEMENTSOF(differ); i++) {
        hash_of(differ[i][0], a);
        hash_of(differ[i][1], b);
        ck_assert_msg(strcmp(a, b) != 0, "same: %s / %s", differ[i][0], differ[i][1]);
    }
    ck_assert_int_eq(registry_params_hash(NULL, a), 0); /* null */
    ck_assert(hex_is_valid(a, 64));

    /* limits: nesting and size */
    {
        json_object *o = json_object_new_object(), *cur = o;
        for (int i = 0; i < REG_PARAMS_DEPTH_MAX + 2; i++) {
            json_object *c = json_object_new_object();
            json_object_object_add(cur, "k", c);
            cur = c;
        }
        ck_assert_int_eq(registry_params_hash(o, a), -E2BIG);
        json_object_put(o);
    }
    {
        char *big = malloc(REG_PARAMS_MAX + 1);
        json_object *o = json_object_new_object();
        ck_assert_ptr_nonnull(big);
        memset(big, 'x', REG_PARAMS_MAX);
        big[REG_PARAMS_MAX] = '\0';
        json_object_object_add(o, "s", json_object_new_string(big));
        ck_assert_int_eq(registry_params_hash(o, a), -E2BIG);
        json_object_put(o);
        free(big);
    }
    check_loop_done(&loop);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("registry");

    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_states);
    tcase_add_test(tc, test_open_instance);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_invalid_save);
    tcase_add_test(tc, test_remove);
    tcase_add_test(tc, test_crash_leftovers);
    tcase_add_test(tc, test_corrupt_records);
    tcase_add_test(tc, test_many);
    tcase_add_test(tc, test_async);
    tcase_add_test(tc, test_async_pool_busy);
    tcase_add_test(tc, test_fuzz_records);
    tcase_add_test(tc, test_params_hash);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
