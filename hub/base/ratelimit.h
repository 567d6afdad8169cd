/*
 * hub/base/ratelimit.h - a token bucket shared by every loop: the per-app REST
 * rate limits (max_backend_events_per_second, max_read_requests_per_second;
 * docs/CONFIG.md).
 *
 * The bucket holds at most one second's worth of tokens (rate), refills
 * continuously at rate tokens a second, and starts full. A request for n
 * tokens is let through when the bucket holds min(n, rate) of them, and
 * then takes all n: the balance may go negative, so a batch larger than
 * one second's worth is served when the bucket is full and paid for by
 * the time that follows, never refused forever. The rate is passed on
 * every call, so a reload that changes it applies at once.
 *
 * Thread: any; a small mutex per bucket (REST requests of one app arrive
 * on any loop; a request holds it for a few arithmetic operations and no
 * I/O). The clock is the caller's (monotonic ms), so tests use a fake one.
 */
#ifndef HUB_RATELIMIT_H
#define HUB_RATELIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct hub_bucket {
    pthread_mutex_t mu;
    bool started;
    int64_t milli;           /* thousandths of a token; may be negative */
    uint64_t last_ms;
};

void hub_bucket_init(struct hub_bucket *b);
void hub_bucket_fini(struct hub_bucket *b);

/*
 * Take n tokens at now_ms from a bucket of rate tokens a second (0: no
 * limit, always true). true when let through; false when refused, with
 * *retry_after_s (when not NULL) the whole seconds, at least 1, until the
 * same request would be let through.
 */
bool hub_bucket_take(struct hub_bucket *b, uint32_t rate, uint32_t n,
                     uint64_t now_ms, uint32_t *retry_after_s);

#endif
