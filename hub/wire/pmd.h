/*
 * hub/wire/pmd.h - permessage-deflate negotiation (RFC 7692 sections 5 and
 * 7): read a client's Sec-WebSocket-Extensions offers and write the
 * server's answer, or decline.
 *
 * The hub compresses without context takeover on both sides (each message
 * is deflated and inflated on its own, so no per-session zlib state lives
 * between messages) and with the full 32 KiB window in both directions, so
 * its answer always names server_no_context_takeover and
 * client_no_context_takeover, and it accepts server_max_window_bits only
 * as 15. Declining is always safe: the server then answers without the
 * extension and the connection goes on uncompressed; the upgrade never
 * fails here.
 *
 * Underneath is a scanner of the header's grammar (RFC 6455 section 9.1
 * over RFC 7230's list and quoted-string rules) that hands out the offers
 * and their parameters one at a time, for any caller that reads an
 * extension header.
 *
 * Pure functions on bytes, no allocation, no recursion: any thread. Every
 * loop is bounded by the length given; nothing reads past it, whatever the
 * bytes (the input is a peer's).
 */
#ifndef HUB_PMD_H
#define HUB_PMD_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A buffer of this many bytes always holds hub_pmd_negotiate()'s answer
 * with its NUL (the longest answer, with both window parameters, is 128
 * characters).
 */
#define HUB_PMD_ANSWER_MAX 160

/*
 * Choose the answer to a client's Sec-WebSocket-Extensions value.
 *
 * hdr/len is the whole value (borrowed; the caller joins several header
 * lines with ", "); it may be NULL when len is 0, and may hold any bytes,
 * NUL included. The offers are read in order and the first acceptable
 * permessage-deflate offer wins; other extensions are passed over. An
 * offer is acceptable when it is well formed and each of its parameters
 * is known, given once, and has a value this server takes:
 *   server_no_context_takeover, client_no_context_takeover: no value;
 *   server_max_window_bits: 15 (the answer echoes server_max_window_bits=15);
 *   client_max_window_bits: no value (answered as 15) or 8..15 (answered
 *     as given).
 * Values are decimal without a leading zero and may be quoted ("15").
 * Names compare without regard to case.
 *
 * Returns 1 and writes the NUL-terminated answer value into out (for
 * example "permessage-deflate; server_no_context_takeover;
 * client_no_context_takeover"), or 0 when no offer is acceptable or the
 * answer does not fit in cap bytes (then out, when cap > 0, holds "").
 */
int hub_pmd_negotiate(const char *hdr, size_t len, char *out, size_t cap);

/*
 * The scanner. Fields are private; hub_pmd_scan_init() sets them.
 *
 *   struct hub_pmd_scan s;
 *   const char *name; size_t nlen;
 *   struct hub_pmd_param p;
 *   hub_pmd_scan_init(&s, hdr, len);
 *   while ((rc = hub_pmd_scan_offer(&s, &name, &nlen)) != 0) {
 *       if (rc < 0) continue;                  (a malformed offer)
 *       while ((rc = hub_pmd_scan_param(&s, &p)) > 0)
 *           ...
 *       if (rc < 0) ...                        (the offer is malformed)
 *   }
 *
 * An offer's parameters left unread are skipped by the next
 * hub_pmd_scan_offer(). Empty list elements (", ,") are skipped, as RFC
 * 7230 section 7 asks of a recipient. After a malformed offer the scanner
 * goes on at the next comma that is outside a quoted-string.
 */
struct hub_pmd_scan {
    const char *p;      /* private: the next byte to read */
    size_t left;        /* private: bytes left from p */
    bool in_offer;      /* private: the current offer's parameters follow */
};

/* A parameter: spans into the scanned bytes (borrowed, as they are). */
struct hub_pmd_param {
    const char *name;   /* a token */
    size_t name_len;
    const char *value;  /* NULL when the parameter has no value; else the
                         * token, or the bytes between the quotes with
                         * their backslash escapes still in */
    size_t value_len;
    bool quoted;
};

/* Start scanning hdr/len (borrowed; NULL allowed when len is 0). */
void hub_pmd_scan_init(struct hub_pmd_scan *s, const char *hdr, size_t len);

/*
 * Move to the next offer. Returns 1 with *name and *name_len set to its
 * extension token, 0 when the list is over, -EINVAL when the element is
 * malformed (the scanner has moved past it; call again for the next).
 */
int hub_pmd_scan_offer(struct hub_pmd_scan *s, const char **name,
                       size_t *name_len);

/*
 * The current offer's next parameter. Returns 1 with *p set, 0 when the
 * offer has no more, -EINVAL when the rest of the offer is malformed
 * (";;", "a=", an unterminated quote, a byte no token may hold; the
 * scanner has moved past the offer).
 */
int hub_pmd_scan_param(struct hub_pmd_scan *s, struct hub_pmd_param *p);

/*
 * p's value with the quotes and escapes taken off, NUL-terminated, into
 * buf/cap. Returns its length, -ENOENT when p has no value, -ENOSPC when
 * it does not fit.
 */
int hub_pmd_param_value(const struct hub_pmd_param *p, char *buf, size_t cap);

#endif
