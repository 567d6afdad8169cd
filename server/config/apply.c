/*
 * server/config/apply.c - one source's value applied to the configuration
 * (server/config/apply.h): the default app's options refused once the file
 * lists "apps", and the secrets given as values noted, so that the same
 * secret's file can be refused once every source is read.
 *
 * Thread: main thread, while the configuration loads.
 */
#include "server/config/apply.h"
#include "server/config/config_error.h"
#include "server/config/options.h"
#include "server/config/settings.h"
#include "server/config/value.h"

#include <errno.h>
#include <stddef.h>

/* The secrets that also have a file option, by their value's field. */
static const size_t srv__given[] = {
    offsetof(struct srv_config, admin_token),
    offsetof(struct srv_config, metrics_token),
    offsetof(struct srv_config, app0.secret),
};

/* After a source set d: note whether it is a secret now given as a
 * value (an empty value unsets it, and the note with it). */
void srv__note_given(struct srv__load *ld,
                     const struct srv_option_desc *d)
{
    for (size_t i = 0; i < sizeof(srv__given) / sizeof(srv__given[0]); i++) {
        if (d->offset_ != srv__given[i])
            continue;
        if (*(char **)srv__field(ld->cfg, d))
            ld->given |= 1u << i;
        else
            ld->given &= ~(1u << i);
    }
}

/* Set an option from a source other than the defaults, with its checks. */
int srv__apply(struct srv__load *ld, const struct srv_option_desc *d,
               const char *text, const char *label)
{
    int rc;

    if ((d->flags & SRV_OPTF_DEFAULT_APP) && ld->file_has_apps) {
        srv_config_err(ld->err, ld->errlen, "%s: cannot change the default app "
                 "when %s lists \"apps\"; set it there", label, ld->file);
        return -EINVAL;
    }
    rc = srv__set_text(ld->cfg, d, text, label, false, ld->err, ld->errlen);
    if (!rc)
        srv__note_given(ld, d);
    return rc;
}
