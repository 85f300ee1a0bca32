/* turnfleet up: the local runtime (one turnserver child per relay on this host).
 * Private to the tool; see docs/architecture.md "Runtimes". */
#ifndef TURNFLEET_TOOL_UP_H
#define TURNFLEET_TOOL_UP_H

#include <stdint.h>
#include <sys/types.h>

#include <turnfleet.h>

/* `turnfleet up ...`: argv[0] is "up". Returns the exit code. */
int tf_up_main(int argc, char **argv);

/* ---- coturn_cli.c: a blocking client of coturn's telnet CLI on 127.0.0.1 ---- */

/* Log in with @p password and read `pc`'s total-current-allocs.
 * @return 0 and *out, or -1 (unreachable, refused, timed out, no count). */
int tf_up_cli_allocations(int64_t *out, uint16_t port, const char *password, int timeout_ms);

/* Log in and send `cc total-quota -1` (the drain of coturn < 4.6.3). @return 0 or -1. */
int tf_up_cli_refuse_allocations(uint16_t port, const char *password, int timeout_ms);

/* GET http://ADDR:PORT/metrics and sum turn_total_allocations (coturn >= 4.6.2). @return 0 or -1. */
int tf_up_metrics_allocations(int64_t *out, const char *address, uint16_t port, int timeout_ms);

/* ---- supervise.c: turnserver children ---- */

/* Start `turnserver -c CONF` in its own process group with stdout and stderr
 * appended to @p log_path; it dies with us (PR_SET_PDEATHSIG). @return the pid or -1. */
pid_t tf_up_spawn(const char *turnserver, const char *conf, const char *log_path);

/* SIGTERM, wait up to @p grace_ms, then SIGKILL and reap. @return the wait status, or -1 when it was not ours. */
int tf_up_stop(pid_t pid, int grace_ms);

/* Reap one exited child without blocking: its pid (and *status), 0 when none, -1 when no children. */
pid_t tf_up_reap(int *status);

/* Run `CMD ARG` (no shell), its stdout and stderr into @p buf (NUL-terminated,
 * cut at @p size - 1), killed after @p timeout_ms. @return the bytes read, or
 * -1 (errno ENOENT when it could not be run at all). */
int tf_up_capture(const char *cmd, const char *arg, char *buf, size_t size, int timeout_ms);

/* Unix time in milliseconds. */
int64_t tf_up_now_ms(void);

#endif
