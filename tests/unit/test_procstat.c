/*
 * tests/unit/test_procstat.c - server/base/procstat.c: open fds follow the
 * descriptors the process opens, and are still counted when the process is
 * at its fd limit (the kept /proc/self/fd needs no new descriptor); the fd
 * limit is RLIMIT_NOFILE's soft one; resident memory is read; two readings
 * within a second are one; the cgroup memory limit is read from a cgroup
 * tree (a temporary one standing in for /sys/fs/cgroup): a number, "max"
 * (no limit), v1's "no limit" value, nothing at all, and a limit of 0; and
 * the lines of /proc/self/cgroup are parsed by their controller lists.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/base/procstat.h"

static void test_procstat_open_fds_follow_the_process(void **state)
{
    int64_t before, after;
    int p[2];

    (void)state;
    before = srv_proc_open_fds();
    assert_true(before >= 3);
    assert_int_equal(pipe(p), 0);
    after = srv_proc_open_fds();
    close(p[0]);
    close(p[1]);
    assert_int_equal(after, before + 2);
    assert_int_equal(srv_proc_open_fds(), before);
}

/*
 * At the fd limit no new descriptor can be had (the old count's opendir
 * failed with EMFILE there and the series went missing). The soft limit is
 * lowered to what is open, the table is filled until dup() says EMFILE,
 * and the count must still come, and be exact.
 */
static void test_procstat_open_fds_counted_at_the_fd_limit(void **state)
{
    struct rlimit saved, rl;
    int64_t before, at_limit;
    int fds[64], n = 0, dups, err;

    (void)state;
    before = srv_proc_open_fds();
    assert_true(before >= 3);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    rl = saved;
    rl.rlim_cur = (rlim_t)before;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    /* Holes below the limit are filled first; bounded by the array. */
    for (;;) {
        int fd = dup(0);

        if (fd < 0) {
            err = errno;
            break;
        }
        assert_true(n < 64);
        fds[n++] = fd;
    }
    at_limit = srv_proc_open_fds();
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    dups = n;
    while (n > 0)
        close(fds[--n]);
    assert_int_equal(err, EMFILE);
    assert_int_equal(at_limit, before + dups);
    assert_int_equal(srv_proc_open_fds(), before);
}

/*
 * Readings within SRV_PROC_CACHE_MS are one: a pipe opened between two of
 * them does not show until the clock (the caller's) passes the second.
 * The times are far above any an earlier case used, so the first is new.
 */
static void test_procstat_reading_is_kept_for_a_second(void **state)
{
    const uint64_t t0 = 1000000000;
    struct srv_proc_reading first, again, later;
    int p[2];

    (void)state;
    srv_proc_read(t0, "/nonexistent", &first);
    assert_true(first.open_fds >= 3);
    assert_int_equal(first.max_fds, srv_proc_max_fds());
    assert_true(first.resident_bytes > 4096);
    assert_int_equal(pipe(p), 0);
    srv_proc_read(t0 + SRV_PROC_CACHE_MS - 1, "/nonexistent", &again);
    /* An earlier now (a loop that read its clock before the refresh). */
    srv_proc_read(t0 - 5, "/nonexistent", &later);
    assert_int_equal(later.open_fds, first.open_fds);
    assert_int_equal(again.open_fds, first.open_fds);
    assert_int_equal(again.resident_bytes, first.resident_bytes);
    srv_proc_read(t0 + SRV_PROC_CACHE_MS, "/nonexistent", &later);
    close(p[0]);
    close(p[1]);
    assert_int_equal(later.open_fds, first.open_fds + 2);
}

static void test_procstat_max_fds_is_the_soft_limit(void **state)
{
    struct rlimit rl;

    (void)state;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur == RLIM_INFINITY)
        assert_int_equal(srv_proc_max_fds(), -1);
    else
        assert_int_equal(srv_proc_max_fds(), (int64_t)rl.rlim_cur);
}

static void test_procstat_resident_memory_is_read(void **state)
{
    (void)state;
    /* A running process holds at least a few pages. */
    assert_true(srv_proc_resident_bytes() > 4096);
}

static void put(const char *dir, const char *name, const char *text)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/*
 * The tree under a temporary root. This process's own cgroup path (from
 * /proc/self/cgroup) is not under it, so only the root's files count:
 * the root's memory.max (v2), then memory/memory.limit_in_bytes (v1).
 */
static void test_procstat_memory_limit_from_the_cgroup_tree(void **state)
{
    char root[] = "/tmp/lubdub-procstat-XXXXXX", v1[64], path[128];

    (void)state;
    assert_non_null(mkdtemp(root));
    assert_int_equal(srv_proc_memory_limit(root), -1);
    put(root, "memory.max", "1073741824\n");
    assert_int_equal(srv_proc_memory_limit(root), 1073741824);
    put(root, "memory.max", "max\n");
    assert_int_equal(srv_proc_memory_limit(root), -1);
    snprintf(v1, sizeof(v1), "%s/memory", root);
    assert_int_equal(mkdir(v1, 0700), 0);
    put(v1, "memory.limit_in_bytes", "536870912\n");
    assert_int_equal(srv_proc_memory_limit(root), 536870912);
    /* v1 says "no limit" with 2^63 rounded down to a page. */
    put(v1, "memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(srv_proc_memory_limit(root), -1);
    snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", v1);
    unlink(path);
    rmdir(v1);
    snprintf(path, sizeof(path), "%s/memory.max", root);
    unlink(path);
    assert_int_equal(rmdir(root), 0);
}

/* cgroup v2 takes memory.max = 0: a real limit (everything the group
 * charges is reclaimed or killed), reported as 0, not as "no limit". */
static void test_procstat_memory_limit_of_zero_is_reported(void **state)
{
    char root[] = "/tmp/lubdub-procstat-XXXXXX", v1[64], path[128];

    (void)state;
    assert_non_null(mkdtemp(root));
    put(root, "memory.max", "0\n");
    assert_int_equal(srv_proc_memory_limit(root), 0);
    snprintf(path, sizeof(path), "%s/memory.max", root);
    unlink(path);
    snprintf(v1, sizeof(v1), "%s/memory", root);
    assert_int_equal(mkdir(v1, 0700), 0);
    put(v1, "memory.limit_in_bytes", "0\n");
    assert_int_equal(srv_proc_memory_limit(root), 0);
    snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", v1);
    unlink(path);
    rmdir(v1);
    assert_int_equal(rmdir(root), 0);
}

/* Lines of /proc/self/cgroup: v1's controller list is comma-separated and
 * memory may share it ("4:cpu,memory:/x"); a name that merely contains
 * "memory" is not it; v2's line is "0::". */
static void test_procstat_cgroup_line_by_controller_list(void **state)
{
    char out[64];

    (void)state;
    assert_int_equal(srv_proc_cgroup_path("4:cpu,memory:/x\n", "memory",
                                          out, sizeof(out)), 0);
    assert_string_equal(out, "/x");
    assert_int_equal(srv_proc_cgroup_path("7:memory,blkio:/y", "memory",
                                          out, sizeof(out)), 0);
    assert_string_equal(out, "/y");
    assert_int_equal(srv_proc_cgroup_path("9:memory:/m/n\n", "memory",
                                          out, sizeof(out)), 0);
    assert_string_equal(out, "/m/n");
    assert_int_equal(srv_proc_cgroup_path("5:cpu,cpuacct:/z\n", "memory",
                                          out, sizeof(out)), -ENOENT);
    assert_int_equal(srv_proc_cgroup_path("6:name=memory2:/z\n", "memory",
                                          out, sizeof(out)), -ENOENT);
    assert_int_equal(srv_proc_cgroup_path("0::/memory\n", "memory",
                                          out, sizeof(out)), -ENOENT);
    assert_int_equal(srv_proc_cgroup_path("0::/a/b\n", "", out,
                                          sizeof(out)), 0);
    assert_string_equal(out, "/a/b");
    assert_int_equal(srv_proc_cgroup_path("4:cpu,memory:/x\n", "", out,
                                          sizeof(out)), -ENOENT);
    assert_int_equal(srv_proc_cgroup_path("garbage\n", "", out,
                                          sizeof(out)), -EINVAL);
    assert_int_equal(srv_proc_cgroup_path("4:memory:/long", "memory", out,
                                          4), -ENAMETOOLONG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_procstat_open_fds_follow_the_process),
        cmocka_unit_test(test_procstat_open_fds_counted_at_the_fd_limit),
        cmocka_unit_test(test_procstat_reading_is_kept_for_a_second),
        cmocka_unit_test(test_procstat_max_fds_is_the_soft_limit),
        cmocka_unit_test(test_procstat_resident_memory_is_read),
        cmocka_unit_test(test_procstat_memory_limit_from_the_cgroup_tree),
        cmocka_unit_test(test_procstat_memory_limit_of_zero_is_reported),
        cmocka_unit_test(test_procstat_cgroup_line_by_controller_list),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
