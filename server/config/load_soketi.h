/*
 * server/config/load_soketi.h - soketi's configuration read as lubdub's:
 * its SOKETI_* environment variables and the config.json soketi takes
 * with `soketi start --config=FILE`, mapped onto lubdub's options and app
 * keys where they mean the same thing (docs/MIGRATING.md lists every name,
 * mapped or not). What does not map is warned about, never an error.
 *
 * Thread: main thread, while the configuration loads.
 */
#ifndef SRV_LOAD_SOKETI_H
#define SRV_LOAD_SOKETI_H


#include <jansson.h>

struct srv__load;

/* The variables' prefix. */
#define SRV_SOKETI_PREFIX "SOKETI_"

/*
 * Apply the SOKETI_* variables of envp (NULL-terminated "K=V" strings; may
 * be NULL) that map, before the LUBDUB_* ones: a LUBDUB_* variable for
 * the same option wins, and when both are set to different values one
 * warning names both. An unmapped SOKETI_* name is warned about. The
 * warnings are given on the process's first load only (the environment
 * cannot change after it). 0 or a negative errno with one line in ld->err.
 */
int srv_soketi_apply_env(struct srv__load *ld, char **envp);

/*
 * When *root (a JSON object, owned) has soketi's shape (no "apps", and a
 * key soketi knows that lubdub does not, such as "appManager.array.apps",
 * "debug" or "adapter"), apply its options now and replace *root with the
 * lubdub file still to be read: {"apps": [...]}, each soketi app object
 * translated. Keys that do not map are warned about. Any other root is
 * left as it is. 0 or a negative errno with one line in ld->err (*root
 * is then still owned by the caller).
 */
int srv_soketi_file(struct srv__load *ld, json_t **root);

/* Tests: forget that the first load has been (a new process, as far as
 * the warnings go). */
void srv_soketi_forget_started(void);

#endif
