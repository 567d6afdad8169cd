#!/bin/sh
# tests/unit/no_session_fields.sh - server/ reaches a session only through
# hub/loop/session.h's functions and inline accessors (the session owns its
# state machine, docs/DESIGN.md). Fails, listing the lines, when a
# .c file under server/ names a struct hub_session field: any "s->" (the name
# every server function gives a session), or one of the session's state,
# receive, queue, ping, write and close fields through any pointer.
# Usage: no_session_fields.sh <source dir>
src=${1:-.}
fields='state|rx_(buf|len|cap|utf8)|q\.|ping_(due|seq|outstanding|sent_ms|sent_ns)|want_writable|close_(code|text|reason_id)|tx_ms|sid_(hi|lo)|socket_id|pong_timer|deadline_timer|app_counted'
hits=$(grep -nE -e '(^|[^A-Za-z0-9_])s->' -e "->(${fields})([^A-Za-z0-9_]|\$)" \
       $(find "$src/server" -name "*.c"))
if [ -n "$hits" ]; then
    echo "server/ names struct hub_session fields; use hub/loop/session.h:" >&2
    echo "$hits" >&2
    exit 1
fi
echo "server/**/*.c: no struct hub_session field named"
