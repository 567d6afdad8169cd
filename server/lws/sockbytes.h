/*
 * server/lws/sockbytes.h - the bytes the hub has written to a connection's
 * socket, from the kernel (the socket inspector's "bytes_written",
 * hub/ops/inspect.h), so that no session carries a counter of its own.
 *
 * Thread: the connection's loop.
 */
#ifndef SRV_SOCKBYTES_H
#define SRV_SOCKBYTES_H

#include <stdint.h>

/* Bytes written so far to the socket of conn (a struct lws *): what the
 * peer acknowledged plus what still sits in the kernel's send queue (TLS
 * records, WebSocket framing and all). 0 when the kernel does not say. */
uint64_t srv_sock_bytes_written(void *conn);

#endif
