/*
 * server/base/procstat.c - open fds, the fd limit, resident memory and the
 * cgroup's memory limit (server/base/procstat.h), for /metrics.
 *
 * Counting /proc/self/fd walks one directory entry per descriptor, about
 * 2 us each: 40-45 ms at 19,500 fds, on the loop serving the scrape. Two
 * things keep that in bounds. The four figures are read together and kept
 * for SRV_PROC_CACHE_MS, so scrapes from several loops (and a client that
 * requests a public /metrics in a loop) share one reading a second. And the
 * directory is opened once and kept (one descriptor for the process's
 * life), then rewound for each count: a count needs no new descriptor, so
 * it still works when the process is at its fd limit, which is when
 * lubdub_open_fds and the alert LubdubFdsNearLimit matter.
 *
 * Thread: any. One mutex guards the kept directory stream and the cached
 * reading; a caller that finds the reading stale reads afresh while
 * holding it, so concurrent callers wait for that one reading instead of
 * walking the directory each.
 */
#include "server/base/procstat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static pthread_mutex_t proc_lock = PTHREAD_MUTEX_INITIALIZER;
/* The kept stream over /proc/self/fd, NULL until the first open works;
 * under proc_lock. Never closed: it lives as long as the process. */
static DIR *fd_dir;
/* The last reading and when it was taken; under proc_lock. */
static struct srv_proc_reading cached;
static uint64_t cached_ms;
static bool cached_valid;

/* Opens the kept stream if it is not open yet. Under proc_lock. */
static int open_locked(void)
{
    int fd;

    if (fd_dir)
        return 0;
    fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    fd_dir = fdopendir(fd);
    if (!fd_dir) {
        int err = errno;

        close(fd);
        return -err;
    }
    return 0;
}

int srv_proc_open(void)
{
    int rc;

    pthread_mutex_lock(&proc_lock);
    rc = open_locked();
    pthread_mutex_unlock(&proc_lock);
    return rc;
}

/*
 * Counts the entries of /proc/self/fd through the kept stream: rewinddir
 * seeks its descriptor back to 0 and the next readdir lists the fd table
 * as it is now, with no new descriptor. The kept one is among them and is
 * counted: it is open, and it counts against the limit like any other.
 * Under proc_lock.
 */
static int64_t count_locked(void)
{
    struct dirent *e;
    int64_t n = 0;

    if (open_locked() < 0)
        return -1;
    rewinddir(fd_dir);
    errno = 0;
    while ((e = readdir(fd_dir)))
        if (e->d_name[0] != '.')
            n++;
    return errno ? -1 : n;
}

int64_t srv_proc_open_fds(void)
{
    int64_t n;

    pthread_mutex_lock(&proc_lock);
    n = count_locked();
    pthread_mutex_unlock(&proc_lock);
    return n;
}

int64_t srv_proc_max_fds(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
        return -1;
    return (int64_t)rl.rlim_cur;
}

int64_t srv_proc_resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long long size, resident;
    long page = sysconf(_SC_PAGESIZE);
    int n;

    if (!f)
        return -1;
    n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    if (n != 2 || page <= 0)
        return -1;
    return (int64_t)(resident * (unsigned long long)page);
}

void srv_proc_read(uint64_t now_ms, const char *cgroup_root,
                   struct srv_proc_reading *out)
{
    pthread_mutex_lock(&proc_lock);
    /* A caller whose now_ms was read before another's refresh sees a
     * reading newer than its now: that one is fresh too. */
    if (!cached_valid || now_ms >= cached_ms + SRV_PROC_CACHE_MS) {
        cached.open_fds = count_locked();
        cached.max_fds = srv_proc_max_fds();
        cached.resident_bytes = srv_proc_resident_bytes();
        cached.memory_limit = srv_proc_memory_limit(cgroup_root);
        cached_ms = now_ms;
        cached_valid = true;
    }
    *out = cached;
    pthread_mutex_unlock(&proc_lock);
}

/* The first line of path as a byte count; "max" or a v1 "no limit" (a
 * value near 2^63, rounded down to the page) is -1, as is an error. A 0
 * is a limit like any other (cgroup v2 takes memory.max = 0 and then
 * reclaims or kills everything the group charges), so it is reported:
 * the memory alert divides by it and fires. */
static int64_t read_limit(const char *path)
{
    FILE *f = fopen(path, "re");
    char line[64];
    unsigned long long v;
    char *end;

    if (!f)
        return -1;
    if (!fgets(line, sizeof(line), f)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    if (!strncmp(line, "max", 3))
        return -1;
    errno = 0;
    v = strtoull(line, &end, 10);
    if (end == line || errno || v >= (1ULL << 62))
        return -1;
    return (int64_t)v;
}

/* Whether the comma-separated list [list, list + len) holds name. */
static bool list_has(const char *list, size_t len, const char *name)
{
    size_t n = strlen(name);

    while (len > 0) {
        const char *comma = memchr(list, ',', len);
        size_t item = comma ? (size_t)(comma - list) : len;

        if (item == n && !memcmp(list, name, n))
            return true;
        if (!comma)
            break;
        len -= item + 1;
        list = comma + 1;
    }
    return false;
}

int srv_proc_cgroup_path(const char *line, const char *controller,
                         char *out, size_t cap)
{
    const char *c1 = strchr(line, ':'), *c2, *path;
    size_t len;

    if (!c1 || !(c2 = strchr(c1 + 1, ':')))
        return -EINVAL;
    if (controller[0] ? !list_has(c1 + 1, (size_t)(c2 - c1 - 1), controller)
                      : (c1 != line + 1 || line[0] != '0' || c2 != c1 + 1))
        return -ENOENT;
    path = c2 + 1;
    len = strcspn(path, "\n");
    if (len >= cap)
        return -ENAMETOOLONG;
    memcpy(out, path, len);
    out[len] = '\0';
    return 0;
}

/* This process's cgroup path for controller ("" for the v2 line) from
 * /proc/self/cgroup into out, or "" when there is none. */
static void cgroup_path(const char *controller, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[512];

    out[0] = '\0';
    if (!f)
        return;
    while (fgets(line, sizeof(line), f))
        if (srv_proc_cgroup_path(line, controller, out, cap) == 0)
            break;
    fclose(f);
}

int64_t srv_proc_memory_limit(const char *cgroup_root)
{
    char rel[400], path[512];
    int64_t v = -1;

    cgroup_path("", rel, sizeof(rel));
    /* v2: this cgroup's memory.max, then its parents' (a container sees
     * its own cgroup as "/"); the nearest limit is the one that binds
     * first, so the smallest on the way up is taken. */
    while (rel[0]) {
        int64_t here;
        char *slash;

        snprintf(path, sizeof(path), "%s%s/memory.max", cgroup_root,
                 strcmp(rel, "/") ? rel : "");
        here = read_limit(path);
        if (here >= 0 && (v < 0 || here < v))
            v = here;
        slash = strrchr(rel, '/');
        if (!slash || slash == rel)
            break;
        *slash = '\0';
    }
    if (v >= 0)
        return v;
    snprintf(path, sizeof(path), "%s/memory.max", cgroup_root);
    v = read_limit(path);
    if (v >= 0)
        return v;
    /* v1: the memory controller's cgroup, then its root (a container
     * that mounts its own cgroup there sees only that). */
    cgroup_path("memory", rel, sizeof(rel));
    if (rel[0] && strcmp(rel, "/")) {
        snprintf(path, sizeof(path), "%s/memory%s/memory.limit_in_bytes",
                 cgroup_root, rel);
        v = read_limit(path);
        if (v >= 0)
            return v;
    }
    snprintf(path, sizeof(path), "%s/memory/memory.limit_in_bytes",
             cgroup_root);
    return read_limit(path);
}
