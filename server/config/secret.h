/*
 * server/config/secret.h - secrets read from files, and the live copies of the
 * secrets a SIGHUP replaces while other threads read them.
 *
 * Files: --app-secret-file, --admin-token-file, --metrics-token-file,
 * --redis-password-file, --redis-sentinel-password-file and an app's
 * "secret_file" (docs/CONFIG.md,
 * "Secrets in files"). A secret file holds the secret and at most one
 * trailing newline ("\n" or "\r\n", as echo and editors leave one), which
 * is dropped; nothing else is trimmed. It must be a regular file (a FIFO
 * would block the main thread at a reload) of at most SRV_SECRET_FILE_MAX
 * bytes, hold no NUL byte, and not be empty once the newline is dropped.
 *
 * Live copies: the operator tokens, read by the loops at each /metrics,
 * /stats and console request, and the Redis and Sentinel passwords, read
 * by the backplane and webhook threads at each connect. The main thread replaces
 * one under its mutex; readers copy the value out under the same mutex,
 * so the old value may be freed as soon as it is replaced, and no reader
 * ever holds a pointer into it. App secrets need none of this: they live
 * in the app table, which a reload republishes (hub/loop/appswap.h).
 *
 * Thread: srv_secret_read_file() on the main thread (configuration);
 * srv_secret_init/set/fini and srv_secrets_* on the main thread;
 * srv_secret_copy() and srv_secret_isset() on any thread.
 */
#ifndef SRV_SECRET_H
#define SRV_SECRET_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct srv_config;

/* The largest secret file read, in bytes (its newline included). */
#define SRV_SECRET_FILE_MAX 4096
/* The longest operator token (server/config/validate.c checks it at load). */
#define SRV_SECRET_TOKEN_MAX 256

/*
 * Read the secret in path into *out (owned, NUL-terminated). 0, or a
 * negative errno with one line in why (whylen bytes) naming the file and
 * the reason ("cannot read \"/run/x\": Permission denied", "\"/run/x\" is
 * empty", ...); *out is then NULL.
 */
int srv_secret_read_file(const char *path, char **out, char *why,
                         size_t whylen);

/* One live secret; val is NULL when unset. Fields private. */
struct srv_secret {
    pthread_mutex_t mu;
    char *val;
};

/* val (borrowed, copied; NULL = unset). 0 or -ENOMEM. */
int srv_secret_init(struct srv_secret *sec, const char *val);
/* Replace the value with a copy of val (NULL = unset). 1 when it changed,
 * 0 when it was the same, -ENOMEM (the old value stays). */
int srv_secret_set(struct srv_secret *sec, const char *val);
/* Copy the value into buf (len bytes): 1, or 0 when unset (buf ""), or
 * -ENOSPC when it does not fit (buf ""). */
int srv_secret_copy(struct srv_secret *sec, char *buf, size_t len);
bool srv_secret_isset(struct srv_secret *sec);
/* Wipe and free the value. */
void srv_secret_fini(struct srv_secret *sec);

/* The process's live secrets (struct srv). */
struct srv_secrets {
    struct srv_secret admin_token;    /* NULL: the console is off */
    struct srv_secret metrics_token;  /* NULL: /metrics asks for none */
    struct srv_secret redis_password; /* NULL: no AUTH */
    /* --redis-sentinel-password-file's: AUTH to each sentinel (never the
     * URL's password, which is the master's). NULL: no AUTH. */
    struct srv_secret redis_sentinel_password;
};

/* The values of cfg (loaded and validated): its tokens, the Redis
 * password from --redis-password-file or else the --redis URL, and the
 * sentinels' from --redis-sentinel-password-file. 0 or -ENOMEM
 * (everything freed). */
int srv_secrets_init(struct srv_secrets *sec, const struct srv_config *cfg);
/*
 * Take cfg's values (a reload's). 0, or -ENOMEM (some may be replaced).
 * changed (len bytes) gets what changed, by name, never by value:
 * "admin token, Redis password, Redis Sentinel password", or "" when
 * nothing did.
 */
int srv_secrets_update(struct srv_secrets *sec, const struct srv_config *cfg,
                       char *changed, size_t len);
void srv_secrets_fini(struct srv_secrets *sec);

#endif
