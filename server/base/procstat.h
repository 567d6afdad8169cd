/*
 * server/base/procstat.h - what the process holds of its limits, read from
 * the kernel when /metrics is scraped: open file descriptors against
 * RLIMIT_NOFILE, resident memory against the cgroup's memory limit. The
 * alerts "fd near its limit" and "memory near its limit"
 * (deploy/prometheus/alerts.yml) divide one by the other.
 *
 * /metrics takes all four with srv_proc_read(): one reading, kept for
 * SRV_PROC_CACHE_MS and shared by every loop that scrapes within it, so a
 * series is at most that old. Open fds are counted through /proc/self/fd
 * opened once and kept (one descriptor for the process's life), so the
 * count needs no free descriptor and works at the fd limit.
 *
 * Thread: any; one mutex inside guards the kept directory and the reading.
 */
#ifndef SRV_PROCSTAT_H
#define SRV_PROCSTAT_H

#include <stddef.h>
#include <stdint.h>

/* How long one reading serves (ms). */
#define SRV_PROC_CACHE_MS 1000

/* The four figures of one reading; each is -1 when it has none. */
struct srv_proc_reading {
    int64_t open_fds;       /* srv_proc_open_fds() */
    int64_t max_fds;        /* srv_proc_max_fds() */
    int64_t resident_bytes; /* srv_proc_resident_bytes() */
    int64_t memory_limit;   /* srv_proc_memory_limit() */
};

/*
 * Opens /proc/self/fd and keeps it, if it is not kept yet; 0 or -errno.
 * main() calls it at start, while descriptors are free; a count opens it
 * itself when that failed.
 */
int srv_proc_open(void);

/*
 * The reading into *out (caller's memory): the one taken less than
 * SRV_PROC_CACHE_MS before now_ms (monotonic ms, from the caller), else
 * a new one taken now. cgroup_root is as for srv_proc_memory_limit(); the
 * kept reading is not keyed by it, so every caller passes the same one.
 */
void srv_proc_read(uint64_t now_ms, const char *cgroup_root,
                   struct srv_proc_reading *out);

/* File descriptors open now (entries of /proc/self/fd, the kept one
 * among them), or -1; counted afresh, no cache. */
int64_t srv_proc_open_fds(void);

/* The soft RLIMIT_NOFILE, or -1 (unlimited or unreadable). */
int64_t srv_proc_max_fds(void);

/* Resident set size in bytes (/proc/self/statm), or -1. */
int64_t srv_proc_resident_bytes(void);

/*
 * The memory limit of the process's cgroup in bytes (v2 memory.max, else
 * v1 memory.limit_in_bytes), or -1 when there is none or it cannot be
 * read. A limit of 0 is reported as 0. cgroup_root is "/sys/fs/cgroup"
 * but for tests.
 */
int64_t srv_proc_memory_limit(const char *cgroup_root);

/*
 * The cgroup path of one line of /proc/self/cgroup ("id:controllers:path")
 * into out (cap bytes, caller's): for controller "" the v2 line ("0::"),
 * else the v1 line whose comma-separated controller list holds controller
 * ("4:cpu,memory:/x" for "memory"). 0, -ENOENT when the line is another
 * controller's, -EINVAL when it is not such a line, -ENAMETOOLONG.
 */
int srv_proc_cgroup_path(const char *line, const char *controller,
                         char *out, size_t cap);

#endif
