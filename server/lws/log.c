/*
 * server/lws/log.c - one line per event: time, level, loop, message; as text or
 * as JSON lines, the JSON ones with the event's fields (hub/base/log.h;
 * server/base/logline.c writes a line, docs/LOGS.md is the schema), each
 * line prefixed with its "<N>" priority when --log-priority says so or
 * stderr is the journal. Peer-caused lines (srv_log_peer, the hub's log hook, lws's
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
#include <stdlib.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "hub/base/log.h"
#include "server/base/logline.h"
#include "server/base/peerlog.h"
#include "server/lws/srv.h"

static int log_level = HUB_LOG_INFO;
static enum srv_log_format log_format = SRV_LOG_TEXT;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static bool log_priority;
static struct srv_peerlog *peerlog;
/* The node id (--redis), written on every JSON line; "" without. Under
 * log_mu: the webhook thread may log while the cluster starts. */
static char log_node[128];

int srv_log_level_parse(const char *s)
{
    for (int i = HUB_LOG_ERR; i <= HUB_LOG_DEBUG; i++)
        if (s && strcasecmp(s, srv_logline_level_name(i)) == 0)
            return i;
    return -1;
}

/*
 * stderr is unbuffered: every fputc of an escaped message was a write of
 * its own, so a reader of the pipe (journald, a container runtime, the
 * tests) could see half a line. With a buffer larger than any line
 * (SRV_LOGLINE_MAX: the message and the fields escaped at most six bytes a
 * byte, plus the rest), emit()'s fflush writes each line in one write(2).
 */
static char stderr_buf[SRV_LOGLINE_MAX];

int srv_log_init(int level, enum srv_log_format fmt,
                 enum srv_log_priority prio)
{
    static const struct srv_peerlog_params params = {
        SRV_PEERLOG_ADDR_BURST, SRV_PEERLOG_ADDR_PER_S,
        SRV_PEERLOG_ALL_BURST, SRV_PEERLOG_ALL_PER_S,
    };
    uint64_t seed = 0;

    log_level = level;
    log_format = fmt;
    log_priority = prio == SRV_LOG_PRIO_ON ||
                   (prio == SRV_LOG_PRIO_AUTO &&
                    srv_logline_is_journal(getenv("JOURNAL_STREAM"),
                                           STDERR_FILENO));
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

/* What a peer line carries besides its message. */
struct peer_line {
    const char *addr;              /* formatted; NULL: no known address */
    struct srv_peerlog_note note;
    uint64_t now_ms;
};

/* Under log_mu. */
static void emit(int level, unsigned loop, const struct hub_log_fields *f,
                 const char *msg, const struct peer_line *pl)
{
    struct srv_logline ln = {
        .level = level, .loop = loop, .node = log_node[0] ? log_node : NULL,
        .peer = pl ? pl->addr : NULL, .f = f, .msg = msg,
    };

    clock_gettime(CLOCK_REALTIME, &ln.ts);
    /* "in the last Xs": from the first suppressed line, rounded up. */
    if (pl && pl->note.suppressed) {
        unsigned long long secs =
            (pl->now_ms - pl->note.since_ms + 999) / 1000;

        ln.suppressed = pl->note.suppressed;
        ln.suppressed_s = secs ? secs : 1;
    }
    srv_logline_write(stderr, &ln, log_format == SRV_LOG_JSON, log_priority);
    fflush(stderr);
}

void srv_log_vevent(bool peer, int level, unsigned loop,
                    const struct hub_log_fields *f, const char *fmt,
                    va_list ap)
{
    char msg[SRV_LOGLINE_MSG_MAX], addr[SRV_PEERADDR_STRLEN];
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
    emit(level, loop, f, msg, peer ? &pl : NULL);
    pthread_mutex_unlock(&log_mu);
}

void srv_log(int level, unsigned loop, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    srv_log_vevent(false, level, loop, NULL, fmt, ap);
    va_end(ap);
}

void srv_log_peer(int level, unsigned loop, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    srv_log_vevent(true, level, loop, NULL, fmt, ap);
    va_end(ap);
}

void srv_log_event(int level, unsigned loop, const struct hub_log_fields *f,
                   const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    srv_log_vevent(false, level, loop, f, fmt, ap);
    va_end(ap);
}

void srv_log_peer_event(int level, unsigned loop,
                        const struct hub_log_fields *f, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    srv_log_vevent(true, level, loop, f, fmt, ap);
    va_end(ap);
}

void srv_log_set_node(const char *node)
{
    pthread_mutex_lock(&log_mu);
    snprintf(log_node, sizeof(log_node), "%s", node ? node : "");
    pthread_mutex_unlock(&log_mu);
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
    emit(HUB_LOG_WARN, 0, HUB_LOG_F(.event = "peer_log_suppressed"), line,
         NULL);
    pthread_mutex_unlock(&log_mu);
}
