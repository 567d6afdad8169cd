/*
 * tests/fuzz/fuzz_config.c - libFuzzer target for the JSON config loader
 * (server/config/config.c through srv_config_load_buffer(), the --config path
 * without the file read).
 *
 * The input is one config text. It is loaded onto the defaults, checked
 * with srv_config_validate(), then loaded a second time onto the result
 * (so every owned string and app is replaced once, which is where the
 * borrowed-versus-owned bookkeeping can go wrong), and freed. Besides
 * memory errors and leaks it checks that a failed load or check always
 * leaves one NUL-terminated line in err (control characters from the
 * input escaped), and that a config that loaded
 * and validated keeps its invariants (at least one app, each with an
 * id, key and secret; a TLS key only with a certificate).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/config/config.h"
#include "tests/fuzz/fuzz.h"

static void check_err(int rc, const char *err, size_t cap)
{
    size_t n = strnlen(err, cap);

    CHECK(n < cap);
    if (rc)
        CHECK(n > 0);
    /* One line, whatever the input: no control characters. */
    for (size_t i = 0; i < n; i++)
        CHECK((unsigned char)err[i] >= 0x20 && err[i] != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct srv_config cfg;
    char err[512];
    /* An exact-size copy: the loader must not read past len. */
    char *text = malloc(size ? size : 1);
    int rc;

    CHECK(text != NULL);
    memcpy(text, data, size);
    srv_config_defaults(&cfg);
    memset(err, 'x', sizeof(err));
    rc = srv_config_load_buffer(&cfg, text, size, "fuzz.json", err,
                                sizeof(err));
    check_err(rc, err, sizeof(err));
    if (rc == 0) {
        memset(err, 'x', sizeof(err));
        rc = srv_config_validate(&cfg, err, sizeof(err));
        check_err(rc, err, sizeof(err));
        if (rc == 0) {
            CHECK(cfg.n_apps >= 1);
            for (unsigned i = 0; i < cfg.n_apps; i++)
                CHECK(cfg.apps[i].id && *cfg.apps[i].id && cfg.apps[i].key &&
                      cfg.apps[i].secret);
            CHECK(!cfg.tls_cert == !cfg.tls_key);
        }
        /* Again on top: every owned value is replaced, none leaks. */
        rc = srv_config_load_buffer(&cfg, text, size, "fuzz.json", err,
                                    sizeof(err));
        check_err(rc, err, sizeof(err));
    }
    srv_config_fini(&cfg);
    free(text);
    return 0;
}
