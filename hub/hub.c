/* hub/hub.c - placeholder until the hub core lands. */
#include "hub/hub.h"

const char *hub_version(void)
{
    return "0.1.0";
}
