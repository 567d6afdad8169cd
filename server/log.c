/*
 * server/log.c - one line per event: time, level, loop, message; as text or
 * as JSON lines. Peer-caused lines go through a token bucket (20 a second,
 * burst 40) so a misbehaving client cannot flood the log; the next line
 * that gets through says how many were suppressed. Peer-supplied bytes are
 * escaped, so a line is always one line and JSON lines are valid JSON.
 *
 * Thread: any; one mutex keeps lines whole and guards the bucket.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hub/log.h"
#include "server/srv.h"

static int log_level = HUB_LOG_INFO;
static enum srv_log_format log_format = SRV_LOG_TEXT;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static double bucket = 40;
static uint64_t bucket_ms;
static uint64_t suppressed;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int srv_log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (s && strcasecmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

/*
 * stderr is unbuffered: every fputc of an escaped message was a write of
 * its own, so a reader of the pipe (journald, a container runtime, the
 * tests) could see half a line. With a buffer larger than any line
 * (1 KiB of message escaped at most six bytes a byte, plus the prefix),
 * emit()'s fflush writes each line in one write(2).
 */
static char stderr_buf[16384];

void srv_log_init(int level, enum srv_log_format fmt)
{
    log_level = level;
    log_format = fmt;
    setvbuf(stderr, stderr_buf, _IOFBF, sizeof(stderr_buf));
}

bool srv_log_enabled(int level)
{
    return level <= log_level;
}

/*
 * Length of the well-formed UTF-8 sequence at s (1..4), or 0 when the bytes
 * there are not one: stray continuation bytes, overlongs, surrogates, code
 * points past U+10FFFF, or a sequence cut short (vsnprintf may truncate in
 * the middle of one).
 */
static int utf8_len(const unsigned char *s)
{
    int n;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return 0;
    return n;
}

/*
 * Messages can carry peer-supplied bytes (a URI, an app key). Each line
 * stays one line and, in JSON, valid UTF-8 JSON: control characters are
 * escaped and bytes that are not UTF-8 become U+FFFD (JSON) or \xNN
 * (text).
 */
static void put_escaped(FILE *f, const char *str, bool json)
{
    const unsigned char *s = (const unsigned char *)str;

    while (*s) {
        int n = utf8_len(s);

        if (n == 0) {
            if (json)
                fputs("\\ufffd", f);
            else
                fprintf(f, "\\x%02x", *s);
            s++;
        } else if (n > 1) {
            fwrite(s, 1, (size_t)n, f);
            s += n;
        } else if (json && (*s == '"' || *s == '\\')) {
            fprintf(f, "\\%c", *s++);
        } else if (*s < 0x20 || *s == 0x7f) {
            if (json)
                fprintf(f, "\\u%04x", *s++);
            else
                fprintf(f, "\\x%02x", *s++);
        } else {
            fputc(*s++, f);
        }
    }
}

static void emit(int level, unsigned loop, const char *msg)
{
    struct timespec ts;
    struct tm tm;
    char when[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    if (log_format == SRV_LOG_JSON) {
        fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"loop\":%u,"
                        "\"msg\":\"",
                when, ts.tv_nsec / 1000000, level_names[level], loop);
        put_escaped(stderr, msg, true);
        if (suppressed)
            fprintf(stderr, "\",\"suppressed\":%llu}\n",
                    (unsigned long long)suppressed);
        else
            fputs("\"}\n", stderr);
    } else {
        fprintf(stderr, "%s.%03ldZ %-5s loop=%u ", when,
                ts.tv_nsec / 1000000, level_names[level], loop);
        put_escaped(stderr, msg, false);
        if (suppressed)
            fprintf(stderr, " (%llu similar lines suppressed)",
                    (unsigned long long)suppressed);
        fputc('\n', stderr);
    }
    suppressed = 0;
    fflush(stderr);
}

static void vlog(bool peer, int level, unsigned loop, const char *fmt,
                 va_list ap)
{
    char msg[1024];

    if (level > log_level)
        return;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    pthread_mutex_lock(&log_mu);
    if (peer) {
        uint64_t now = srv_now_ms();

        bucket += (double)(now - bucket_ms) * 0.02;
        bucket_ms = now;
        if (bucket > 40)
            bucket = 40;
        if (bucket < 1) {
            suppressed++;
            pthread_mutex_unlock(&log_mu);
            return;
        }
        bucket -= 1;
    }
    emit(level, loop, msg);
    pthread_mutex_unlock(&log_mu);
}

void srv_log(int level, unsigned loop, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vlog(false, level, loop, fmt, ap);
    va_end(ap);
}

void srv_log_peer(int level, unsigned loop, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vlog(true, level, loop, fmt, ap);
    va_end(ap);
}
