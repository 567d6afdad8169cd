/*
 * tests/unit/test_publish_defer.c - the client events of one read, delivered in one
 * walk per run of them (hub/loop/publish.h, hub_defer_begin): held until the
 * read ends, then every member has them all in the order sent; a run
 * breaks at another channel and at the sender's next message of another
 * kind, so nothing is reordered; a member whose queue cannot take the
 * whole run gets them one by one and is closed 4100 as before; a run
 * longer than the batch is delivered whole; and outside a read (lws's own
 * read path) a client event is delivered at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake_hub.h"

struct world {
    struct fake_hub fh;
    struct fake_session a, b, c;
};

/* a sends; b and c listen on private-c, b also on private-d. */
static struct world *world_new(uint64_t max_queue)
{
    struct world *w = calloc(1, sizeof(*w));

    assert_non_null(w);
    fake_hub_init(&w->fh, 1);
    w->fh.apps[0].client_event_rate = 0;
    if (max_queue)
        w->fh.cfg.max_queue = max_queue;
    assert_int_equal(fake_hub_start(&w->fh), 0);
    assert_int_equal(fake_session_open(&w->fh, &w->a, 0, &w->fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&w->fh, &w->b, 0, &w->fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&w->fh, &w->c, 0, &w->fh.apps[0]), 0);
    fake_subscribe(&w->fh, &w->a.s, "private-c", NULL);
    fake_subscribe(&w->fh, &w->a.s, "private-d", NULL);
    fake_subscribe(&w->fh, &w->b.s, "private-c", NULL);
    fake_subscribe(&w->fh, &w->b.s, "private-d", NULL);
    fake_subscribe(&w->fh, &w->c.s, "private-c", NULL);
    fake_flush(&w->a.s);
    fake_flush(&w->b.s);
    fake_flush(&w->c.s);
    return w;
}

static void world_free(struct world *w)
{
    hub_session_fini(&w->a.s, HUB_CLOSE_PEER);
    hub_session_fini(&w->b.s, HUB_CLOSE_PEER);
    hub_session_fini(&w->c.s, HUB_CLOSE_PEER);
    fake_hub_stop(&w->fh);
    free(w);
}

static void send_event(struct world *w, const char *channel, unsigned i)
{
    char text[256];

    snprintf(text, sizeof(text),
             "{\"event\":\"client-x\",\"channel\":\"%s\",\"data\":\"m%u.\"}",
             channel, i);
    assert_int_equal(fake_recv(&w->fh, &w->a.s, text), 0);
}

/* The i-th queued frame of s carries message n. */
static void assert_frame(const struct hub_session *s, uint32_t i, unsigned n)
{
    char want[32];
    const char *t = fake_frame_text(s, i);

    snprintf(want, sizeof(want), "\"m%u.\"", n);
    assert_non_null(t);
    if (!strstr(t, want))
        fail_msg("frame %u is %s, wanted message %u", i, t, n);
}

static void test_publish_defer_holds_until_the_read_ends_then_in_order(
    void **state)
{
    struct world *w = world_new(0);
    struct hub_loop *l = w->fh.loops[0];
    uint64_t pub0 = l->stats.publishes;

    (void)state;
    hub_defer_begin(l);
    for (unsigned i = 0; i < 5; i++)
        send_event(w, "private-c", i);
    /* Held: one walk at the end of the read. */
    assert_int_equal(w->b.s.q.count, 0);
    assert_int_equal(w->c.s.q.count, 0);
    assert_int_equal(l->defer.k, 5);
    hub_defer_end(l);
    assert_int_equal(l->defer.k, 0);
    assert_false(l->defer.open);
    assert_int_equal(w->a.s.q.count, 0); /* the sender is excluded */
    assert_int_equal(w->b.s.q.count, 5);
    assert_int_equal(w->c.s.q.count, 5);
    for (unsigned i = 0; i < 5; i++) {
        assert_frame(&w->b.s, i, i);
        assert_frame(&w->c.s, i, i);
    }
    /* Both queues hold the same frames: one reference each, plus none
     * left over (the batch gave its own back). */
    for (unsigned i = 0; i < 5; i++) {
        struct hub_frame *f = w->b.s.q.ring[(w->b.s.q.head + i) &
                                            (w->b.s.q.cap - 1)];

        assert_ptr_equal(f, w->c.s.q.ring[(w->c.s.q.head + i) &
                                          (w->c.s.q.cap - 1)]);
        assert_int_equal(atomic_load(&f->refs), 2);
    }
    assert_int_equal(l->stats.publishes - pub0, 5);
    assert_int_equal(hub_loop_queued(l),
                     w->b.s.q.bytes + w->c.s.q.bytes);
    fake_flush(&w->b.s);
    fake_flush(&w->c.s);
    assert_int_equal(hub_loop_queued(l), 0);
    world_free(w);
}

static void test_publish_defer_breaks_at_another_channel_and_message(
    void **state)
{
    struct world *w = world_new(0);
    struct hub_loop *l = w->fh.loops[0];

    (void)state;
    hub_defer_begin(l);
    send_event(w, "private-c", 0);
    send_event(w, "private-c", 1);
    send_event(w, "private-d", 2); /* c's run goes first */
    assert_int_equal(w->b.s.q.count, 2);
    send_event(w, "private-c", 3);
    assert_int_equal(w->b.s.q.count, 3);
    /* The sender's next message of another kind ends the run before it
     * takes effect. */
    assert_int_equal(fake_recv(&w->fh, &w->a.s,
                               "{\"event\":\"pusher:ping\",\"data\":{}}"),
                     0);
    assert_int_equal(l->defer.k, 0);
    assert_int_equal(w->b.s.q.count, 4);
    send_event(w, "private-c", 4);
    hub_defer_end(l);
    assert_int_equal(w->b.s.q.count, 5);
    for (unsigned i = 0; i < 5; i++)
        assert_frame(&w->b.s, i, i);
    assert_int_equal(w->c.s.q.count, 4); /* not on private-d */
    assert_frame(&w->c.s, 0, 0);
    assert_frame(&w->c.s, 1, 1);
    assert_frame(&w->c.s, 2, 3);
    assert_frame(&w->c.s, 3, 4);
    world_free(w);
}

static void test_publish_defer_a_full_queue_closes_as_one_by_one(void **state)
{
    /* Each frame is ~60 B: 10 fit in 700 B, a run of 20 does not. */
    struct world *w = world_new(700);
    struct hub_loop *l = w->fh.loops[0];

    (void)state;
    hub_defer_begin(l);
    for (unsigned i = 0; i < 20; i++)
        send_event(w, "private-c", i);
    hub_defer_end(l);
    /* What a single push does when the queue is full: pusher:error 4100
     * after the backlog is dropped, then the close. */
    assert_int_equal(w->b.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(w->b.s.close_code, 4100);
    assert_int_equal(w->c.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(w->c.s.q.count, 1);
    assert_true(fake_find(&w->c.s, "4100") == 0);
    assert_int_equal(hub_loop_queued(l),
                     w->b.s.q.bytes + w->c.s.q.bytes);
    world_free(w);
}

static void test_publish_defer_a_run_longer_than_the_batch(void **state)
{
    struct world *w = world_new(0);
    struct hub_loop *l = w->fh.loops[0];
    unsigned n = HUB_DEFER_MAX * 2 + 3;

    (void)state;
    hub_defer_begin(l);
    for (unsigned i = 0; i < n; i++)
        send_event(w, "private-c", i);
    assert_true(l->defer.k <= HUB_DEFER_MAX);
    hub_defer_end(l);
    assert_int_equal(w->b.s.q.count, n);
    for (unsigned i = 0; i < n; i++)
        assert_frame(&w->b.s, i, i);
    world_free(w); /* the session ends drop what is queued */
}

static void test_publish_defer_outside_a_read_is_at_once(void **state)
{
    struct world *w = world_new(0);

    (void)state;
    send_event(w, "private-c", 7);
    assert_int_equal(w->fh.loops[0]->defer.k, 0);
    assert_int_equal(w->b.s.q.count, 1);
    assert_frame(&w->b.s, 0, 7);
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_publish_defer_holds_until_the_read_ends_then_in_order),
        cmocka_unit_test(
            test_publish_defer_breaks_at_another_channel_and_message),
        cmocka_unit_test(test_publish_defer_a_full_queue_closes_as_one_by_one),
        cmocka_unit_test(test_publish_defer_a_run_longer_than_the_batch),
        cmocka_unit_test(test_publish_defer_outside_a_read_is_at_once),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
