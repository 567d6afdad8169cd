/*
 * server/base/procstat.h - what the process holds of its limits, read from
 * the kernel when /metrics is scraped: open file descriptors against
 * RLIMIT_NOFILE, resident memory against the cgroup's memory limit. The
 * alerts "fd near its limit" and "memory near its limit"
 * (deploy/prometheus/alerts.yml) divide one by the other.
 *
 * Thread: any; each call reads /proc or /sys afresh and keeps nothing.
 */
#ifndef SRV_PROCSTAT_H
#define SRV_PROCSTAT_H

#include <stdint.h>

/* File descriptors open now (entries of /proc/self/fd), or -1. */
int64_t srv_proc_open_fds(void);

/* The soft RLIMIT_NOFILE, or -1 (unlimited or unreadable). */
int64_t srv_proc_max_fds(void);

/* Resident set size in bytes (/proc/self/statm), or -1. */
int64_t srv_proc_resident_bytes(void);

/*
 * The memory limit of the process's cgroup in bytes (v2 memory.max, else
 * v1 memory.limit_in_bytes), or -1 when there is none or it cannot be
 * read. cgroup_root is "/sys/fs/cgroup" but for tests.
 */
int64_t srv_proc_memory_limit(const char *cgroup_root);

#endif
