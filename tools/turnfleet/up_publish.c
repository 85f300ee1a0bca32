/* What `turnfleet up` publishes: turn-uris, iceServers.json and status.json in
 * the state directory (each written atomically, the URIs first, so a relay that
 * left them is never still published by a newer status), and the text /metrics
 * serves. A write that fails (a full disk) removes the stale files, so none is
 * left claiming readiness; it is reported once and retried every step. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "up.h"

static const char *const published[] = {"turn-uris", "iceServers.json", "status.json"};

static int write_text(up *u, const char *name, const char *text)
{
  return tool_write_atomic(u->state_dir, name, text, strlen(text), 0644);
}

/* The write failed: nothing stale may stay behind. */
static void unpublish(up *u, int err)
{
  for (size_t i = 0; i < sizeof(published) / sizeof(*published); i++) {
    char *path = tool_join(u->state_dir, published[i]);
    if (path) unlink(path);
    free(path);
  }
  if (u->files_failing) return; /* reported once; retried every step */
  u->files_failing = 1;
  char why[256];
  snprintf(why, sizeof(why), "cannot write to %s: %s (retried every step; the published files are removed)",
           u->state_dir, strerror(err));
  up_say("--state-dir", "%s", why);
  up_log(u, "state directory: %s", why);
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "message", why);
  up_event(u, "stateDirUnwritable", ev);
  up_set_unhealthy(u, UP_H_FILES, "the state directory cannot be written");
}

static void republished(up *u)
{
  if (!u->files_failing) return;
  u->files_failing = 0;
  up_say("--state-dir", "%s written again", u->state_dir);
  up_log(u, "state directory written again");
  up_event(u, "stateDirWritable", cJSON_CreateObject());
  up_set_unhealthy(u, UP_H_FILES, NULL);
}

void up_publish(up *u)
{
  const tf_reconcile *rec = tf_engine_reconcile(u->engine);
  char *status = NULL, *ice = NULL, *metrics = NULL, *uris = NULL, *text = NULL;
  tf_metrics *m = NULL;
  if (tf_engine_status_json(&status, u->engine) == 0 && (!u->last_status || strcmp(status, u->last_status))) {
    size_t cap = 2;
    for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++) cap += strlen(tf_reconcile_uri(rec, i)) + 1;
    int err = (uris = calloc(1, cap)) ? 0 : ENOMEM;
    for (size_t i = 0; uris && i < tf_reconcile_uri_count(rec); i++) strcat(strcat(uris, tf_reconcile_uri(rec, i)), "\n");
    if (!err && write_text(u, "turn-uris", uris) < 0) err = errno;
    if (!err && (tf_reconcile_ice_servers_json(&ice, rec) < 0 || asprintf(&text, "%s\n", ice) < 0)) err = ENOMEM;
    if (!err && write_text(u, "iceServers.json", text) < 0) err = errno;
    free(text);
    text = NULL;
    if (!err && asprintf(&text, "%s\n", status) < 0) err = ENOMEM;
    if (!err && write_text(u, "status.json", text) < 0) err = errno;
    if (err) {
      unpublish(u, err);
    } else {
      free(u->last_status);
      u->last_status = strdup(status);
      republished(u);
    }
  }
  if (tf_metrics_new(&m) == 0 && tf_reconcile_metrics(m, rec) == 0 && tf_metrics_to_text(&metrics, m) == 0) {
    pthread_mutex_lock(&u->mu);
    tf_free(u->metrics_text);
    u->metrics_text = metrics;
    pthread_mutex_unlock(&u->mu);
  }
  tf_metrics_free(m);
  free(text);
  free(uris);
  tf_free(status);
  tf_free(ice);
}
