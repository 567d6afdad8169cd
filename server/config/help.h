/*
 * server/config/help.h - --help: every option of the table with its flag,
 * environment variable, JSON key and default, wrapped to 78 columns.
 * tests/unit/test_config.c checks docs/CONFIG.md against the table it reads.
 *
 * Thread: main thread.
 */
#ifndef SRV_HELP_H
#define SRV_HELP_H

#include <stdio.h>

/* Print --help: every option with flag, env var, JSON key, default. */
void srv_config_print_help(FILE *out);

#endif
