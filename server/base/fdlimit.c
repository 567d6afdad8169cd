/*
 * server/base/fdlimit.c - the process's file-descriptor limit: the soft
 * limit chosen from --fd-limit, --max-connections or the hard limit, and
 * set (server/base/fdlimit.h).
 */
#include "server/base/fdlimit.h"

uint64_t srv_fd_limit_pick(uint64_t want, uint32_t max_connections,
                           uint64_t hard, enum srv_fd_limit_why *why)
{
    uint64_t top = hard < SRV_FD_LIMIT_MAX ? hard : SRV_FD_LIMIT_MAX;
    uint64_t v;

    if (want) {
        *why = want > top ? SRV_FDL_FLAG_HARD : SRV_FDL_FLAG;
        return want > top ? top : want;
    }
    if (max_connections) {
        uint64_t extra = max_connections / 4;

        /* The operator said how many sessions: size the table to them,
         * not to whatever the hard limit happens to be. */
        v = (uint64_t)max_connections +
            (extra > SRV_FD_LIMIT_RESERVE ? extra : SRV_FD_LIMIT_RESERVE);
        if (v <= top) {
            *why = SRV_FDL_CONNECTIONS;
            return v;
        }
        *why = SRV_FDL_CONNECTIONS_HARD;
        return top;
    }
    if (top > SRV_FD_LIMIT_AUTO_CAP) {
        *why = SRV_FDL_CAPPED;
        return SRV_FD_LIMIT_AUTO_CAP;
    }
    *why = SRV_FDL_HARD;
    return top;
}

const char *srv_fd_limit_why_str(enum srv_fd_limit_why why)
{
    switch (why) {
    case SRV_FDL_FLAG:
        return "--fd-limit";
    case SRV_FDL_FLAG_HARD:
        return "--fd-limit is above the hard limit: the hard limit";
    case SRV_FDL_CONNECTIONS:
        return "--max-connections plus a reserve";
    case SRV_FDL_CONNECTIONS_HARD:
        return "--max-connections plus a reserve is above the hard limit: "
               "the hard limit";
    case SRV_FDL_HARD:
        return "the hard limit";
    case SRV_FDL_CAPPED:
        return "the hard limit capped at 65536; --fd-limit for more";
    }
    return "?";
}
