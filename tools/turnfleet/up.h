/* turnfleet up: the local runtime (one turnserver child per relay on this host),
 * a driver of the library's fleet engine (engine.h). Private to the tool. */
#ifndef TURNFLEET_TOOL_UP_H
#define TURNFLEET_TOOL_UP_H

#include <stdint.h>
#include <sys/types.h>

#include <turnfleet.h>

/* `turnfleet up ...`: argv[0] is "up". Returns the exit code. */
int up_main(int argc, char **argv);

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
