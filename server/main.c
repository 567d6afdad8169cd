/*
 * server/main.c - lubdub's entry point: configuration, loops, signals and
 * the drain.
 *
 * The main thread parses the configuration, blocks SIGTERM/SIGINT/SIGHUP
 * before any thread exists (so only sigwait sees them; no signal handler
 * runs), creates the loops serially, starts one thread per loop, then
 * waits for a signal. SIGHUP re-reads --tls-cert/--tls-key and hands them
 * to the loops (server/lws/tls.c), and reloads the apps, the operator tokens
 * and the Redis password from --config and the secret files
 * (server/reload.c); the wait goes on. The first SIGTERM or
 * SIGINT drains: /readyz turns 503, accepting stops, heartbeats stop, and
 * every session is closed with 4200, jittered over --drain-timeout. A second
 * one exits at once; SIGHUP during the drain is ignored.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hub/loop/dirdelay_harness.h"
#include "hub/base/hash.h"
#include "hub/hub.h"
#include "hub/base/log.h"
#include "hub/base/version.h"
#include "hub/pusher/pusher.h"
#include "server/base/fdlimit.h"
#include "server/base/procstat.h"
#include "server/lws/hdrpool.h"
#include "server/base/memtrim.h"
#include "server/config/new_app.h"
#include "server/config/print_config.h"
#include "server/lws/srv.h"
#include "server/webhook/webhook.h"

/*
 * The default queue budget: 1/8 of the memory this process may use (the
 * machine's, or the cgroup v2 limit when lower, as in a container), at
 * most 16 GiB, and at least one --max-queue per loop (each loop gets an
 * even share).
 */
static uint64_t derived_queue_budget(uint64_t max_queue, unsigned loops)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t mem = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz
                                        : UINT64_C(1) << 30;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    unsigned long long lim;
    uint64_t b;

    if (f) {
        if (fscanf(f, "%llu", &lim) == 1 && lim && lim < mem)
            mem = lim;
        fclose(f);
    }
    b = mem / 8;
    if (b > UINT64_C(16) << 30)
        b = UINT64_C(16) << 30;
    if (b < max_queue * loops)
        b = max_queue * loops;
    return b;
}

static void fill_hub_config(struct srv *srv)
{
    const struct srv_config *c = srv->cfg;
    struct hub_config *h = &srv->hcfg;

    memset(h, 0, sizeof(*h));
    h->tick_ms = c->tick_ms;
    h->ping_interval_ms = c->ping_interval_ms;
    h->pong_timeout_ms = c->pong_timeout_ms;
    h->idle_timeout_ms = c->idle_timeout_ms;
    h->close_timeout_ms = c->close_timeout_ms;
    h->heartbeat_interval_ms = c->heartbeat_interval_ms;
    h->drain_timeout_ms = c->drain_timeout_ms;
    h->activity_timeout_s = c->activity_timeout_s;
    h->max_message = c->max_message;
    h->max_queue = c->max_queue;
    h->write_timeout_ms = c->write_timeout_ms;
    h->max_queued_total = c->max_queued_total
                              ? c->max_queued_total
                              : derived_queue_budget(c->max_queue,
                                                     srv->n_loops);
    h->max_subscriptions = c->max_subscriptions;
    h->subscribe_rate = c->subscribe_rate;
    h->cache_ttl_ms = c->cache_ttl_ms;
    h->cache_max_bytes = c->cache_max_bytes;
    h->subscription_count_interval_ms = c->subscription_count_interval_ms;
    h->history_max_bytes = c->history_max_bytes;
    h->compression = c->compression != 0;
    h->compression_min_size = c->compression_min_size;
    h->auth_window_s = c->auth_timestamp_window_s;
    h->session_hooks = &hub_pusher_hooks;
    /* The first table's apps: their index is their position. */
    for (unsigned i = 0; i < c->n_apps; i++)
        srv->cfg->apps[i].index = i;
    h->apps = c->apps;
    h->n_apps = c->n_apps;
}

/*
 * A relative web root is looked up in the working directory, then next to
 * the binary (build/lubdub -> ../web), then in /usr/share/lubdub/web.
 */
static void resolve_web_root(struct srv_config *cfg)
{
    char path[PATH_MAX];
    char exe[PATH_MAX];
    struct stat st;
    ssize_t n;

    if (!cfg->web_root || cfg->web_root[0] == '/' ||
        (stat(cfg->web_root, &st) == 0 && S_ISDIR(st.st_mode)))
        return;
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        snprintf(path, sizeof(path), "%s/../%s", dirname(exe), cfg->web_root);
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            goto found;
        }
    }
    snprintf(path, sizeof(path), "/usr/share/lubdub/%s", cfg->web_root);
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return;
found:
    /* The old string (a default or a copy) is dropped: a one-off leak
     * beats guessing who owns it; fini frees the new one. */
    if (realpath(path, exe))
        cfg->web_root = strdup(exe);
}

/*
 * LUBDUB_TEST_STALL_MS (1..60000) is for tests only and undocumented in
 * --help: it turns on GET /test/stall?loop=N, which makes loop N sleep that
 * long right after its next heartbeat ping (tests/integration/stall.test.js,
 * docs/OPERATIONS.md). Read once here; anything else leaves it off.
 */
static unsigned test_stall_ms(void)
{
    const char *v = getenv("LUBDUB_TEST_STALL_MS");
    char *end;
    unsigned long ms;

    if (!v || !*v)
        return 0;
    ms = strtoul(v, &end, 10);
    if (*end || ms == 0 || ms > 60000) {
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "test_hook"),
                      "LUBDUB_TEST_STALL_MS=%s ignored (1..60000)",
                      v);
        return 0;
    }
    srv_log_event(HUB_LOG_WARN, 0,
                  HUB_LOG_F(.event = "test_hook"),
                  "LUBDUB_TEST_STALL_MS=%lu: /test/stall is on; "
                  "a test hook, never for production", ms);
    return (unsigned)ms;
}

/*
 * LUBDUB_TEST_DIR_DELAY_MS (1..10000), tests only, undocumented in --help:
 * without --redis, the directory answers every subscribe join and REST
 * read that long late through the asynchronous ops (the test harness
 * hub/loop/dirdelay_harness.h), so that
 * tests/integration/dir_async.test.js drives pending subscriptions
 * and deferred HTTP answers. NULL: not asked for (or --redis given).
 */
static struct hub *test_dir_hub(struct srv *srv)
{
    const char *v = getenv("LUBDUB_TEST_DIR_DELAY_MS");
    struct hub_backplane bp;
    struct hub *h;
    char *end;
    unsigned long ms;

    if (!v || !*v || srv->cfg->redis)
        return NULL;
    ms = strtoul(v, &end, 10);
    if (*end || ms == 0 || ms > 10000) {
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "test_hook"),
                      "LUBDUB_TEST_DIR_DELAY_MS=%s ignored (1..10000)", v);
        return NULL;
    }
    if (hub_dirdelay_harness_backplane(&bp, (unsigned)ms))
        return NULL;
    h = hub_create_with(&srv->hcfg, hub_clock_monotonic(), &bp);
    if (!h) {
        bp.dir->destroy(bp.dir_impl);
        return NULL;
    }
    srv_log_event(HUB_LOG_WARN, 0,
                  HUB_LOG_F(.event = "test_hook"),
                  "LUBDUB_TEST_DIR_DELAY_MS=%lu: the directory "
                  "answers late; a test hook, never for production", ms);
    return h;
}

/*
 * Run with the fd limit server/base/fdlimit.h picks, before any lws context
 * exists: each sizes its fd table from it, and lws's debug build walks
 * that table on every close (docs/LWS.md).
 */
static void apply_fd_limit(const struct srv_config *cfg)
{
    enum srv_fd_limit_why why;
    struct rlimit rl;
    uint64_t hard, want;
    char hbuf[24];

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    hard = rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_max;
    want = srv_fd_limit_pick(cfg->fd_limit, cfg->max_connections, hard, &why);
    if ((uint64_t)rl.rlim_cur != want) {
        rlim_t old = rl.rlim_cur;

        rl.rlim_cur = (rlim_t)want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            srv_log_event(HUB_LOG_WARN, 0,
                          HUB_LOG_F(.event = "fd_limit"),
                          "fd limit: cannot set %llu (%s); "
                          "running with %llu", (unsigned long long)want,
                          strerror(errno), (unsigned long long)old);
            return;
        }
    }
    if (hard == UINT64_MAX)
        snprintf(hbuf, sizeof(hbuf), "unlimited");
    else
        snprintf(hbuf, sizeof(hbuf), "%llu", (unsigned long long)hard);
    srv_log_event(why == SRV_FDL_FLAG_HARD || why == SRV_FDL_CONNECTIONS_HARD
                      ? HUB_LOG_WARN : HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "fd_limit",
                            .reason = srv_fd_limit_why_str(why)),
                  "fd limit %llu (%s; hard limit %s)",
                  (unsigned long long)want, srv_fd_limit_why_str(why), hbuf);
}

/* WebSocket handshakes so far, all loops (what leaves header buffers). */
static uint64_t handshakes(const struct srv *srv)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < srv->n_loops; i++)
        n += HUB_STAT_GET(srv->loops[i].hub->stats.accepted);
    return n;
}

/* Once a second on the main thread: after a burst of handshakes, give
 * the freed header buffers back (server/base/memtrim.h). */
static void trim_tick(const struct srv *srv, struct srv_memtrim *t)
{
    uint64_t n = handshakes(srv), kib, t0;
    unsigned slots, tables;

    if (!srv_memtrim_due(t, n, srv_now_ms()))
        return;
    t0 = srv_now_ms();
    slots = srv_hdrpool_release(SRV_HDRPOOL_KEEP);
    tables = srv_hdrpool_tab_release(SRV_HDRPOOL_KEEP);
    kib = srv_memtrim_run();
    srv_log_event(HUB_LOG_DEBUG, 0,
                  HUB_LOG_F(.event = "memtrim"),
                  "memory: after %llu handshakes, %u header "
                  "buffers and %llu KiB of heap given back (and %u header "
                  "tables), in %llu ms",
                  (unsigned long long)n, slots, (unsigned long long)kib, tables,
                  (unsigned long long)(srv_now_ms() - t0));
}

/*
 * A process started with stdin, stdout or stderr closed (`2>&-`, some
 * supervisors) would give that number to its first descriptor, a listener,
 * an epoll set or a Redis socket, and every log line would be written into
 * it. Hold 0-2 open on /dev/null first: open() takes the lowest free
 * number, which in this ascending walk is fd itself.
 */
static void hold_stdio(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF)
            (void)open("/dev/null", fd ? O_WRONLY : O_RDONLY);
}

/* --new-app: a random app on stdout (server/config/new_app.h). */
static int new_app(void)
{
    struct srv_new_app a;
    int rc = srv_new_app_make(&a);

    if (rc) {
        fprintf(stderr, "lubdub: no random bytes from the kernel: %s\n",
                strerror(-rc));
        return 1;
    }
    srv_new_app_print(stdout, &a);
    explicit_bzero(&a, sizeof(a));
    return 0;
}

/* The load's warnings (unknown LUBDUB_* variables) to stderr, for the
 * commands that exit before the log exists. */
static void print_warnings(const struct srv_config *cfg)
{
    const char *w = cfg->warnings;

    while (w && *w) {
        size_t len = strcspn(w, "\n");

        fprintf(stderr, "lubdub: warning: %.*s\n", (int)len, w);
        w += len + (w[len] == '\n');
    }
}

/* The commands that answer from the flags alone (--help, --version,
 * --new-app): main()'s exit code, or -1 when none was given. */
static int answer_alone(const struct srv_config *cfg)
{
    if (cfg->help) {
        srv_config_print_help(stdout);
        return 0;
    }
    if (cfg->version) {
        printf("lubdub %s (commit %s)\n", hub_version(), hub_commit());
        return 0;
    }
    if (cfg->new_app)
        return new_app();
    return -1;
}

/*
 * The configuration from every source, checked; the commands that answer
 * and exit (--help, --version, --new-app, --print-config, --check-config,
 * the webhook commands) run here. Returns -1 when the hub is to start,
 * else main()'s exit code.
 */
static int load_config(struct srv_config *cfg, int argc, char **argv,
                       char **envp)
{
    char err[512];
    int code;

    srv_config_defaults(cfg);
    if (srv_config_load(cfg, argc, argv, envp, err, sizeof(err))) {
        /* A variable's typo may be why: its warning comes first. */
        print_warnings(cfg);
        fprintf(stderr, "lubdub: %s\n", err);
        return 2;
    }
    code = answer_alone(cfg);
    if (code >= 0)
        return code;
    code = srv_config_validate(cfg, err, sizeof(err)) ? 2 : -1;
    if (cfg->print_config) {
        /* Also when it does not validate: what the sources ended up
         * with is how one finds out why. */
        print_warnings(cfg);
        srv_config_print(stdout, cfg);
        fflush(stdout);
        if (code == 2)
            fprintf(stderr, "lubdub: %s\n", err);
        return code == 2 ? 2 : 0;
    }
    if (code == 2) {
        print_warnings(cfg);
        fprintf(stderr, "lubdub: %s\n", err);
        return 2;
    }
    if (cfg->check_only) {
        print_warnings(cfg);
        printf("lubdub: configuration is valid\n");
        return 0;
    }
    if (cfg->webhook_dead_letters || cfg->webhook_replay) {
        /* The operator's webhook commands (docs/WEBHOOKS.md). */
        code = srv_wh_admin(cfg, stdout);
        srv_config_fini(cfg);
        return code;
    }
    return -1;
}

/* The load's warnings, each once, as log lines (JSON with --log-format
 * json). */
static void log_warnings(const struct srv_config *cfg)
{
    const char *w = cfg->warnings;

    while (w && *w) {
        size_t len = strcspn(w, "\n");

        srv_log(HUB_LOG_WARN, 0, "config: %.*s", (int)len, w);
        w += len + (w[len] == '\n');
    }
}

/* struct srv from the configuration, before any thread: the log, trusted
 * proxies, secrets, the loop count and the hub's config, the fd limit.
 * 0 or 1 (out of memory, said on stderr). */
static int init_srv(struct srv *srv, struct srv_config *cfg, int argc,
                    char **argv, char **envp)
{
    char err[512];
    int level;
    long cpus;

    resolve_web_root(cfg);
    level = srv_log_level_parse(cfg->log_level);
    if (srv_log_init(level < 0 ? HUB_LOG_INFO : level, cfg->log_format,
                     cfg->log_priority)) {
        fprintf(stderr, "lubdub: out of memory\n");
        return 1;
    }
    log_warnings(cfg);
    memset(srv, 0, sizeof(*srv));
    srv->cfg = cfg;
    /* Checked by srv_config_validate(): it parses. */
    if (cfg->trusted_proxies)
        (void)srv_peeraddr_cidrs_parse(&srv->trusted, cfg->trusted_proxies,
                                       err, sizeof(err));
    srv_peer_init(&srv->trusted);
    srv->argc = argc;
    srv->argv = argv;
    srv->envp = envp;
    if (srv_secrets_init(&srv->secrets, cfg)) {
        fprintf(stderr, "lubdub: out of memory\n");
        return 1;
    }
    srv->test_stall_ms = test_stall_ms();
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
    srv->n_loops = cfg->loops ? cfg->loops : (cpus > 0 ? (unsigned)cpus : 1);
    if (srv->n_loops > HUB_MAX_LOOPS)
        srv->n_loops = HUB_MAX_LOOPS;
    fill_hub_config(srv);
    apply_fd_limit(cfg);
    /* Keep /proc/self/fd open from now, while descriptors are free, so
     * /metrics counts them even at the fd limit; a count retries the
     * open itself if this fails. */
    (void)srv_proc_open();
    return 0;
}

/* The listening lines: the log's (with the URLs as fields) and stdout's,
 * which scripts and tests wait for. */
static void log_listening(const struct srv *srv)
{
    const struct srv_config *cfg = srv->cfg;
    char url[320];

    snprintf(url, sizeof(url), "%s://%s:%u", cfg->tls_cert ? "https" : "http",
             cfg->bind, srv->port);
    srv_log_event(HUB_LOG_INFO, 0, HUB_LOG_F(.event = "listen", .url = url),
                  "lubdub listening on %s (%u loops, ping %llums, pong "
                  "%llums, queue budget %llu bytes)",
                  url, srv->n_loops,
                  (unsigned long long)cfg->ping_interval_ms,
                  (unsigned long long)cfg->pong_timeout_ms,
                  (unsigned long long)srv->hcfg.max_queued_total);
    printf("lubdub: listening on %s:%u\n", cfg->bind, srv->port);
    if (cfg->metrics_port) {
        snprintf(url, sizeof(url), "http://%s:%u",
                 cfg->metrics_bind ? cfg->metrics_bind : cfg->bind,
                 (unsigned)cfg->metrics_port);
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "listen", .reason = "metrics",
                                .url = url),
                      "metrics and stats on %s only (not on %u)%s", url,
                      srv->port,
                      cfg->metrics_token ? ", bearer token required" : "");
    }
    if (cfg->admin_token)
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "listen", .reason = "console"),
                      "operator console at /console");
}

/* The hub, the webhook sender, the loops and the backplane, then the
 * lines that say where it listens. 0 or 1 (said in the log). */
static int start(struct srv *srv)
{
    srv->hub = test_dir_hub(srv);
    if (!srv->hub)
        srv->hub = srv_redis_cluster_hub_create(srv);
    /* From here on stderr carries only log lines (JSON with
     * --log-format json); the listening line goes to stdout. */
    if (!srv->hub) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "out_of_memory"),
                      "out of memory");
        return 1;
    }
    if (srv_wh_start(srv) || srv_loops_create(srv) ||
        srv_redis_cluster_start(srv) ||
        srv_loops_start(srv)) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed"),
                      "cannot start (see the lines above)");
        return 1;
    }
    log_listening(srv);
    fflush(stdout);
    return 0;
}

/* Running: each second the heap trim's and the log's tick; SIGHUP
 * reloads. Returns the signal that ends it (SIGTERM or SIGINT). */
static int serve(struct srv *srv, const sigset_t *set)
{
    struct timespec trim_ts = { 1, 0 };
    struct srv_memtrim trim;
    int sig;

    srv_memtrim_init(&trim, handshakes(srv), srv_now_ms());
    for (;;) {
        sig = sigtimedwait(set, NULL, &trim_ts);
        if (sig < 0) {
            trim_tick(srv, &trim);
            srv_log_tick(srv_now_ms());
            continue;
        }
        if (sig != SIGHUP)
            return sig;
        /* Only before the drain: the loops' contexts are all alive. */
        srv_tls_reload(srv);
        srv_config_reload(srv);
    }
}

/* The drain (docs/DESIGN.md section 11) until every loop is done; a
 * second SIGTERM or SIGINT exits at once. */
static void drain(struct srv *srv, const sigset_t *set, int sig)
{
    struct timespec poll_ts = { 0, 100 * 1000000 };

    srv_log_event(HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "drain",
                            .reason = sig == SIGTERM ? "SIGTERM" : "SIGINT"),
                  "%s: draining over %llums (signal again to exit "
                  "now)",
                  sig == SIGTERM ? "SIGTERM" : "SIGINT",
                  (unsigned long long)srv->cfg->drain_timeout_ms);
    hub_start_drain(srv->hub);
    while (atomic_load(&srv->loops_done) < srv->n_loops) {
        sig = sigtimedwait(set, NULL, &poll_ts);
        srv_log_tick(srv_now_ms());
        if (sig == SIGHUP) {
            srv_log_event(HUB_LOG_INFO, 0,
                          HUB_LOG_F(.event = "reload",
                                    .reason = "ignored_draining"),
                          "SIGHUP: ignored while draining");
            continue;
        }
        if (sig == SIGTERM || sig == SIGINT) {
            srv_log_event(HUB_LOG_WARN, 0,
                          HUB_LOG_F(.event = "drain", .reason = "exit_now"),
                          "second signal: exiting now");
            _exit(1);
        }
    }
}

int main(int argc, char **argv, char **envp)
{
    static struct srv_config cfg;
    struct srv srv;
    sigset_t set;
    int code;

    hold_stdio();
    /* The key of every table a peer's strings index (hub/base/hash.h): first,
     * before any table (the apps' among them) is built. */
    if (hub_hash_init()) {
        fprintf(stderr, "lubdub: cannot start libsodium for the hash key\n");
        return 1;
    }
    code = load_config(&cfg, argc, argv, envp);
    if (code >= 0)
        return code;
    if (init_srv(&srv, &cfg, argc, argv, envp))
        return 1;
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (start(&srv))
        return 1;
    drain(&srv, &set, serve(&srv, &set));
    srv_loops_join(&srv);
    srv_wh_stop(&srv);
    srv_redis_cluster_stop(&srv);
    srv_log_event(HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "drained"),
                  "drained; bye");
    hub_destroy(srv.hub);
    srv_secrets_fini(&srv.secrets);
    srv_config_fini(&cfg);
    return 0;
}
