/*
 * server/lws/lwslog.c - log bridges: lws's lines into server/lws/log.c (filtered
 * and rate-limited), the hub's log hook onto the peer rate limit, and the
 * _lws_log/_lws_logv replacements.
 *
 * Thread: any (lws and the hub log from every loop).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "server/lws/srv.h"

static void lws_emit(int level, const char *line)
{
    size_t n = strlen(line);

    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        n--;
    /* A header over SRV_HEADER_ONE_MAX: the hub answers 431 and logs. */
    if (strncmp(line, "header ", 7) == 0 && strstr(line, "exceeds limit"))
        return;
    /* Past SRV_HEADER_BYTES lws closes without a status (no hook lets
     * the hub answer): peer-caused, so rate-limited, not an error. */
    if (strncmp(line, "Ran out of header data space", 28) == 0) {
        srv_log_peer_event(HUB_LOG_INFO, 0,
                           HUB_LOG_F(.event = "request_refused",
                                     .reason = "headers_too_big"),
                           "request headers over %u bytes: closed without a "
                           "response", SRV_HEADER_BYTES);
        return;
    }
    if (strncmp(line, "More hdr frags than we can deal with", 36) == 0) {
        srv_log_peer_event(HUB_LOG_INFO, 0,
                           HUB_LOG_F(.event = "request_refused",
                                     .reason = "too_many_headers"),
                           "request with too many header lines: "
                           "closed without a response");
        return;
    }
    /* lws warns mostly about what peers do (bad headers, refused
     * upgrades), so its warnings share the peer rate limit. */
    if (level == LLL_ERR)
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "lws"),
                      "lws: %.*s", (int)n, line);
    else
        srv_log_peer_event(HUB_LOG_WARN, 0,
                           HUB_LOG_F(.event = "lws"),
                           "lws: %.*s", (int)n, line);
}

/*
 * lws 4.1.6 as Debian builds it formats every log line into one global
 * buffer inside _lws_logv() and hands that buffer to the emit callback
 * (ThreadSanitizer: vsnprintf from _lws_logv writes a global in
 * libwebsockets.so's data, which lws_emit() then reads). With one lws
 * context per thread, two loops logging at once overwrite each other's line
 * while it is read: TSan reports the race when two loops refuse upgrades at
 * the same moment. lws calls its own _lws_log()/_lws_logv() through the PLT, so the
 * definitions below, in the executable, take their place: same public
 * signatures (lws-logs.h), a buffer on the caller's stack, and the levels
 * srv_loops_create() asks lws for.
 */
#define SRV_LWS_LEVELS (LLL_ERR | LLL_WARN)

void _lws_logv(int filter, const char *format, va_list vl)
{
    char line[256];

    if (!(filter & SRV_LWS_LEVELS))
        return;
    vsnprintf(line, sizeof(line), format, vl);
    lws_emit(filter, line);
}

void _lws_log(int filter, const char *format, ...)
{
    va_list ap;

    va_start(ap, format);
    _lws_logv(filter, format, ap);
    va_end(ap);
}

/* The hub's lines are charged to the peer whose work the thread is doing;
 * nothing is formatted when the level is off. */
static void hub_log_bridge(int level, unsigned loop, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    srv_log_vevent(true, level, loop, NULL, fmt, ap);
    va_end(ap);
}

static void hub_log_event_bridge(int level, unsigned loop,
                                 const struct hub_log_fields *f,
                                 const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    srv_log_vevent(true, level, loop, f, fmt, ap);
    va_end(ap);
}

void srv_lwslog_install(void)
{
    /*
     * Nothing else in the program names _lws_logv/_lws_log: this call is
     * what links this object, and with it the two overrides above, into
     * the executable (a static library member nobody references is left
     * out, and lws's racy buffer would silently be back). The volatile
     * reads keep the references from being optimised away.
     */
    void (*volatile keep_logv)(int, const char *, va_list) = _lws_logv;
    void (*volatile keep_log)(int, const char *, ...) = _lws_log;

    (void)keep_logv;
    (void)keep_log;
    lws_set_log_level(SRV_LWS_LEVELS, lws_emit);
    hub_log = hub_log_bridge;
    hub_log_event = hub_log_event_bridge;
    hub_log_enabled = srv_log_enabled;
}
