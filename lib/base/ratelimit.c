/* Rate limiting of repeated messages. See ratelimit.h. */
#include "ratelimit.h"

#include <stdio.h>
#include <string.h>

void ratelimit_init(struct ratelimit *rl, uint64_t interval_ms, unsigned burst)
{
    memset(rl, 0, sizeof *rl);
    rl->interval_ms = interval_ms;
    rl->burst = burst;
}

static struct ratelimit_slot *slot_for(struct ratelimit *rl, uint64_t subject, const char *cause)
{
    struct ratelimit_slot *oldest = &rl->slots[0];

    for (unsigned i = 0; i < RATELIMIT_SLOTS; i++) {
        struct ratelimit_slot *s = &rl->slots[i];

        if (s->cause == cause && s->subject == subject)
            return s;
        if (!s->cause || (oldest->cause && s->used_ms < oldest->used_ms))
            oldest = s;
    }
    /* A reused slot forgets what its old key had suppressed: bounded memory wins over
     * that count (64 keys busy at once is already a flood of many kinds). */
    *oldest = (struct ratelimit_slot){.subject = subject, .cause = cause};
    return oldest;
}

bool ratelimit_pass(struct ratelimit *rl, uint64_t subject, const char *cause, uint64_t now_ms,
                    unsigned *ret_suppressed)
{
    struct ratelimit_slot *s = slot_for(rl, subject, cause);

    s->used_ms = now_ms;
    if (s->passed == 0 || now_ms - s->begin_ms >= rl->interval_ms) {
        s->begin_ms = now_ms;
        s->passed = 0;
    }
    if (s->passed >= rl->burst) {
        s->suppressed++;
        return false;
    }
    s->passed++;
    if (ret_suppressed)
        *ret_suppressed = s->suppressed;
    s->suppressed = 0;
    return true;
}

const char *ratelimit_note(unsigned n, char buf[static RATELIMIT_NOTE_MAX])
{
    if (n == 0)
        buf[0] = 0;
    else
        snprintf(buf, RATELIMIT_NOTE_MAX, " (%u similar message%s suppressed)", n,
                 n == 1 ? "" : "s");
    return buf;
}
