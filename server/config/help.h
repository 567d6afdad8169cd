/*
 * server/config/help.h - --help: every option of the table with its flag,
 * environment variable, JSON key and default, wrapped to 78 columns,
 * grouped by topic (apps first). tests/unit/test_config.c checks
 * docs/CONFIG.md against the table it reads; tests/unit/test_help.c checks
 * that every row has a topic.
 *
 * Thread: main thread.
 */
#ifndef SRV_HELP_H
#define SRV_HELP_H

#include <stdio.h>

/* The topics of --help, in the order it prints them. */
enum srv_help_topic {
    SRV_HELP_APPS,
    SRV_HELP_LISTEN,     /* listen and TLS */
    SRV_HELP_LIMITS,
    SRV_HELP_LIVENESS,
    SRV_HELP_CLUSTER,
    SRV_HELP_WEBHOOKS,
    SRV_HELP_OPERATIONS,
    SRV_HELP_TOPICS      /* how many */
};

/* Print --help: every option with flag, env var, JSON key, default, by
 * topic. */
void srv_config_print_help(FILE *out);

/* The topic of the option called name ("ping_interval"), or -ENOENT. */
int srv_config_help_topic(const char *name);
/* A topic's heading as --help prints it (borrowed, static); NULL when t
 * is no topic. */
const char *srv_config_help_topic_title(enum srv_help_topic t);

#endif
