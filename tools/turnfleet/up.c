/* turnfleet up: the local runtime, a thin driver of the library's fleet
 * engine. This file is its start (what cannot work is refused with exit 2) and
 * its loop: facts in (children reaped, CLI results, input files), a step of
 * the engine, its actions carried out, the outputs published. The jobs are in
 * the files up.h lists. Secrets live only in the 0600 relay configs and in memory. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "up.h"

#define UP_POLL_ROUNDS 16 /* probe rounds waited on at once (one per step with probes: rarely more than one) */

volatile sig_atomic_t up_stop_signals;

static void on_signal(int sig)
{
  (void)sig;
  up_stop_signals++;
}

/* The pool, its nodes and the turnserver agree, and every listener can be bound: the engine's inputs. */
static int start_inputs(up *u, tf_pool **pool, tf_nodes **nodes)
{
  if (up_detect_turnserver(u) < 0) return -1;
  if (tf_cred_secret_read(&u->secret, u->secret_file) < 0) return up_say("--secret-file", "%s", tf_error_last()->message), -1;
  char why[1024];
  if (!(*pool = up_load_pool(u)) || !(*nodes = up_load_nodes(u, *pool, why, sizeof(why)))) return -1;
  if (tf_engine_check_runtime(*pool, u->ts_version, u->cert != NULL) < 0) {
    const char *m = tf_error_last()->message;
    if (strstr(m, "coturnVersion"))
      up_say(u->pool_file, "%s (%s; set coturnVersion to %s, or give --turnserver a coturn %s)", m, u->turnserver,
             u->ts_version_text, tf_pool_coturn_version(*pool));
    else up_say("--cert/--key", "%s", m);
    return -1;
  }
  if (tf_engine_check_placement(*pool, *nodes) < 0) return up_say(u->addresses ? "--addresses" : u->nodes_file, "%s", tf_error_last()->message), -1;
  return up_check_listeners(*pool, *nodes);
}

/* The state directory (its mode kept when it exists) and its lock: one `up` per directory. */
static int start_state_dir(up *u)
{
  if ((mkdir(u->state_dir_arg, 0700) < 0 && errno != EEXIST) || !(u->state_dir = realpath(u->state_dir_arg, NULL)) ||
      !(u->log_dir = tool_join(u->state_dir, "logs")) || (mkdir(u->log_dir, 0700) < 0 && errno != EEXIST))
    return up_say("--state-dir", "cannot create %s: %s", u->state_dir_arg, strerror(errno)), -1;
  char *lock_path = tool_join(u->state_dir, "lock");
  int lock_fd = lock_path ? open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1; /* held until exit */
  free(lock_path);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) < 0)
    return up_say("--state-dir", "%s is in use by another turnfleet up", u->state_dir), -1;
  return 0;
}

/* Everything before the loop; @return -1 to go on, else the exit code. */
static int start(up *u)
{
  tf_pool *pool = NULL;
  tf_nodes *nodes = NULL;
  if (start_inputs(u, &pool, &nodes) < 0 || start_state_dir(u) < 0) return tf_pool_free(pool), tf_nodes_free(nodes), 2;
  up_file_changed(u->pool_file, &u->pool_mtime);
  up_file_changed(u->secret_file, &u->secret_mtime);
  if (u->nodes_file) up_file_changed(u->nodes_file, &u->nodes_mtime);
  unsigned char rnd[16];
  if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) return tf_pool_free(pool), tf_nodes_free(nodes), 1;
  for (size_t i = 0; i < sizeof(rnd); i++) snprintf(u->cli_password + 2 * i, 3, "%02x", rnd[i]);
  explicit_bzero(rnd, sizeof(rnd));
  u->grace_ms = (tf_coturn_features(u->ts_version) & TF_COTURN_GRACEFUL_SIGTERM) ? 8000 : 3000;
  const char *secrets[2];
  tf_coturn_options co = up_coturn_options(u, secrets);
  tf_engine_options eo = TF_ENGINE_OPTIONS_INIT;
  eo.coturn = &co;
  eo.log_dir = u->log_dir;
  eo.probe_interval_ms = (int64_t)(u->probe_interval * 1000);
  eo.publish_delay_ms = eo.probe_interval_ms; /* turn-uris is rewritten at once; readers poll it */
  if (tf_engine_new(&u->engine, pool, nodes, &eo) < 0) return up_say(u->pool_file, "%s", tf_error_last()->message), 2;
  char *status_path = tool_join(u->state_dir, "status.json");
  char *old = status_path ? tool_read_file(status_path, NULL, TOOL_READ_MAX) : NULL;
  if (old) (void)tf_engine_set_status(u->engine, old, strlen(old)); /* conditions keep their transition times */
  free(old);
  free(status_path);
  if (tf_relayctl_workers_new(&u->ctl, 8) < 0) return up_say("relayctl", "%s", tf_error_last()->message), 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  return up_http_start(u) < 0 ? 1 : -1;
}

/* Wait for what the loop serves: CLI results, the probe rounds' sockets and timers, the engine's
 * next deadline; children, signals and files every 100 ms. /metrics and /healthz have their own
 * thread (up_http.c), which this loop never holds up. @return 1 when only the probe rounds woke it
 * (a socket of theirs, or a timer of theirs due before anything else), else 0. */
static int up_poll(up *u)
{
  int64_t next = tf_engine_next_ms(u->engine), wait = next ? next - up_now_ms() : 100; /* 0: nothing scheduled */
  int timeout = wait <= 0 ? 0 : wait > 100 ? 100 : (int)wait, own = timeout;
  struct pollfd p[UP_POLL_ROUNDS + 1];
  size_t n = 0;
  p[n++] = (struct pollfd){tf_relayctl_workers_fd(u->ctl), POLLIN, 0};
  for (size_t i = 0; i < u->nrounds; i++) {
    int t = tf_probe_set_timeout(u->rounds[i].set);
    if (t >= 0 && t < timeout) timeout = t;
    if (n <= UP_POLL_ROUNDS) p[n++] = (struct pollfd){tf_probe_set_fd(u->rounds[i].set), POLLIN, 0};
    else timeout = 0; /* no room to wait for it: go round at once */
  }
  if (own <= 0) return 0;
  int ready = timeout > 0 ? poll(p, n, timeout) : 0;
  if (ready < 0 || p[0].revents) return 0;
  return ready > 0 || timeout < own; /* a round's socket, or its timer before the loop's own time */
}

/* One step: decide, act, report back. What was done is printed after the next step, which shows its effect. */
static void iterate(up *u)
{
  if (tf_engine_step(u->engine, up_now_ms(), up_wall_ms()) < 0) {
    up_say("engine", "%s", tf_error_last()->message);
    return;
  }
  if (u->event_due) up_print(u);
  up_carry_out(u, up_now_ms());
  up_publish(u);
}

static void finish(up *u)
{
  if (u->mhd) MHD_stop_daemon(u->mhd);
  up_probes_free(u);
  up_stop_all(u);
  up_forget_step(u);
  tf_relayctl_workers_free(u->ctl);
  tf_engine_free(u->engine);
  tf_secret_free(u->secret);
  tf_secret_free(u->previous);
  explicit_bzero(u->cli_password, sizeof(u->cli_password));
  free(u->last_status);
  tf_free(u->metrics_text);
  for (size_t i = 0; i < UP_LOG; i++) free(u->log[i]);
  free(u->state_dir);
  free(u->cert);
  free(u->key);
  free(u->log_dir);
  pthread_mutex_destroy(&u->mu);
}

int up_main(int argc, char **argv)
{
  up u;
  memset(&u, 0, sizeof(u));
  u.metrics_addr = "127.0.0.1:9650";
  u.probe_interval = 5;
  u.cli_port = 5766;
  u.turnserver = "turnserver";
  u.state_dir_arg = "turnfleet-state";
  u.json = !isatty(STDOUT_FILENO);
  pthread_mutex_init(&u.mu, NULL);
  int st = up_parse_flags(&u, argc, argv);
  if (st < 0) st = start(&u);
  int64_t last_step = 0;
  for (sig_atomic_t seen = 0, probes_only = 0; st < 0;) {
    /* a pass a probe round's socket or timer woke, that ended no round, within 100 ms of the
     * last step and before the engine's next time: the probes' alone (no step to take) */
    int ended = up_probes(&u);
    int64_t now = up_now_ms();
    int64_t next = tf_engine_next_ms(u.engine);
    if (probes_only && !ended && now - last_step < 100 && (!next || now < next)) {
      probes_only = up_poll(&u);
      continue;
    }
    last_step = now;
    up_loop_alive(&u);
    up_reap_children(&u);
    up_take_results(&u);
    if (up_stop_signals != seen) {
      (void)tf_engine_shutdown(u.engine, up_now_ms(), seen > 0); /* a second signal: stop at once */
      seen = up_stop_signals;
    }
    if (!seen) up_watch_inputs(&u);
    iterate(&u);
    if (tf_engine_finished(u.engine)) st = 0;
    if (st < 0) probes_only = up_poll(&u);
  }
  if (u.engine && tf_engine_finished(u.engine)) {
    iterate(&u); /* the final status: no relay left, not ready */
    u.event_due = 1;
    iterate(&u);
    if (!u.json) printf("turnfleet up: every relay drained and stopped\n");
  }
  finish(&u);
  return st;
}
