/*
 * server/config/secret.c - secrets read from files, and the live secrets a SIGHUP
 * replaces (server/config/secret.h).
 *
 * A live secret is a mutex and an owned string rather than an atomically
 * swapped pointer: its readers (a /metrics scrape, a console request, a
 * Redis connect) are rare, so a lock costs nothing measurable, and a
 * reader that copies under the lock can never see a value being freed,
 * which a bare pointer swap would need a grace period for.
 */
#include "server/config/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/config/settings.h"
#include "server/config/redis_url.h"

int srv_secret_read_file(const char *path, char **out, char *why,
                         size_t whylen)
{
    /* One byte more than allowed, to tell a file that is too large. */
    char buf[SRV_SECRET_FILE_MAX + 1];
    struct stat st;
    size_t n = 0;
    ssize_t r;
    int fd, rc = 0;

    *out = NULL;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is
     * refused below like any other file that is not a regular one. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        rc = -errno;
        snprintf(why, whylen, "cannot read \"%s\": %s", path, strerror(-rc));
        return rc;
    }
    if (fstat(fd, &st)) {
        rc = -errno;
        snprintf(why, whylen, "cannot read \"%s\": %s", path, strerror(-rc));
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "\"%s\" is not a regular file", path);
        close(fd);
        return -EINVAL;
    }
    while (n < sizeof(buf)) {
        r = read(fd, buf + n, sizeof(buf) - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            snprintf(why, whylen, "cannot read \"%s\": %s", path,
                     strerror(-rc));
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (!rc && n > SRV_SECRET_FILE_MAX) {
        snprintf(why, whylen, "\"%s\" is larger than %d bytes", path,
                 SRV_SECRET_FILE_MAX);
        rc = -EFBIG;
    } else if (!rc && memchr(buf, '\0', n)) {
        snprintf(why, whylen, "\"%s\" holds a NUL byte", path);
        rc = -EINVAL;
    }
    if (!rc && n && buf[n - 1] == '\n') {
        n--;
        if (n && buf[n - 1] == '\r')
            n--;
    }
    if (!rc && !n) {
        snprintf(why, whylen, "\"%s\" is empty", path);
        rc = -EINVAL;
    }
    if (!rc && !(*out = strndup(buf, n))) {
        snprintf(why, whylen, "\"%s\": out of memory", path);
        rc = -ENOMEM;
    }
    explicit_bzero(buf, sizeof(buf));
    return rc;
}

/* Wipe, then free: a freed secret should not linger in the heap. */
static void free_secret(char *p)
{
    if (p) {
        explicit_bzero(p, strlen(p));
        free(p);
    }
}

int srv_secret_init(struct srv_secret *sec, const char *val)
{
    sec->val = NULL;
    if (val && !(sec->val = strdup(val)))
        return -ENOMEM;
    if (pthread_mutex_init(&sec->mu, NULL)) {
        free_secret(sec->val);
        sec->val = NULL;
        return -ENOMEM;
    }
    return 0;
}

int srv_secret_set(struct srv_secret *sec, const char *val)
{
    char *copy = NULL, *old;

    pthread_mutex_lock(&sec->mu);
    old = sec->val;
    if (old == val || (old && val && !strcmp(old, val))) {
        pthread_mutex_unlock(&sec->mu);
        return 0;
    }
    pthread_mutex_unlock(&sec->mu);
    /* Only this (the main) thread writes, so the value read above is
     * still the one replaced below. */
    if (val && !(copy = strdup(val)))
        return -ENOMEM;
    pthread_mutex_lock(&sec->mu);
    sec->val = copy;
    pthread_mutex_unlock(&sec->mu);
    free_secret(old);
    return 1;
}

int srv_secret_copy(struct srv_secret *sec, char *buf, size_t len)
{
    size_t n;
    int rc;

    if (!len)
        return -ENOSPC;
    pthread_mutex_lock(&sec->mu);
    n = sec->val ? strlen(sec->val) : 0;
    if (!sec->val) {
        buf[0] = '\0';
        rc = 0;
    } else if (n >= len) {
        buf[0] = '\0';
        rc = -ENOSPC;
    } else {
        memcpy(buf, sec->val, n + 1);
        rc = 1;
    }
    pthread_mutex_unlock(&sec->mu);
    return rc;
}

bool srv_secret_isset(struct srv_secret *sec)
{
    bool set;

    pthread_mutex_lock(&sec->mu);
    set = sec->val != NULL;
    pthread_mutex_unlock(&sec->mu);
    return set;
}

void srv_secret_fini(struct srv_secret *sec)
{
    free_secret(sec->val);
    sec->val = NULL;
    pthread_mutex_destroy(&sec->mu);
}

/* The Redis password cfg asks for: --redis-password-file's, else the
 * --redis URL's, else none (NULL). The URL's is copied into u. */
static const char *redis_password_of(const struct srv_config *cfg,
                                     struct srv_redis_url *u)
{
    if (cfg->redis_password)
        return cfg->redis_password;
    if (!cfg->redis || srv_redis_url_parse(cfg->redis, u, NULL, 0) ||
        !u->pass[0])
        return NULL;
    return u->pass;
}

int srv_secrets_init(struct srv_secrets *sec, const struct srv_config *cfg)
{
    struct srv_redis_url u;
    int rc;

    rc = srv_secret_init(&sec->admin_token, cfg->admin_token);
    if (rc)
        return rc;
    rc = srv_secret_init(&sec->metrics_token, cfg->metrics_token);
    if (rc) {
        srv_secret_fini(&sec->admin_token);
        return rc;
    }
    rc = srv_secret_init(&sec->redis_password, redis_password_of(cfg, &u));
    explicit_bzero(&u, sizeof(u));
    if (!rc) {
        rc = srv_secret_init(&sec->redis_sentinel_password,
                             cfg->redis_sentinel_password);
        if (rc)
            srv_secret_fini(&sec->redis_password);
    }
    if (rc) {
        srv_secret_fini(&sec->admin_token);
        srv_secret_fini(&sec->metrics_token);
    }
    return rc;
}

/* Append name to the comma list in buf. */
static void note(char *buf, size_t len, const char *name)
{
    size_t o = strlen(buf);

    if (o < len)
        snprintf(buf + o, len - o, "%s%s", o ? ", " : "", name);
}

int srv_secrets_update(struct srv_secrets *sec, const struct srv_config *cfg,
                       char *changed, size_t len)
{
    struct srv_redis_url u;
    int a, m, r, s;

    if (len)
        changed[0] = '\0';
    a = srv_secret_set(&sec->admin_token, cfg->admin_token);
    m = srv_secret_set(&sec->metrics_token, cfg->metrics_token);
    r = srv_secret_set(&sec->redis_password, redis_password_of(cfg, &u));
    explicit_bzero(&u, sizeof(u));
    s = srv_secret_set(&sec->redis_sentinel_password,
                       cfg->redis_sentinel_password);
    if (a > 0)
        note(changed, len, "admin token");
    if (m > 0)
        note(changed, len, "metrics token");
    if (r > 0)
        note(changed, len, "Redis password");
    if (s > 0)
        note(changed, len, "Redis Sentinel password");
    return a < 0 || m < 0 || r < 0 || s < 0 ? -ENOMEM : 0;
}

void srv_secrets_fini(struct srv_secrets *sec)
{
    srv_secret_fini(&sec->admin_token);
    srv_secret_fini(&sec->metrics_token);
    srv_secret_fini(&sec->redis_password);
    srv_secret_fini(&sec->redis_sentinel_password);
}
