/*
 * hub/base/ratelimit.c - the shared token bucket (hub/base/ratelimit.h). Tokens are
 * kept in thousandths, so a rate of 1 a second refills 1 a millisecond.
 */
#include "hub/base/ratelimit.h"

void hub_bucket_init(struct hub_bucket *b)
{
    pthread_mutex_init(&b->mu, NULL);
    b->started = false;
    b->milli = 0;
    b->last_ms = 0;
}

void hub_bucket_fini(struct hub_bucket *b)
{
    pthread_mutex_destroy(&b->mu);
}

bool hub_bucket_take(struct hub_bucket *b, uint32_t rate, uint32_t n,
                     uint64_t now_ms, uint32_t *retry_after_s)
{
    int64_t cap = (int64_t)rate * 1000, need, missing;
    bool ok;

    if (!rate)
        return true;
    need = (int64_t)(n < rate ? n : rate) * 1000;
    pthread_mutex_lock(&b->mu);
    if (!b->started) {
        b->started = true;
        b->milli = cap;
    } else if (now_ms > b->last_ms) {
        /* A quiet spell only fills the bucket: dt is capped so that the
         * product stays far from overflowing (1e6 ms x 2^32 < 2^63). */
        uint64_t dt = now_ms - b->last_ms;

        if (dt > 1000000)
            dt = 1000000;
        b->milli += (int64_t)dt * rate;
    }
    if (now_ms > b->last_ms)
        b->last_ms = now_ms;
    if (b->milli > cap)
        b->milli = cap;
    ok = b->milli >= need;
    if (ok)
        b->milli -= (int64_t)n * 1000;
    missing = need - b->milli;
    pthread_mutex_unlock(&b->mu);
    if (!ok && retry_after_s) {
        /* Tokens come at rate a second: ceil(missing / (rate * 1000)). */
        int64_t s = (missing + cap - 1) / cap;

        *retry_after_s = s < 1 ? 1 : (uint32_t)s;
    }
    return ok;
}
