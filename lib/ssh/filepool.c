/* The file work pool: worker threads of our own, queues by uid and by group, round-robin
 * dispatch under per-uid and per-group shares. See filepool.h. */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "filepool.h"
#include "log.h"
#include "macro.h"

#define COMP "filepool"

/* A group (a sandbox) of one uid with work running or queued. */
struct filepool_grp {
    const void *key;
    struct filepool_uid *uid;
    unsigned running;
    struct filepool_req *first, *last;
    struct filepool_grp *next;
};

/* A uid with work running or queued. */
struct filepool_uid {
    uid_t uid;
    unsigned running, n_grps;
    struct filepool_grp *grps; /* round-robin order: the next to serve first */
    struct filepool_uid *next;
};

struct filepool {
    uv_loop_t *loop;
    uv_async_t async; /* wakes the loop for the finished requests */
    unsigned refs;
    unsigned n;
    uv_thread_t *threads;
    unsigned n_threads;
    /* Under mu: */
    uv_mutex_t mu;
    uv_cond_t cv;
    bool stopping;
    struct filepool_uid *uids; /* round-robin order: the next to serve first */
    unsigned n_uids;
    struct filepool_req *done_first, *done_last;
};

/* ---- under mu ---- */

static unsigned uid_share(const struct filepool *p)
{
    return MAX(1u, p->n / (p->n_uids + 1));
}

static unsigned grp_share(const struct filepool *p, const struct filepool_uid *u)
{
    return MAX(1u, uid_share(p) / MAX(1u, u->n_grps));
}

/* Frees g and its uid once nothing of theirs runs or waits. */
static void grp_maybe_free(struct filepool *p, struct filepool_grp *g)
{
    struct filepool_uid *u = g->uid;
    struct filepool_grp **gp;
    struct filepool_uid **up;

    if (g->running > 0 || g->first)
        return;
    for (gp = &u->grps; *gp != g; gp = &(*gp)->next)
        ;
    *gp = g->next;
    u->n_grps--;
    free(g);
    if (u->grps)
        return;
    assert(u->running == 0);
    for (up = &p->uids; *up != u; up = &(*up)->next)
        ;
    *up = u->next;
    p->n_uids--;
    free(u);
}

static int grp_get(struct filepool *p, uid_t uid, const void *key, struct filepool_grp **ret)
{
    struct filepool_uid *u, **up;
    struct filepool_grp *g, **gp;

    for (up = &p->uids; (u = *up) && u->uid != uid; up = &u->next)
        ;
    if (!u) {
        u = calloc(1, sizeof(*u));
        if (!u)
            return -ENOMEM;
        u->uid = uid;
        *up = u; /* at the end: served after those already waiting */
        p->n_uids++;
    }
    for (gp = &u->grps; (g = *gp) && g->key != key; gp = &g->next)
        ;
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g) {
            if (!u->grps) {
                *up = u->next;
                p->n_uids--;
                free(u);
            }
            return -ENOMEM;
        }
        g->key = key;
        g->uid = u;
        *gp = g;
        u->n_grps++;
    }
    *ret = g;
    return 0;
}

/* Moves *pp, an element of its list, to the list's end: served after the others. */
static void grp_to_end(struct filepool_grp **pp)
{
    struct filepool_grp *e = *pp, *t;

    if (!e->next)
        return;
    *pp = e->next;
    for (t = e->next; t->next; t = t->next)
        ;
    t->next = e;
    e->next = NULL;
}

static void uid_to_end(struct filepool_uid **pp)
{
    struct filepool_uid *e = *pp, *t;

    if (!e->next)
        return;
    *pp = e->next;
    for (t = e->next; t->next; t = t->next)
        ;
    t->next = e;
    e->next = NULL;
}

/* The next request to run within the shares, taken out of its queue; NULL when none may. */
static struct filepool_req *pick(struct filepool *p)
{
    unsigned ushare = uid_share(p);

    for (struct filepool_uid **up = &p->uids; *up; up = &(*up)->next) {
        struct filepool_uid *u = *up;
        unsigned gshare = grp_share(p, u);

        if (u->running >= ushare)
            continue;
        for (struct filepool_grp **gp = &u->grps; *gp; gp = &(*gp)->next) {
            struct filepool_grp *g = *gp;
            struct filepool_req *req = g->first;

            if (!req || g->running >= gshare)
                continue;
            g->first = req->next;
            if (!g->first)
                g->last = NULL;
            req->next = NULL;
            req->started = true;
            g->running++;
            u->running++;
            grp_to_end(gp);
            uid_to_end(up);
            return req;
        }
    }
    return NULL;
}

static void done_push(struct filepool *p, struct filepool_req *req)
{
    req->next = NULL;
    if (p->done_last)
        p->done_last->next = req;
    else
        p->done_first = req;
    p->done_last = req;
    (void)uv_async_send(&p->async);
}

/* ---- workers ---- */

static void worker_main(void *arg)
{
    struct filepool *p = arg;
    struct filepool_req *req;

    uv_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stopping && !(req = pick(p)))
            uv_cond_wait(&p->cv, &p->mu);
        if (p->stopping)
            break;
        uv_mutex_unlock(&p->mu);
        req->work(req);
        uv_mutex_lock(&p->mu);
        req->grp->running--;
        req->grp->uid->running--;
        grp_maybe_free(p, req->grp);
        req->grp = NULL;
        req->status = 0;
        done_push(p, req);
        /* The shares changed: a waiting request may now run. */
        uv_cond_broadcast(&p->cv);
    }
    uv_mutex_unlock(&p->mu);
}

/* ---- loop side ---- */

static void on_async(uv_async_t *a)
{
    struct filepool *p = container_of(a, struct filepool, async);
    struct filepool_req *req, *next;

    uv_mutex_lock(&p->mu);
    req = p->done_first;
    p->done_first = p->done_last = NULL;
    uv_mutex_unlock(&p->mu);
    /* p stays allocated until its handle is closed, even when a callback drops the last
     * reference. */
    for (; req; req = next) {
        next = req->next;
        req->next = NULL;
        req->done(req, req->status);
    }
}

static void on_async_closed(uv_handle_t *h)
{
    struct filepool *p = container_of((uv_async_t *)h, struct filepool, async);

    assert(!p->done_first && !p->uids);
    uv_cond_destroy(&p->cv);
    uv_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}

static void stop_threads(struct filepool *p)
{
    uv_mutex_lock(&p->mu);
    p->stopping = true;
    uv_cond_broadcast(&p->cv);
    uv_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n_threads; i++)
        (void)uv_thread_join(&p->threads[i]);
    p->n_threads = 0;
}

int filepool_new(uv_loop_t *loop, unsigned n, struct filepool **ret)
{
    struct filepool *p;
    int r;

    if (!loop || !ret)
        return -EINVAL;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->n = n ? n : FILEPOOL_WORKERS;
    p->threads = calloc(p->n, sizeof(*p->threads));
    if (!p->threads) {
        free(p);
        return -ENOMEM;
    }
    r = uv_mutex_init(&p->mu);
    if (r == 0) {
        r = uv_cond_init(&p->cv);
        if (r < 0)
            uv_mutex_destroy(&p->mu);
    }
    if (r < 0) {
        free(p->threads);
        free(p);
        return r;
    }
    (void)uv_async_init(loop, &p->async, on_async); /* fails only on bad arguments */
    p->loop = loop;
    p->refs = 1;
    for (; p->n_threads < p->n; p->n_threads++) {
        r = uv_thread_create(&p->threads[p->n_threads], worker_main, p);
        if (r < 0) {
            log_error(COMP, "cannot start a worker: %s", uv_strerror(r));
            stop_threads(p);
            uv_close((uv_handle_t *)&p->async, on_async_closed);
            return r;
        }
    }
    *ret = p;
    return 0;
}

struct filepool *filepool_ref(struct filepool *p)
{
    if (p)
        p->refs++;
    return p;
}

void filepool_unref(struct filepool *p)
{
    if (!p)
        return;
    assert(p->refs > 0);
    if (--p->refs > 0)
        return;
    stop_threads(p);
    uv_close((uv_handle_t *)&p->async, on_async_closed);
}

int filepool_submit(struct filepool *p, struct filepool_req *req, uid_t uid, const void *group,
                    filepool_work_fn work, filepool_done_fn done)
{
    struct filepool_grp *g;
    int r;

    if (!p || !req || !work || !done)
        return -EINVAL;
    *req = (struct filepool_req){.work = work, .done = done};
    uv_mutex_lock(&p->mu);
    r = grp_get(p, uid, group, &g);
    if (r == 0) {
        req->grp = g;
        if (g->last)
            g->last->next = req;
        else
            g->first = req;
        g->last = req;
        uv_cond_broadcast(&p->cv);
    }
    uv_mutex_unlock(&p->mu);
    return r;
}

int filepool_cancel(struct filepool *p, struct filepool_req *req)
{
    struct filepool_grp *g;
    struct filepool_req **rp;
    int r = -EBUSY;

    uv_mutex_lock(&p->mu);
    g = req->grp;
    if (!req->started && g) {
        for (rp = &g->first; *rp && *rp != req; rp = &(*rp)->next)
            ;
        assert(*rp == req);
        *rp = req->next;
        g->last = NULL;
        for (struct filepool_req *q = g->first; q; q = q->next)
            g->last = q;
        req->grp = NULL;
        req->started = true; /* over: a second cancel finds it so */
        req->status = -ECANCELED;
        grp_maybe_free(p, g);
        done_push(p, req);
        r = 0;
    }
    uv_mutex_unlock(&p->mu);
    return r;
}

unsigned filepool_workers(const struct filepool *p)
{
    return p->n;
}
