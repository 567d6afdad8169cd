/* hub/base/version.h - the version of lubdub, taken from CMake's
 * project(lubdub VERSION ...) at build time. Any thread. */
#ifndef HUB_VERSION_H
#define HUB_VERSION_H

const char *hub_version(void);

#endif
