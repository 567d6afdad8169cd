/*
 * server/lws/sockbytes.c - bytes written to a connection's socket
 * (server/lws/sockbytes.h): TCP_INFO's tcpi_bytes_acked (Linux 4.1 and
 * later) plus SIOCOUTQ, the bytes still in the send queue (sent and not
 * acknowledged, or not sent yet). Two system calls, asked only by the
 * console's socket inspector, never per write.
 *
 * Thread: the connection's loop.
 */
#include "server/lws/sockbytes.h"

#include <stddef.h>

#include <linux/sockios.h>
#include <linux/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "server/lws/srv.h"

uint64_t srv_sock_bytes_written(void *conn)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int fd = conn ? (int)lws_get_socket_fd(conn) : -1;
    int queued = 0;

    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) ||
        len < offsetof(struct tcp_info, tcpi_bytes_acked) +
                  sizeof(ti.tcpi_bytes_acked))
        return 0;
    if (ioctl(fd, SIOCOUTQ, &queued) || queued < 0)
        queued = 0;
    return ti.tcpi_bytes_acked + (uint64_t)queued;
}
