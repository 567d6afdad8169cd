/*
 * server/config/didyoumean.h - the nearest name to a mistyped one: an
 * unknown JSON key ("ping_intervall") or LUBDUB_* variable gets the known
 * name it most likely meant ("ping_interval") in its error or warning.
 *
 * Nearness is the optimal string alignment distance (Levenshtein plus the
 * swap of two neighbours, "prot" -> "port", as one edit), with letters
 * compared without case. A name is suggested only when it is close enough
 * for the word's length: at most 1 edit for words of up to 4 characters, 2
 * up to 8, 3 beyond; so "id" never suggests "ip"'s unrelated neighbours
 * and a long key with two slips still finds its option. Ties go to the
 * name offered first.
 *
 * Pure: no allocation, no tables of its own (the caller offers its
 * candidates one by one), so the loaders and the unit test share it.
 * Words or candidates longer than SRV_DIDYOUMEAN_MAX bytes are never
 * matched (a key that long is no typo of an option).
 *
 * Thread: any.
 */
#ifndef SRV_DIDYOUMEAN_H
#define SRV_DIDYOUMEAN_H

#include <stddef.h>

/* The longest word or candidate compared, in bytes. */
#define SRV_DIDYOUMEAN_MAX 128

/* One search: the word and the best candidate so far. Fields private. */
struct srv_didyoumean {
    const char *word;   /* borrowed, for the search's life */
    const char *best;   /* borrowed: the caller's candidate, or NULL */
    size_t best_dist;
};

/* Start a search for word (borrowed; must outlive the search). */
void srv_didyoumean_init(struct srv_didyoumean *m, const char *word);

/* Offer one known name (borrowed; must outlive the search). */
void srv_didyoumean_offer(struct srv_didyoumean *m, const char *candidate);

/* The nearest name offered when it is close enough, else NULL
 * (borrowed: the pointer the caller offered). */
const char *srv_didyoumean_get(const struct srv_didyoumean *m);

/* The distance between a and b (letters without case); SIZE_MAX when
 * either is longer than SRV_DIDYOUMEAN_MAX. */
size_t srv_didyoumean_distance(const char *a, const char *b);

#endif
