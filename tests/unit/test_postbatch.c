/*
 * tests/unit/test_postbatch.c - held posts (hub/postbatch.h) on the fake
 * hub: a batching thread's publications reach each loop as one chain at
 * the flush, in order, with one wakeup per loop; terminate orders and
 * other nodes stay behind what was held before them; the count bound
 * pushes early; a closed gate drops what is held (frame references back,
 * nothing run); a thread that does not batch posts at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "fake_hub.h"
#include "hub/postbatch.h"

static unsigned frame_refs(struct hub_frame *f)
{
    return atomic_load(&f->refs);
}

static void publish(struct fake_hub *fh, struct hub_frame *f)
{
    const struct hub_pub_req r = { 0, "c", 1, f, NULL };

    assert_int_equal(hub_fanout_loops(fh->hub, NULL, &r), 0);
}

static struct hub_frame *text(unsigned i)
{
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "{\"event\":\"e%u\"}", i);

    return hub_frame_create_text(buf, (size_t)n);
}

/* Two loops, one subscriber of "c" on each, flushed clean. */
static void setup(struct fake_hub *fh, struct fake_session *a,
                  struct fake_session *b)
{
    fake_hub_init(fh, 2);
    assert_int_equal(fake_hub_start(fh), 0);
    fake_session_open(fh, a, 0, &fh->apps[0]);
    fake_session_open(fh, b, 1, &fh->apps[0]);
    assert_int_equal(fake_subscribe(fh, &a->s, "c", NULL), 0);
    assert_int_equal(fake_subscribe(fh, &b->s, "c", NULL), 0);
    fake_flush(&a->s);
    fake_flush(&b->s);
    fh->wakes = 0;
}

static void teardown(struct fake_hub *fh, struct fake_session *a,
                     struct fake_session *b)
{
    hub_session_fini(&a->s, HUB_CLOSE_PEER);
    hub_session_fini(&b->s, HUB_CLOSE_PEER);
    fake_hub_stop(fh);
}

static void test_not_batching_posts_at_once(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct hub_frame *f = text(0);

    (void)state;
    setup(&fh, &a, &b);
    assert_false(hub_post_batch_active());
    publish(&fh, f);
    assert_int_equal(fh.wakes, 2);
    assert_non_null(atomic_load(&fh.loops[0]->inbox.head));
    fake_hub_drain(&fh);
    assert_int_equal(fake_count(&a.s, "e0"), 1);
    assert_int_equal(fake_count(&b.s, "e0"), 1);
    hub_frame_unref(f);
    teardown(&fh, &a, &b);
}

static void test_held_until_flush_in_order_one_wake(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct hub_frame *f[5];
    struct hub_post_batch_stats st;

    (void)state;
    setup(&fh, &a, &b);
    hub_post_batch_begin();
    assert_true(hub_post_batch_active());
    for (unsigned i = 0; i < 5; i++) {
        f[i] = text(i);
        publish(&fh, f[i]);
    }
    /* Nothing reached a loop yet: no wakeup, empty inboxes. */
    assert_int_equal(fh.wakes, 0);
    assert_null(atomic_load(&fh.loops[0]->inbox.head));
    assert_null(atomic_load(&fh.loops[1]->inbox.head));
    hub_post_batch_flush();
    assert_int_equal(fh.wakes, 2);
    hub_post_batch_stats(&st);
    assert_int_equal(st.posts, 10);
    assert_int_equal(st.pushes, 2);
    assert_int_equal(st.wakes, 2);
    fake_hub_drain(&fh);
    /* All five queued on each subscriber before any write, oldest first. */
    for (unsigned i = 0; i < 5; i++) {
        char want[16];

        snprintf(want, sizeof(want), "\"e%u\"", i);
        assert_int_equal(fake_find(&a.s, want), (int)i);
        assert_int_equal(fake_find(&b.s, want), (int)i);
    }
    /* A second pass reuses the slots; a flush with nothing held is a no-op. */
    hub_post_batch_flush();
    assert_int_equal(fh.wakes, 2);
    hub_post_batch_end();
    assert_false(hub_post_batch_active());
    for (unsigned i = 0; i < 5; i++)
        hub_frame_unref(f[i]);
    teardown(&fh, &a, &b);
}

/* A chain pushed behind nodes already in the inbox comes after them. */
static void test_chain_after_earlier_nodes(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct hub_frame *f0 = text(0), *f1 = text(1), *f2 = text(2);

    (void)state;
    setup(&fh, &a, &b);
    publish(&fh, f0); /* direct */
    hub_post_batch_begin();
    publish(&fh, f1);
    publish(&fh, f2);
    hub_post_batch_end();
    /* Woken once by the direct post; the chain found the inbox busy. */
    assert_int_equal(fh.wakes, 2);
    fake_hub_drain(&fh);
    assert_int_equal(fake_find(&a.s, "\"e0\""), 0);
    assert_int_equal(fake_find(&a.s, "\"e1\""), 1);
    assert_int_equal(fake_find(&a.s, "\"e2\""), 2);
    assert_int_equal(fake_find(&b.s, "\"e2\""), 2);
    hub_frame_unref(f0);
    hub_frame_unref(f1);
    hub_frame_unref(f2);
    teardown(&fh, &a, &b);
}

/* Terminate orders and plain hub_loop_post() nodes queue behind. */
struct mark {
    struct hub_inbox_node node;
    struct fake_session *fs;
    int seen_frames;
};

static void mark_run(struct hub_inbox_node *n, struct hub_loop *l,
                     uint64_t now_ms)
{
    struct mark *m = hub_container_of(n, struct mark, node);

    (void)l;
    (void)now_ms;
    m->seen_frames = (int)m->fs->s.q.count;
}

static void mark_drop(struct hub_inbox_node *n)
{
    hub_container_of(n, struct mark, node)->seen_frames = -2;
}

static const struct hub_inbox_ops mark_ops = { mark_run, mark_drop };

static void test_other_nodes_keep_their_place(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct hub_frame *f0 = text(0), *f1 = text(1);
    struct mark m = { .node.ops = &mark_ops, .fs = &a, .seen_frames = -1 };

    (void)state;
    setup(&fh, &a, &b);
    fake_signin(&fh, &b.s, "{\"id\":\"42\"}");
    fake_flush(&b.s);
    fh.wakes = 0;
    hub_post_batch_begin();
    publish(&fh, f0);
    hub_loop_post(fh.loops[0], &m.node);
    assert_int_equal(hub_fanout_terminate(fh.hub, NULL, 0, "42"), 0);
    publish(&fh, f1);
    assert_int_equal(fh.wakes, 0);
    assert_int_equal(m.seen_frames, -1);
    hub_post_batch_end();
    assert_int_equal(fh.wakes, 2);
    fake_hub_drain(&fh);
    /* The marker ran after e0 was queued and before e1. */
    assert_int_equal(m.seen_frames, 1);
    assert_int_equal(fake_count(&a.s, "\"e1\""), 1);
    /* b got e0, then the terminate closed it (e1 not queued after it). */
    assert_int_equal(fake_find(&b.s, "\"e0\""), 0);
    assert_int_equal(b.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(b.s.close_code, 4009);
    assert_int_equal(fake_count(&b.s, "\"e1\""), 0);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    hub_session_fini(&b.s, HUB_CLOSE_APP);
    hub_frame_unref(f0);
    hub_frame_unref(f1);
    fake_hub_stop(&fh);
}

static void test_count_bound_pushes_early(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct hub_frame *f = text(7);
    struct hub_post_batch_stats st;

    (void)state;
    setup(&fh, &a, &b);
    hub_post_batch_begin();
    for (unsigned i = 0; i < HUB_POST_BATCH_MAX_NODES; i++)
        publish(&fh, f);
    /* The bound pushed each loop's chain without waiting for the flush. */
    assert_int_equal(fh.wakes, 2);
    assert_non_null(atomic_load(&fh.loops[0]->inbox.head));
    publish(&fh, f);
    hub_post_batch_end();
    hub_post_batch_stats(&st);
    assert_int_equal(st.pushes, 4);
    fake_hub_drain(&fh);
    assert_int_equal(fake_count(&a.s, "e7"), HUB_POST_BATCH_MAX_NODES + 1);
    assert_int_equal(fake_count(&b.s, "e7"), HUB_POST_BATCH_MAX_NODES + 1);
    hub_frame_unref(f);
    teardown(&fh, &a, &b);
}

static void test_closed_gate_drops_held(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct hub_frame *f = text(3);
    struct mark m = { .node.ops = &mark_ops, .fs = &a, .seen_frames = -1 };

    (void)state;
    setup(&fh, &a, &b);
    hub_post_batch_begin();
    publish(&fh, f);
    hub_loop_post(fh.loops[1], &m.node);
    assert_int_equal(frame_refs(f), 2);
    hub_post_gate_close(fh.hub);
    hub_post_gate_close(fh.hub); /* idempotent */
    hub_post_batch_end();
    /* Dropped, not pushed: no wakeup, the frame's references back. */
    assert_int_equal(fh.wakes, 0);
    assert_null(atomic_load(&fh.loops[0]->inbox.head));
    assert_int_equal(m.seen_frames, -2);
    assert_int_equal(frame_refs(f), 1);
    hub_frame_unref(f);
    teardown(&fh, &a, &b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_batching_posts_at_once),
        cmocka_unit_test(test_held_until_flush_in_order_one_wake),
        cmocka_unit_test(test_chain_after_earlier_nodes),
        cmocka_unit_test(test_other_nodes_keep_their_place),
        cmocka_unit_test(test_count_bound_pushes_early),
        cmocka_unit_test(test_closed_gate_drops_held),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
