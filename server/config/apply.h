/*
 * server/config/apply.h - one source's value applied to the configuration
 * (a flag, an environment variable or a key of the file), with what one
 * srv_config_load() remembers across its sources: whether the file lists
 * "apps" (then the default app's options are refused), which secrets
 * some source gave as a value (then the same secret's file is refused),
 * which source set each option, and the warnings the load gives.
 *
 * Thread: main thread, while the configuration loads.
 */
#ifndef SRV_APPLY_H
#define SRV_APPLY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct srv_config;
struct srv_option_desc;

/* State shared by the passes of one srv_config_load(). */
struct srv__load {
    struct srv_config *cfg;
    bool file_has_apps;
    const char *file;   /* borrowed; for error messages */
    char *err;
    size_t errlen;
    /* The secrets some source of this load set (bit i: srv__given[i] in
     * apply.c: admin token, metrics token, default app's secret), to
     * refuse one given both as a value and as a file. */
    unsigned given;
    /* The source being read (SRV_SRC_FILE, SRV_SRC_ENV or SRV_SRC_FLAG;
     * config.c sets it before each pass), noted in cfg->src_[] for each
     * option it sets (--print-config). */
    unsigned source;
};

/* After a source set d: note which source set it (ld->source), and
 * whether it is a secret now given as a value (an empty value unsets it,
 * and the note with it). */
void srv__note_given(struct srv__load *ld, const struct srv_option_desc *d);

/*
 * Add one warning line to ld->cfg->warnings (control characters written
 * as \xNN, as in errors). A warning never fails the load: out of memory,
 * it is dropped.
 */
void srv__warn(struct srv__load *ld, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Set an option from a source other than the defaults, with its checks;
 * label names the option and its source. 0 or a negative errno with one
 * line in ld->err. */
int srv__apply(struct srv__load *ld, const struct srv_option_desc *d,
               const char *text, const char *label);

/*
 * Set d's field in base (the configuration, or an app) from a JSON value:
 * strings and numbers go through the same text parser as flags ("25s" or
 * 25000 both work for a duration), booleans must be JSON booleans and
 * strings JSON strings (null unsets a nullable). label names the key; 0
 * or a negative errno with one line in ld->err. The caller notes the
 * source (srv__note_given()).
 */
int srv__apply_json(struct srv__load *ld, void *base,
                    const struct srv_option_desc *d, json_t *val,
                    const char *label);

#endif
