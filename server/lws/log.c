/*
 * server/lws/log.c - one line per event: time, level, loop, message; as text or
 * as JSON lines. Peer-caused lines (srv_log_peer, the hub's log hook, lws's
 * warnings) are rate-limited per client address (server/base/peerlog.h: a
 * bucket per address in an LRU table of SRV_PEERLOG_ENTRIES, under one
 * bucket for all), so one noisy client cannot hide another's lines nor a
 * crowd flood the log. The address is that of the connection whose work
 * the thread is doing (hub_log_conn, hub/base/log.h; server/lws/peer.c resolves it,
 * through trusted proxies with --trusted-proxies) and is written with the
 * line; lines logged outside any connection's work (timers, deliveries)
 * share the entry of the unknown address. The next line of an address
 * that gets through says how many of its lines were suppressed and over
 * how long; what no line said comes in a summary at most every
 * SRV_PEERLOG_REPORT_MS (srv_log_tick). Peer-supplied bytes are escaped,
 * so a line is always one line and JSON lines are valid JSON.
 *
 * Thread: any; one mutex keeps lines whole and guards the table.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "hub/base/json_escape.h"
#include "hub/base/log.h"
#include "server/base/peerlog.h"
#include "server/lws/srv.h"

static int log_level = HUB_LOG_INFO;
static enum srv_log_format log_format = SRV_LOG_TEXT;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct srv_peerlog *peerlog;

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

int srv_log_init(int level, enum srv_log_format fmt)
{
    static const struct srv_peerlog_params params = {
        SRV_PEERLOG_ADDR_BURST, SRV_PEERLOG_ADDR_PER_S,
        SRV_PEERLOG_ALL_BURST, SRV_PEERLOG_ALL_PER_S,
    };
    uint64_t seed = 0;

    log_level = level;
    log_format = fmt;
    setvbuf(stderr, stderr_buf, _IOFBF, sizeof(stderr_buf));
    /* The hash seed keeps a sprayer of addresses from choosing ones that
     * share a chain; without getrandom the clock is still unknown to it. */
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
        seed = srv_now_ms() ^ (uint64_t)(uintptr_t)&seed;
    peerlog = srv_peerlog_create(SRV_PEERLOG_ENTRIES, &params, seed,
                                 srv_now_ms());
    return peerlog ? 0 : -ENOMEM;
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
        } else if (json && hub_json_needs_escape(*s, HUB_JSON_ESC_DEL)) {
            char esc[HUB_JSON_ESC_MAX];

            fwrite(esc, 1, hub_json_escape_byte(*s++, HUB_JSON_ESC_DEL, esc),
                   f);
        } else if (!json && (*s < 0x20 || *s == 0x7f)) {
            fprintf(f, "\\x%02x", *s++);
        } else {
            fputc(*s++, f);
        }
    }
}

/* What a peer line carries besides its message; NULL for other lines. */
struct peer_line {
    const char *addr;              /* formatted; NULL: no known address */
    struct srv_peerlog_note note;
    uint64_t now_ms;
};

static void emit(int level, unsigned loop, const char *msg,
                 const struct peer_line *pl)
{
    struct timespec ts;
    struct tm tm;
    char when[32];
    unsigned long long n = pl ? pl->note.suppressed : 0, secs = 0;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    /* "in the last Xs": from the first suppressed line, rounded up. */
    if (n)
        secs = (pl->now_ms - pl->note.since_ms + 999) / 1000;
    if (log_format == SRV_LOG_JSON) {
        fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"loop\":%u,",
                when, ts.tv_nsec / 1000000, level_names[level], loop);
        if (pl && pl->addr)
            fprintf(stderr, "\"peer\":\"%s\",", pl->addr);
        fputs("\"msg\":\"", stderr);
        put_escaped(stderr, msg, true);
        if (n)
            fprintf(stderr, "\",\"suppressed\":%llu,\"suppressed_s\":%llu}\n",
                    n, secs ? secs : 1);
        else
            fputs("\"}\n", stderr);
    } else {
        fprintf(stderr, "%s.%03ldZ %-5s loop=%u ", when,
                ts.tv_nsec / 1000000, level_names[level], loop);
        if (pl && pl->addr)
            fprintf(stderr, "peer=%s ", pl->addr);
        put_escaped(stderr, msg, false);
        if (n)
            fprintf(stderr, " (%llu line%s from %s suppressed in the last "
                            "%llus)",
                    n, n == 1 ? "" : "s",
                    pl->addr ? pl->addr : "no known address",
                    secs ? secs : 1);
        fputc('\n', stderr);
    }
    fflush(stderr);
}

static void vlog(bool peer, int level, unsigned loop, const char *fmt,
                 va_list ap)
{
    char msg[1024], addr[SRV_PEERADDR_STRLEN];
    struct srv_peeraddr a;
    struct peer_line pl = { NULL, { 0, 0 }, 0 };

    if (level > log_level)
        return;
    /* Whose line: resolved before the lock (it may ask the kernel). */
    memset(&a, 0, sizeof(a));
    if (peer && hub_log_conn && srv_peer_get(hub_log_conn, &a))
        pl.addr = srv_peeraddr_format(&a, addr);
    pthread_mutex_lock(&log_mu);
    if (peer && peerlog) {
        pl.now_ms = srv_now_ms();
        if (!srv_peerlog_admit(peerlog, &a, pl.now_ms, &pl.note)) {
            pthread_mutex_unlock(&log_mu);
            return;
        }
    }
    vsnprintf(msg, sizeof(msg), fmt, ap);
    emit(level, loop, msg, peer ? &pl : NULL);
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

/*
 * The suppressions no later line of their address reported (the address
 * went quiet, or was evicted from the table), in one warning line with the
 * largest few: "peer log: 523 lines from 3 addresses suppressed in the
 * last 12s: 127.0.0.1 500, 192.0.2.7 20, - 3".
 */
void srv_log_tick(uint64_t now_ms)
{
    struct srv_peerlog_report r;
    char line[512], addr[SRV_PEERADDR_STRLEN];
    size_t n;

    pthread_mutex_lock(&log_mu);
    if (!peerlog || !srv_peerlog_sweep(peerlog, now_ms, &r) ||
        HUB_LOG_WARN > log_level) {
        pthread_mutex_unlock(&log_mu);
        return;
    }
    n = (size_t)snprintf(line, sizeof(line),
                         "peer log: %llu line%s from %u address%s "
                         "suppressed in the last %llus:",
                         (unsigned long long)r.lines, r.lines == 1 ? "" : "s",
                         r.addrs + r.gone_addrs,
                         r.addrs + r.gone_addrs == 1 ? "" : "es",
                         (unsigned long long)((now_ms - r.since_ms + 999) /
                                              1000));
    for (unsigned i = 0; i < r.n_top && n < sizeof(line); i++)
        n += (size_t)snprintf(line + n, sizeof(line) - n, "%s %s %u",
                              i ? "," : "",
                              srv_peeraddr_format(&r.top[i].addr, addr),
                              r.top[i].lines);
    if (r.gone_lines && n < sizeof(line))
        snprintf(line + n, sizeof(line) - n,
                 "%s %llu from %u address%s no longer tracked",
                 r.n_top ? "," : "", (unsigned long long)r.gone_lines,
                 r.gone_addrs, r.gone_addrs == 1 ? "" : "es");
    emit(HUB_LOG_WARN, 0, line, NULL);
    pthread_mutex_unlock(&log_mu);
}
