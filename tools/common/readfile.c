/* tool_read_file: one way for the tools to read an input file. */
#include "readfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

char *tool_read_file(const char *path, size_t *len, size_t max)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf && n <= max) {
    if (n + 1 >= cap) {
      char *bigger = realloc(buf, cap * 2);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    size_t want = cap - n - 1;
    if (want > max + 1 - n) want = max + 1 - n;
    size_t r = fread(buf + n, 1, want, f);
    if (r == 0) break;
    n += r;
  }
  int err = !buf ? ENOMEM : ferror(f) ? EIO : 0;
  fclose(f);
  if (err) {
    free(buf);
    errno = err;
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}
