/*
 * server/config/value.h - one option's value: parsed from text into its field
 * (the same parser for every source, so a value means the same thing
 * wherever it is written and its errors read the same), spelled back for
 * messages, and freed. The fields live in a struct srv_config or a struct
 * hub_app, at the offset the option's row gives.
 *
 * Ownership: a string field pointing at table text (a default or a choice,
 * srv__is_borrowed()) is borrowed; any other was strdup()ed here and is
 * owned by its struct.
 *
 * Thread: main thread, while the configuration loads or is checked.
 */
#ifndef SRV_VALUE_H
#define SRV_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub_app;
struct srv_config;
struct srv_option_desc;

/* Room for a secret file's error: its path and errno's text. */
#define SRV_CFG_WHY_MAX 600

/* d's field in base (a struct srv_config or a struct hub_app). */
void *srv__field(void *base, const struct srv_option_desc *d);
/* A numeric field's value, whatever its width. */
uint64_t srv__get_uint(const void *base, const struct srv_option_desc *d);
void srv__put_uint(void *base, const struct srv_option_desc *d, uint64_t v);

/* Free *slot unless it is borrowed table text; *slot becomes NULL. */
void srv__free_string(char **slot);
/* Wipe a secret read from a file, then free it; *slot becomes NULL. */
void srv__free_secret(char **slot);

/* Shortest exact spelling of ms: "0", "25s", "2m", "1h" or "1500ms". */
void srv__fmt_ms(uint64_t ms, char *buf, size_t len);
/* "1GiB", "64KiB" or bytes. */
void srv__fmt_size(uint64_t b, char *buf, size_t len);
/* A value of d's type in its own syntax, for range messages. */
void srv__fmt_value(const struct srv_option_desc *d, uint64_t v, char *buf,
                    size_t len);
/* "label: shown is out of range lo..hi" in err; returns -EINVAL. */
int srv__range_err(const struct srv_option_desc *d, const char *label,
                   const char *shown, char *err, size_t errlen);

/*
 * Set d's field in base from text. label names the option and its source
 * in errors: "--port", "LUBDUB_PORT" or "lubdub.json: \"port\"". When
 * borrow is true a string value is stored as is (it must be table text);
 * otherwise it is copied. 0, -EINVAL or -ENOMEM with one line in err.
 */
int srv__set_text(void *base, const struct srv_option_desc *d,
                  const char *text, const char *label, bool borrow,
                  char *err, size_t errlen);

/* Free an app's owned fields (the default app's id, key and secret may
 * be borrowed table text). */
void srv__app_fini(struct hub_app *app);
/* Drop the file's apps: the view goes back to the default app. */
void srv__file_apps_fini(struct srv_config *cfg);

#endif
