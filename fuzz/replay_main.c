/* Plain replay driver for the fuzz targets: runs LLVMFuzzerTestOneInput over
 * every file of the corpus directories (or files) given as arguments, so the
 * corpora are regression tests in every build, with or without libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    if (r == 0) break;
    n += r;
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "replay: out of memory reading %s\n", path);
    return -1;
  }
  /* an exact-size copy, so AddressSanitizer sees any read past the input */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  if (n) memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
  size_t files = 0;
  int failed = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: %s does not exist\n", argv[i]);
      failed = 1;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[i]) < 0) failed = 1;
      files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) {
      fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      failed = 1;
      continue;
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      if (count == cap) {
        cap = cap ? cap * 2 : 256;
        char **nn = realloc(names, cap * sizeof(*names));
        if (!nn) break;
        names = nn;
      }
      size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      names[count] = malloc(len);
      if (!names[count]) break;
      snprintf(names[count], len, "%s/%s", argv[i], e->d_name);
      count++;
    }
    closedir(d);
    if (count) qsort(names, count, sizeof(*names), by_name);
    for (size_t k = 0; k < count; k++) {
      if (stat(names[k], &st) == 0 && S_ISREG(st.st_mode)) {
        if (run_file(names[k]) < 0) failed = 1;
        files++;
      }
      free(names[k]);
    }
    free(names);
  }
  printf("replay: %zu inputs\n", files);
  /* an empty or missing corpus must not pass */
  return failed || files == 0 ? 1 : 0;
}
