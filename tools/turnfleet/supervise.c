/* turnserver children of `turnfleet up`: spawn with the config file only
 * (secrets never in argv), stop with SIGTERM and a bound, reap. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "up.h"

static int64_t clock_ms(clockid_t id)
{
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t up_now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

int64_t up_wall_ms(void) { return clock_ms(CLOCK_REALTIME); }

pid_t up_spawn(const char *turnserver, const char *conf, const char *log_path)
{
  int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (logfd < 0) return -1;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(logfd);
    return -1;
  }
  if (pid == 0) {
    /* own process group: a terminal's Ctrl-C reaches turnfleet, which drains, not coturn 4.6.1 (killed by SIGINT) */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    int nullfd = open("/dev/null", O_RDONLY);
    if (nullfd >= 0) dup2(nullfd, 0);
    dup2(logfd, 1);
    dup2(logfd, 2);
    execlp(turnserver, turnserver, "-c", conf, (char *)NULL);
    _exit(127);
  }
  close(logfd);
  return pid;
}

int up_stop(pid_t pid, int grace_ms)
{
  int status = 0;
  if (pid <= 0) return -1;
  if (kill(pid, SIGTERM) < 0 && errno == ESRCH) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    return r == pid ? status : -1;
  }
  int64_t deadline = up_now_ms() + grace_ms;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (up_now_ms() >= deadline) break;
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

pid_t up_reap(int *status)
{
  pid_t r = waitpid(-1, status, WNOHANG);
  if (r < 0 && errno == ECHILD) return -1;
  return r < 0 ? 0 : r;
}
