/* Real turnserver processes for the check suites: see tf_coturn.h. */
#include "tf_coturn.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tf_test.h"

int64_t tf_ts_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tf_ts_sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

const char *tf_ts_command(void)
{
  const char *cmd = getenv("TF_TEST_TURNSERVER");
  return cmd && *cmd ? cmd : "turnserver";
}

void tf_ts_require(char *version_text, size_t size, uint32_t *version)
{
  const char *cmd = tf_ts_command();
  char buf[4096];
  int found = 0;
  if (strchr(cmd, '/')) {
    found = access(cmd, X_OK) == 0;
  } else {
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; !found && *p;) {
      size_t n = strcspn(p, ":");
      snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, cmd);
      if (n && access(buf, X_OK) == 0) found = 1;
      p += n;
      if (*p == ':') p++;
    }
  }
  ck_assert_msg(found, "%s not found: install coturn (tools/dev/install-deps.sh), or build the coturn 4.18 root "
                "filesystem (tools/dev/coturn-rootfs.sh)", cmd);
  snprintf(buf, sizeof(buf), "'%s' --version 2>&1", cmd);
  FILE *f = popen(buf, "r");
  ck_assert_ptr_nonnull(f);
  version_text[0] = '\0';
  char last[512] = "";
  while (fgets(buf, sizeof(buf), f)) {
    buf[strcspn(buf, "\r\n")] = '\0';
    uint32_t v;
    if (!version_text[0] && tf_coturn_version_parse(&v, buf) == 0) {
      snprintf(version_text, size, "%.63s", buf);
      *version = v;
    } else if (buf[0]) {
      snprintf(last, sizeof(last), "%.500s", buf);
    }
  }
  pclose(f);
  ck_assert_msg(version_text[0], "%s --version printed no version: %s", cmd, last);
  /* the version a suite is registered for (ctest) must be the one that runs */
  const char *want = getenv("TF_TEST_COTURN_VERSION");
  if (want && *want) {
    uint32_t w = 0;
    ck_assert_msg(tf_coturn_version_parse(&w, want) == 0, "TF_TEST_COTURN_VERSION=%s is not a version", want);
    ck_assert_msg((w >> 8) == (*version >> 8), "%s is coturn %s, not the %s this suite is registered for", cmd,
                  version_text, want);
  }
}

int tf_ts_log_problem(const char *path, const char *const *allowed, int strict, char *line, size_t size)
{
  /* what a rendered config must never make any coturn log */
  static const char *const always[] = {"Bad configuration format", "ERROR", "unrecognized option"};
  /* and, for the renderer's own acceptance, no warning at all */
  static const char *const more[] = {"WARNING", "Wrong address format", "cannot find"};
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char buf[2048];
  int bad = 0;
  while (!bad && fgets(buf, sizeof(buf), f)) {
    int skip = 0;
    for (size_t i = 0; allowed && allowed[i] && !skip; i++) skip = strstr(buf, allowed[i]) != NULL;
    if (skip) continue;
    for (size_t i = 0; !bad && i < sizeof(always) / sizeof(always[0]); i++) bad = strstr(buf, always[i]) != NULL;
    for (size_t i = 0; strict && !bad && i < sizeof(more) / sizeof(more[0]); i++) bad = strstr(buf, more[i]) != NULL;
  }
  fclose(f);
  if (bad) snprintf(line, size, "%s", buf);
  return bad;
}

pid_t tf_ts_spawn(const char *conf, const char *out_path)
{
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  /* if the test process dies (a failed assertion, a check timeout), so does this server */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int nul = open("/dev/null", O_RDONLY);
  if (fd < 0 || nul < 0) _exit(127);
  dup2(nul, 0);
  dup2(fd, 1);
  dup2(fd, 2);
  const char *cmd = tf_ts_command();
  char *argv[] = {(char *)cmd, (char *)"-c", (char *)conf, NULL};
  execvp(cmd, argv);
  _exit(127);
}

static void ts_hex_addr(tf_addr *a, const char *hex, int v6)
{
  memset(a, 0, sizeof(*a));
  a->family = v6 ? TF_AF_INET6 : TF_AF_INET;
  /* the kernel prints each 32-bit word in host order: copying the parsed
   * integer's bytes gives back network order on any endianness */
  for (int w = 0; w < (v6 ? 4 : 1); w++) {
    char word[9];
    memcpy(word, hex + 8 * w, 8);
    word[8] = '\0';
    uint32_t v = (uint32_t)strtoul(word, NULL, 16);
    memcpy(a->bytes + 4 * w, &v, 4);
  }
}

int tf_ts_sockets(pid_t pid, tf_ts_sock *out, int max)
{
  char path[128];
  unsigned long inodes[512];
  int ninodes = 0;
  snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && ninodes < 512) {
    char link[512], target[256];
    snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    unsigned long ino;
    if (sscanf(target, "socket:[%lu]", &ino) == 1) inodes[ninodes++] = ino;
  }
  closedir(d);
  static const struct {
    const char *file;
    int tcp, v6;
  } files[] = {{"/proc/net/udp", 0, 0}, {"/proc/net/udp6", 0, 1}, {"/proc/net/tcp", 1, 0}, {"/proc/net/tcp6", 1, 1}};
  int count = 0;
  for (size_t f = 0; f < 4; f++) {
    FILE *fp = fopen(files[f].file, "r");
    if (!fp) continue;
    char line[512];
    if (!fgets(line, sizeof(line), fp)) {
      fclose(fp);
      continue;
    }
    while (fgets(line, sizeof(line), fp)) {
      char local[40];
      unsigned port, state;
      unsigned long ino;
      if (sscanf(line, " %*[^:]: %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", local, &port, &state, &ino) != 4)
        continue;
      for (int i = 0; i < ninodes; i++) {
        if (inodes[i] != ino || count >= max) continue;
        out[count].tcp = files[f].tcp;
        ts_hex_addr(&out[count].addr, local, files[f].v6);
        out[count].port = (uint16_t)port;
        out[count].state = (int)state;
        count++;
      }
    }
    fclose(fp);
  }
  return count;
}

int tf_ts_has(const tf_ts_sock *socks, int n, int tcp, const tf_addr *addr, uint16_t port)
{
  for (int i = 0; i < n; i++)
    if (socks[i].tcp == tcp && socks[i].port == port && tf_addr_compare(&socks[i].addr, addr) == 0 &&
        (!tcp || socks[i].state == 0x0A))
      return 1;
  return 0;
}

void tf_ts_fmt_sock(char *buf, size_t size, const tf_ts_sock *s)
{
  char a[TF_ADDR_STRLEN] = "?";
  tf_addr_format(a, sizeof(a), &s->addr);
  snprintf(buf, size, "%s %s%s%s:%u state %02X", s->tcp ? "tcp" : "udp", s->addr.family == TF_AF_INET6 ? "[" : "",
           a, s->addr.family == TF_AF_INET6 ? "]" : "", s->port, s->state);
}

int tf_ts_make_cert(const char *cert_path, const char *key_path, const char *const *ips, size_t n_ips)
{
  int rc = -1;
  FILE *f = NULL;
  EVP_PKEY *key = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  if (!key || !x) goto out;
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 2 * 86400L);
  X509_set_pubkey(x, key);
  X509_NAME *name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"relay-test", -1, -1, 0);
  X509_set_issuer_name(x, name);
  if (n_ips) {
    char san[1024] = "";
    size_t used = 0;
    for (size_t i = 0; i < n_ips; i++)
      used += (size_t)snprintf(san + used, sizeof(san) - used, "%sIP:%s", i ? "," : "", ips[i]);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_alt_name, san);
    if (!ext) goto out;
    int added = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    if (!added) goto out;
  }
  if (X509_sign(x, key, EVP_sha256()) <= 0) goto out;
  int fd = open(key_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f || !PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)) goto out;
  fclose(f);
  f = fopen(cert_path, "w");
  if (!f || !PEM_write_X509(f, x)) goto out;
  rc = 0;
out:
  if (f) fclose(f);
  X509_free(x);
  EVP_PKEY_free(key);
  return rc;
}

void tf_ts_file_head(const char *path, char *buf, size_t size)
{
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t n = fread(buf, 1, size - 1, f);
  buf[n] = '\0';
  fclose(f);
}

void tf_ts_reap(pid_t *pid)
{
  if (*pid <= 0) return;
  kill(*pid, SIGKILL);
  waitpid(*pid, NULL, 0);
  *pid = 0;
}

void tf_ts_remove_dir(char **dir)
{
  if (*dir && !getenv("TF_TEST_KEEP")) tf_test_rmtree(*dir);
  free(*dir);
  *dir = NULL;
}
