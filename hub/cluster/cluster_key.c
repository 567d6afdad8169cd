/*
 * hub/cluster/cluster_key.c - the cluster key's MACs and the receiving side's
 * replay table (hub/cluster/cluster_key.h). HMAC-SHA256 through OpenSSL's
 * EVP_MAC, one context per key keyed once and re-initialised per message (same
 * key).
 */
#include "hub/cluster/cluster_key.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

struct last {
    char *node;
    size_t node_len;
    uint64_t ctr, time_ms;
};

struct hub_cluster_key {
    pthread_mutex_t mu;
    EVP_MAC_CTX *ctx[2]; /* ctx[1] NULL: one key */
    char *prefix, *node;
    uint64_t window_ms;
    uint64_t ctr; /* the last counter this node signed */
    struct last *seen;
    size_t n_seen, cap_seen;
};

static uint64_t wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static EVP_MAC_CTX *keyed(const void *key, size_t len)
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    EVP_MAC *alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = alg ? EVP_MAC_CTX_new(alg) : NULL;

    EVP_MAC_free(alg);
    if (ctx && !EVP_MAC_init(ctx, key, len, params)) {
        EVP_MAC_CTX_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

struct hub_cluster_key *hub_cluster_key_create(const void *key1, size_t len1,
                                               const void *key2, size_t len2,
                                               const char *prefix,
                                               const char *node,
                                               uint64_t window_ms)
{
    struct hub_cluster_key *k;

    if (len1 < HUB_CLUSTER_KEY_MIN_KEY || len1 > HUB_CLUSTER_KEY_MAX_KEY ||
        (len2 &&
         (len2 < HUB_CLUSTER_KEY_MIN_KEY || len2 > HUB_CLUSTER_KEY_MAX_KEY)) ||
        !prefix || !node)
        return NULL;
    k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    pthread_mutex_init(&k->mu, NULL);
    k->ctx[0] = keyed(key1, len1);
    k->ctx[1] = len2 ? keyed(key2, len2) : NULL;
    k->prefix = strdup(prefix);
    k->node = strdup(node);
    k->window_ms = window_ms;
    if (!k->ctx[0] || (len2 && !k->ctx[1]) || !k->prefix || !k->node) {
        hub_cluster_key_destroy(k);
        return NULL;
    }
    return k;
}

void hub_cluster_key_destroy(struct hub_cluster_key *k)
{
    if (!k)
        return;
    EVP_MAC_CTX_free(k->ctx[0]);
    EVP_MAC_CTX_free(k->ctx[1]);
    for (size_t i = 0; i < k->n_seen; i++)
        free(k->seen[i].node);
    free(k->seen);
    free(k->prefix);
    free(k->node);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

int hub_cluster_key_read_file(const char *path, char **key1, size_t *len1,
                              char **key2, size_t *len2, char *why,
                              size_t why_len)
{
    FILE *f = fopen(path, "r");
    char *line = NULL, *keys[2] = { NULL, NULL };
    size_t cap = 0, lens[2] = { 0, 0 }, n = 0;
    ssize_t got;
    int rc = 0;

    *key1 = *key2 = NULL;
    *len1 = *len2 = 0;
    if (!f) {
        rc = -errno;
        snprintf(why, why_len, "%s: %s", path, strerror(errno));
        return rc;
    }
    while ((got = getline(&line, &cap, f)) >= 0) {
        size_t l = (size_t)got;

        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r' ||
                     line[l - 1] == ' ' || line[l - 1] == '\t'))
            l--;
        if (!l)
            continue;
        if (n == 2) {
            snprintf(why, why_len, "%s: more than two keys", path);
            rc = -EINVAL;
            break;
        }
        if (l < HUB_CLUSTER_KEY_MIN_KEY || l > HUB_CLUSTER_KEY_MAX_KEY) {
            snprintf(why, why_len, "%s: key %zu is %zu bytes (%d..%d allowed)",
                     path, n + 1, l, HUB_CLUSTER_KEY_MIN_KEY,
                     HUB_CLUSTER_KEY_MAX_KEY);
            rc = -EINVAL;
            break;
        }
        keys[n] = malloc(l);
        if (!keys[n]) {
            rc = -ENOMEM;
            break;
        }
        memcpy(keys[n], line, l);
        lens[n++] = l;
    }
    if (!rc && ferror(f)) {
        rc = -EIO;
        snprintf(why, why_len, "%s: read error", path);
    }
    if (!rc && !n) {
        rc = -EINVAL;
        snprintf(why, why_len, "%s: no key", path);
    }
    fclose(f);
    if (line)
        OPENSSL_cleanse(line, cap);
    free(line);
    if (rc) {
        for (int i = 0; i < 2; i++) {
            if (keys[i])
                OPENSSL_cleanse(keys[i], lens[i]);
            free(keys[i]);
        }
        if (rc == -ENOMEM)
            snprintf(why, why_len, "%s: out of memory", path);
        return rc;
    }
    *key1 = keys[0];
    *len1 = lens[0];
    *key2 = keys[1];
    *len2 = lens[1];
    return 0;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (56 - 8 * i));
}

static int upd_str(EVP_MAC_CTX *ctx, const void *s, size_t n)
{
    unsigned char len[4];

    put_u32(len, (uint32_t)n);
    return EVP_MAC_update(ctx, len, 4) && (!n || EVP_MAC_update(ctx, s, n));
}

/* The MAC of one message with ctx (its key). */
static bool mac_with(EVP_MAC_CTX *ctx, const char *prefix, const char *node,
                     size_t node_len, uint64_t ctr, uint64_t time_ms,
                     const char *domain,
                     const struct hub_cluster_key_part *parts, size_t n,
                     unsigned char out[HUB_CLUSTER_KEY_MAC_LEN])
{
    unsigned char ints[16], md[EVP_MAX_MD_SIZE];
    size_t md_len = 0;
    bool ok;

    put_u64(ints, ctr);
    put_u64(ints + 8, time_ms);
    ok = EVP_MAC_init(ctx, NULL, 0, NULL) &&
         upd_str(ctx, prefix, strlen(prefix)) &&
         upd_str(ctx, node, node_len) && EVP_MAC_update(ctx, ints, 16) &&
         upd_str(ctx, domain, strlen(domain));
    for (size_t i = 0; ok && i < n; i++)
        ok = upd_str(ctx, parts[i].p, parts[i].n);
    ok = ok && EVP_MAC_final(ctx, md, &md_len, sizeof(md)) &&
         md_len >= HUB_CLUSTER_KEY_MAC_LEN;
    if (ok)
        memcpy(out, md, HUB_CLUSTER_KEY_MAC_LEN);
    return ok;
}

int hub_cluster_key_sign(struct hub_cluster_key *k, const char *domain,
                         const struct hub_cluster_key_part *parts, size_t n,
                         uint64_t *ctr, uint64_t *time_ms,
                         unsigned char mac[HUB_CLUSTER_KEY_MAC_LEN])
{
    uint64_t us = wall_us();
    bool ok;

    pthread_mutex_lock(&k->mu);
    k->ctr = us > k->ctr ? us : k->ctr + 1;
    *ctr = k->ctr;
    *time_ms = us / 1000;
    ok = mac_with(k->ctx[0], k->prefix, k->node, strlen(k->node), *ctr,
                  *time_ms, domain, parts, n, mac);
    pthread_mutex_unlock(&k->mu);
    return ok ? 0 : -ENOMEM;
}

/* The node's entry (under mu), made when make; NULL when none or full. */
static struct last *last_of(struct hub_cluster_key *k, const char *node,
                            size_t node_len, uint64_t now_ms, bool make)
{
    struct last *l;

    for (size_t i = 0; i < k->n_seen; i++)
        if (k->seen[i].node_len == node_len &&
            !memcmp(k->seen[i].node, node, node_len))
            return &k->seen[i];
    if (!make)
        return NULL;
    if (k->n_seen == HUB_CLUSTER_KEY_MAX_NODES) {
        /* Forget nodes silent past the window: their old messages fail
         * the time check anyway. */
        size_t j = 0;

        for (size_t i = 0; i < k->n_seen; i++) {
            if (now_ms - k->seen[i].time_ms <= k->window_ms ||
                k->seen[i].time_ms > now_ms)
                k->seen[j++] = k->seen[i];
            else
                free(k->seen[i].node);
        }
        k->n_seen = j;
        if (j == HUB_CLUSTER_KEY_MAX_NODES)
            return NULL;
    }
    if (k->n_seen == k->cap_seen) {
        size_t cap = k->cap_seen ? k->cap_seen * 2 : 8;
        struct last *v = realloc(k->seen, cap * sizeof(*v));

        if (!v)
            return NULL;
        k->seen = v;
        k->cap_seen = cap;
    }
    l = &k->seen[k->n_seen];
    l->node = malloc(node_len ? node_len : 1);
    if (!l->node)
        return NULL;
    memcpy(l->node, node, node_len);
    l->node_len = node_len;
    l->ctr = l->time_ms = 0;
    k->n_seen++;
    return l;
}

enum hub_cluster_key_verdict
hub_cluster_key_verify(struct hub_cluster_key *k, const char *node,
                       size_t node_len, uint64_t ctr, uint64_t time_ms,
                       const char *domain,
                       const struct hub_cluster_key_part *parts, size_t n,
                       const unsigned char *mac, bool fresh)
{
    unsigned char want[HUB_CLUSTER_KEY_MAC_LEN];
    enum hub_cluster_key_verdict v = HUB_CLUSTER_KEY_FORGED;
    uint64_t now_ms = wall_us() / 1000;
    struct last *l;

    pthread_mutex_lock(&k->mu);
    for (int i = 0; i < 2 && k->ctx[i]; i++) {
        if (mac_with(k->ctx[i], k->prefix, node, node_len, ctr, time_ms,
                     domain, parts, n, want) &&
            !CRYPTO_memcmp(want, mac, HUB_CLUSTER_KEY_MAC_LEN)) {
            v = HUB_CLUSTER_KEY_OK;
            break;
        }
    }
    if (v == HUB_CLUSTER_KEY_OK && fresh) {
        if ((now_ms > time_ms && now_ms - time_ms > k->window_ms) ||
            (time_ms > now_ms && time_ms - now_ms > k->window_ms)) {
            v = HUB_CLUSTER_KEY_REPLAY;
        } else {
            l = last_of(k, node, node_len, now_ms, true);
            if (!l || ctr <= l->ctr) {
                v = HUB_CLUSTER_KEY_REPLAY;
            } else {
                l->ctr = ctr;
                l->time_ms = time_ms;
            }
        }
    }
    pthread_mutex_unlock(&k->mu);
    return v;
}
