/*
 * server/lws/rxpool.h - lws's WebSocket receive buffers, lent from a pool so
 * that a session the read bypass owns can give its buffer back.
 *
 * lws 4.1.6 allocates one receive buffer per WebSocket at the upgrade
 * (lws_server_init_wsi_for_ws() in lib/roles/ws/ops-ws.c: "rx_ubuf",
 * --ws-rx-buffer + LWS_PRE + 4 bytes, right before it calls
 * LWS_CALLBACK_ESTABLISHED on the same thread) and frees it when the
 * session goes. Only lws's WebSocket parser touches it. A session that
 * server/lws/direct.h takes over is never parsed by lws again (lws's reading
 * is off from the handover to the close, docs/LWS.md "The read bypass"),
 * so its buffer lies unused for the whole session: 160 B of every idle
 * session as a glibc chunk (docs/BENCHMARKS.md, "Where an idle session's
 * bytes go").
 *
 * So those buffers come from slots of one reserved mapping (only touched
 * pages resident). At the handover srv_rxpool_release() puts the
 * session's slot back on the free list while lws still holds the
 * pointer, and the slot counts one free of lws's to ignore ("owed"); the
 * next session may get the same slot. When a free of lws's finds its slot
 * owing, it is ignored and the count goes down; otherwise the slot goes
 * back to the free list.
 *
 * Why a count per slot is enough, though lws's frees arrive in any order
 * and name only the address: a slot is lent only from the free list, and
 * whenever it is on the free list, every holder it had was released and
 * its owed count equals the frees still to come. Lent again, the frees of
 * the earlier holders find it owing and are ignored; the slot goes back
 * only on its new holder's release, or on the last free to come, once
 * every holder is gone (whichever of them frees first). A slot is never
 * free while a holder that was not released still has it. (Checked
 * against a model in tests/unit/test_rxpool.c.)
 *
 * Past the pool's slots, for other sizes and other names, lws's
 * allocations go to the heap as before (srv_rxpool_alloc returns NULL);
 * such a buffer is simply not given back early.
 *
 * Threads: any (the lws allocator is process-wide); a mutex held for a
 * few instructions. The "last buffer lent" is per thread.
 */
#ifndef SRV_RXPOOL_H
#define SRV_RXPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The name lws 4.1.6 allocates the receive buffer under. */
#define SRV_RXPOOL_REASON "rx_ubuf"
/* Slots reserved: receive buffers held at once by sessions lubdub does
 * not read itself (TLS, declined) or not yet (before the handover). */
#define SRV_RXPOOL_SLOTS 65536u

struct srv_rxpool_stats {
    uint32_t in_use;     /* slots lent and not back on the free list */
    uint32_t owed;       /* frees of lws's still to be ignored, all slots */
    uint64_t released;   /* buffers given back early, total */
    uint64_t fallbacks;  /* buffers of the pool's size served by the heap */
};

/* Reserve slots of exactly `bytes` (lws's request: --ws-rx-buffer +
 * LWS_PRE + 4). Once; -1 when already set up or the mapping fails (then
 * everything goes to the heap). */
int srv_rxpool_init(size_t bytes, uint32_t slots);

/*
 * lws's allocation of size with its reason: a slot when it is a receive
 * buffer of the pool's size and one is free, else NULL (the caller uses
 * the heap). Every receive-buffer request sets the calling thread's last
 * buffer (NULL when the heap serves it).
 */
void *srv_rxpool_alloc(size_t size, const char *reason);
/* The calling thread's last receive buffer, then forgotten: from
 * LWS_CALLBACK_ESTABLISHED it is that session's. NULL when none. */
void *srv_rxpool_take_last(void);
/* lws frees p: true when p is the pool's (then it is handled here). */
bool srv_rxpool_free(void *p);
/* lws will never touch p (a slot from srv_rxpool_take_last) again before
 * it frees it: the slot is free from now on. */
void srv_rxpool_release(void *p);
/* Whether p lies in the pool; a slot's usable bytes (0: no pool). */
bool srv_rxpool_owns(const void *p);
size_t srv_rxpool_slot_bytes(void);

void srv_rxpool_stats(struct srv_rxpool_stats *out);

#endif
