/* Parse time per MB at 1, 4, 16 and 64 MB, relative to the 1 MB figure of the
 * same run: flat ratios mean linear parsing (duplicate keys through a hash
 * set, no rescans). Three shapes: a pool as YAML and as JSON with one mapping
 * of many keys (the duplicate-key check), and a NodeList whose
 * external-addresses annotation lists many addresses (the duplicate-address
 * check). Each size runs in a child process, so the peak resident size
 * printed is that parse's (input, tree and key sets together).
 *
 * Time per MB also grows with the memory hierarchy: past the caches, every
 * hash-set probe of a table bigger than the caches and the TLB costs a memory
 * access. The instructions retired per MB (perf_event_open, user space) count
 * the work itself: that ratio is the algorithm's, flat when parsing is linear.
 * Times are this process's CPU time, so other load on the machine does not
 * count. usage: bench_parse [MAX_MB] */
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <turnfleet.h>

typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) exit(1);
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

/* Each document is about @p bytes long. */
static void make_yaml(buf *b, size_t bytes)
{
  puts_(b, "metadata:\n  name: bench\n  labels:\n");
  char line[64];
  for (size_t i = 0; b->n < bytes; i++) put(b, line, (size_t)snprintf(line, sizeof(line), "    k%09zu: v\n", i));
  puts_(b, "spec:\n  auth: {realm: r, secretRef: {name: s}}\n");
}

static void make_json(buf *b, size_t bytes)
{
  puts_(b, "{\"metadata\": {\"name\": \"bench\", \"labels\": {\"k\": \"v\"");
  char item[64];
  for (size_t i = 0; b->n < bytes; i++) put(b, item, (size_t)snprintf(item, sizeof(item), ", \"k%09zu\": \"v\"", i));
  puts_(b, "}}, \"spec\": {\"auth\": {\"realm\": \"r\", \"secretRef\": {\"name\": \"s\"}}}}");
}

static void make_nodes(buf *b, size_t bytes)
{
  puts_(b, "{\"items\": [{\"metadata\": {\"name\": \"n1\", \"annotations\": "
           "{\"turnfleet.hzmi.dev/external-addresses\": \"10.0.0.0");
  char item[64];
  for (size_t i = 1; b->n < bytes; i++) {
    unsigned long a = 0x0a000000ul + i; /* distinct IPv4, then IPv6 once those run out */
    int n = a <= 0x0affffffu ? snprintf(item, sizeof(item), ",%lu.%lu.%lu.%lu", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255)
                              : snprintf(item, sizeof(item), ",fd00::%lx:%lx", (a >> 16) & 0xffff, a & 0xffff);
    put(b, item, (size_t)n);
  }
  puts_(b, "\"}}}]}");
}

static double now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); /* CPU time: the machine is shared */
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long peak_mb(void)
{
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

/* A user-space instruction counter, or -1 when perf events are not allowed here. */
static int counter_open(void)
{
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_HARDWARE;
  a.config = PERF_COUNT_HW_INSTRUCTIONS;
  a.disabled = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static double counter_read(int fd)
{
  uint64_t v = 0;
  if (fd < 0 || read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) return -1;
  return (double)v;
}

static int parse(int shape, const buf *b, const tf_parse_options *o)
{
  tf_err rc;
  if (shape == 2) {
    tf_nodes *n = NULL;
    rc = tf_nodes_parse_with(&n, b->p, b->n, o);
    tf_nodes_free(n);
  } else {
    tf_pool *p = NULL;
    rc = tf_pool_parse_with(&p, b->p, b->n, shape == 0 ? TF_FORMAT_YAML : TF_FORMAT_JSON, o);
    tf_pool_free(p);
  }
  if (rc < 0) fprintf(stderr, "bench_parse: %s\n", tf_error_last()->message);
  return rc;
}

int main(int argc, char **argv)
{
  size_t max_mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  static const char *const names[] = {"pool YAML, one mapping of many keys", "pool JSON, one object of many keys",
                                      "NodeList, one external-addresses annotation"};
  tf_parse_options o = TF_PARSE_OPTIONS_INIT;
  o.max_bytes = (max_mb + 1) << 20;
  o.max_values = (size_t)1 << 30;
  int fd = counter_open();
  printf("parse CPU time and instructions per MB, best of 3, relative to 1 MB in this run\n"
         "(instructions/MB flat = linear work; ms/MB adds the memory hierarchy)\n");
  for (int shape = 0; shape < 3; shape++) {
    printf("%s\n  %6s %10s %10s %8s %12s %8s %10s\n", names[shape], "MB", "ms", "ms/MB", "ratio", "Minstr/MB",
           "ratio", "peak MB");
    double base = 0, ibase = 0;
    for (size_t mb = 1; mb <= max_mb; mb *= 4) {
      int fds[2];
      if (pipe(fds) != 0) return 1;
      fflush(stdout);
      pid_t pid = fork();
      if (pid < 0) return 1;
      if (pid == 0) { /* the child measures one size: its peak is this parse's */
        close(fds[0]);
        buf b = {0};
        if (shape == 0) make_yaml(&b, mb << 20);
        else if (shape == 1) make_json(&b, mb << 20);
        else make_nodes(&b, mb << 20);
        double res[4] = {1e9, -1, (double)b.n / (1 << 20), 0};
        for (int k = 0; k < 3; k++) {
          if (fd >= 0) {
            ioctl(fd, PERF_EVENT_IOC_RESET, 0);
            ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
          }
          double t0 = now_s();
          if (parse(shape, &b, &o) < 0) _exit(1);
          double t = now_s() - t0;
          if (fd >= 0) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
          double n = counter_read(fd);
          if (t < res[0]) res[0] = t;
          if (n >= 0 && (res[1] < 0 || n < res[1])) res[1] = n;
        }
        res[3] = (double)peak_mb();
        _exit(write(fds[1], res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1);
      }
      close(fds[1]);
      double res[4];
      int status = 0;
      ssize_t got = read(fds[0], res, sizeof(res));
      close(fds[0]);
      waitpid(pid, &status, 0);
      if (got != (ssize_t)sizeof(res) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
      double per = res[0] * 1000.0 / res[2], iper = res[1] / 1e6 / res[2];
      if (mb == 1) {
        base = per;
        ibase = iper;
      }
      if (res[1] >= 0)
        printf("  %6zu %10.1f %10.2f %8.2f %12.1f %8.2f %10.0f\n", mb, res[0] * 1000.0, per, per / base, iper,
               iper / ibase, res[3]);
      else
        printf("  %6zu %10.1f %10.2f %8.2f %12s %8s %10.0f\n", mb, res[0] * 1000.0, per, per / base, "n/a", "n/a",
               res[3]);
    }
  }
  return 0;
}
