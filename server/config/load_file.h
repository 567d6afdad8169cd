/*
 * server/config/load_file.h - the JSON configuration file (--config): its
 * options, and its "apps" array with each app's keys, secret file and
 * webhooks.
 *
 * Thread: main thread, while the configuration loads.
 */
#ifndef SRV_LOAD_FILE_H
#define SRV_LOAD_FILE_H

#include <jansson.h>

struct srv__load;

/* Apply a parsed file (root, owned: released here; NULL when parsing
 * failed, with jerr saying why) named path. 0 or a negative errno with
 * one line in ld->err. */
int srv__load_root(struct srv__load *ld, json_t *root,
                   const json_error_t *jerr, const char *path);

/* Read, parse and apply the file at path. */
int srv__load_file(struct srv__load *ld, const char *path);

#endif
