/* turnfleet up: the local runtime (one turnserver child per relay on this host),
 * a driver of the library's fleet engine (engine.h). Private to the tool.
 * The driver is split by job: up.c (start, the loop, the wiring), up_flags.c
 * (the command line), up_inputs.c (the pool, nodes and secret files and the
 * turnserver they must agree with), up_relays.c (carrying out the engine's
 * actions: children, the coturn CLI, probes), up_publish.c (the published files
 * and /metrics' text), up_print.c (the terminal table, the JSON events, the event
 * log), up_http.c (/metrics and /healthz), supervise.c (process primitives). */
#ifndef TURNFLEET_TOOL_UP_H
#define TURNFLEET_TOOL_UP_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <turnfleet.h>

#include "tool_io.h"

#define UP_PROG "turnfleet up"
#define up_say(what, ...) tool_say(UP_PROG, what, __VA_ARGS__)

/* `turnfleet up ...`: argv[0] is "up". Returns the exit code. */
int up_main(int argc, char **argv);

#define UP_LOG 12 /* lines of the table's event log */

/* Why /healthz fails, one slot per source (static strings; NULL: fine). */
enum { UP_H_POOL, UP_H_NODES, UP_H_SECRET, UP_H_FILES, UP_H_COUNT };

typedef struct up_child {
  char *name;
  pid_t pid;
} up_child;

/* A step's probes, running on the loop: ids[i] is the engine's action of the set's probe i. */
typedef struct up_round {
  tf_probe_set *set;
  uint64_t *ids;
  size_t n;
  char **relays; /* the relays it probes: u->probed once it ended */
  size_t nrelays;
} up_round;

typedef struct up {
  /* flags */
  const char *pool_file, *name, *addresses, *nodes_file, *turnserver, *metrics_addr, *secret_file, *ca_file;
  const char *state_dir_arg;
  char *cert, *key;
  double probe_interval;
  uint16_t cli_port;
  int json, peer_check, allow_loopback_peers;
  /* the runtime */
  char *state_dir, *log_dir, *secret, *previous, *last_status; /* secret, previous: wiped */
  char cli_password[33];
  int grace_ms;
  struct timespec pool_mtime, secret_mtime, nodes_mtime;
  uint32_t ts_version, ts_build; /* the turnserver that runs: its version and TF_COTURN_BUILD_* bits */
  char ts_version_text[64];
  tf_engine *engine;
  tf_relayctl_workers *ctl;
  up_round *rounds; /* probe rounds in flight */
  size_t nrounds;
  up_child *children;
  size_t nchildren;
  char *log[UP_LOG]; /* the table's event log, a ring */
  size_t log_next;
  char **acts; /* the last step's lifecycle actions, printed after the next step */
  size_t nacts;
  char **probed; /* the relays of the probe rounds that ended since the last step, likewise */
  size_t nprobed;
  int event_due, files_failing;
  /* read by the HTTP thread too, under mu */
  pthread_mutex_t mu;
  char *metrics_text;
  const char *unhealthy[UP_H_COUNT];
  int64_t loop_ms; /* when the loop last went round */
  struct MHD_Daemon *mhd;
} up;

/* SIGINT/SIGTERM seen (up.c) */
extern volatile sig_atomic_t up_stop_signals;

/* ---- up_flags.c ---- */

/* Parse argv into @p u. @return -1 to go on, else the exit code (0 after --help, 2 for bad flags). */
int up_parse_flags(up *u, int argc, char **argv);

/* ---- up_inputs.c ---- */

/* What --turnserver is (its version and build). 0, or -1 reported. */
int up_detect_turnserver(up *u);
/* The pool file, parsed, validated and checked against the turnserver; NULL with every problem reported. */
tf_pool *up_load_pool(up *u);
/* The inventory from --addresses or --nodes for @p pool; NULL reported, the reason in @p why. */
tf_nodes *up_load_nodes(up *u, const tf_pool *pool, char *why, size_t size);
/* 0 when every relay's listeners can be bound now; -1 with the bind error reported. */
int up_check_listeners(const tf_pool *pool, const tf_nodes *nodes);
/* 0 when relay @p r's listeners can be bound now; -1 with the bind error in @p why. */
int up_relay_bind_problem(const tf_pool *pool, const tf_relay *r, char *why, size_t size);
/* The render options: the current secret, and the one before it while relays may still run with it. */
tf_coturn_options up_coturn_options(up *u, const char *secrets[2]);
/* 1 (and *seen updated) when @p path's mtime changed. */
int up_file_changed(const char *path, struct timespec *seen);
/* The input files that changed since the last call: pool, secret, nodes. */
void up_watch_inputs(up *u);
void up_set_unhealthy(up *u, int source, const char *why);

/* ---- up_relays.c ---- */

/* Carry out the last step's actions; the lifecycle ones and the relays probed are kept for the next event. */
void up_carry_out(up *u, int64_t now);
/* Free what the last step did (acts, probed). */
void up_forget_step(up *u);
/* Exited children and the CLI results that came back, as facts for the engine. */
void up_reap_children(up *u);
void up_take_results(up *u);
/* Stop every child left. */
void up_stop_all(up *u);
/* One non-blocking round of every probe set in flight; a finished one's results go to the engine.
 * @return how many ended. */
int up_probes(up *u);
/* Abandon the rounds in flight (their allocations released, best effort). */
void up_probes_free(up *u);

/* ---- up_publish.c ---- */

/* status.json, turn-uris, iceServers.json (only when the status changed, or the last write failed)
 * and the text of /metrics. A failed write removes the stale files, reports once, and is retried. */
void up_publish(up *u);

/* ---- up_print.c ---- */

/* A line of the table's event log, stamped with the time. */
__attribute__((format(printf, 2, 3))) void up_log(up *u, const char *fmt, ...);
/* One JSON event line {"event": @p event, ...@p fields} on stdout (--json); @p fields is consumed. */
void up_event(up *u, const char *event, cJSON *fields);
/* The table (TTY) or a "reconcile" event (--json) of the last step, with what it did (acts, probed). */
void up_print(up *u);

/* ---- up_http.c ---- */

/* Serve /metrics and /healthz on --metrics-addr. 0, or -1 reported. */
int up_http_start(up *u);
/* Why the runtime cannot do its job now (what /healthz says with 503), NULL when it can. */
const char *up_health(up *u);
/* The loop went round: /healthz's stall clock. */
void up_loop_alive(up *u);

/* ---- supervise.c: turnserver children ---- */

/* Start `turnserver -c CONF` in its own process group with stdout and stderr
 * appended to @p log_path; it dies with us (PR_SET_PDEATHSIG). @return the pid or -1. */
pid_t up_spawn(const char *turnserver, const char *conf, const char *log_path);

/* SIGTERM, wait up to @p grace_ms, then SIGKILL and reap. @return the wait status, or -1 when it was not ours. */
int up_stop(pid_t pid, int grace_ms);

/* Reap one exited child without blocking: its pid (and *status), 0 when none, -1 when no children. */
pid_t up_reap(int *status);

/* CLOCK_MONOTONIC in ms (every interval), and the wall clock in Unix ms (timestamps only). */
int64_t up_now_ms(void);
int64_t up_wall_ms(void);

/* Run `CMD ARG` (no shell), its stdout and stderr into @p buf (NUL-terminated,
 * cut at @p size - 1), killed after @p timeout_ms. @return the bytes read, or
 * -1 (errno ENOENT when it could not be run at all). */
int up_capture(const char *cmd, const char *arg, char *buf, size_t size, int timeout_ms);

#endif
