/*
 * server/base/fdlimit.h - the process's file-descriptor limit: what the hub
 * runs with and why.
 *
 * Every loop's lws context sizes its fd lookup table from the soft
 * RLIMIT_NOFILE when it is created, and the Debian (_DEBUG) build of lws
 * walks that whole table on every close (docs/LWS.md, "The debug build
 * scans the fd table on close"). So the limit is both the hub's socket
 * capacity and a per-close cost: srv_fd_limit_pick() chooses it from
 * --fd-limit, --max-connections and the hard limit (docs/CONFIG.md,
 * "File descriptors"); main() applies it before any context exists.
 */
#ifndef SRV_FDLIMIT_H
#define SRV_FDLIMIT_H

#include <stdint.h>

/* lws ignores a limit above this and sizes its tables for 2,560 fds
 * ("unreasonable ulimit -n workaround", lib/core/context.c). */
#define SRV_FD_LIMIT_MAX 10000000u
/* Below this the hub cannot hold its own listeners, pipes and files. */
#define SRV_FD_LIMIT_MIN 64u
/* With neither --fd-limit nor --max-connections, the hard limit but no
 * more than this: a container's 1,048,576 would make every close walk
 * 8 MB of lookup table per loop. */
#define SRV_FD_LIMIT_AUTO_CAP 65536u
/* Beyond --max-connections sessions: REST and refused connections in
 * flight, listeners, the loops' pipes, webhook, Redis and SQLite files. */
#define SRV_FD_LIMIT_RESERVE 1024u

enum srv_fd_limit_why {
    SRV_FDL_FLAG,        /* --fd-limit as given */
    SRV_FDL_FLAG_HARD,   /* --fd-limit above the hard limit: the hard one */
    SRV_FDL_CONNECTIONS, /* --max-connections plus the reserve */
    SRV_FDL_CONNECTIONS_HARD, /* that is above the hard limit: the hard one */
    SRV_FDL_HARD,        /* the hard limit */
    SRV_FDL_CAPPED,      /* the hard limit, capped at the auto cap */
};

/*
 * The soft limit to run with. want is --fd-limit (0 = derive one),
 * max_connections the hub-wide --max-connections (0 = none), hard the
 * hard RLIMIT_NOFILE (RLIM_INFINITY as UINT64_MAX). Never above hard or
 * SRV_FD_LIMIT_MAX. *why says which rule chose it.
 */
uint64_t srv_fd_limit_pick(uint64_t want, uint32_t max_connections,
                           uint64_t hard, enum srv_fd_limit_why *why);

/* One phrase for the startup log line, e.g. "--max-connections + 1024". */
const char *srv_fd_limit_why_str(enum srv_fd_limit_why why);

#endif
