/*
 * server/base/logline.c - one log line written out, text or JSON, with its
 * fields and its priority prefix; and the journal test (see
 * server/base/logline.h).
 *
 * Thread: any; the caller serialises writes to one stream.
 */
#include "server/base/logline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hub/base/json_escape.h"

static const char *const level_names[] = { "error", "warn", "info", "debug" };
/* sd-daemon(3): SD_ERR, SD_WARNING, SD_INFO, SD_DEBUG. */
static const int level_prio[] = { 3, 4, 6, 7 };

static int level_index(int level)
{
    return level < HUB_LOG_ERR ? HUB_LOG_ERR
           : level > HUB_LOG_DEBUG ? HUB_LOG_DEBUG : level;
}

const char *srv_logline_level_name(int level)
{
    return level_names[level_index(level)];
}

int srv_logline_priority(int level)
{
    return level_prio[level_index(level)];
}

/*
 * Length of the well-formed UTF-8 sequence at s (1..4), or 0 when the bytes
 * there are not one: stray continuation bytes, overlongs, surrogates, code
 * points past U+10FFFF, or a sequence cut short (vsnprintf may truncate in
 * the middle of one, and so does a field's cut).
 */
static int utf8_len(const unsigned char *s, size_t left)
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
    if ((size_t)n > left)
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
 * Messages and fields can carry peer-supplied bytes (a URI, an app key, a
 * channel name). Each line stays one line and, in JSON, valid UTF-8 JSON:
 * control characters are escaped and bytes that are not UTF-8 become
 * U+FFFD (JSON) or \xNN (text). At most max bytes of str are read.
 */
static void put_escaped(FILE *f, const char *str, size_t max, bool json)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t left = strnlen(str, max);

    while (left) {
        int n = utf8_len(s, left);

        if (n == 0) {
            if (json)
                fputs("\\ufffd", f);
            else
                fprintf(f, "\\x%02x", *s);
            n = 1;
        } else if (n > 1) {
            fwrite(s, 1, (size_t)n, f);
        } else if (json && hub_json_needs_escape(*s, HUB_JSON_ESC_DEL)) {
            char esc[HUB_JSON_ESC_MAX];

            fwrite(esc, 1, hub_json_escape_byte(*s, HUB_JSON_ESC_DEL, esc), f);
        } else if (!json && (*s < 0x20 || *s == 0x7f)) {
            fprintf(f, "\\x%02x", *s);
        } else {
            fputc(*s, f);
        }
        s += n;
        left -= (size_t)n;
    }
}

/* ,"key":"value" when value is set. */
static void put_str(FILE *out, const char *key, const char *value)
{
    if (!value)
        return;
    fprintf(out, ",\"%s\":\"", key);
    put_escaped(out, value, HUB_LOG_FIELD_MAX, true);
    fputc('"', out);
}

static void put_num(FILE *out, const char *key, unsigned value)
{
    if (value)
        fprintf(out, ",\"%s\":%u", key, value);
}

static void write_json(FILE *out, const struct srv_logline *ln,
                       const char *when)
{
    /* A copy: read as fl.x, not through a pointer (no_session_fields.sh
     * looks for session fields' names after "->"). */
    const struct hub_log_fields fl =
        ln->f ? *ln->f : (struct hub_log_fields){ 0 };
    const struct hub_log_fields *f = ln->f ? &fl : NULL;

    fprintf(out, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"loop\":%u", when,
            ln->ts.tv_nsec / 1000000, srv_logline_level_name(ln->level),
            ln->loop);
    put_str(out, "node", ln->node);
    put_str(out, "event", f ? f->event : NULL);
    put_str(out, "peer", ln->peer ? ln->peer : f ? f->peer : NULL);
    if (f) {
        put_str(out, "app", f->app);
        put_str(out, "socket_id", fl.socket_id);
        put_str(out, "channel", f->channel);
        put_str(out, "user_id", f->user_id);
        put_num(out, "code", f->code);
        put_num(out, "status", f->status);
        put_str(out, "reason", f->reason);
        put_str(out, "url", f->url);
        put_str(out, "path", f->path);
        if (f->duration_ms)
            fprintf(out, ",\"duration_ms\":%llu", f->duration_ms);
    }
    fputs(",\"msg\":\"", out);
    put_escaped(out, ln->msg, SRV_LOGLINE_MSG_MAX, true);
    if (ln->suppressed)
        fprintf(out, "\",\"suppressed\":%llu,\"suppressed_s\":%llu}\n",
                ln->suppressed, ln->suppressed_s);
    else
        fputs("\"}\n", out);
}

static void write_text(FILE *out, const struct srv_logline *ln,
                       const char *when)
{
    unsigned long long n = ln->suppressed;

    fprintf(out, "%s.%03ldZ %-5s loop=%u ", when, ln->ts.tv_nsec / 1000000,
            srv_logline_level_name(ln->level), ln->loop);
    if (ln->peer)
        fprintf(out, "peer=%s ", ln->peer);
    put_escaped(out, ln->msg, SRV_LOGLINE_MSG_MAX, false);
    if (n)
        fprintf(out, " (%llu line%s from %s suppressed in the last %llus)", n,
                n == 1 ? "" : "s", ln->peer ? ln->peer : "no known address",
                ln->suppressed_s);
    fputc('\n', out);
}

void srv_logline_write(FILE *out, const struct srv_logline *ln, bool json,
                       bool priority)
{
    struct tm tm;
    char when[32];

    gmtime_r(&ln->ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    if (priority)
        fprintf(out, "<%d>", srv_logline_priority(ln->level));
    if (json)
        write_json(out, ln, when);
    else
        write_text(out, ln, when);
}

bool srv_logline_is_journal(const char *journal_stream, int fd)
{
    unsigned long long dev, ino;
    struct stat st;
    char *end;

    if (!journal_stream || !*journal_stream)
        return false;
    errno = 0;
    dev = strtoull(journal_stream, &end, 10);
    if (errno || end == journal_stream || *end != ':')
        return false;
    journal_stream = end + 1;
    ino = strtoull(journal_stream, &end, 10);
    if (errno || end == journal_stream || *end)
        return false;
    if (fstat(fd, &st))
        return false;
    return (unsigned long long)st.st_dev == dev &&
           (unsigned long long)st.st_ino == ino;
}
