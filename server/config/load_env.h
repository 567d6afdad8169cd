/*
 * server/config/load_env.h - the LUBDUB_* environment variables.
 *
 * Thread: main thread, while the configuration loads.
 */
#ifndef SRV_LOAD_ENV_H
#define SRV_LOAD_ENV_H

struct srv__load;

/* The value of name in envp (NULL-terminated "K=V" strings; may be
 * NULL), or NULL. */
const char *srv__getenv(char **envp, const char *name);

/* Apply every LUBDUB_* variable the table knows, and warn about each
 * other LUBDUB_* name (ld->cfg->warnings). 0 or a negative errno with one
 * line in ld->err. */
int srv__apply_env(struct srv__load *ld, char **envp);

#endif
