/* hub/base/log.c - the default log hooks: nothing; and the thread's current
 * connection (see hub/base/log.h). */
#include "hub/base/log.h"

static void log_nothing(int level, unsigned loop, const char *fmt, ...)
{
    (void)level;
    (void)loop;
    (void)fmt;
}

hub_log_fn *hub_log = log_nothing;

static void log_event_nothing(int level, unsigned loop,
                              const struct hub_log_fields *f,
                              const char *fmt, ...)
{
    (void)level;
    (void)loop;
    (void)f;
    (void)fmt;
}

hub_log_event_fn *hub_log_event = log_event_nothing;

static bool log_disabled(int level)
{
    (void)level;
    return false;
}

hub_log_enabled_fn *hub_log_enabled = log_disabled;

_Thread_local void *hub_log_conn;
