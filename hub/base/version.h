/* hub/base/version.h - the version of lubdub, taken from CMake's
 * project(lubdub VERSION ...) at build time, and the git commit it was
 * built from (hub/base/commit.cmake). Any thread. */
#ifndef HUB_VERSION_H
#define HUB_VERSION_H

/* "0.2.0" (borrowed, static). */
const char *hub_version(void);

/* The commit: 12 hex digits of `git rev-parse --short=12 HEAD`, with
 * "-dirty" when tracked files differed from it, the builder's
 * LUBDUB_COMMIT, or "unknown" outside a git checkout (borrowed, static;
 * only 0-9 A-Z a-z . _ + -, so it needs no escaping in JSON or a
 * Prometheus label). */
const char *hub_commit(void);

#endif
