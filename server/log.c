/*
 * server/log.c - one line per event: time, level, loop, message; as text or
 * as JSON lines. Peer-caused lines go through a token bucket (20 a second,
 * burst 40) so a misbehaving client cannot flood the log; the next line
 * that gets through says how many were suppressed.
 *
 * Thread: any; one mutex keeps lines whole and guards the bucket.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hub/pusher.h"
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

void srv_log_init(int level, enum srv_log_format fmt)
{
    log_level = level;
    log_format = fmt;
}

static void json_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
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
        json_escape(stderr, msg);
        if (suppressed)
            fprintf(stderr, "\",\"suppressed\":%llu}\n",
                    (unsigned long long)suppressed);
        else
            fputs("\"}\n", stderr);
    } else {
        fprintf(stderr, "%s.%03ldZ %-5s loop=%u %s", when,
                ts.tv_nsec / 1000000, level_names[level], loop, msg);
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
