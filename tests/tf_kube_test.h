/* The Kubernetes API stand-in (tests/kube/cluster.py) for the check suites:
 * started in a private directory, stopped by PID, faults and the request log
 * through its control endpoint (libcurl, cJSON). */
#ifndef TF_KUBE_TEST_H
#define TF_KUBE_TEST_H

#include <cjson/cJSON.h>
#include <sys/types.h>

#include "turnfleet.h"

typedef struct tf_test_cluster {
  pid_t pid;
  char *dir;
  char server[64];
  char control[64];
  char kubeconfig[4200];
  char token_path[4200];
  char ca_path[4200];
  char *token; /* the admin token */
} tf_test_cluster;

/* Start cluster.py on ADDR:PORT (control PORT+1) with extra flags (NULL-terminated). */
void tf_test_cluster_start(tf_test_cluster *c, const char *addr, int port, const char *const *extra);
/* SIGTERM, wait, remove the directory. */
void tf_test_cluster_stop(tf_test_cluster *c);
/* A control request; returns the answer parsed (caller deletes), fails the test unless 2xx. */
cJSON *tf_test_control(const tf_test_cluster *c, const char *method, const char *path, const char *body);
/* Add a fault rule (JSON text). */
void tf_test_fault(const tf_test_cluster *c, const char *json);
/* Clear faults and the request log. */
void tf_test_reset(const tf_test_cluster *c);
/* Count logged requests whose method matches and whose path contains @p path_part
 * and whose query contains @p query_part (NULL = any). */
int tf_test_count(const tf_test_cluster *c, const char *method, const char *path_part, const char *query_part);
/* Wait (up to 30 s) until the request log holds at least @p n such requests (a request is logged once its
 * answer is sent, so a client can be back before its request is in the log); fails the test otherwise.
 * Returns the count seen. */
int tf_test_wait_count(const tf_test_cluster *c, const char *method, const char *path_part, const char *query_part,
                       int n);
/* The request log entries matching, in order (caller deletes the array). */
cJSON *tf_test_requests(const tf_test_cluster *c, const char *method, const char *path_part, const char *query_part);
/* A client on the cluster's kubeconfig, logging into @p log (may be NULL). */
tf_kube *tf_test_kube(const tf_test_cluster *c, char **log);
/* A new token for @p user (group system:masters) written to @p path; returns its text (caller frees). */
char *tf_test_new_token(const tf_test_cluster *c, const char *user, const char *path);
/* A client with explicit options: the cluster's server and CA, @p token_path re-read;
 * @p user_agent may be NULL; logs into @p log when not NULL. */
tf_kube *tf_test_kube_token(const tf_test_cluster *c, const char *token_path, const char *user_agent, char **log);
/* Log callback appending to a char ** buffer (thread-safe; read it after the writers stopped). */
void tf_test_log_cb(tf_log_level level, const char *msg, void *payload);
/* Occurrences of @p needle in a buffer filled by tf_test_log_cb (locked read). */
int tf_test_log_count(char **buf, const char *needle);
/* Sleep ms. */
void tf_test_sleep_ms(long ms);

#endif
