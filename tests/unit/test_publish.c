/*
 * tests/unit/test_publish.c - publication and the backplane seam: inbox
 * nodes left on a destroyed loop are dropped once and release their
 * frame; a terminate order is its own node and reaches every loop; a
 * recording backplane installed with hub_create_with() sees the directory
 * and bus calls of a subscribe, a client event, a REST publish and a
 * terminate; a seeded random run over the (app, name) table checks
 * its invariants after every operation; and the socket_id exclusion
 * parser (hub_skip_parse).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_hub.h"
#include "hub/base/chantab.h"
#include "hub/rest/rest.h"

static unsigned frame_refs(struct hub_frame *f)
{
    return atomic_load(&f->refs);
}

/* A node that counts what the loop did with it. */
struct count_node {
    struct hub_inbox_node node;
    unsigned runs, drops;
};

static void count_run(struct hub_inbox_node *n, struct hub_loop *l,
                      uint64_t now_ms)
{
    (void)l;
    (void)now_ms;
    hub_container_of(n, struct count_node, node)->runs++;
}

static void count_drop(struct hub_inbox_node *n)
{
    hub_container_of(n, struct count_node, node)->drops++;
}

static const struct hub_inbox_ops count_ops = {
    .run = count_run,
    .drop = count_drop,
};

static void test_publish_node_on_destroyed_loop_dropped_once(void **state)
{
    struct fake_hub fh;
    struct count_node cn[2] = { { .node.ops = &count_ops },
                                { .node.ops = &count_ops } };
    struct hub_frame *f;

    (void)state;
    fake_hub_init(&fh, 3);
    assert_int_equal(fake_hub_start(&fh), 0);
    f = hub_frame_create_text("{\"event\":\"e\"}", 13);
    assert_non_null(f);
    /* From no loop: every loop gets a node; the block holds one ref. */
    assert_int_equal(hub_publish(fh.hub, NULL, 0, "c", 1, f, NULL), 0);
    assert_int_equal(frame_refs(f), 2);
    hub_loop_post(fh.loops[0], &cn[0].node);
    /* A drained node runs, once. */
    hub_loop_drain_inbox(fh.loops[0], fake_now_ms(&fh));
    assert_int_equal(cn[0].runs, 1);
    assert_int_equal(cn[0].drops, 0);
    assert_int_equal(frame_refs(f), 2);
    hub_loop_post(fh.loops[2], &cn[1].node);
    /* Loops 1 and 2 go with their nodes still queued. */
    fake_hub_stop(&fh);
    assert_int_equal(cn[1].runs, 0);
    assert_int_equal(cn[1].drops, 1);
    assert_int_equal(cn[0].drops, 0);
    assert_int_equal(frame_refs(f), 1);
    hub_frame_unref(f);
}

static void test_publish_terminate_reaches_every_loop(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b, c, d;
    const struct hub_inbox_ops *pub_ops;
    struct hub_inbox_node *pub, *n;
    struct hub_frame *f;

    (void)state;
    fake_hub_init(&fh, 3);
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &a, 0, &fh.apps[0]);
    fake_session_open(&fh, &b, 1, &fh.apps[0]);
    fake_session_open(&fh, &c, 2, &fh.apps[0]);
    fake_session_open(&fh, &d, 2, &fh.apps[0]);
    fake_signin(&fh, &a.s, "{\"id\":\"42\"}");
    fake_signin(&fh, &b.s, "{\"id\":\"42\"}");
    fake_signin(&fh, &c.s, "{\"id\":\"42\"}");
    fake_signin(&fh, &d.s, "{\"id\":\"7\"}");
    /* A publication's node, to tell the two node types apart. */
    f = hub_frame_create_text("{\"event\":\"e\"}", 13);
    assert_int_equal(hub_publish(fh.hub, NULL, 0, "x", 1, f, NULL), 0);
    pub = hub_inbox_take_all(&fh.loops[0]->inbox);
    assert_non_null(pub);
    pub_ops = pub->ops;
    pub->ops->run(pub, fh.loops[0], fake_now_ms(&fh));
    fake_hub_drain(&fh);
    assert_int_equal(frame_refs(f), 1);

    assert_int_equal(hub_terminate_user(fh.hub, NULL, 0, "42"), 0);
    for (unsigned i = 0; i < 3; i++) {
        n = hub_inbox_take_all(&fh.loops[i]->inbox);
        assert_non_null(n);
        assert_null(n->next);
        /* Its own node type, not a publication with a missing frame. */
        assert_ptr_not_equal(n->ops, pub_ops);
        n->ops->run(n, fh.loops[i], fake_now_ms(&fh));
    }
    assert_int_equal(frame_refs(f), 1);
    assert_int_equal(a.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(b.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(c.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(a.s.close_code, 4009);
    assert_int_equal(c.s.close_code, 4009);
    assert_int_equal(d.s.state, HUB_SESSION_OPEN);
    /* Queued on loops 1 and 2 and never drained: the loops' destruction
     * drops them (ASan: freed once, nothing run). */
    assert_int_equal(hub_terminate_user(fh.hub, fh.loops[0], 0, "7"), 0);
    assert_int_equal(d.s.state, HUB_SESSION_OPEN);
    hub_session_fini(&a.s, HUB_CLOSE_APP);
    hub_session_fini(&b.s, HUB_CLOSE_APP);
    hub_session_fini(&c.s, HUB_CLOSE_APP);
    hub_session_fini(&d.s, HUB_CLOSE_PEER);
    hub_frame_unref(f);
    fake_hub_stop(&fh);
}

/* A backplane that records its calls and forwards to the local one. */
struct rec {
    struct hub_directory *d;
    unsigned joins, leaves, infos, publishes, terminates, destroys;
    char last_pub[64];
    uint64_t last_member_seq;
};

static int rec_join(void *impl, unsigned app, const char *name, size_t len,
                    struct hub_presence_join *j)
{
    struct rec *r = impl;

    r->joins++;
    return hub_directory_local_ops.join(r->d, app, name, len, j);
}

static void rec_leave(void *impl, unsigned app, const char *name, size_t len,
                      const char *uid, bool *last, uint64_t *seq)
{
    struct rec *r = impl;

    r->leaves++;
    hub_directory_local_ops.leave(r->d, app, name, len, uid, last, seq);
}

static void rec_info(void *impl, unsigned app, const char *name, size_t len,
                     struct hub_channel_info *out)
{
    struct rec *r = impl;

    r->infos++;
    hub_directory_local_ops.info(r->d, app, name, len, out);
}

static json_t *rec_list(void *impl, unsigned app, const char *prefix,
                        bool user_count)
{
    struct rec *r = impl;

    return hub_directory_local_ops.list(r->d, app, prefix, user_count);
}

static json_t *rec_users(void *impl, unsigned app, const char *name,
                         size_t len)
{
    struct rec *r = impl;

    return hub_directory_local_ops.users(r->d, app, name, len);
}

static void rec_dir_destroy(void *impl)
{
    struct rec *r = impl;

    r->destroys++;
    hub_directory_local_ops.destroy(r->d);
}

static const struct hub_directory_ops rec_dir_ops = {
    .join = rec_join,
    .leave = rec_leave,
    .info = rec_info,
    .list = rec_list,
    .users = rec_users,
    .destroy = rec_dir_destroy,
};

static int rec_publish(void *impl, struct hub *h, struct hub_loop *from,
                       const struct hub_pub_req *req)
{
    struct rec *r = impl;

    r->publishes++;
    snprintf(r->last_pub, sizeof(r->last_pub), "%.*s", (int)req->len,
             req->name);
    r->last_member_seq = req->skip ? req->skip->member_seq : 0;
    return hub_bus_local_ops.publish(NULL, h, from, req);
}

static int rec_terminate(void *impl, struct hub *h, struct hub_loop *from,
                         unsigned app, const char *uid)
{
    struct rec *r = impl;

    r->terminates++;
    return hub_bus_local_ops.terminate_user(NULL, h, from, app, uid);
}

static const struct hub_bus_ops rec_bus_ops = {
    .publish = rec_publish,
    .terminate_user = rec_terminate,
    .destroy = NULL,
};

static void rest_post_event(struct fake_hub *fh, struct hub_loop *l,
                            const char *body, struct hub_rest_response *out)
{
    const char *path = "/apps/app-id/events";
    char query[1024];
    uint64_t now_s = 1700000000;

    assert_int_equal(hub_auth_sign_rest(&fh->apps[0], "POST", path, "", body,
                                        strlen(body), now_s, query,
                                        sizeof(query)),
                     0);
    hub_rest_handle(l, HUB_HTTP_POST, path, query, body, strlen(body), now_s,
                    out);
}

static void test_publish_recording_backplane_sees_calls(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct rec r = { 0 };
    struct hub_backplane bp = { &rec_dir_ops, &r, &rec_bus_ops, &r, NULL };
    struct hub_rest_response resp = { 0 };
    const char *ev = "{\"name\":\"ev\",\"channel\":\"private-c\","
                     "\"data\":\"{}\"}";

    (void)state;
    r.d = hub_directory_create();
    assert_non_null(r.d);
    fake_hub_init(&fh, 2);
    fh.hub = hub_create_with(&fh.cfg, &fh.clock, &bp);
    assert_non_null(fh.hub);
    assert_int_equal(fake_hub_loops_start(&fh), 0);
    fake_session_open(&fh, &a, 0, &fh.apps[0]);
    fake_session_open(&fh, &b, 1, &fh.apps[0]);

    /* A subscribe counts in the directory through the seam. */
    fake_subscribe(&fh, &a.s, "private-c", NULL);
    assert_int_equal(r.joins, 1);
    fake_subscribe(&fh, &b.s, "private-c", NULL);
    assert_int_equal(r.joins, 2);
    assert_int_equal(r.publishes, 0);
    assert_int_equal(hub_chanmap_check(fh.loops[0]->chans), 0);
    fake_flush(&a.s);
    fake_flush(&b.s);

    /* A client event is one bus publish; b gets it on its loop. */
    fake_recv(&fh, &a.s,
              "{\"event\":\"client-x\",\"channel\":\"private-c\","
              "\"data\":{}}");
    assert_int_equal(r.publishes, 1);
    assert_string_equal(r.last_pub, "private-c");
    fake_hub_drain(&fh);
    assert_int_equal(a.s.q.count, 0);
    assert_int_equal(b.s.q.count, 1);
    fake_flush(&b.s);

    /* A REST publish too, received on the other loop. */
    rest_post_event(&fh, fh.loops[1], ev, &resp);
    assert_int_equal(resp.status, 200);
    free(resp.body);
    assert_int_equal(r.publishes, 2);
    assert_string_equal(r.last_pub, "private-c");
    fake_hub_drain(&fh);
    assert_int_equal(a.s.q.count, 1);
    assert_int_equal(b.s.q.count, 1);

    /* A presence join publishes member_added with the directory seq. */
    fake_subscribe(&fh, &a.s, "presence-p", "{\"user_id\":\"u\"}");
    assert_int_equal(r.joins, 3);
    assert_int_equal(r.publishes, 3);
    assert_string_equal(r.last_pub, "presence-p");
    assert_true(r.last_member_seq > 0);

    assert_int_equal(hub_terminate_user(fh.hub, fh.loops[0], 0, "9"), 0);
    assert_int_equal(r.terminates, 1);

    /* Leaving every channel goes through the seam as well. */
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    assert_int_equal(r.leaves, 3);
    assert_int_equal(r.destroys, 0);
    fake_hub_stop(&fh);
    assert_int_equal(r.destroys, 1);
}

/* The (app, name) table against a model, seeded, 10^4 operations. */
#define KEYS 300

struct key {
    struct hub_chan_node node;
    char name[16];
    bool in;
};

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void test_publish_chantab_random_against_model(void **state)
{
    static struct key k[KEYS];
    struct hub_chantab t;
    uint64_t seed = 0x5eed1234abcdull;
    uint32_t in = 0;

    (void)state;
    for (unsigned i = 0; i < KEYS; i++) {
        int n = snprintf(k[i].name, sizeof(k[i].name), "ch-%u", i / 3);

        memset(&k[i].node, 0, sizeof(k[i].node));
        k[i].node.app = i % 3; /* the same name in three apps */
        k[i].node.name = k[i].name;
        k[i].node.name_len = (uint32_t)n;
        k[i].node.hash = hub_chan_hash(i % 3, k[i].name, (size_t)n);
        k[i].in = false;
    }
    assert_int_equal(hub_chantab_init(&t, 1), 0);
    assert_int_equal(hub_chantab_check(&t), 0);
    for (unsigned op = 0; op < 10000; op++) {
        struct key *e = &k[rnd(&seed) % KEYS];
        struct hub_chan_node *f =
            hub_chantab_find(&t, e->node.app, e->name, e->node.name_len,
                             e->node.hash);

        assert_ptr_equal(f, e->in ? &e->node : NULL);
        if (e->in) {
            hub_chantab_remove(&t, &e->node);
            e->in = false;
            in--;
        } else {
            hub_chantab_insert(&t, &e->node);
            e->in = true;
            in++;
        }
        assert_int_equal(t.count, in);
        assert_int_equal(hub_chantab_check(&t), 0);
        if (op % 1000 == 0) {
            uint32_t seen = 0;

            for (f = hub_chantab_next(&t, NULL); f;
                 f = hub_chantab_next(&t, f)) {
                assert_true(hub_container_of(f, struct key, node)->in);
                seen++;
            }
            assert_int_equal(seen, in);
        }
    }
    /* A node in the wrong bucket is found out. */
    if (in) {
        struct hub_chan_node *f = hub_chantab_next(&t, NULL);

        f->hash ^= 1;
        assert_int_equal(hub_chantab_check(&t), -EFAULT);
        f->hash ^= 1;
    }
    assert_true(t.mask + 1 >= 128); /* grew from one bucket */
    hub_chantab_fini(&t);
}

static void test_publish_skip_parse(void **state)
{
    struct hub_skip ex;

    (void)state;
    assert_int_equal(hub_skip_parse(&ex, "123.456"), 0);
    assert_true(ex.set);
    assert_true(ex.hi == 123 && ex.lo == 456);
    assert_int_equal(hub_skip_parse(&ex, "1.4294967295"), 0);
    assert_int_equal(hub_skip_parse(&ex, "1.4294967296"), -EINVAL);
    assert_false(ex.set);
    assert_int_equal(hub_skip_parse(&ex, "1."), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, ".1"), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, "1.2.3"), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, "-1.2"), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, "1.2 "), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_publish_node_on_destroyed_loop_dropped_once),
        cmocka_unit_test(test_publish_terminate_reaches_every_loop),
        cmocka_unit_test(test_publish_recording_backplane_sees_calls),
        cmocka_unit_test(test_publish_chantab_random_against_model),
        cmocka_unit_test(test_publish_skip_parse),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
