/* metrics: Prometheus text exposition (0.0.4), writer and parser.
 *
 * The writer sorts on output (families by name, samples by name and label
 * text), so the bytes depend on what was added, never on the order of the
 * calls. The parser reads coturn's two serializers (coturn.md §1): libprom
 * (<= 4.13: a blank line after every family, `%.17g` values, a trailing
 * process_* block) and the vendored client (>= 4.14: no blank lines, `%lld`
 * integers, escaped label values). It walks the input by index against the
 * given length, so it never reads past it, and names line and column on
 * every rejection. Numbers are read and written in the C locale whatever
 * the application's LC_NUMERIC is. */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TF_METRICS__LABELS_MAX 128 /* labels in one sample */
#define TF_METRICS__NUMBER_MAX 64  /* characters of a value or timestamp token */

typedef struct tf_metrics__family {
  char *name;
  char *help; /* NULL: no # HELP */
  int type;   /* tf_metric_type, -1: no # TYPE */
} tf_metrics__family;

typedef struct tf_metrics__sample {
  char *name;
  char **label_names;
  char **label_values;
  size_t label_count;
  double value;
  char *id; /* writer: name + rendered labels, the sort and duplicate key */
} tf_metrics__sample;

struct tf_metrics {
  tf_metrics__family *families;
  size_t family_count, family_cap;
  tf_metrics__sample *samples;
  size_t sample_count, sample_cap;
  tf_map family_index; /* family name -> index (keys: the families' names) */
  tf_map sample_index; /* writer: sample id -> index (keys: the samples' ids) */
};

/* ---- helpers ---- */

static int tf_metrics__is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int tf_metrics__is_digit(char c) { return c >= '0' && c <= '9'; }

static int tf_metrics__valid_metric_name(const char *s)
{
  if (!s || !(tf_metrics__is_alpha(s[0]) || s[0] == ':')) return 0;
  for (size_t i = 1; s[i]; i++)
    if (!(tf_metrics__is_alpha(s[i]) || tf_metrics__is_digit(s[i]) || s[i] == ':')) return 0;
  return 1;
}

static int tf_metrics__valid_label_name(const char *s)
{
  if (!s || !tf_metrics__is_alpha(s[0])) return 0;
  if (s[0] == '_' && s[1] == '_') return 0; /* reserved for Prometheus itself */
  for (size_t i = 1; s[i]; i++)
    if (!(tf_metrics__is_alpha(s[i]) || tf_metrics__is_digit(s[i]))) return 0;
  return 1;
}

static long tf_metrics__lookup(const tf_map *ix, const char *key)
{
  const uint64_t *v = tf_map__find(ix, 0, key, strlen(key));
  return v ? (long)*v : -1;
}

static void tf_metrics__sample_clear(tf_metrics__sample *s)
{
  free(s->name);
  for (size_t i = 0; i < s->label_count; i++) {
    free(s->label_names[i]);
    free(s->label_values[i]);
  }
  free(s->label_names);
  free(s->label_values);
  free(s->id);
}

tf_err tf_metrics_new(tf_metrics **out)
{
  TF_ASSERT_ARG(out);
  *out = calloc(1, sizeof(tf_metrics));
  return *out ? TF_OK : tf_error__nomem();
}

void tf_metrics_free(tf_metrics *m)
{
  if (!m) return;
  for (size_t i = 0; i < m->family_count; i++) {
    free(m->families[i].name);
    free(m->families[i].help);
  }
  for (size_t i = 0; i < m->sample_count; i++) tf_metrics__sample_clear(&m->samples[i]);
  free(m->families);
  free(m->samples);
  tf_map__dispose(&m->family_index);
  tf_map__dispose(&m->sample_index);
  free(m);
}

/* Append a family (name taken over on success). */
static tf_err tf_metrics__family_push(tf_metrics *m, char *name, long *index)
{
  if (m->family_count == m->family_cap) {
    size_t cap = m->family_cap ? 2 * m->family_cap : 8;
    tf_metrics__family *f = realloc(m->families, cap * sizeof(*f));
    if (!f) return tf_error__nomem();
    m->families = f;
    m->family_cap = cap;
  }
  int rc = tf_map__insert(&m->family_index, 0, name, strlen(name), m->family_count, NULL);
  if (rc < 0) return rc;
  m->families[m->family_count] = (tf_metrics__family){name, NULL, -1};
  *index = (long)m->family_count++;
  return TF_OK;
}

static tf_err tf_metrics__sample_reserve(tf_metrics *m)
{
  if (m->sample_count < m->sample_cap) return TF_OK;
  size_t cap = m->sample_cap ? 2 * m->sample_cap : 16;
  tf_metrics__sample *s = realloc(m->samples, cap * sizeof(*s));
  if (!s) return tf_error__nomem();
  m->samples = s;
  m->sample_cap = cap;
  return TF_OK;
}

/* ---- numbers in the C locale ---- */

typedef struct tf_metrics__c_locale {
  locale_t c;
  locale_t old;
} tf_metrics__c_locale;

static void tf_metrics__c_locale_enter(tf_metrics__c_locale *l)
{
  l->c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  l->old = l->c ? uselocale(l->c) : (locale_t)0;
}

static void tf_metrics__c_locale_leave(tf_metrics__c_locale *l)
{
  if (!l->c) return;
  uselocale(l->old);
  freelocale(l->c);
}

/* Write @p v; call inside the C locale. */
static void tf_metrics__put_value(tf_buf *b, double v)
{
  if (isnan(v)) {
    tf_buf__puts(b, "NaN");
    return;
  }
  if (isinf(v)) {
    tf_buf__puts(b, v > 0 ? "+Inf" : "-Inf");
    return;
  }
  if (v == trunc(v) && fabs(v) < 9007199254740992.0) {
    tf_buf__printf(b, "%lld", (long long)v);
    return;
  }
  char text[40];
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(text, sizeof(text), "%.*g", prec, v);
    if (prec == 17 || strtod(text, NULL) == v) break;
  }
  tf_buf__puts(b, text);
}

/* ---- writer ---- */

static int tf_metrics__type_ok(int type) { return type >= TF_METRIC_UNTYPED && type <= TF_METRIC_SUMMARY; }

tf_err tf_metrics_declare(tf_metrics *m, const char *name, tf_metric_type type, const char *help)
{
  TF_ASSERT_ARG(m);
  TF_ASSERT_ARG(name);
  TF_ASSERT_ARG(help);
  if (!tf_metrics__valid_metric_name(name))
    return tf_error__set(TF_EINVALID, "name: \"%.80s\" is not a metric name [a-zA-Z_:][a-zA-Z0-9_:]*", name);
  if (!tf_metrics__type_ok((int)type)) return tf_error__set(TF_EINVALID, "type: %d is not a tf_metric_type", (int)type);
  if (tf_metrics__lookup(&m->family_index, name) >= 0)
    return tf_error__set(TF_EINVALID, "name: family %.80s is already declared", name);
  char *n = strdup(name), *h = strdup(help);
  long index;
  tf_err rc = (n && h) ? tf_metrics__family_push(m, n, &index) : tf_error__nomem();
  if (rc < 0) {
    free(n);
    free(h);
    return rc;
  }
  m->families[index].help = h;
  m->families[index].type = (int)type;
  return TF_OK;
}

/* The family a sample name belongs to: itself, or a histogram/summary base. */
static long tf_metrics__family_of(const tf_metrics *m, const char *name)
{
  long f = tf_metrics__lookup(&m->family_index, name);
  if (f >= 0) return f;
  static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
  size_t n = strlen(name);
  for (size_t i = 0; i < 3; i++) {
    size_t sl = strlen(suffixes[i]);
    if (n <= sl || strcmp(name + n - sl, suffixes[i]) != 0) continue;
    char *base = strndup(name, n - sl);
    if (!base) return -2;
    f = tf_metrics__lookup(&m->family_index, base);
    free(base);
    if (f < 0) continue;
    int t = m->families[f].type;
    if (t == TF_METRIC_HISTOGRAM || (t == TF_METRIC_SUMMARY && i > 0)) return f;
  }
  return -1;
}

static void tf_metrics__put_escaped(tf_buf *b, const char *s, int quote)
{
  for (; *s; s++) {
    if (*s == '\\') tf_buf__puts(b, "\\\\");
    else if (*s == '\n') tf_buf__puts(b, "\\n");
    else if (quote && *s == '"') tf_buf__puts(b, "\\\"");
    else tf_buf__putn(b, s, 1);
  }
}

/* The sample's id: its name and labels as written, the sort and duplicate key. */
static tf_err tf_metrics__make_id(tf_metrics__sample *s)
{
  tf_buf id;
  tf_buf__init(&id);
  tf_buf__puts(&id, s->name);
  if (s->label_count) {
    tf_buf__puts(&id, "{");
    for (size_t i = 0; i < s->label_count; i++) {
      tf_buf__printf(&id, "%s%s=\"", i ? "," : "", s->label_names[i]);
      tf_metrics__put_escaped(&id, s->label_values[i], 1);
      tf_buf__puts(&id, "\"");
    }
    tf_buf__puts(&id, "}");
  }
  return tf_buf__detach(&id, &s->id);
}

/* Returned by tf_metrics__push_sample() for a repeated id (no error set). */
#define TF_EEXIST__ (-1000)

/* Append @p s (taken over on success; on failure the caller still owns it). */
static tf_err tf_metrics__push_sample(tf_metrics *m, tf_metrics__sample *s)
{
  tf_err rc = s->id ? TF_OK : tf_metrics__make_id(s);
  if (rc < 0) return rc;
  if (tf_metrics__lookup(&m->sample_index, s->id) >= 0) return TF_EEXIST__;
  if ((rc = tf_metrics__sample_reserve(m)) < 0) return rc;
  if ((rc = tf_map__insert(&m->sample_index, 0, s->id, strlen(s->id), m->sample_count, NULL)) < 0) return rc;
  m->samples[m->sample_count] = *s;
  m->sample_count++;
  return TF_OK;
}

tf_err tf_metrics_add(tf_metrics *m, const char *name, const char *const *label_names,
                      const char *const *label_values, size_t label_count, double value)
{
  TF_ASSERT_ARG(m);
  TF_ASSERT_ARG(name);
  TF_ASSERT_ARG(label_count == 0 || (label_names && label_values));
  if (label_count > TF_METRICS__LABELS_MAX)
    return tf_error__set(TF_EINVALID, "label_count: %zu labels, at most %d", label_count, TF_METRICS__LABELS_MAX);
  long f = tf_metrics__family_of(m, name);
  if (f == -2) return tf_error__nomem();
  if (f < 0) return tf_error__set(TF_ENOTFOUND, "name: no family declared for %.80s", name);
  for (size_t i = 0; i < label_count; i++) {
    if (!tf_metrics__valid_label_name(label_names[i]))
      return tf_error__set(TF_EINVALID, "label_names[%zu]: \"%.80s\" is not a label name", i,
                           label_names[i] ? label_names[i] : "(null)");
    if (!label_values[i]) return tf_error__set(TF_EINVALID, "label_values[%zu]: NULL", i);
    for (size_t j = 0; j < i; j++)
      if (strcmp(label_names[i], label_names[j]) == 0)
        return tf_error__set(TF_EINVALID, "label_names[%zu]: %s given twice", i, label_names[i]);
  }

  tf_metrics__sample s = {0};
  s.value = value;
  s.name = strdup(name);
  s.label_names = calloc(label_count ? label_count : 1, sizeof(char *));
  s.label_values = calloc(label_count ? label_count : 1, sizeof(char *));
  int ok = s.name && s.label_names && s.label_values;
  for (size_t i = 0; ok && i < label_count; i++) {
    s.label_names[i] = strdup(label_names[i]);
    s.label_values[i] = strdup(label_values[i]);
    s.label_count++;
    ok = s.label_names[i] && s.label_values[i];
  }
  tf_err rc = ok ? tf_metrics__push_sample(m, &s) : tf_error__nomem();
  if (rc == TF_EEXIST__) rc = tf_error__set(TF_EINVALID, "labels: %.200s was added before", s.id);
  if (rc < 0) tf_metrics__sample_clear(&s);
  return rc;
}

static const char *tf_metrics__type_name(int type)
{
  switch (type) {
  case TF_METRIC_COUNTER:
    return "counter";
  case TF_METRIC_GAUGE:
    return "gauge";
  case TF_METRIC_HISTOGRAM:
    return "histogram";
  case TF_METRIC_SUMMARY:
    return "summary";
  default:
    return "untyped";
  }
}

typedef struct tf_metrics__ref {
  const tf_metrics__sample *s;
  long family;
} tf_metrics__ref;

/* By family name (samples of no family last), then by id. */
static int tf_metrics__ref_cmp(const void *pa, const void *pb, void *arg)
{
  const tf_metrics__ref *a = pa, *b = pb;
  const tf_metrics *m = arg;
  if (a->family != b->family) {
    if (a->family < 0 || b->family < 0) return a->family < 0 ? 1 : -1;
    return strcmp(m->families[a->family].name, m->families[b->family].name);
  }
  return strcmp(a->s->id, b->s->id);
}

static int tf_metrics__family_cmp(const void *pa, const void *pb, void *arg)
{
  const tf_metrics *m = arg;
  return strcmp(m->families[*(const size_t *)pa].name, m->families[*(const size_t *)pb].name);
}

tf_err tf_metrics_to_text(char **out, const tf_metrics *m)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(m);
  size_t *order = malloc((m->family_count ? m->family_count : 1) * sizeof(*order));
  tf_metrics__ref *refs = malloc((m->sample_count ? m->sample_count : 1) * sizeof(*refs));
  if (!order || !refs) {
    free(order);
    free(refs);
    return tf_error__nomem();
  }
  for (size_t i = 0; i < m->family_count; i++) order[i] = i;
  qsort_r(order, m->family_count, sizeof(*order), tf_metrics__family_cmp, (void *)m);
  size_t n = 0;
  for (size_t i = 0; i < m->sample_count; i++) {
    long f = tf_metrics__family_of(m, m->samples[i].name);
    if (f == -2) {
      free(order);
      free(refs);
      return tf_error__nomem();
    }
    /* parsed samples may have no # HELP/# TYPE: they come after the families */
    refs[n++] = (tf_metrics__ref){&m->samples[i], f};
  }
  qsort_r(refs, n, sizeof(*refs), tf_metrics__ref_cmp, (void *)m);

  tf_metrics__c_locale loc;
  tf_metrics__c_locale_enter(&loc);
  tf_buf b;
  tf_buf__init(&b);
  size_t r = 0;
  for (size_t k = 0; k < m->family_count; k++) {
    const tf_metrics__family *fam = &m->families[order[k]];
    tf_buf__printf(&b, "# HELP %s ", fam->name);
    tf_metrics__put_escaped(&b, fam->help ? fam->help : "", 0);
    tf_buf__printf(&b, "\n# TYPE %s %s\n", fam->name, tf_metrics__type_name(fam->type));
    while (r < n && refs[r].family == (long)order[k]) {
      tf_buf__puts(&b, refs[r].s->id);
      tf_buf__puts(&b, " ");
      tf_metrics__put_value(&b, refs[r].s->value);
      tf_buf__puts(&b, "\n");
      r++;
    }
  }
  for (; r < n; r++) {
    tf_buf__puts(&b, refs[r].s->id);
    tf_buf__puts(&b, " ");
    tf_metrics__put_value(&b, refs[r].s->value);
    tf_buf__puts(&b, "\n");
  }
  tf_metrics__c_locale_leave(&loc);
  free(order);
  free(refs);
  return tf_buf__detach(&b, out);
}

/* ---- parser ---- */

typedef struct tf_metrics__line {
  const char *s; /* the line, without its '\n' (and '\r') */
  size_t n;
  size_t no; /* 1-based line number */
} tf_metrics__line;

static tf_err tf_metrics__perr(const tf_metrics__line *l, size_t at, const char *why)
{
  return tf_error__set(TF_EPROTO, "line %zu, column %zu: %s", l->no, at + 1, why);
}

static int tf_metrics__ws(char c) { return c == ' ' || c == '\t'; }

static size_t tf_metrics__skip_ws(const tf_metrics__line *l, size_t i)
{
  while (i < l->n && tf_metrics__ws(l->s[i])) i++;
  return i;
}

/* A metric name at @p *i; its end in *i. Returns NULL (error set) when none. */
static char *tf_metrics__take_name(const tf_metrics__line *l, size_t *i, int label, tf_err *rc)
{
  size_t a = *i, e = a;
  if (e < l->n && (tf_metrics__is_alpha(l->s[e]) || (!label && l->s[e] == ':'))) e++;
  else {
    *rc = tf_metrics__perr(l, a, label ? "expected a label name" : "expected a metric name");
    return NULL;
  }
  while (e < l->n && (tf_metrics__is_alpha(l->s[e]) || tf_metrics__is_digit(l->s[e]) || (!label && l->s[e] == ':')))
    e++;
  char *name = strndup(l->s + a, e - a);
  if (!name) {
    *rc = tf_error__nomem();
    return NULL;
  }
  *i = e;
  return name;
}

static int tf_metrics__word_is(const char *s, size_t n, const char *word)
{
  return n == strlen(word) && strncasecmp(s, word, n) == 0;
}

/* A value token: a float, NaN or [+-]Inf(inity), case-insensitive words. */
static int tf_metrics__parse_value(const char *s, size_t n, double *out)
{
  const char *w = s;
  size_t wn = n;
  int neg = 0;
  if (wn && (*w == '+' || *w == '-')) {
    neg = *w == '-';
    w++;
    wn--;
  }
  if (tf_metrics__word_is(w, wn, "inf") || tf_metrics__word_is(w, wn, "infinity")) {
    *out = neg ? -INFINITY : INFINITY;
    return 0;
  }
  if (tf_metrics__word_is(s, n, "nan")) {
    *out = NAN;
    return 0;
  }
  if (n == 0 || n >= TF_METRICS__NUMBER_MAX) return -1;
  /* [+-] digits [. digits] [e [+-] digits], at least one digit in the mantissa */
  size_t i = 0, digits = 0;
  if (s[i] == '+' || s[i] == '-') i++;
  while (i < n && tf_metrics__is_digit(s[i])) i++, digits++;
  if (i < n && s[i] == '.') {
    i++;
    while (i < n && tf_metrics__is_digit(s[i])) i++, digits++;
  }
  if (!digits) return -1;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t e = 0;
    while (i < n && tf_metrics__is_digit(s[i])) i++, e++;
    if (!e) return -1;
  }
  if (i != n) return -1;
  char text[TF_METRICS__NUMBER_MAX];
  memcpy(text, s, n);
  text[n] = '\0';
  char *end = NULL;
  *out = strtod(text, &end); /* in the C locale: see tf_metrics_parse */
  return end == text + n ? 0 : -1;
}

/* `# HELP name text`, `# TYPE name type`, or a comment; l->s[hash] is '#'. */
static tf_err tf_metrics__parse_comment(tf_metrics *m, const tf_metrics__line *l, size_t hash)
{
  size_t i = tf_metrics__skip_ws(l, hash + 1);
  int help = 0;
  if (l->n - i >= 4 && memcmp(l->s + i, "HELP", 4) == 0) help = 1;
  else if (!(l->n - i >= 4 && memcmp(l->s + i, "TYPE", 4) == 0)) return TF_OK; /* a comment */
  if (i + 4 < l->n && !tf_metrics__ws(l->s[i + 4])) return TF_OK;            /* "# HELPER": a comment */
  i = tf_metrics__skip_ws(l, i + 4);
  tf_err rc = TF_OK;
  char *name = tf_metrics__take_name(l, &i, 0, &rc);
  if (!name) return rc;
  if (i < l->n && !tf_metrics__ws(l->s[i])) {
    free(name);
    return tf_metrics__perr(l, i, "expected a space after the metric name");
  }
  long f = tf_metrics__lookup(&m->family_index, name);
  if (f < 0) {
    rc = tf_metrics__family_push(m, name, &f);
    if (rc < 0) {
      free(name);
      return rc;
    }
  } else {
    free(name);
  }
  tf_metrics__family *fam = &m->families[f];
  if (help) {
    if (i < l->n) i++; /* one separator; the rest, spaces included, is the text */
    if (fam->help) return TF_OK; /* the first one counts */
    tf_buf b;
    tf_buf__init(&b);
    for (; i < l->n; i++) {
      if (l->s[i] == '\\' && i + 1 < l->n && (l->s[i + 1] == '\\' || l->s[i + 1] == 'n')) {
        tf_buf__putn(&b, l->s[i + 1] == 'n' ? "\n" : "\\", 1);
        i++;
      } else {
        tf_buf__putn(&b, l->s + i, 1);
      }
    }
    return tf_buf__detach(&b, &fam->help);
  }
  i = tf_metrics__skip_ws(l, i);
  size_t a = i;
  while (i < l->n && !tf_metrics__ws(l->s[i])) i++;
  static const char *const types[] = {"untyped", "counter", "gauge", "histogram", "summary"};
  int type = -1;
  for (int t = 0; t < 5; t++)
    if (i - a == strlen(types[t]) && memcmp(l->s + a, types[t], i - a) == 0) type = t;
  if (type < 0) return tf_metrics__perr(l, a, "expected counter, gauge, histogram, summary or untyped");
  size_t rest = tf_metrics__skip_ws(l, i);
  if (rest < l->n) return tf_metrics__perr(l, rest, "unexpected text after the type");
  if (fam->type >= 0 && fam->type != type) return tf_metrics__perr(l, a, "a second, different TYPE for this metric");
  fam->type = type;
  return TF_OK;
}

/* `{name="value",...}` at l->s[*i] == '{'. Labels are appended to @p s. */
static tf_err tf_metrics__parse_labels(const tf_metrics__line *l, size_t *pi, tf_metrics__sample *s)
{
  size_t i = *pi + 1;
  tf_err rc = TF_OK;
  for (;;) {
    i = tf_metrics__skip_ws(l, i);
    if (i < l->n && l->s[i] == '}') break;
    if (s->label_count == TF_METRICS__LABELS_MAX) return tf_metrics__perr(l, i, "too many labels");
    char *name = tf_metrics__take_name(l, &i, 1, &rc);
    if (!name) return rc;
    for (size_t j = 0; j < s->label_count; j++)
      if (strcmp(s->label_names[j], name) == 0) {
        free(name);
        return tf_metrics__perr(l, i, "label given twice");
      }
    size_t k = s->label_count;
    s->label_names[k] = name;
    s->label_values[k] = NULL;
    s->label_count++;
    i = tf_metrics__skip_ws(l, i);
    if (i >= l->n || l->s[i] != '=') return tf_metrics__perr(l, i, "expected '=' after the label name");
    i = tf_metrics__skip_ws(l, i + 1);
    if (i >= l->n || l->s[i] != '"') return tf_metrics__perr(l, i, "expected '\"' to open the label value");
    i++;
    tf_buf v;
    tf_buf__init(&v);
    for (;;) {
      if (i >= l->n) {
        tf_buf__dispose(&v, 0);
        return tf_metrics__perr(l, i, "unterminated label value");
      }
      char c = l->s[i];
      if (c == '"') break;
      if (c == '\\') {
        char e = i + 1 < l->n ? l->s[i + 1] : '\0';
        if (e != '\\' && e != '"' && e != 'n') {
          tf_buf__dispose(&v, 0);
          return tf_metrics__perr(l, i, "invalid escape in a label value (only \\\\, \\\" and \\n)");
        }
        tf_buf__putn(&v, e == 'n' ? "\n" : &e, 1);
        i += 2;
        continue;
      }
      tf_buf__putn(&v, &c, 1);
      i++;
    }
    i++;
    if ((rc = tf_buf__detach(&v, &s->label_values[k])) < 0) return rc;
    i = tf_metrics__skip_ws(l, i);
    if (i < l->n && l->s[i] == ',') {
      i++;
      continue;
    }
    if (i < l->n && l->s[i] == '}') break;
    return tf_metrics__perr(l, i, "expected ',' or '}' after a label");
  }
  *pi = i + 1;
  return TF_OK;
}

static tf_err tf_metrics__parse_sample(tf_metrics *m, const tf_metrics__line *l, size_t i)
{
  tf_err rc = TF_OK;
  size_t start = i;
  tf_metrics__sample s = {0};
  s.name = tf_metrics__take_name(l, &i, 0, &rc);
  if (!s.name) return rc;
  s.label_names = calloc(TF_METRICS__LABELS_MAX, sizeof(char *));
  s.label_values = calloc(TF_METRICS__LABELS_MAX, sizeof(char *));
  if (!s.label_names || !s.label_values) {
    rc = tf_error__nomem();
    goto fail;
  }
  size_t j = tf_metrics__skip_ws(l, i);
  if (j < l->n && l->s[j] == '{') {
    if ((rc = tf_metrics__parse_labels(l, &j, &s)) < 0) goto fail;
    i = j;
  }
  if (i >= l->n || !tf_metrics__ws(l->s[i])) {
    rc = tf_metrics__perr(l, i, i >= l->n ? "expected a value" : "expected a space before the value");
    goto fail;
  }
  i = tf_metrics__skip_ws(l, i);
  size_t a = i;
  while (i < l->n && !tf_metrics__ws(l->s[i])) i++;
  if (a == i) {
    rc = tf_metrics__perr(l, a, "expected a value");
    goto fail;
  }
  if (tf_metrics__parse_value(l->s + a, i - a, &s.value) < 0) {
    rc = tf_metrics__perr(l, a, "not a number (a float, NaN, +Inf or -Inf)");
    goto fail;
  }
  i = tf_metrics__skip_ws(l, i);
  if (i < l->n) { /* an optional timestamp in milliseconds: read, then ignored */
    size_t t = i;
    if (l->s[i] == '-') i++;
    size_t d = 0;
    while (i < l->n && tf_metrics__is_digit(l->s[i])) i++, d++;
    if (!d || d > 19 || (i < l->n && !tf_metrics__ws(l->s[i]))) {
      rc = tf_metrics__perr(l, t, "expected an integer timestamp or the end of the line");
      goto fail;
    }
    i = tf_metrics__skip_ws(l, i);
    if (i < l->n) {
      rc = tf_metrics__perr(l, i, "unexpected text after the timestamp");
      goto fail;
    }
  }
  /* shrink the label arrays to what was used */
  char **ln = realloc(s.label_names, (s.label_count ? s.label_count : 1) * sizeof(char *));
  if (ln) s.label_names = ln;
  char **lv = realloc(s.label_values, (s.label_count ? s.label_count : 1) * sizeof(char *));
  if (lv) s.label_values = lv;
  rc = tf_metrics__push_sample(m, &s);
  if (rc == TF_EEXIST__) rc = tf_metrics__perr(l, start, "a sample with the same name and labels came before");
  if (rc == TF_OK) return TF_OK;
fail:
  tf_metrics__sample_clear(&s);
  return rc;
}

tf_err tf_metrics_parse(tf_metrics **out, const char *text, size_t len)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  tf_metrics *m = NULL;
  tf_err rc = tf_metrics_new(&m);
  if (rc < 0) return rc;
  tf_metrics__c_locale loc;
  tf_metrics__c_locale_enter(&loc);
  size_t pos = 0, no = 0;
  while (rc == TF_OK && pos < len) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    size_t end = nl ? (size_t)(nl - text) : len;
    tf_metrics__line l = {text + pos, end - pos, ++no};
    pos = nl ? end + 1 : len;
    const char *nul = memchr(l.s, '\0', l.n);
    if (nul) {
      rc = tf_metrics__perr(&l, (size_t)(nul - l.s), "NUL byte");
      break;
    }
    /* a line ends at its LF, CRs before it included: one CR less per round trip would not be a fixed point */
    while (l.n && l.s[l.n - 1] == '\r') l.n--;
    size_t i = tf_metrics__skip_ws(&l, 0);
    if (i == l.n) continue; /* blank: libprom writes one after every family */
    if (l.s[i] == '#') {
      rc = tf_metrics__parse_comment(m, &l, i);
    } else {
      rc = tf_metrics__parse_sample(m, &l, i);
    }
  }
  tf_metrics__c_locale_leave(&loc);
  if (rc < 0) {
    tf_metrics_free(m);
    return rc;
  }
  *out = m;
  return TF_OK;
}

/* ---- accessors ---- */

size_t tf_metrics_sample_count(const tf_metrics *m) { return m ? m->sample_count : 0; }

tf_err tf_metrics_sample(const tf_metrics *m, size_t i, const char **name, double *value)
{
  TF_ASSERT_ARG(m);
  if (i >= m->sample_count)
    return tf_error__set(TF_ENOTFOUND, "sample %zu: out of range (%zu samples)", i, m->sample_count);
  if (name) *name = m->samples[i].name;
  if (value) *value = m->samples[i].value;
  return TF_OK;
}

const char *tf_metrics_sample_label(const tf_metrics *m, size_t i, const char *label)
{
  if (!m || !label || i >= m->sample_count) return NULL;
  const tf_metrics__sample *s = &m->samples[i];
  for (size_t k = 0; k < s->label_count; k++)
    if (strcmp(s->label_names[k], label) == 0) return s->label_values[k];
  return NULL;
}

int tf_metrics_family_type(const tf_metrics *m, const char *name)
{
  if (!m || !name) return -1;
  long f = tf_metrics__lookup(&m->family_index, name);
  return f < 0 ? -1 : m->families[f].type;
}

tf_err tf_metrics_sum(double *out, const tf_metrics *m, const char *name)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(m);
  TF_ASSERT_ARG(name);
  double sum = 0;
  int seen = tf_metrics__lookup(&m->family_index, name) >= 0;
  for (size_t i = 0; i < m->sample_count; i++)
    if (strcmp(m->samples[i].name, name) == 0) {
      sum += m->samples[i].value;
      seen = 1;
    }
  if (!seen) return tf_error__set(TF_ENOTFOUND, "%.80s: no such metric in the exposition", name);
  *out = sum;
  return TF_OK;
}
