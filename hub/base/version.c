/* hub/base/version.c - hub_version() and hub_commit(): the one place the
 * version string and the commit live in the binary (`lubdub --version`,
 * /stats "version" and "commit", /metrics lubdub_build_info). The version
 * comes from CMakeLists.txt; the commit from the header hub/base/commit.cmake
 * generates into the build tree at every build, which only this file
 * includes, so a new commit recompiles nothing else. */
#include "hub/base/version.h"
#include "hub/base/version_commit.h"

#ifndef HUB_VERSION
#error "HUB_VERSION must be defined by the build (CMake project VERSION)"
#endif
#ifndef HUB_COMMIT
#error "HUB_COMMIT must come from <build>/gen/hub/base/version_commit.h"
#endif

const char *hub_version(void)
{
    return HUB_VERSION;
}

const char *hub_commit(void)
{
    return HUB_COMMIT;
}
