/*
 * server/config/new_app.h - --new-app: a new app's id, key and secret,
 * drawn from the kernel's random source (getrandom(2)), printed as a JSON
 * object to paste into the config file's "apps" array.
 *
 * The shapes follow Pusher's, which client and server libraries expect:
 * a numeric id (7 digits, 1000000..9999999), a key of 20 lowercase hex
 * digits (80 bits) and a secret of 32 (128 bits; Pusher's are 20). Hex
 * needs no escaping anywhere a secret travels (JSON, .env files, shells).
 *
 * Thread: any.
 */
#ifndef SRV_NEW_APP_H
#define SRV_NEW_APP_H

#include <stdio.h>

#define SRV_NEW_APP_ID_LEN 7
#define SRV_NEW_APP_KEY_LEN 20
#define SRV_NEW_APP_SECRET_LEN 32

struct srv_new_app {
    char id[SRV_NEW_APP_ID_LEN + 1];
    char key[SRV_NEW_APP_KEY_LEN + 1];
    char secret[SRV_NEW_APP_SECRET_LEN + 1];
};

/* Draw a new app. 0, or a negative errno when the kernel gives no random
 * bytes (a is then wiped). */
int srv_new_app_make(struct srv_new_app *a);

/* Print a as a JSON object ({"id": ..., "key": ..., "secret": ...}, one
 * key a line) and a newline. */
void srv_new_app_print(FILE *out, const struct srv_new_app *a);

#endif
