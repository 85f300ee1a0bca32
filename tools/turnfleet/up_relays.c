/* Carrying out the engine's actions: turnserver children (config 0600, start,
 * stop, reap), the coturn CLI through relayctl workers (counts and drains, on
 * their own threads, so a relay that does not answer stalls no other), and the
 * rounds of probes, each a probe set run on the runtime's own loop (its hooks in
 * up_poll()), so a relay slow to answer holds up nothing. Every outcome goes back
 * to the engine. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "secure.h"
#include "up.h"

static up_child *find_child(up *u, const char *name)
{
  for (size_t i = 0; i < u->nchildren; i++)
    if (!strcmp(u->children[i].name, name)) return &u->children[i];
  return NULL;
}

static void stop_child(up *u, const char *name)
{
  up_child *c = find_child(u, name);
  if (!c) return;
  if (c->pid > 0) up_stop(c->pid, u->grace_ms);
  free(c->name);
  *c = u->children[--u->nchildren];
}

void up_stop_all(up *u)
{
  while (u->nchildren) stop_child(u, u->children[0].name);
  free(u->children);
  u->children = NULL;
}

/* START (or the second half of RESTART): config 0600, then turnserver -c. @return the pid or -1. */
static pid_t start_relay(up *u, const tf_engine_action *a)
{
  char dir[4096], conf[4200], out[4200];
  snprintf(dir, sizeof(dir), "%s/%s", u->state_dir, a->relay);
  snprintf(conf, sizeof(conf), "%s/turnserver.conf", dir);
  snprintf(out, sizeof(out), "%s/%s.out", u->log_dir, a->relay);
  /* a listener another process holds: the bind error, not a relay that never answers */
  const tf_plan *plan = tf_reconcile_plan(tf_engine_reconcile(u->engine));
  char why[512];
  for (size_t i = 0; plan && i < tf_plan_relay_count(plan); i++)
    if (!strcmp(tf_relay_name(tf_plan_relay(plan, i)), a->relay) &&
        up_relay_bind_problem(tf_engine_pool(u->engine), tf_plan_relay(plan, i), why, sizeof(why)) < 0) {
      up_say(a->relay, "not started: %s", why);
      up_log(u, "%s: not started: %s", a->relay, why);
      cJSON *ev = cJSON_CreateObject();
      cJSON_AddStringToObject(ev, "relay", a->relay);
      cJSON_AddStringToObject(ev, "message", why);
      up_event(u, "relayStartFailed", ev);
      return -1;
    }
  /* the only copy of the secret on disk: 0600, atomic, never through a symbolic link */
  if ((mkdir(dir, 0700) < 0 && errno != EEXIST) || secure_write_file(conf, a->config, strlen(a->config)) < 0) {
    up_say(a->relay, "cannot write its config: %s", strerror(errno));
    up_log(u, "%s: cannot write its config: %s", a->relay, strerror(errno));
    return -1;
  }
  pid_t pid = up_spawn(u->turnserver, conf, out);
  up_child *grown = pid > 0 ? realloc(u->children, (u->nchildren + 1) * sizeof(up_child)) : NULL;
  if (pid > 0 && grown) {
    u->children = grown;
    u->children[u->nchildren++] = (up_child){strdup(a->relay), pid};
  }
  if (pid < 0) up_say(a->relay, "cannot start %s: %s", u->turnserver, strerror(errno));
  return pid;
}

/* DRAIN or COUNT through a relayctl worker; the result comes back in up_take_results(). */
static void submit_cli(up *u, const tf_engine_action *a, int64_t now)
{
  tf_relayctl_request req = TF_RELAYCTL_REQUEST_INIT;
  req.op = a->kind == TF_ENGINE_COUNT ? (a->count == TF_ENGINE_COUNT_METRICS ? TF_RELAYCTL_COUNT_METRICS : TF_RELAYCTL_COUNT)
           : a->drain == TF_ENGINE_DRAIN_MODE ? TF_RELAYCTL_DRAIN : TF_RELAYCTL_REFUSE;
  req.address = a->address;
  req.port = req.op == TF_RELAYCTL_COUNT_METRICS ? a->metrics_port : a->cli_port;
  req.password = a->cli_password; /* the relay's own, and only to a listener of its process */
  req.owner_pid = a->relay_id ? atoi(a->relay_id) : 0;
  req.timeout_ms = (int)a->timeout_ms;
  if (tf_relayctl_workers_submit(u->ctl, &req, a->id) < 0) {
    if (a->kind == TF_ENGINE_COUNT) (void)tf_engine_count_done(u->engine, a->id, -1, now);
    else (void)tf_engine_done(u->engine, a->id, 0, NULL, now);
  }
}

/* PROBE: one probe per URI into the round's set, as the engine says. */
static void add_probes(up *u, const tf_engine_action *a, tf_probe_set *set, uint64_t *ids, size_t *n)
{
  for (size_t j = 0; j < a->probe_count; j++) {
    tf_probe_options po = TF_PROBE_OPTIONS_INIT;
    po.rto_ms = 200;
    po.peer_check = u->peer_check;
    po.ca_file = u->ca_file;
    if (tf_engine_probe_options(u->engine, a, j, &po) == 0 && tf_probe_set_add(set, &po) == 0) ids[(*n)++] = a->id;
  }
}

/* Start the step's round of probes on the runtime's loop (up_poll() waits for it, up_probes() runs it);
 * the relays it probes (u->probed) go with it, to be reported when it ends. */
static void start_probes(up *u, tf_probe_set *set, uint64_t *ids, size_t n)
{
  up_round *grown = n ? realloc(u->rounds, (u->nrounds + 1) * sizeof(*grown)) : NULL;
  if (grown) u->rounds = grown;
  if (!grown || tf_probe_set_start(set, NULL, NULL) < 0) {
    int64_t now = up_now_ms();
    for (size_t i = 0; i < n; i++) /* the engine hears of every probe it handed out */
      if (i == 0 || ids[i] != ids[i - 1]) (void)tf_engine_probe_results_done(u->engine, ids[i], NULL, 0, now);
    tf_probe_set_free(set);
    free(ids);
    return;
  }
  u->rounds[u->nrounds++] = (up_round){set, ids, n, u->probed, u->nprobed};
  u->probed = NULL;
  u->nprobed = 0;
}

/* A round that ended: each relay's results go back together. */
static void finish_round(up *u, up_round *r)
{
  const tf_probe_result **results = calloc(r->n, sizeof(*results));
  int64_t now = up_now_ms();
  for (size_t i = 0; i < r->n;) {
    size_t j = i;
    for (; j < r->n && r->ids[j] == r->ids[i]; j++)
      if (results) results[j] = tf_probe_set_result(r->set, j);
    (void)tf_engine_probe_results_done(u->engine, r->ids[i], results ? results + i : NULL, results ? j - i : 0, now);
    i = j;
  }
  free(results);
  tf_probe_set_free(r->set);
  free(r->ids);
  /* the next step shows the outcomes: its event names the relays this round probed */
  char **grown = realloc(u->probed, (u->nprobed + r->nrelays + 1) * sizeof(char *));
  for (size_t i = 0; i < r->nrelays; i++)
    if (grown) grown[u->nprobed++] = r->relays[i];
    else free(r->relays[i]);
  if (grown) u->probed = grown;
  free(r->relays);
  u->event_due = 1;
}

int up_probes(up *u)
{
  int ended = 0;
  for (size_t i = 0; i < u->nrounds;) {
    size_t running = 0;
    (void)tf_probe_set_process(u->rounds[i].set, &running); /* a failed round ends with what it has */
    if (running) {
      i++;
      continue;
    }
    finish_round(u, &u->rounds[i]);
    u->rounds[i] = u->rounds[--u->nrounds];
    ended++;
  }
  return ended;
}

void up_probes_free(up *u)
{
  for (size_t i = 0; i < u->nrounds; i++) {
    tf_probe_set_free(u->rounds[i].set);
    free(u->rounds[i].ids);
    for (size_t j = 0; j < u->rounds[i].nrelays; j++) free(u->rounds[i].relays[j]);
    free(u->rounds[i].relays);
  }
  free(u->rounds);
  u->rounds = NULL;
  u->nrounds = 0;
}

void up_forget_step(up *u)
{
  for (size_t i = 0; i < u->nacts; i++) free(u->acts[i]);
  for (size_t i = 0; i < u->nprobed; i++) free(u->probed[i]);
  free(u->acts);
  free(u->probed);
  u->acts = u->probed = NULL;
  u->nacts = u->nprobed = 0;
}

void up_carry_out(up *u, int64_t now)
{
  up_forget_step(u);
  size_t n = tf_engine_action_count(u->engine), nprobes = 0;
  u->acts = calloc(n + 1, sizeof(char *));
  u->probed = calloc(n + 1, sizeof(char *));
  uint64_t *probe_ids = NULL;
  size_t nuris = 0;
  for (size_t i = 0; i < n; i++) nuris += tf_engine_action_at(u->engine, i)->probe_count;
  probe_ids = calloc(nuris + 1, sizeof(uint64_t));
  tf_probe_set *set = NULL;
  if (!u->acts || !u->probed || !probe_ids || tf_probe_set_new(&set, 16) < 0) n = 0;
  for (size_t i = 0; i < n; i++) {
    const tf_engine_action *a = tf_engine_action_at(u->engine, i);
    char id[24] = "", path[4200];
    if (a->kind <= TF_ENGINE_STOP &&
        asprintf(&u->acts[u->nacts], "%s %s (%s)", tf_engine_action_name(a->kind), a->relay, a->reason) > 0)
      u->nacts++;
    switch (a->kind) {
    case TF_ENGINE_RESTART:
    case TF_ENGINE_START: {
      if (a->kind == TF_ENGINE_RESTART) stop_child(u, a->relay);
      pid_t pid = start_relay(u, a);
      if (pid > 0) snprintf(id, sizeof(id), "%d", (int)pid);
      (void)tf_engine_done(u->engine, a->id, pid > 0, id, now);
      break;
    }
    case TF_ENGINE_STOP:
      stop_child(u, a->relay);
      snprintf(path, sizeof(path), "%s/%s/turnserver.conf", u->state_dir, a->relay);
      unlink(path); /* the only copy of the secret on disk goes with the relay */
      (void)tf_engine_done(u->engine, a->id, 1, NULL, now);
      break;
    case TF_ENGINE_DRAIN:
    case TF_ENGINE_COUNT: submit_cli(u, a, now); break;
    case TF_ENGINE_PROBE: {
      size_t before = nprobes;
      add_probes(u, a, set, probe_ids, &nprobes);
      if (nprobes > before && (u->probed[u->nprobed] = strdup(a->relay))) u->nprobed++;
      break;
    }
    }
  }
  if (nprobes) start_probes(u, set, probe_ids, nprobes);
  else tf_probe_set_free(set), free(probe_ids);
  u->event_due = u->nacts > 0; /* a round's event comes when it ends (finish_round) */
}

void up_take_results(up *u)
{
  uint64_t id;
  tf_err rc;
  int64_t count;
  while (tf_relayctl_workers_next(u->ctl, &id, &rc, &count) == 1)
    if (tf_engine_count_done(u->engine, id, rc == 0 ? count : -1, up_now_ms()) == TF_ENOTFOUND)
      (void)tf_engine_done(u->engine, id, rc == 0, NULL, up_now_ms());
}

/* The one reaper: every child that exited is collected here; a relay's is a fact for the engine,
 * which restarts it after its backoff. */
void up_reap_children(up *u)
{
  int status;
  pid_t pid;
  while ((pid = up_reap(&status)) > 0)
    for (size_t i = 0; i < u->nchildren; i++) {
      if (u->children[i].pid != pid) continue;
      up_child gone = u->children[i];
      u->children[i] = u->children[--u->nchildren]; /* a restart adds it again */
      tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
      f.name = gone.name;
      f.running = 0;
      (void)tf_engine_observe(u->engine, &f, up_now_ms());
      up_log(u, "%s: turnserver %d exited (%s %d)", f.name, (int)pid, WIFSIGNALED(status) ? "signal" : "status",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      free(gone.name);
      break;
    }
}
