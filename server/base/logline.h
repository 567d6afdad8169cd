/*
 * server/base/logline.h - one log line written out: the text or the JSON
 * form, the structured fields of a line (hub/base/log.h's struct
 * hub_log_fields), the escaping of what peers supplied, and the
 * sd-daemon(3) priority prefix "<N>" that journald reads; and whether
 * stderr is the journal ($JOURNAL_STREAM).
 *
 * The text form is the message alone after the time, level, loop and
 * peer, as it always was: fields are for the JSON form, where each one
 * that is set becomes a key (docs/LOGS.md is the schema). Every string is
 * escaped (control characters; bytes that are not UTF-8 become \xNN in
 * text and U+FFFD in JSON), so a line is always one line and a JSON line
 * valid JSON; each field is cut at HUB_LOG_FIELD_MAX bytes, so a line is
 * at most SRV_LOGLINE_MAX bytes.
 *
 * Thread: any; the caller serialises writes to one stream.
 */
#ifndef SRV_LOGLINE_H
#define SRV_LOGLINE_H

#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "hub/base/log.h"

/* The message is cut at SRV_LOGLINE_MSG_MAX - 1 bytes by the caller. */
#define SRV_LOGLINE_MSG_MAX 1024
/* Escaped, a byte is at most 6 bytes ("\u001f"); 10 string fields and the
 * message, plus keys, numbers and the prefix. */
#define SRV_LOGLINE_MAX                                                      \
    (6 * (SRV_LOGLINE_MSG_MAX + 10 * HUB_LOG_FIELD_MAX) + 1024)

struct srv_logline {
    int level;                         /* HUB_LOG_ERR .. HUB_LOG_DEBUG */
    unsigned loop;
    struct timespec ts;                /* CLOCK_REALTIME */
    const char *node;                  /* --node-id with --redis, or NULL */
    const char *peer;                  /* the connection's address, or NULL
                                          (then f->peer, if any) */
    const struct hub_log_fields *f;    /* NULL: none */
    const char *msg;
    unsigned long long suppressed;     /* lines of this peer held back */
    unsigned long long suppressed_s;   /* over this many seconds */
};

/* "error", "warn", "info", "debug". */
const char *srv_logline_level_name(int level);

/* The sd-daemon(3) priority of a level: 3, 4, 6 or 7. */
int srv_logline_priority(int level);

/* Write ln as one line (with its newline) to out: JSON when json, else
 * text; prefixed with "<N>" when priority. */
void srv_logline_write(FILE *out, const struct srv_logline *ln, bool json,
                       bool priority);

/*
 * Is fd the stream journald reads? systemd sets $JOURNAL_STREAM to
 * "<device>:<inode>" (decimal) of the stream it connected a service's
 * stdout or stderr to; fd is that stream when its fstat() matches.
 * journal_stream may be NULL (not set): false.
 */
bool srv_logline_is_journal(const char *journal_stream, int fd);

#endif
