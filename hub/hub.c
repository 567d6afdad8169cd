/* hub/hub.c - the hub library's version string (hub_version()), which
 * /metrics reports as lubdub_build_info. */
#include "hub/hub.h"

const char *hub_version(void)
{
    return "0.1.0";
}
