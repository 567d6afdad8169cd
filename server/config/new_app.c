/*
 * server/config/new_app.c - --new-app (server/config/new_app.h): random
 * bytes from getrandom(2), spelled as hex, and a uniform 7-digit id by
 * rejection (no modulo bias).
 *
 * Thread: any.
 */
#include "server/config/new_app.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

/* Fill buf (len bytes) from the kernel's source; 0 or -errno. */
static int srv__random(void *buf, size_t len)
{
    unsigned char *p = buf;

    while (len) {
        ssize_t n = getrandom(p, len, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* n random bytes as 2n lowercase hex digits into out (2n + 1 bytes). */
static int srv__hex(char *out, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char raw[32];
    int rc;

    if (n > sizeof(raw))
        return -EINVAL;
    rc = srv__random(raw, n);
    if (rc) {
        /* A failed draw may have filled part of raw: a secret's bytes. */
        explicit_bzero(raw, sizeof(raw));
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[raw[i] >> 4];
        out[2 * i + 1] = digits[raw[i] & 15];
    }
    out[2 * n] = '\0';
    explicit_bzero(raw, sizeof(raw));
    return 0;
}

/* A 7-digit id, 1000000..9999999, uniformly: 32-bit draws past the
 * largest multiple of 9000000 are drawn again. */
static int srv__id(char *out, size_t len)
{
    const uint32_t span = 9000000u;
    const uint32_t limit = UINT32_MAX - UINT32_MAX % span;
    uint32_t v;
    int rc;

    do {
        rc = srv__random(&v, sizeof(v));
        if (rc)
            return rc;
    } while (v >= limit);
    snprintf(out, len, "%u", (unsigned)(1000000u + v % span));
    return 0;
}

int srv_new_app_make(struct srv_new_app *a)
{
    int rc = srv__id(a->id, sizeof(a->id));

    if (!rc)
        rc = srv__hex(a->key, SRV_NEW_APP_KEY_LEN / 2);
    if (!rc)
        rc = srv__hex(a->secret, SRV_NEW_APP_SECRET_LEN / 2);
    if (rc)
        explicit_bzero(a, sizeof(*a));
    return rc;
}

void srv_new_app_print(FILE *out, const struct srv_new_app *a)
{
    /* Digits and hex: nothing to escape. */
    fprintf(out, "{\n    \"id\": \"%s\",\n    \"key\": \"%s\",\n"
                 "    \"secret\": \"%s\"\n}\n", a->id, a->key, a->secret);
}
