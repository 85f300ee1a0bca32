/* The load of bench/webhook and bench/issuer: C keep-alive connections on one
 * libcurl multi handle, each POSTing BODY_FILE (or, for "-", GETting) URL one
 * request after the other, for SECONDS (after a one-second warm-up), with one
 * extra request HEADER when given. Every answer must be 200 and contain
 * EXPECT. Prints one JSON line: requests, seconds, rps, p50/p90/p99/max ms.
 *   bench_webhook_load URL CA_FILE BODY_FILE|- EXPECT CONNECTIONS SECONDS [HEADER] */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool_io.h"

typedef struct slot {
  CURL *easy;
  char buf[65536];
  size_t len;
  double started;
} slot;

static double now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static size_t sink(char *p, size_t size, size_t n, void *arg)
{
  slot *s = arg;
  size_t k = size * n;
  if (s->len + k < sizeof(s->buf)) {
    memcpy(s->buf + s->len, p, k);
    s->len += k;
    s->buf[s->len] = '\0';
  }
  return k;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
  if (argc != 7 && argc != 8) {
    fprintf(stderr, "usage: bench_webhook_load URL CA_FILE BODY_FILE|- EXPECT CONNECTIONS SECONDS [HEADER]\n");
    return 2;
  }
  size_t body_len = 0;
  int get = strcmp(argv[3], "-") == 0;
  char *body = get ? calloc(1, 1) : tool_read_file(argv[3], &body_len, 1 << 24);
  int conns = atoi(argv[5]);
  double seconds = atof(argv[6]);
  if (!body || conns < 1 || conns > 1024 || seconds <= 0) {
    fprintf(stderr, "bench_webhook_load: bad arguments\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURLM *multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)conns);
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  hdr = curl_slist_append(hdr, "Expect:");
  if (argc == 8) hdr = curl_slist_append(hdr, argv[7]);
  slot *slots = calloc((size_t)conns, sizeof(slot));
  size_t cap = 1 << 20, count = 0;
  double *lat = malloc(cap * sizeof(double));
  long failures = 0;
  double t0 = now_s(), measure_from = t0 + 1.0, until = measure_from + seconds;
  for (int i = 0; i < conns; i++) {
    slot *s = &slots[i];
    s->easy = curl_easy_init();
    curl_easy_setopt(s->easy, CURLOPT_URL, argv[1]);
    curl_easy_setopt(s->easy, CURLOPT_CAINFO, argv[2]);
    if (!get) {
      curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, body);
      curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE, (long)body_len);
    }
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
    curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, 10000L);
    s->started = now_s();
    curl_multi_add_handle(multi, s->easy);
  }
  int running = conns;
  while (running > 0) {
    curl_multi_perform(multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(multi, &left))) {
      if (m->msg != CURLMSG_DONE) continue;
      slot *s;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
      long code = 0;
      curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
      double t = now_s();
      if (m->data.result != CURLE_OK || code != 200 || !strstr(s->buf, argv[4])) {
        if (failures++ < 3)
          fprintf(stderr, "bench_webhook_load: %s, HTTP %ld: %.200s\n", curl_easy_strerror(m->data.result), code,
                  s->buf);
      } else if (s->started >= measure_from && t <= until) {
        if (count == cap) lat = realloc(lat, (cap *= 2) * sizeof(double));
        lat[count++] = (t - s->started) * 1e3;
      }
      curl_multi_remove_handle(multi, s->easy);
      if (t < until) {
        s->len = 0;
        s->started = t;
        curl_multi_add_handle(multi, s->easy); /* the same easy handle reuses its connection */
        running++;
      }
    }
    if (running > 0) curl_multi_poll(multi, NULL, 0, 100, NULL);
  }
  qsort(lat, count, sizeof(double), cmp);
#define PCT(p) (count ? lat[(size_t)((double)(count - 1) * (p))] : 0.0)
  printf("{\"requests\": %zu, \"seconds\": %.3f, \"rps\": %.1f, \"p50_ms\": %.3f, \"p90_ms\": %.3f, "
         "\"p99_ms\": %.3f, \"max_ms\": %.3f, \"failures\": %ld}\n",
         count, seconds, (double)count / seconds, PCT(0.50), PCT(0.90), PCT(0.99), count ? lat[count - 1] : 0.0,
         failures);
  for (int i = 0; i < conns; i++) curl_easy_cleanup(slots[i].easy);
  curl_multi_cleanup(multi);
  curl_slist_free_all(hdr);
  free(slots);
  free(lat);
  free(body);
  return failures ? 1 : 0;
}
