/*
 * tests/unit/config_fixture.h - the configuration fixture the config unit
 * tests share (test_config_history.c, test_config_keys.c): one struct
 * srv_config reset to the defaults before each case and finished after
 * it, and an error buffer. Header-only: each test file gets its own copy
 * of the static fixture; the cases run one at a time.
 */
#ifndef TEST_CONFIG_FIXTURE_H
#define TEST_CONFIG_FIXTURE_H

#include <string.h>

#include "server/config/config.h"

struct fixture {
    struct srv_config cfg;
    char err[512];
};

static struct fixture the_fixture;

static int setup(void **state)
{
    memset(&the_fixture, 0, sizeof(the_fixture));
    srv_config_defaults(&the_fixture.cfg);
    *state = &the_fixture;
    return 0;
}

static int teardown(void **state)
{
    srv_config_fini(&((struct fixture *)*state)->cfg);
    return 0;
}

#endif
