/*
 * server/config/load_argv.h - the command line: --flag VALUE, --flag=VALUE,
 * --flag / --no-flag for booleans, and the short -h.
 *
 * Thread: main thread, while the configuration loads.
 */
#ifndef SRV_LOAD_ARGV_H
#define SRV_LOAD_ARGV_H

#include <stdbool.h>

struct srv__load;

/*
 * Walk argv (argv[0] is the program name). With early set, only syntax is
 * checked and only --config and --help are applied, so the file can be
 * read before the flags that must override it; otherwise every flag is
 * applied in order. 0 or a negative errno with one line in ld->err.
 */
int srv__apply_argv(struct srv__load *ld, int argc, char **argv, bool early);

#endif
