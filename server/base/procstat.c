/*
 * server/base/procstat.c - open fds, the fd limit, resident memory and the
 * cgroup's memory limit (server/base/procstat.h), for /metrics.
 *
 * Counting /proc/self/fd walks one directory entry per descriptor: at the
 * 20,000 a process may hold here that is a few milliseconds on the loop
 * serving the scrape, once per scrape (Prometheus: every 15-60 s).
 *
 * Thread: any; nothing is kept between calls.
 */
#include "server/base/procstat.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int64_t srv_proc_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int64_t n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    /* The directory stream's own descriptor was among them. */
    return n > 0 ? n - 1 : 0;
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
    FILE *f = fopen("/proc/self/statm", "r");
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

/* The first line of path as a byte count; "max" or a v1 "no limit" (a
 * value near 2^63, rounded down to the page) is -1, as is an error. */
static int64_t read_limit(const char *path)
{
    FILE *f = fopen(path, "r");
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
    v = strtoull(line, &end, 10);
    if (end == line || v == 0 || v >= (1ULL << 62))
        return -1;
    return (int64_t)v;
}

/* The path of this process's cgroup whose line in /proc/self/cgroup starts
 * with prefix ("0::" for v2, ":memory:" after the id for v1) into out, or
 * "" when there is none. */
static void cgroup_path(const char *prefix, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512];

    out[0] = '\0';
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, prefix);

        if (!p || (prefix[0] == '0' && p != line))
            continue;
        p += strlen(prefix);
        line[strcspn(line, "\n")] = '\0';
        if (strlen(p) < cap)
            memcpy(out, p, strlen(p) + 1);
        break;
    }
    fclose(f);
}

int64_t srv_proc_memory_limit(const char *cgroup_root)
{
    char rel[400], path[512];
    int64_t v = -1;

    cgroup_path("0::", rel, sizeof(rel));
    /* v2: this cgroup's memory.max, then its parents' (a container sees
     * its own cgroup as "/"); the nearest limit is the one that binds
     * first, so the smallest on the way up is taken. */
    while (rel[0]) {
        int64_t here;
        char *slash;

        snprintf(path, sizeof(path), "%s%s/memory.max", cgroup_root,
                 strcmp(rel, "/") ? rel : "");
        here = read_limit(path);
        if (here > 0 && (v < 0 || here < v))
            v = here;
        slash = strrchr(rel, '/');
        if (!slash || slash == rel)
            break;
        *slash = '\0';
    }
    if (v > 0)
        return v;
    snprintf(path, sizeof(path), "%s/memory.max", cgroup_root);
    v = read_limit(path);
    if (v > 0)
        return v;
    /* v1: the memory controller's cgroup, then its root (a container
     * that mounts its own cgroup there sees only that). */
    cgroup_path(":memory:", rel, sizeof(rel));
    if (rel[0] && strcmp(rel, "/")) {
        snprintf(path, sizeof(path), "%s/memory%s/memory.limit_in_bytes",
                 cgroup_root, rel);
        v = read_limit(path);
        if (v > 0)
            return v;
    }
    snprintf(path, sizeof(path), "%s/memory/memory.limit_in_bytes",
             cgroup_root);
    return read_limit(path);
}
