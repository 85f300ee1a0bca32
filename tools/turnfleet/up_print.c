/* What `turnfleet up` shows: on a terminal a table redrawn after every step
 * with an event log below it that the redraws keep; with --json one event per
 * line (`reconcile` after each step that did something, and the events of
 * input changes and of the state directory). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "up.h"

void up_log(up *u, const char *fmt, ...)
{
  char when[16], *text = NULL;
  time_t t = time(NULL);
  struct tm tm;
  strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&t, &tm));
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&text, fmt, ap) < 0) text = NULL;
  va_end(ap);
  free(u->log[u->log_next]);
  if (!text || asprintf(&u->log[u->log_next], "%s %s", when, text) < 0) u->log[u->log_next] = NULL;
  free(text);
  u->log_next = (u->log_next + 1) % UP_LOG;
}

void up_event(up *u, const char *event, cJSON *fields)
{
  if (!fields) return;
  if (!u->json) {
    cJSON_Delete(fields);
    return;
  }
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "event", event);
  cJSON_AddNumberToObject(ev, "timeMs", (double)up_wall_ms());
  for (cJSON *f = fields->child; f; f = fields->child) cJSON_AddItemToObject(ev, f->string, cJSON_DetachItemViaPointer(fields, f));
  char *line = cJSON_PrintUnformatted(ev);
  if (line) printf("%s\n", line);
  fflush(stdout);
  free(line);
  cJSON_Delete(ev);
  cJSON_Delete(fields);
}

static void print_json(up *u, size_t ready)
{
  const tf_reconcile *rec = tf_engine_reconcile(u->engine);
  const tf_pool *pool = tf_engine_pool(u->engine);
  const char *unhealthy = up_health(u);
  cJSON *ev = cJSON_CreateObject(), *rel, *a, *uris;
  cJSON_AddStringToObject(ev, "pool", tf_pool_name(pool));
  cJSON_AddBoolToObject(ev, "stopping", up_stop_signals > 0);
  cJSON_AddNumberToObject(ev, "readyRelays", (double)ready);
  cJSON_AddNumberToObject(ev, "desiredReplicas", (double)tf_pool_replicas(pool));
  cJSON_AddNumberToObject(ev, "placedReplicas", (double)tf_plan_relay_count(tf_reconcile_plan(rec)));
  if (unhealthy) cJSON_AddStringToObject(ev, "unhealthy", unhealthy);
  else cJSON_AddNullToObject(ev, "unhealthy");
  cJSON *conds = cJSON_AddArrayToObject(ev, "conditions");
  for (size_t i = 0; i < tf_reconcile_condition_count(rec); i++) {
    const char *type, *status, *reason, *message;
    if (tf_reconcile_condition(rec, i, &type, &status, &reason, &message, NULL) < 0) continue;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", type);
    cJSON_AddStringToObject(c, "status", status);
    cJSON_AddStringToObject(c, "reason", reason);
    cJSON_AddStringToObject(c, "message", message);
    cJSON_AddItemToArray(conds, c);
  }
  cJSON_AddItemToObject(ev, "actions", a = cJSON_CreateArray());
  for (size_t i = 0; i < u->nacts; i++) cJSON_AddItemToArray(a, cJSON_CreateString(u->acts[i]));
  cJSON_AddItemToObject(ev, "probed", a = cJSON_CreateArray());
  for (size_t i = 0; i < u->nprobed; i++) cJSON_AddItemToArray(a, cJSON_CreateString(u->probed[i]));
  cJSON_AddItemToObject(ev, "relays", rel = cJSON_CreateArray());
  for (size_t i = 0; i < tf_engine_relay_count(u->engine); i++) {
    const tf_engine_relay *r = tf_engine_relay_at(u->engine, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(rel, o);
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON_AddStringToObject(o, "state", tf_engine_relay_state_name(r->state));
    cJSON_AddBoolToObject(o, "published", (r->flags & TF_RELAY_PUBLISHED) != 0);
    cJSON_AddNumberToObject(o, "pid", r->id ? atoi(r->id) : 0);
    cJSON_AddNumberToObject(o, "restarts", (double)r->restarts);
    if (r->allocations >= 0) cJSON_AddNumberToObject(o, "allocations", (double)r->allocations);
    else cJSON_AddNullToObject(o, "allocations");
    if (r->probe_ms && !r->probe_ok && r->probe_message) cJSON_AddStringToObject(o, "probeMessage", r->probe_message);
  }
  cJSON_AddItemToObject(ev, "uris", uris = cJSON_CreateArray());
  for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++)
    cJSON_AddItemToArray(uris, cJSON_CreateString(tf_reconcile_uri(rec, i)));
  up_event(u, "reconcile", ev);
}

static void print_table(up *u, size_t ready)
{
  const tf_reconcile *rec = tf_engine_reconcile(u->engine);
  const tf_pool *pool = tf_engine_pool(u->engine);
  const char *unhealthy = up_health(u);
  printf("\033[H\033[Jturnfleet up  pool %s/%s  coturn %s  ready %zu/%lld (placed %zu)  uris %zu%s%s%s\n\n"
         "%-22s %-16s %-13s %-9s %-7s %-8s %-8s %s\n",
         tf_pool_namespace(pool), tf_pool_name(pool), tf_pool_coturn_version(pool), ready,
         (long long)tf_pool_replicas(pool), tf_plan_relay_count(tf_reconcile_plan(rec)), tf_reconcile_uri_count(rec),
         up_stop_signals ? "  STOPPING (draining)" : "", unhealthy ? "  UNHEALTHY: " : "", unhealthy ? unhealthy : "",
         "RELAY", "ADDRESS", "PORTS", "STATE", "ALLOCS", "PID", "RESTARTS", "LAST PROBE");
  for (size_t i = 0; i < tf_engine_relay_count(u->engine); i++) {
    const tf_engine_relay *r = tf_engine_relay_at(u->engine, i);
    char ports[32] = "-", allocs[24] = "-";
    if (r->ports.start) snprintf(ports, sizeof(ports), "%u-%u", r->ports.start, r->ports.end);
    if (r->allocations >= 0) snprintf(allocs, sizeof(allocs), "%lld", (long long)r->allocations);
    int failed = r->probe_ms && !r->probe_ok;
    printf("%-22s %-16s %-13s %-9s %-7s %-8s %-8lld %s%s%.60s\n", r->name, *r->address ? r->address : "-", ports,
           tf_engine_relay_state_name(r->state), allocs, r->id ? r->id : "-", (long long)r->restarts,
           !r->probe_ms ? "-" : r->probe_ok ? "ok" : "FAIL", failed ? ": " : "",
           failed && r->probe_message ? r->probe_message : "");
  }
  printf("\nturn URIs:\n");
  for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++) printf("  %s\n", tf_reconcile_uri(rec, i));
  printf("\nconditions:\n");
  for (size_t i = 0; i < tf_reconcile_condition_count(rec); i++) {
    const char *type, *status, *reason, *message;
    if (tf_reconcile_condition(rec, i, &type, &status, &reason, &message, NULL) == 0)
      printf("  %-20s %-5s %s: %s\n", type, status, reason, message);
  }
  /* the event log survives the redraws: the last lines of what happened */
  for (size_t i = 0; i < u->nacts; i++) up_log(u, "%s", u->acts[i]);
  printf("\nevents:\n");
  for (size_t i = 0; i < UP_LOG; i++)
    if (u->log[(u->log_next + i) % UP_LOG]) printf("  %s\n", u->log[(u->log_next + i) % UP_LOG]);
  fflush(stdout);
}

void up_print(up *u)
{
  size_t ready = 0;
  for (size_t i = 0; i < tf_engine_relay_count(u->engine); i++)
    ready += tf_engine_relay_at(u->engine, i)->state == TF_ENGINE_RELAY_READY;
  if (u->json) print_json(u, ready);
  else print_table(u, ready);
}
