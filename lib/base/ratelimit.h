/* Rate limiting of repeated log and audit messages, per subject (a uid) and cause, in the
 * manner of journald's: within an interval the first `burst` messages of a key pass, the
 * rest are counted; the first message that passes after them says how many were
 * suppressed. The caller owns the table (no global state) and gives the time. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define RATELIMIT_SLOTS 64

struct ratelimit_slot {
    uint64_t subject;
    const char *cause; /* compared by address: a string literal of the caller's */
    uint64_t begin_ms; /* start of the current interval */
    unsigned passed;   /* messages passed in it */
    unsigned suppressed;
    uint64_t used_ms; /* last use, to reuse the oldest slot */
};

struct ratelimit {
    uint64_t interval_ms;
    unsigned burst;
    struct ratelimit_slot slots[RATELIMIT_SLOTS];
};

void ratelimit_init(struct ratelimit *rl, uint64_t interval_ms, unsigned burst);
/* True when a message of (subject, cause) may be written now. *ret_suppressed (may be
 * NULL) is the number of messages of that key suppressed before this one, to be reported
 * with it (then reset); it is written whenever the call returns true. */
bool ratelimit_pass(struct ratelimit *rl, uint64_t subject, const char *cause, uint64_t now_ms,
                    unsigned *ret_suppressed);

#define RATELIMIT_NOTE_MAX 64
/* " (N similar messages suppressed)" for n > 0, else "": to append to the message that
 * passed. Returns buf. */
const char *ratelimit_note(unsigned n, char buf[static RATELIMIT_NOTE_MAX]);
