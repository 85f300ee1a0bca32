/* Real turnserver processes for the check suites (check_coturn, check_probe):
 * find coturn, start a rendered config, see its sockets, make a test
 * certificate. The helpers that can fail after a server started return an
 * error instead of failing the test, so callers can stop their servers first. */
#ifndef TF_COTURN_TEST_H
#define TF_COTURN_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "turnfleet.h"

/* The turnserver the suites run: $TF_TEST_TURNSERVER (ctest sets it to
 * tools/dev/turnserver-rootfs for the coturn 4.18 runs), else `turnserver`
 * on PATH (Debian 12's 4.6.1). */
const char *tf_ts_command(void);

/* That turnserver and its version (text and tf_coturn_version_parse() form).
 * Fails the test loudly when it is missing, and when it is not the
 * MAJOR.MINOR of $TF_TEST_COTURN_VERSION (the version ctest registered). */
void tf_ts_require(char *version_text, size_t size, uint32_t *version);

/* 1 when the coturn log or output at PATH has a line that a rendered config
 * must never cause (`Bad configuration format`, `ERROR`, `unrecognized
 * option`; with STRICT also any `WARNING`), skipping lines that contain one
 * of ALLOWED (NULL-terminated, or NULL); the line goes into LINE. 0 when
 * clean or unreadable. */
int tf_ts_log_problem(const char *path, const char *const *allowed, int strict, char *line, size_t size);

/* Start `<tf_ts_command()> -c CONF`, stdout and stderr into OUT_PATH. The server is
 * killed when the test process dies (PR_SET_PDEATHSIG), but callers stop it by
 * PID. Returns the PID, or -1 (errno set). */
pid_t tf_ts_spawn(const char *conf, const char *out_path);

/* One socket of a process, from /proc/net/{udp,tcp}{,6}. */
typedef struct tf_ts_sock {
  int tcp;
  tf_addr addr;
  uint16_t port;
  int state; /* 0x0A = TCP LISTEN; 0x07 = UDP unconnected */
} tf_ts_sock;

/* The sockets of process PID (its socket inodes matched against /proc/net).
 * Returns the count, -1 if the process is gone. */
int tf_ts_sockets(pid_t pid, tf_ts_sock *out, int max);
/* 1 when SOCKS holds (tcp, addr, port), in LISTEN state for TCP. */
int tf_ts_has(const tf_ts_sock *socks, int n, int tcp, const tf_addr *addr, uint16_t port);
/* "udp 127.0.0.1:3478 state 07" */
void tf_ts_fmt_sock(char *buf, size_t size, const tf_ts_sock *s);

/* A self-signed certificate (EC P-256, valid 2 days, CN relay-test) with the
 * given IP subjectAltNames, written with the OpenSSL C API (key mode 0600).
 * Returns 0, or -1. */
int tf_ts_make_cert(const char *cert_path, const char *key_path, const char *const *ips, size_t n_ips);

/* Stop a test's process by PID at once (SIGKILL, reaped) and zero *pid; no-op when <= 0. */
void tf_ts_reap(pid_t *pid);
/* Remove a test's private directory (kept with TF_TEST_KEEP=1), free and clear *dir. */
void tf_ts_remove_dir(char **dir);

/* Fail the test, but first run CLEANUP, which stops every process the test started by PID
 * (check ends the forked test process at once on failure; no teardown runs then). */
#define TF_TS_CHECK(cleanup, cond, ...) \
  do {                                  \
    if (!(cond)) {                      \
      cleanup();                        \
      ck_abort_msg(__VA_ARGS__);        \
    }                                   \
  } while (0)
#define TF_TS_OK(cleanup, call)                                                                      \
  do {                                                                                               \
    tf_err tf_ts__rc = (call);                                                                       \
    TF_TS_CHECK(cleanup, tf_ts__rc == 0, "%s -> %d (%s)", #call, tf_ts__rc, tf_error_last()->message); \
  } while (0)

int64_t tf_ts_now_ms(void);
void tf_ts_sleep_ms(long ms);
/* The first SIZE-1 bytes of a file (empty when unreadable), for failure messages. */
void tf_ts_file_head(const char *path, char *buf, size_t size);

#endif
