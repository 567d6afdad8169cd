/*
 * server/config/help.c - --help (server/config/help.h): a usage paragraph,
 * then per option its flag and metavar, its help text and a line with its
 * environment variable, JSON key and default, each wrapped to 78 columns.
 *
 * Thread: main thread.
 */
#include "server/config/help.h"
#include "server/config/options.h"

#include <stdio.h>
#include <string.h>

/* One word of w bytes; a tab in it is a space the wrap may not break at
 * (json "redis_sentinel_password_file" stays on one line). */
static int srv__put_word(FILE *out, const char *text, size_t w)
{
    for (size_t i = 0; i < w; i++)
        fputc(text[i] == '\t' ? ' ' : text[i], out);
    return (int)w;
}

/* Print text wrapped to 78 columns, each line indented by indent spaces. */
static void srv__print_wrapped(FILE *out, const char *text, int indent)
{
    int col = 0;

    while (*text) {
        size_t w = strcspn(text, " ");

        if (col && col + 1 + (int)w > 78) {
            fputc('\n', out);
            col = 0;
        }
        if (!col)
            col = fprintf(out, "%*s", indent, "");
        else
            col += fprintf(out, " ");
        col += srv__put_word(out, text, w);
        text += w;
        while (*text == ' ')
            text++;
    }
    if (col)
        fputc('\n', out);
}

static const char *srv__metavar(const struct srv_option_desc *d, char *buf,
                                size_t len)
{
    size_t i;

    if (d->metavar)
        return d->metavar;
    switch (d->type) {
    case SRV_OPT_DURATION:
    case SRV_OPT_SECONDS:
        return "DURATION";
    case SRV_OPT_SIZE:
        return "SIZE";
    case SRV_OPT_CHOICE:
    case SRV_OPT_ENUM:
        buf[0] = '\0';
        for (i = 0; d->choices[i]; i++) {
            if (i)
                strncat(buf, "|", len - strlen(buf) - 1);
            strncat(buf, d->choices[i], len - strlen(buf) - 1);
        }
        return buf;
    default:
        return "VALUE";
    }
}

void srv_config_print_help(FILE *out)
{
    const struct srv_option_desc *opts;
    size_t n_opts = srv_config_options(&opts);
    size_t i;

    fputs("Usage: lubdub [OPTIONS]\n\n", out);
    srv__print_wrapped(out,
        "A Pusher Channels compatible WebSocket hub. Settings come from the "
        "built-in defaults, then the JSON file named by --config, then "
        "LUBDUB_* environment variables, then these flags; later sources "
        "win. Durations take 25s, 500ms, 2m, 1h or 1.5s (a bare number is "
        "milliseconds). Sizes take 64KiB or 1MiB (binary), 10k, 10KB or 1M "
        "(decimal) or bytes. Booleans take --flag, --no-flag or "
        "--flag=true|false|1|0. Apps beyond the single default one are "
        "listed in the file's \"apps\" array; see docs/CONFIG.md.", 0);
    fputc('\n', out);
    for (i = 0; i < n_opts; i++) {
        const struct srv_option_desc *d = &opts[i];
        char flag[64], env[64], line[256], mv[64];

        srv_config_option_name(d, SRV_SRC_FLAG, flag, sizeof(flag));
        if (d->short_flag)
            fprintf(out, "  -%c, %s", d->short_flag, flag);
        else if (d->type == SRV_OPT_BOOL)
            fprintf(out, "  %s, --no-%s", flag, flag + 2);
        else
            fprintf(out, "  %s %s", flag, srv__metavar(d, mv, sizeof(mv)));
        fputc('\n', out);
        srv__print_wrapped(out, d->help, 6);
        snprintf(line, sizeof(line), "env %s, json\t%s%s%s, default\t%s",
                     srv_config_option_name(d, SRV_SRC_ENV, env, sizeof(env))
                         ? "-" : env,
                     d->sources & SRV_SRC_FILE ? "\"" : "",
                     d->sources & SRV_SRC_FILE ? d->name : "-",
                     d->sources & SRV_SRC_FILE ? "\"" : "",
                     d->def ? d->def : "unset");
        srv__print_wrapped(out, line, 6);
    }
}
