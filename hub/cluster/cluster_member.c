/*
 * hub/cluster/cluster_member.c - member events across nodes
 * (docs/SCALING.md, "Views" and "The cluster key"): the stamp this node's
 * join script puts before the member_added it may publish, and the
 * messages that arrive on a member-event channel
 * "<prefix>:m:<app>:<channel>", parsed and checked (their stamp against
 * the cluster key) before the channel's view (hub/cluster/cluster_view.c)
 * applies them.
 *
 * Thread: the backplane thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/cluster/cluster_key.h"
#include "hub/cluster/cluster_int.h"

/* One message on a member-event channel, parsed (pointers into the
 * channel name and the message). */
struct member_msg {
    const char *app_s, *ch;        /* the app id and channel of rchan */
    size_t app_len, ch_len;
    int app;
    bool stamped;                  /* with the joining node's stamp: */
    const char *snode;             /* its node id, counter, time, MAC */
    size_t snode_len;
    unsigned char sbuf[16], smac[HUB_CLUSTER_KEY_MAC_LEN];
    uint64_t cseq;
    bool add;
    const char *uid, *info;
    size_t ulen, ilen;
};

/* 2n lowercase hex digits at s into out[0..n). */
static bool hex_in(const char *s, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < 2 * n; i++) {
        char h = s[i];
        int v = h >= '0' && h <= '9' ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                       : -1;

        if (v < 0)
            return false;
        if (i % 2)
            out[i / 2] = (unsigned char)(out[i / 2] | v);
        else
            out[i / 2] = (unsigned char)(v << 4);
    }
    return true;
}

int hub_cluster_member_stamp(struct hub_cluster *c, const char *app_id,
                             const char *ch, size_t ch_len, const char *uid,
                             size_t ulen, const char *info, size_t ilen,
                             char **out)
{
    const struct hub_cluster_key_part parts[5] = {
        { app_id, strlen(app_id) }, { ch, ch_len }, { "+", 1 },
        { uid, ulen }, { info, ilen } };
    unsigned char mac[HUB_CLUSTER_KEY_MAC_LEN];
    uint64_t ctr, ms;
    char *s;
    int n;

    *out = NULL;
    if (!c->key)
        return 0;
    if (hub_cluster_key_sign(c->key, "mem", parts, 5, &ctr, &ms, mac))
        return -ENOMEM;
    s = malloc(1 + 64 + c->node_len + 2);
    if (!s)
        return -ENOMEM;
    n = sprintf(s, "~%016" PRIx64 "%016" PRIx64, ctr, ms);
    for (size_t i = 0; i < HUB_CLUSTER_KEY_MAC_LEN; i++)
        n += sprintf(s + n, "%02x", mac[i]);
    memcpy(s + n, c->node_id, c->node_len);
    n += (int)c->node_len;
    s[n++] = '\n';
    s[n] = '\0';
    *out = s;
    return n;
}

/* A decimal number at *pp (at least one digit, no overflow) into *v; *pp
 * past it. false when there is none or it overflows. */
static bool digits(const char **pp, const char *end, uint64_t *v)
{
    const char *p = *pp;

    *v = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (*v > (UINT64_MAX - 9) / 10)
            return false;
        *v = *v * 10 + (uint64_t)(*p - '0');
    }
    if (p == *pp)
        return false;
    *pp = p;
    return true;
}

/* "<prefix>:m:<app>:<channel>": the app id has no ':' (ids are restricted
 * at load), so the channel is everything after the first ':' past it,
 * whatever bytes the channel name holds. */
static bool member_chan(struct hub_cluster *c, const char *rchan,
                        size_t rlen, struct member_msg *mm)
{
    size_t plen = strlen(c->prefix);
    const char *ch;

    if (!rchan || rlen < plen + 3 || memcmp(rchan, c->prefix, plen) ||
        memcmp(rchan + plen, ":m:", 3))
        return false;
    mm->app_s = rchan + plen + 3;
    ch = memchr(mm->app_s, ':', rlen - plen - 3);
    if (!ch || ch == mm->app_s)
        return false;
    mm->app_len = (size_t)(ch - mm->app_s);
    mm->ch = ch + 1;
    mm->ch_len = (size_t)(rchan + rlen - mm->ch);
    return mm->ch_len &&
           (mm->app = hub_cluster_app_index(c, mm->app_s, mm->app_len)) >= 0;
}

/* With a cluster key, the joining node's stamp first (hub_cluster_
 * member_stamp): "~<ctr><time><mac><node>\n", hex. *data past it. */
static bool member_stamp_in(struct hub_cluster *c, const char **data,
                            const char *end, struct member_msg *mm)
{
    const char *d = *data, *nl;
    size_t len = (size_t)(end - d);

    if (!len || d[0] != '~')
        return true;
    if (!c->key || len < 1 + 64 + 2 || !hex_in(d + 1, 8, mm->sbuf) ||
        !hex_in(d + 17, 8, mm->sbuf + 8) ||
        !hex_in(d + 33, HUB_CLUSTER_KEY_MAC_LEN, mm->smac))
        return false;
    mm->snode = d + 65;
    nl = memchr(mm->snode, '\n', (size_t)(end - mm->snode));
    if (!nl || nl == mm->snode)
        return false;
    mm->snode_len = (size_t)(nl - mm->snode);
    *data = nl + 1;
    mm->stamped = true;
    return true;
}

/* "<cseq>\n<+|-><n>\n<uid><info>": the uid is n bytes, counted and never
 * delimited, so that a '\n' (or any byte) in it cannot move where the uid
 * ends (docs/SCALING.md). */
static bool member_body(const char *p, const char *end, struct member_msg *mm)
{
    uint64_t n = 0;

    if (!digits(&p, end, &mm->cseq) || !mm->cseq || end - p < 3 ||
        p[0] != '\n' || (p[1] != '+' && p[1] != '-'))
        return false;
    mm->add = p[1] == '+';
    p += 2;
    if (!digits(&p, end, &n) || !n || p == end || *p != '\n' ||
        n > (uint64_t)(end - p - 1))
        return false;
    mm->uid = p + 1;
    mm->ulen = (size_t)n;
    if (memchr(mm->uid, '\0', mm->ulen))
        return false;
    mm->info = mm->uid + mm->ulen;
    mm->ilen = (size_t)(end - mm->info);
    if (!mm->add && mm->ilen)
        return false;
    if (mm->ilen) {
        json_t *jv = memchr(mm->info, '\0', mm->ilen)
                         ? NULL
                         : json_loadb(mm->info, mm->ilen, JSON_DECODE_ANY,
                                      NULL);

        if (!jv)
            return false;
        json_decref(jv);
    }
    return true;
}

/* With a key, a member_added must carry a stamp that verifies; a removal
 * without one is a reaper's or a rejoin sweep's (docs/SCALING.md lists
 * what the key does not cover). 0, -EACCES or -ESTALE (dropped and
 * counted). */
static int member_verify(struct hub_cluster *c, const struct member_msg *mm)
{
    const struct hub_cluster_key_part parts[5] = {
        { mm->app_s, mm->app_len }, { mm->ch, mm->ch_len },
        { mm->add ? "+" : "-", 1 }, { mm->uid, mm->ulen },
        { mm->info, mm->ilen } };
    int why = -EACCES;

    if (!c->key || (!mm->stamped && !mm->add))
        return 0;
    if (mm->stamped) {
        enum hub_cluster_key_verdict vd = hub_cluster_key_verify(
            c->key, mm->snode, mm->snode_len, hub__cluster_be64(mm->sbuf),
            hub__cluster_be64(mm->sbuf + 8), "mem", parts, 5, mm->smac, true);

        why = vd == HUB_CLUSTER_KEY_OK       ? 0
              : vd == HUB_CLUSTER_KEY_REPLAY ? -ESTALE
                                             : -EACCES;
    }
    if (why)
        hub__cluster_key_drop(c, why, mm->snode, mm->snode_len,
                              mm->stamped ? "a member event"
                                          : "an unsigned member_added");
    return why;
}

int hub_cluster_member_msg(struct hub_cluster *c, const char *rchan,
                           size_t rlen, const char *data, size_t len)
{
    struct member_msg mm = { 0 };
    const char *end = data + len;
    int why;

    if (!member_chan(c, rchan, rlen, &mm) ||
        !member_stamp_in(c, &data, end, &mm) ||
        !member_body(data, end, &mm)) {
        HUB_STAT_ADD_SHARED(c->stats.bad, 1);
        return -EINVAL;
    }
    why = member_verify(c, &mm);
    if (why)
        return why;
    HUB_STAT_ADD_SHARED(c->stats.member_events, 1);
    return hub__cluster_view_member_event(c, (unsigned)mm.app, mm.ch,
                                          mm.ch_len, mm.cseq, mm.add, mm.uid,
                                          mm.ulen, mm.info, mm.ilen);
}
