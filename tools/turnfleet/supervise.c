/* turnserver children of `turnfleet up`: spawn with the config file only
 * (secrets never in argv), stop with SIGTERM and a bound, reap. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
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

int up_capture(const char *cmd, const char *arg, char *buf, size_t size, int timeout_ms)
{
  int fds[2];
  if (size == 0 || pipe2(fds, O_CLOEXEC) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int nullfd = open("/dev/null", O_RDONLY);
    if (nullfd >= 0) dup2(nullfd, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    execlp(cmd, cmd, arg, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t len = 0;
  int64_t deadline = up_now_ms() + timeout_ms;
  for (;;) {
    int64_t left = deadline - up_now_ms();
    struct pollfd p = {fds[0], POLLIN, 0};
    if (left <= 0 || (poll(&p, 1, (int)left) < 0 && errno != EINTR)) break;
    char chunk[4096];
    ssize_t n = read(fds[0], chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size_t take = (size_t)n < size - 1 - len ? (size_t)n : size - 1 - len;
    memcpy(buf + len, chunk, take);
    len += take;
  }
  close(fds[0]);
  buf[len] = '\0';
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != pid) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && len == 0) {
    errno = ENOENT;
    return -1;
  }
  return (int)len;
}
