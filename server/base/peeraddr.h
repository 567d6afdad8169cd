/*
 * server/base/peeraddr.h - a client's address: what the socket says, or, with
 * --trusted-proxies, what X-Forwarded-For says behind a trusted proxy.
 *
 * One representation for both families, 16 bytes: an IPv6 address, IPv4
 * as the IPv4-mapped ::ffff:a.b.c.d (so a dual-stack listener's mapped
 * peers and plain IPv4 ones are the same key). All zeros (::, never a
 * connected peer) means "not known".
 *
 * --trusted-proxies is a comma list of CIDRs (IPv4 and IPv6; a bare
 * address is one host) of at most SRV_PEERADDR_CIDRS_MAX entries. When
 * the socket's peer is in it, the client is the right-most
 * X-Forwarded-For entry that is not (each trusted proxy appends the
 * address it got the request from, so everything left of the first
 * untrusted entry was written by the client and may be forged). An entry
 * that is not an address stops the walk at the nearest hop known to be
 * good, the last trusted one. docs/RELIABILITY.md, "Whose address".
 *
 * Pure functions; no allocation. Thread: any.
 */
#ifndef SRV_PEERADDR_H
#define SRV_PEERADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct srv_peeraddr {
    uint8_t b[16];                 /* network order; IPv4 mapped */
};

/* Longest formatted address plus its NUL (INET6_ADDRSTRLEN). */
#define SRV_PEERADDR_STRLEN 46
/* Entries in --trusted-proxies: a deployment has a few proxy ranges. */
#define SRV_PEERADDR_CIDRS_MAX 64
/* Longest X-Forwarded-For entry read (an IPv6 address in brackets with a
 * port is 47); a longer one is not an address. */
#define SRV_PEERADDR_ENTRY_MAX 64

struct srv_peeraddr_cidr {
    struct srv_peeraddr net;       /* host bits cleared */
    uint8_t bits;                  /* 0..128, IPv4's counted from 96 */
};

struct srv_peeraddr_cidrs {
    unsigned n;
    struct srv_peeraddr_cidr c[SRV_PEERADDR_CIDRS_MAX];
};

/* Not the all-zero "not known". */
bool srv_peeraddr_is_set(const struct srv_peeraddr *a);
bool srv_peeraddr_equal(const struct srv_peeraddr *a,
                        const struct srv_peeraddr *b);

/* From getpeername()'s answer. 0, or -EAFNOSUPPORT (not IPv4 or IPv6). */
int srv_peeraddr_from_sockaddr(struct srv_peeraddr *a,
                               const struct sockaddr *sa, socklen_t len);

/*
 * One address of len bytes (no NUL needed): "192.0.2.1", "2001:db8::1",
 * and as X-Forwarded-For entries also carry them "192.0.2.1:8080",
 * "[2001:db8::1]" and "[2001:db8::1]:443". 0, or -EINVAL (a has not
 * changed).
 */
int srv_peeraddr_parse(struct srv_peeraddr *a, const char *s, size_t len);

/* Dotted quad for IPv4 (mapped), RFC 5952 text for IPv6, "-" when not
 * known. Returns buf (at least SRV_PEERADDR_STRLEN bytes). */
char *srv_peeraddr_format(const struct srv_peeraddr *a, char *buf);

/*
 * Parse a --trusted-proxies list ("10.0.0.0/8, 2001:db8::/32,
 * 192.0.2.7"): spaces around entries are ignored, host bits past the
 * prefix are cleared. 0, or -EINVAL with a one-line reason in err (an
 * entry that is not a CIDR, a prefix out of range, an empty entry, more
 * than SRV_PEERADDR_CIDRS_MAX).
 */
int srv_peeraddr_cidrs_parse(struct srv_peeraddr_cidrs *set, const char *list,
                             char *err, size_t errlen);

/* Is a inside one of set's ranges? */
bool srv_peeraddr_cidrs_match(const struct srv_peeraddr_cidrs *set,
                              const struct srv_peeraddr *a);

/*
 * The client behind peer, from the X-Forwarded-For value xff (len bytes,
 * several header lines joined with commas): the right-most entry not in
 * trusted, walking left only past trusted ones. *client is peer when
 * peer is not trusted (anyone can send the header) or xff is empty; the
 * last trusted hop when an entry is not an address (returns -EINVAL);
 * the left-most entry when every one is trusted. Returns 0 otherwise.
 */
int srv_peeraddr_forwarded(const struct srv_peeraddr_cidrs *trusted,
                           const struct srv_peeraddr *peer, const char *xff,
                           size_t len, struct srv_peeraddr *client);

#endif
