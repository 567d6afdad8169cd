/*
 * server/config/didyoumean.c - the nearest known name to a mistyped one
 * (server/config/didyoumean.h): the optimal string alignment distance over
 * three rows on the stack, and the threshold by the word's length.
 *
 * Thread: any (pure).
 */
#include "server/config/didyoumean.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>

static size_t srv__min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;

    return m < c ? m : c;
}

static int srv__same(char a, char b)
{
    return tolower((unsigned char)a) == tolower((unsigned char)b);
}

size_t srv_didyoumean_distance(const char *a, const char *b)
{
    /* Row k of the table (len(b)+1 cells) lives in rows[k % 3]: a row
     * reads only the two before it. */
    size_t rows[3][SRV_DIDYOUMEAN_MAX + 1];
    size_t la = strlen(a), lb = strlen(b), i, j;

    if (la > SRV_DIDYOUMEAN_MAX || lb > SRV_DIDYOUMEAN_MAX)
        return SIZE_MAX;
    for (j = 0; j <= lb; j++)
        rows[0][j] = j;
    for (i = 1; i <= la; i++) {
        size_t *prev2 = rows[(i + 1) % 3], *prev = rows[(i - 1) % 3];
        size_t *cur = rows[i % 3];

        cur[0] = i;
        for (j = 1; j <= lb; j++) {
            size_t cost = srv__same(a[i - 1], b[j - 1]) ? 0 : 1;

            cur[j] = srv__min3(prev[j] + 1, cur[j - 1] + 1,
                               prev[j - 1] + cost);
            /* prev2 is row i - 2 ((i + 1) % 3 == (i - 2) % 3). */
            if (i > 1 && j > 1 && srv__same(a[i - 1], b[j - 2]) &&
                srv__same(a[i - 2], b[j - 1]) &&
                prev2[j - 2] + 1 < cur[j])
                cur[j] = prev2[j - 2] + 1;
        }
    }
    return rows[la % 3][lb];
}

/* The most edits a word of len bytes may be from the name it meant. */
static size_t srv__threshold(size_t len)
{
    if (len <= 4)
        return 1;
    return len <= 8 ? 2 : 3;
}

void srv_didyoumean_init(struct srv_didyoumean *m, const char *word)
{
    m->word = word;
    m->best = NULL;
    m->best_dist = SIZE_MAX;
}

void srv_didyoumean_offer(struct srv_didyoumean *m, const char *candidate)
{
    size_t d = srv_didyoumean_distance(m->word, candidate);

    if (d < m->best_dist) {
        m->best = candidate;
        m->best_dist = d;
    }
}

const char *srv_didyoumean_get(const struct srv_didyoumean *m)
{
    if (!m->best || m->best_dist > srv__threshold(strlen(m->word)))
        return NULL;
    return m->best;
}
