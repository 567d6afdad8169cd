/* hub/base/version.c - hub_version(): the one place the version string lives
 * in the binary (/stats "version" and /metrics lubdub_build_info report
 * it). The string itself comes from CMakeLists.txt. */
#include "hub/base/version.h"

#ifndef HUB_VERSION
#error "HUB_VERSION must be defined by the build (CMake project VERSION)"
#endif

const char *hub_version(void)
{
    return HUB_VERSION;
}
