/*
 * tests/unit/test_inbox.c - the cross-loop inbox and frame references under
 * real threads: several producers push nodes that each hold a reference to
 * their producer's frame, one consumer drains them, woken only when a push
 * found the inbox empty (as lws_cancel_service wakes a loop). Checks that no
 * node and no wakeup is lost, that each producer's nodes come oldest first,
 * and that a frame's bytes written before the push are what the consumer
 * reads. The tsan label runs it under ThreadSanitizer (make test-tsan),
 * which checks the memory orders of hub/loop/inbox.h and hub/wire/frame.h.
 */
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hub/wire/frame.h"
#include "hub/loop/inbox.h"
#include "timer/list.h"

#define PRODUCERS 4
#define PER_PRODUCER 20000

struct item {
    struct hub_inbox_node node;
    unsigned producer;
    unsigned seq;
    struct hub_frame *frame;
};

/* The consumer runs each node through its ops, as hub_loop_drain_inbox()
 * does: the node releases its frame reference and itself. */
static void item_drop(struct hub_inbox_node *n)
{
    struct item *it = hub_container_of(n, struct item, node);

    hub_frame_unref(it->frame);
    free(it);
}

static void item_run(struct hub_inbox_node *n, struct hub_loop *l,
                     uint64_t now_ms)
{
    (void)l;
    (void)now_ms;
    item_drop(n);
}

static const struct hub_inbox_ops item_ops = {
    .run = item_run,
    .drop = item_drop,
};

struct shared {
    struct hub_inbox inbox;
    sem_t wake;
    atomic_uint wakes;
};

struct producer {
    struct shared *sh;
    unsigned id;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    char text[32];
    int n = snprintf(text, sizeof(text), "frame of producer %u", p->id);
    struct hub_frame *f = hub_frame_create_text(text, (size_t)n);

    if (!f)
        abort(); /* cmocka's asserts belong to the main thread */
    for (unsigned i = 0; i < PER_PRODUCER; i++) {
        struct item *it = malloc(sizeof(*it));

        if (!it)
            abort();
        it->node.ops = &item_ops;
        it->producer = p->id;
        it->seq = i;
        it->frame = hub_frame_ref(f);
        if (hub_inbox_push(&p->sh->inbox, &it->node)) {
            atomic_fetch_add(&p->sh->wakes, 1);
            sem_post(&p->sh->wake);
        }
    }
    /* The producer's own reference goes while the consumer drops the
     * others: whoever is last frees the frame. */
    hub_frame_unref(f);
    return NULL;
}

static void test_inbox_threads_lose_nothing(void **state)
{
    struct shared sh;
    struct producer prod[PRODUCERS];
    pthread_t th[PRODUCERS];
    unsigned next[PRODUCERS] = { 0 };
    unsigned long received = 0, drains = 0;

    (void)state;
    hub_inbox_init(&sh.inbox);
    atomic_init(&sh.wakes, 0);
    assert_int_equal(sem_init(&sh.wake, 0, 0), 0);
    for (unsigned i = 0; i < PRODUCERS; i++) {
        prod[i].sh = &sh;
        prod[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, produce, &prod[i]), 0);
    }
    while (received < (unsigned long)PRODUCERS * PER_PRODUCER) {
        struct hub_inbox_node *n, *nx;

        sem_wait(&sh.wake);
        drains++;
        for (n = hub_inbox_take_all(&sh.inbox); n; n = nx) {
            struct item *it = hub_container_of(n, struct item, node);
            char want[32];
            int len = snprintf(want, sizeof(want), "frame of producer %u",
                               it->producer);

            nx = n->next;
            assert_true(it->producer < PRODUCERS);
            assert_int_equal(it->seq, next[it->producer]);
            next[it->producer]++;
            assert_int_equal(it->frame->payload_len, (unsigned)len);
            assert_memory_equal(hub_frame_payload(it->frame), want,
                                (size_t)len);
            n->ops->run(n, NULL, 0);
            received++;
        }
    }
    for (unsigned i = 0; i < PRODUCERS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_null(hub_inbox_take_all(&sh.inbox));
    /* Every wakeup was consumed or is still counted in the semaphore. */
    assert_true(drains <= atomic_load(&sh.wakes));
    sem_destroy(&sh.wake);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inbox_threads_lose_nothing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
