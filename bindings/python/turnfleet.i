/* SWIG interface of libturnfleet for Python: the 1:1 layer.
 *
 * Generated: the extension `turnfleet._core` (turnfleet/_core*.so) and its
 * proxy module `turnfleet.core` (core.py). The module is not named `_core`:
 * SWIG would then call the extension `__core`, a name Python mangles inside
 * the generated class bodies. The hand-written package `turnfleet`
 * (bindings/python/turnfleet/) builds the Python API on top; nothing outside
 * it should need this layer.
 *
 * Conventions (docs: bindings/python/README.md):
 * - a `tf_err` return becomes None or raises the class of turnfleet._errors for
 *   the code, with this thread's tf_error_last() message;
 * - `T **out` becomes an owned proxy (its destructor calls tf_T_free);
 *   `char **out` becomes str (the C string is released with tf_free, secrets
 *   are wiped first); other out-parameters become return values;
 * - `(const void *data, size_t len)` takes any bytes-like object, released
 *   after the call;
 * - the versioned options structs are not exposed: the tf_py_* helpers below
 *   fill them on the C stack from plain arguments;
 * - built with -threads: every call releases the GIL, except the helpers
 *   marked %nothreadallow, which create Python objects.
 * Borrowed pointers (tf_plan_relay, tf_probe_set_result) are valid while their
 * parent lives, as in C: the package converts them at once.
 */
%module(package="turnfleet", docstring="libturnfleet, 1:1 (SWIG). Use the package `turnfleet` instead.") core

%{
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "turnfleet.h"

/* Owned handles alive: wrapped with SWIG_POINTER_OWN and not destroyed yet
 * (atomic: destructors run with the GIL released). The tests use it to find
 * handles that a lost Python reference keeps (valgrind sees those as still
 * reachable, not lost). */
static long tf_py_live = 0;

/* A C string as str (None for NULL). Library text is UTF-8; anything else is escaped. */
static PyObject *tf_py_str(const char *s)
{
  if (!s) Py_RETURN_NONE;
  return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "backslashreplace");
}

/* Raise the exception for a failed call: the class turnfleet._errors maps
 * @p code to, with this thread's message. The message is copied first: it is
 * valid only until the next failing call on this thread. */
static void tf_py_raise(tf_err code)
{
  const tf_error *e = tf_error_last();
  PyObject *msg = tf_py_str((e->code == code && e->message) ? e->message : tf_strerror(code));
  if (!msg) return;
  PyObject *mod = PyImport_ImportModule("turnfleet._errors");
  PyObject *exc = mod ? PyObject_CallMethod(mod, "_make", "iO", (int)code, msg) : NULL;
  Py_XDECREF(mod);
  Py_DECREF(msg);
  if (!exc) return;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
}

/* Raise turnfleet.InvalidArgument (a ValueError) for an argument the bindings
 * refuse before the library sees it: every error is a turnfleet.Error. */
static void tf_py_invalid(const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  PyOS_vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  PyObject *text = tf_py_str(msg);
  PyObject *mod = text ? PyImport_ImportModule("turnfleet._errors") : NULL;
  PyObject *exc = mod ? PyObject_CallMethod(mod, "_make", "iO", (int)TF_EINVALID, text) : NULL;
  Py_XDECREF(mod);
  Py_XDECREF(text);
  if (!exc) return;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
}

/* The probe's log callback: forwards to a Python callable(level, message). It
 * runs on the thread running the probe, with the GIL released: take it. An
 * exception in the callable cannot stop the probe; it is reported as unraisable. */
static void tf_py_log(tf_log_level level, const char *message, void *payload)
{
  SWIG_PYTHON_THREAD_BEGIN_BLOCK;
  PyObject *r = PyObject_CallFunction((PyObject *)payload, "iN", (int)level, tf_py_str(message));
  if (r)
    Py_DECREF(r);
  else
    PyErr_WriteUnraisable((PyObject *)payload);
  SWIG_PYTHON_THREAD_END_BLOCK;
}
%}

/* SWIG reads the public headers; the export macro is only the type to it. */
#define TF_EXTERN(type) type

%include <stdint.i>
%include <typemaps.i>

/* ---- errors: tf_err is its own typedef, so this touches status returns only ---- */

%typemap(out) tf_err {
  if ($1 < 0) {
    tf_py_raise($1);
    SWIG_fail;
  }
  $result = SWIG_Py_Void();
}

/* ... except where a tf_err is the value asked for, not the call's status */
%typemap(out) tf_err tf_probe_result_status {
  $result = PyLong_FromLong((long)$1);
}

/* ---- input strings: borrowed from the str object (the call's arguments keep it
 * alive while the GIL is released); no copy, so a secret is not left in a
 * freed copy. None is NULL: the library rejects it where it is required. ---- */

%typemap(in) const char * {
  if ($input == Py_None) {
    $1 = NULL;
  } else if (PyUnicode_Check($input)) {
    Py_ssize_t n = 0;
    const char *s = PyUnicode_AsUTF8AndSize($input, &n);
    if (!s) SWIG_fail;
    if (strlen(s) != (size_t)n) {
      tf_py_invalid("$symname: argument $argnum contains a NUL character");
      SWIG_fail;
    }
    $1 = ($1_ltype)s;
  } else {
    PyErr_Format(PyExc_TypeError, "$symname: argument $argnum must be str or None, not %.100s",
                 Py_TYPE($input)->tp_name);
    SWIG_fail;
  }
}
%typemap(freearg) const char * "";
%typemap(typecheck, precedence=SWIG_TYPECHECK_STRING) const char * {
  $1 = ($input == Py_None || PyUnicode_Check($input)) ? 1 : 0;
}

/* ---- bytes-like input through the buffer protocol, released after the call ---- */

%define TF_BUFFER_IN(PTR, LEN, NONE_OK)
%typemap(in) (PTR, LEN) (Py_buffer view, Py_buffer *held = NULL) {
  if (NONE_OK && $input == Py_None) {
    $1 = NULL;
    $2 = 0;
  } else {
    if (PyObject_GetBuffer($input, &view, PyBUF_SIMPLE) < 0) SWIG_fail;
    held = &view;
    $1 = ($1_ltype)view.buf;
    $2 = (size_t)view.len;
  }
}
%typemap(freearg) (PTR, LEN) {
  if (held$argnum) PyBuffer_Release(held$argnum);
}
/* an input: no output typemap may match it (SWIG would try `uint8_t *key` without const) */
%typemap(argout) (PTR, LEN) "";
%enddef

TF_BUFFER_IN(const void *data, size_t len, 0)
TF_BUFFER_IN(const void *buf, size_t len, 0)
TF_BUFFER_IN(const void *value, size_t len, 0)
TF_BUFFER_IN(const uint8_t *key, size_t key_len, 1)

/* Documents: str (UTF-8) or any bytes-like object. */
%define TF_TEXT_IN(PTR, LEN)
%typemap(in) (PTR, LEN) (Py_buffer view, Py_buffer *held = NULL) {
  if (PyUnicode_Check($input)) {
    Py_ssize_t n = 0;
    const char *s = PyUnicode_AsUTF8AndSize($input, &n);
    if (!s) SWIG_fail;
    $1 = ($1_ltype)s;
    $2 = (size_t)n;
  } else {
    if (PyObject_GetBuffer($input, &view, PyBUF_SIMPLE) < 0) SWIG_fail;
    held = &view;
    $1 = ($1_ltype)view.buf;
    $2 = (size_t)view.len;
  }
}
%typemap(freearg) (PTR, LEN) {
  if (held$argnum) PyBuffer_Release(held$argnum);
}
%enddef

TF_TEXT_IN(const char *text, size_t len)
TF_TEXT_IN(const char *json, size_t len)
TF_TEXT_IN(const char *ice_servers, size_t ice_len)
TF_TEXT_IN(const char *status, size_t status_len)

/* A STUN transaction id: 12 bytes, or None (tf_stun_msg_new draws one). */
%typemap(in) const uint8_t *tid (Py_buffer view, Py_buffer *held = NULL) {
  if ($input == Py_None) {
    $1 = NULL;
  } else {
    if (PyObject_GetBuffer($input, &view, PyBUF_SIMPLE) < 0) SWIG_fail;
    held = &view;
    if (view.len != TF_STUN_TID_SIZE) {
      tf_py_invalid("$symname: a transaction id is %d bytes, not %zd", TF_STUN_TID_SIZE,
                   view.len);
      SWIG_fail; /* freearg releases the view */
    }
    $1 = ($1_ltype)view.buf;
  }
}
%typemap(freearg) const uint8_t *tid {
  if (held$argnum) PyBuffer_Release(held$argnum);
}

/* listener ports: a sequence of ints (None: none). */
%typemap(in) (const uint16_t *listener_ports, size_t listener_ports_count) (uint16_t *ports = NULL) {
  $1 = NULL;
  $2 = 0;
  if ($input != Py_None) {
    PyObject *seq = PySequence_Fast($input, "$symname: listener ports must be a sequence of ints");
    if (!seq) SWIG_fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ports = n > 0 ? (uint16_t *)malloc((size_t)n * sizeof(*ports)) : NULL;
    if (n > 0 && !ports) {
      Py_DECREF(seq);
      PyErr_NoMemory();
      SWIG_fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
      long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
      if ((v == -1 && PyErr_Occurred()) || v < 0 || v > 65535) {
        if (!PyErr_Occurred()) tf_py_invalid("$symname: listener port %ld is not 0-65535", v);
        Py_DECREF(seq);
        SWIG_fail;
      }
      ports[i] = (uint16_t)v;
    }
    Py_DECREF(seq);
    $1 = ports;
    $2 = (size_t)n;
  }
}
%typemap(freearg) (const uint16_t *listener_ports, size_t listener_ports_count) {
  free(ports$argnum);
}

/* Shared secrets: a sequence of str, current first. The tuple keeps them alive. */
%typemap(in) (const char *const *secrets, size_t secrets_count) (PyObject *tuple = NULL, const char **arr = NULL) {
  if (PyUnicode_Check($input) || PyBytes_Check($input)) {
    PyErr_SetString(PyExc_TypeError, "$symname: secrets must be a sequence of str, not one string");
    SWIG_fail;
  }
  tuple = PySequence_Tuple($input);
  if (!tuple) SWIG_fail;
  Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  arr = (const char **)calloc(n > 0 ? (size_t)n : 1, sizeof(*arr));
  if (!arr) {
    PyErr_NoMemory();
    SWIG_fail;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = PyTuple_GET_ITEM(tuple, i);
    Py_ssize_t len = 0;
    const char *s = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &len) : NULL;
    if (!s) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "$symname: each secret must be str");
      SWIG_fail;
    }
    if (strlen(s) != (size_t)len) {
      tf_py_invalid("$symname: a secret contains a NUL character");
      SWIG_fail;
    }
    arr[i] = s;
  }
  $1 = ($1_ltype)arr;
  $2 = (size_t)n;
}
%typemap(freearg) (const char *const *secrets, size_t secrets_count) {
  free((void *)arr$argnum);
  Py_XDECREF(tuple$argnum);
}

/* ---- addresses and ranges as text and tuples ---- */

%typemap(in) const tf_addr * (tf_addr tmp) {
  const char *s = PyUnicode_Check($input) ? PyUnicode_AsUTF8($input) : NULL;
  if (!s) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "$symname: an address must be str");
    SWIG_fail;
  }
  if (tf_addr_parse(&tmp, s) < 0) {
    tf_py_raise(TF_EINVALID);
    SWIG_fail;
  }
  $1 = &tmp;
}

%typemap(in, numinputs=0) tf_addr *out (tf_addr tmp) {
  memset(&tmp, 0, sizeof(tmp));
  $1 = &tmp;
}
%typemap(argout) tf_addr *out {
  char text[TF_ADDR_STRLEN];
  if (tf_addr_format(text, sizeof(text), $1) < 0) {
    tf_py_raise(TF_EINVALID);
    SWIG_fail;
  }
  PyObject *o = tf_py_str(text);
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}

/* (address, port) */
%typemap(in, numinputs=0) (tf_addr *addr, uint16_t *port) (tf_addr a, uint16_t p) {
  memset(&a, 0, sizeof(a));
  p = 0;
  $1 = &a;
  $2 = &p;
}
%typemap(argout) (tf_addr *addr, uint16_t *port) {
  char text[TF_ADDR_STRLEN];
  if (tf_addr_format(text, sizeof(text), $1) < 0) {
    tf_py_raise(TF_EINVALID);
    SWIG_fail;
  }
  PyObject *o = Py_BuildValue("(sI)", text, (unsigned)*$2);
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}

%typemap(out) tf_port_range {
  $result = Py_BuildValue("(II)", (unsigned)$1.start, (unsigned)$1.end);
}
%typemap(in) tf_port_range {
  unsigned int s = 0, e = 0;
  if (!PyArg_ParseTuple($input, "II;a port range is a (start, end) tuple", &s, &e)) SWIG_fail;
  if (s > 65535 || e > 65535) {
    tf_py_invalid("$symname: a port is 0-65535");
    SWIG_fail;
  }
  $1.start = (uint16_t)s;
  $1.end = (uint16_t)e;
}
%typemap(in, numinputs=0) tf_port_range *out (tf_port_range tmp) {
  tmp.start = tmp.end = 0;
  $1 = &tmp;
}
%typemap(argout) tf_port_range *out {
  $result = SWIG_Python_AppendOutput($result, Py_BuildValue("(II)", (unsigned)$1->start, (unsigned)$1->end));
}

/* A caller buffer for a short string (relay name, address). */
%typemap(in, numinputs=0) (char *buf, size_t size) (char tmp[TF_RELAY_NAME_MAX]) {
  tmp[0] = '\0';
  $1 = tmp;
  $2 = sizeof(tmp);
}
%typemap(argout) (char *buf, size_t size) {
  PyObject *o = tf_py_str($1);
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}

/* ---- strings the library allocates: str, then tf_free (secrets: wiped and freed) ---- */

%define TF_STRING_OUT(PATTERN, RELEASE)
%typemap(in, numinputs=0) PATTERN (char *tmp = NULL) {
  $1 = &tmp;
}
%typemap(argout) PATTERN {
  PyObject *o = tf_py_str(*$1);
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}
%typemap(freearg) PATTERN {
  if ($1) RELEASE(*$1);
}
%enddef

TF_STRING_OUT(char **TF_STR_OUT, tf_free)
TF_STRING_OUT(char **TF_SECRET_OUT, tf_secret_free)
%apply char **TF_STR_OUT { char **out, char **username };
%apply char **TF_SECRET_OUT { char **password, char **secret_out };

/* Borrowed strings (plan conditions, STUN reason): str or None, never freed. */
%typemap(in, numinputs=0) const char ** (const char *tmp = NULL) {
  $1 = ($1_ltype)&tmp;
}
%typemap(argout) const char ** {
  PyObject *o = tf_py_str(*$1);
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}

/* Borrowed bytes (a STUN attribute's value, ChannelData payload): copied to bytes. */
%define TF_BYTES_OUT(PTR, LEN)
%typemap(in, numinputs=0) (PTR, LEN) (const uint8_t *p = NULL, size_t n = 0) {
  $1 = ($1_ltype)&p;
  $2 = &n;
}
%typemap(argout) (PTR, LEN) {
  PyObject *o = PyBytes_FromStringAndSize((const char *)*$1, (Py_ssize_t)*$2);
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}
%enddef
TF_BYTES_OUT(const uint8_t **value, size_t *len)
TF_BYTES_OUT(const uint8_t **data, size_t *data_len)

/* A long-term key (16 bytes). */
%typemap(in, numinputs=0) uint8_t *key (uint8_t tmp[TF_STUN_KEY_SIZE]) {
  memset(tmp, 0, sizeof(tmp));
  $1 = tmp;
}
%typemap(argout) uint8_t *key {
  $result = SWIG_Python_AppendOutput($result, PyBytes_FromStringAndSize((const char *)$1, TF_STUN_KEY_SIZE));
}

/* A ChannelData frame: encoded into a heap buffer (4 + 65535 + 3 bytes at most). */
%typemap(in, numinputs=0) (uint8_t *buf, size_t size, size_t *out_len) (uint8_t *frame = NULL, size_t frame_len = 0) {
  frame = (uint8_t *)malloc(65544);
  if (!frame) {
    PyErr_NoMemory();
    SWIG_fail;
  }
  $1 = frame;
  $2 = 65544;
  $3 = &frame_len;
}
%typemap(argout) (uint8_t *buf, size_t size, size_t *out_len) {
  $result = SWIG_Python_AppendOutput($result, PyBytes_FromStringAndSize((const char *)$1, (Py_ssize_t)*$3));
}
%typemap(freearg) (uint8_t *buf, size_t size, size_t *out_len) {
  free(frame$argnum);
}

%apply int *OUTPUT { int *major, int *minor, int *patch, int *code };
%apply unsigned short *OUTPUT { uint16_t *type, uint16_t *channel };
%apply unsigned int *OUTPUT { uint32_t *value };

%typemap(in, numinputs=0) uint32_t *out (uint32_t tmp = 0) {
  $1 = &tmp;
}
%typemap(argout) uint32_t *out {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromUnsignedLong(*$1));
}
%typemap(in, numinputs=0) int64_t *out (int64_t tmp = 0) {
  $1 = &tmp;
}
%typemap(argout) int64_t *out {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromLongLong((long long)*$1));
}
%typemap(in, numinputs=0) size_t *frame_len (size_t tmp = 0) {
  $1 = &tmp;
}
%typemap(argout) size_t *frame_len {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromSize_t(*$1));
}

/* Python objects pass through (the log callable). */
%typemap(in) PyObject *log_cb {
  $1 = $input;
}

/* A port (or any uint16_t) out of range is an InvalidArgument, like the library's own refusals. */
%typemap(in) uint16_t {
  long v = PyLong_AsLong($input);
  if (v == -1 && PyErr_Occurred()) SWIG_fail;
  if (v < 0 || v > 65535) {
    tf_py_invalid("$symname: argument $argnum: %ld is not 0-65535", v);
    SWIG_fail;
  }
  $1 = (uint16_t)v;
}

/* ---- reconcile and metrics ---- */

/* Strings sequences of the reconcile and metrics helpers: the shape of the secrets one. */
%apply (const char *const *secrets, size_t secrets_count) {
  (const char *const *names, size_t names_count), (const char *const *values, size_t values_count),
  (const char *const *uris, size_t uri_count)
};

/* Allocate failures by TURN code: a dict {code: count} into two arrays. */
%typemap(in) (const int *failure_codes, const long long *failure_counts, size_t failure_count)
  (int *codes = NULL, long long *counts = NULL) {
  $1 = NULL;
  $2 = NULL;
  $3 = 0;
  if ($input != Py_None) {
    if (!PyDict_Check($input)) {
      PyErr_SetString(PyExc_TypeError, "$symname: failures must be a dict {code: count}");
      SWIG_fail;
    }
    Py_ssize_t n = PyDict_Size($input), pos = 0, i = 0;
    codes = (int *)calloc(n > 0 ? (size_t)n : 1, sizeof(*codes));
    counts = (long long *)calloc(n > 0 ? (size_t)n : 1, sizeof(*counts));
    if (!codes || !counts) {
      PyErr_NoMemory();
      SWIG_fail;
    }
    PyObject *k, *v;
    while (PyDict_Next($input, &pos, &k, &v)) {
      long code = PyLong_AsLong(k);
      long long count = PyLong_AsLongLong(v);
      if (PyErr_Occurred()) SWIG_fail;
      if (code < 0 || code > 999 || count < 0) {
        tf_py_invalid("$symname: failures: %ld: %lld is not a TURN code and a count", code, count);
        SWIG_fail;
      }
      codes[i] = (int)code;
      counts[i] = count;
      i++;
    }
    $1 = codes;
    $2 = counts;
    $3 = (size_t)n;
  }
}
%typemap(freearg) (const int *failure_codes, const long long *failure_counts, size_t failure_count) {
  free(codes$argnum);
  free(counts$argnum);
}

/* tf_reconcile_action: (action, relay index, reason) */
%typemap(in, numinputs=0) tf_action *action (tf_action tmp = TF_ACTION_START) {
  $1 = &tmp;
}
%typemap(argout) tf_action *action {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromLong((long)*$1));
}
%typemap(in, numinputs=0) size_t *relay (size_t tmp = 0) {
  $1 = &tmp;
}
%typemap(argout) size_t *relay {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromSize_t(*$1));
}
%typemap(in, numinputs=0) double *value (double tmp = 0) {
  $1 = &tmp;
}
%typemap(argout) double *value {
  $result = SWIG_Python_AppendOutput($result, PyFloat_FromDouble(*$1));
}
%apply double *value { double *out };

/* ---- opaque handles: owned proxies whose destructor frees ---- */

%define TF_HANDLE(TYPE, FREE)
%nodefaultctor TYPE;
struct TYPE {}; /* SWIG only: a class to hang the destructor on; C sees the opaque type */
%extend TYPE {
  ~TYPE() {
    __atomic_sub_fetch(&tf_py_live, 1, __ATOMIC_RELAXED);
    FREE($self);
  }
}
%ignore FREE;
%typemap(in, numinputs=0) TYPE **out (TYPE *tmp = NULL) {
  $1 = &tmp;
}
%typemap(argout) TYPE **out {
  PyObject *o = SWIG_NewPointerObj(SWIG_as_voidptr(*$1), $*1_descriptor, *$1 ? SWIG_POINTER_OWN : 0);
  if (!o) SWIG_fail; /* freearg frees the handle */
  if (*$1) __atomic_add_fetch(&tf_py_live, 1, __ATOMIC_RELAXED);
  *$1 = NULL;
  $result = SWIG_Python_AppendOutput($result, o);
}
/* a handle not handed to Python (the call or a later conversion failed) */
%typemap(freearg) TYPE **out {
  if ($1) FREE(*$1);
}
%enddef

TF_HANDLE(tf_pool, tf_pool_free)
TF_HANDLE(tf_problems, tf_problems_free)
TF_HANDLE(tf_nodes, tf_nodes_free)
TF_HANDLE(tf_existing, tf_existing_free)
TF_HANDLE(tf_plan, tf_plan_free)
TF_HANDLE(tf_capacity, tf_capacity_free)
TF_HANDLE(tf_uri, tf_uri_free)
TF_HANDLE(tf_stun_msg, tf_stun_msg_free)
TF_HANDLE(tf_probe_result, tf_probe_result_free)
TF_HANDLE(tf_probe_set, tf_probe_set_free)
TF_HANDLE(tf_allocation, tf_allocation_free)
TF_HANDLE(tf_metrics, tf_metrics_free)
TF_HANDLE(tf_observed, tf_observed_free)
TF_HANDLE(tf_reconcile, tf_reconcile_free)
TF_HANDLE(tf_issuer_pool, tf_issuer_pool_free)
TF_HANDLE(tf_issuer_answer, tf_issuer_answer_free)
%apply tf_probe_result **out { tf_probe_result **result };

/* borrowed from its plan, never freed */
%nodefaultctor tf_relay;
%nodefaultdtor tf_relay;
struct tf_relay {};

/* ---- what is not exposed ---- */

%ignore tf_free;               /* every string is converted and freed by the typemaps */
%ignore tf_secret_free;
%ignore tf_error_last;         /* read by the tf_err typemap */
%ignore tf_error;
%ignore TF__ERR_PLACEHOLDER;
%ignore tf_addr;               /* addresses are str */
%ignore tf_prefix;
%ignore tf_prefix_parse;
%ignore tf_prefix_contains;
%ignore tf_prefix_bounds;
%ignore tf_port_range;         /* (start, end) tuples */
/* versioned options: filled by the tf_py_* helpers */
%ignore tf_capacity_options;
%ignore tf_capacity_options_init;
%ignore tf_capacity_new;
%ignore tf_coturn_options;
%ignore tf_coturn_options_init;
%ignore tf_coturn_render;
%ignore tf_probe_options;
%ignore tf_probe_options_init;
%ignore tf_probe_run;
%ignore tf_probe_set_add;
%ignore tf_probe_set_run;
%ignore tf_probe_set_start;   /* the caller's-loop hooks: not in the binding (it runs sets with run()) */
%ignore tf_probe_set_fd;
%ignore tf_probe_set_timeout;
%ignore tf_probe_set_process;
%ignore tf_probe_set_running;
%ignore tf_allocation_new;
%ignore tf_relay_observation;
%ignore tf_relay_observation_init;
%ignore tf_observed_add_relay;
%ignore tf_reconcile_options;
%ignore tf_reconcile_options_init;
%ignore tf_reconcile_new;
%ignore tf_metrics_add;
%ignore tf_reconcile_plan;      /* borrowed: the package plans again when it needs one */
%ignore tf_issuer_options;
%ignore tf_issuer_options_init;
%ignore tf_issuer_request;
%ignore tf_issuer_answer_new;
%ignore tf_issuer_transports_parse; /* tf_py_issuer_answer_new parses the filters */
%ignore tf_issuer_family_parse;
/* input limits: filled by tf_py_parse_with */
%ignore tf_parse_options;
%ignore tf_parse_options_init;
%ignore tf_pool_parse_with;
%ignore tf_nodes_parse_with;
%ignore tf_existing_parse_with;
/* replaced by helpers that fit Python better */
%ignore tf_pool_validate;
%ignore tf_cred_secret_read;
%ignore tf_stun_msg_bytes;
%ignore tf_stun_msg_tid;

%include "turnfleet/common.h"
%include "turnfleet/errors.h"
%include "turnfleet/version.h"
%include "turnfleet/log.h"
%include "turnfleet/addr.h"
%include "turnfleet/pool.h"
%include "turnfleet/inventory.h"
%include "turnfleet/plan.h"
%include "turnfleet/capacity.h"
/* a rendered config or a CLI login line holds secrets: wipe every string of coturn.h */
%apply char **TF_SECRET_OUT { char **out };
%include "turnfleet/coturn.h"
%apply char **TF_STR_OUT { char **out };
%include "turnfleet/cred.h"
%include "turnfleet/stun.h"
%include "turnfleet/uri.h"
%include "turnfleet/probe.h"
%include "turnfleet/metrics.h"
/* the relays' rendered configs hold the secrets: wipe the JSON strings of reconcile.h too */
%apply char **TF_SECRET_OUT { char **out };
%include "turnfleet/reconcile.h"
/* an answer holds a credential: wipe its JSON too */
%include "turnfleet/issuer.h"
%apply char **TF_STR_OUT { char **out };
/* Not wrapped (never %include'd, so nothing of them is generated): engine.h,
 * relayctl.h, manifest.h, admission.h and vantage.h, the runtime side that the
 * tools drive.
 * manifest.h's Secret builder returns secret material, so wrapping it needs
 * the TF_SECRET_OUT typemap like coturn.h and reconcile.h. */

/* ---- helpers ---- */

%inline %{
/* tf_pool_validate(), but a pool with problems is not a failure here: the
 * problems are the answer. */
tf_err tf_py_pool_validate(tf_problems **out, const tf_pool *pool)
{
  tf_err rc = tf_pool_validate(out, pool);
  return (rc == TF_EINVALID && *out) ? TF_OK : rc;
}

tf_err tf_py_capacity_new(tf_capacity **out, const tf_pool *pool, const tf_plan *plan, int64_t target_allocations,
                          double headroom, double session_kbps, double node_mbps)
{
  tf_capacity_options o;
  tf_err rc = tf_capacity_options_init(&o, TF_CAPACITY_OPTIONS_VERSION);
  if (rc < 0) return rc;
  o.target_allocations = target_allocations;
  o.headroom = headroom;
  o.session_kbps = session_kbps;
  o.node_mbps = node_mbps;
  return tf_capacity_new(out, pool, plan, &o);
}

tf_err tf_py_coturn_render(char **secret_out, const tf_pool *pool, const tf_plan *plan, const char *relay_name,
                           const char *const *secrets, size_t secrets_count, const char *coturn_version,
                           const char *state_dir, const char *log_file, uint16_t cli_port,
                           const char *cli_password, uint16_t prometheus_port, const char *cert_file,
                           const char *key_file, int allow_loopback_peers, int prometheus)
{
  tf_coturn_options o;
  tf_err rc = tf_coturn_options_init(&o, TF_COTURN_OPTIONS_VERSION);
  if (rc < 0) return rc;
  o.coturn_version = coturn_version;
  o.secrets = secrets;
  o.secrets_count = secrets_count;
  o.state_dir = state_dir;
  o.log_file = log_file;
  o.cli_port = cli_port;
  o.cli_password = cli_password;
  if (prometheus_port) o.prometheus_port = prometheus_port;
  o.cert_file = cert_file;
  o.key_file = key_file;
  o.allow_loopback_peers = allow_loopback_peers;
  o.prometheus = prometheus;
  return tf_coturn_render(secret_out, pool, plan, relay_name, &o);
}

tf_err tf_py_cred_secret_read(char **secret_out, const char *path)
{
  return tf_cred_secret_read(secret_out, path);
}

/* tf_issuer_answer_new() with the request's filters as the query gives them (NULL: none) and the
 * options as plain arguments (0: the default). */
tf_err tf_py_issuer_answer_new(tf_issuer_answer **out, const tf_issuer_pool *pool, const char *secret,
                               const char *user, const char *transport, const char *family, int64_t ttl_s,
                               size_t max_relays, int64_t ttl_default_s, int64_t ttl_min_s, int64_t ttl_max_s,
                               double pressure, int64_t now_s)
{
  tf_issuer_request req = TF_ISSUER_REQUEST_INIT;
  req.user = user;
  req.ttl_s = ttl_s;
  tf_err rc = transport ? tf_issuer_transports_parse(&req.transports, transport) : TF_OK;
  if (rc == TF_OK && family) rc = tf_issuer_family_parse(&req.family, family);
  if (rc < 0) return rc;
  tf_issuer_options o;
  if ((rc = tf_issuer_options_init(&o, TF_ISSUER_OPTIONS_VERSION)) < 0) return rc;
  if (max_relays) o.max_relays = max_relays;
  if (ttl_default_s) o.ttl_default_s = ttl_default_s;
  if (ttl_min_s) o.ttl_min_s = ttl_min_s;
  if (ttl_max_s) o.ttl_max_s = ttl_max_s;
  if (pressure != 0) o.pressure = pressure;
  return tf_issuer_answer_new(out, pool, secret, &req, &o, now_s);
}

/* tf_metrics_add() with the labels as two sequences of one length. */
tf_err tf_py_metrics_add(tf_metrics *metrics, const char *name, const char *const *names, size_t names_count,
                         const char *const *values, size_t values_count, double value)
{
  if (names_count != values_count) return TF_EINVALID; /* the package passes them paired */
  return tf_metrics_add(metrics, name, names, values, names_count, value);
}

/* tf_observed_add_relay() with the observation as arguments. */
tf_err tf_py_observed_add_relay(tf_observed *observed, const char *name, const char *identity,
                                const char *config_hash, uint16_t cli_port, int running, int64_t started_ms,
                                int64_t exited_ms, int64_t restarts, int draining, int64_t draining_since_ms,
                                int64_t allocations, int64_t probe_ms, int probe_ok, int probe_error_code,
                                const char *probe_message, int saw_508, const int *failure_codes,
                                const long long *failure_counts, size_t failure_count, const char *const *uris,
                                size_t uri_count)
{
  tf_relay_observation r;
  tf_err rc = tf_relay_observation_init(&r, TF_RELAY_OBSERVATION_VERSION);
  if (rc < 0) return rc;
  /* SWIG's int64_t is long long: copy into the library's type */
  int64_t *counts = failure_count ? malloc(failure_count * sizeof(*counts)) : NULL;
  if (failure_count && !counts) return TF_ENOMEM;
  for (size_t i = 0; i < failure_count; i++) counts[i] = (int64_t)failure_counts[i];
  r.name = name;
  r.identity = identity;
  r.config_hash = config_hash;
  r.cli_port = cli_port;
  r.running = running;
  r.started_ms = started_ms;
  r.exited_ms = exited_ms;
  r.restarts = restarts;
  r.draining = draining;
  r.draining_since_ms = draining_since_ms;
  r.allocations = allocations;
  r.probe_ms = probe_ms;
  r.probe_ok = probe_ok;
  r.probe_error_code = probe_error_code;
  r.probe_message = probe_message;
  r.saw_508 = saw_508;
  r.failure_codes = failure_codes;
  r.failure_counts = counts;
  r.failure_count = failure_count;
  r.uris = uris;
  r.uri_count = uri_count;
  rc = tf_observed_add_relay(observed, &r);
  free(counts);
  return rc;
}

/* tf_reconcile_new() with the render options and knobs as arguments (0 keeps a knob's default). */
tf_err tf_py_reconcile_new(tf_reconcile **out, const tf_pool *pool, const tf_nodes *nodes,
                           const tf_observed *observed, int64_t now_ms, const char *const *secrets,
                           size_t secrets_count, const char *coturn_version, const char *state_dir,
                           const char *log_file, uint16_t cli_port, const char *cli_password,
                           const char *log_dir, double pressure_threshold, int64_t backoff_initial_ms,
                           int64_t backoff_max_ms, int allow_loopback_peers)
{
  tf_coturn_options c;
  tf_reconcile_options o;
  tf_err rc = tf_coturn_options_init(&c, TF_COTURN_OPTIONS_VERSION);
  if (rc < 0 || (rc = tf_reconcile_options_init(&o, TF_RECONCILE_OPTIONS_VERSION)) < 0) return rc;
  c.coturn_version = coturn_version;
  c.secrets = secrets;
  c.secrets_count = secrets_count;
  c.state_dir = state_dir;
  c.log_file = log_file;
  c.cli_port = cli_port;
  c.cli_password = cli_password;
  c.allow_loopback_peers = allow_loopback_peers;
  o.coturn = &c;
  o.log_dir = log_dir;
  if (pressure_threshold > 0) o.pressure_threshold = pressure_threshold;
  if (backoff_initial_ms > 0) o.backoff_initial_ms = backoff_initial_ms;
  if (backoff_max_ms > 0) o.backoff_max_ms = backoff_max_ms;
  return tf_reconcile_new(out, pool, nodes, observed, now_ms, &o);
}

/* The parse functions with input limits (0 keeps a default). */
static tf_err tf_py__limits(tf_parse_options *o, size_t max_bytes, size_t max_values)
{
  tf_err rc = tf_parse_options_init(o, TF_PARSE_OPTIONS_VERSION);
  if (max_bytes) o->max_bytes = max_bytes;
  if (max_values) o->max_values = max_values;
  return rc;
}

tf_err tf_py_pool_parse_with(tf_pool **out, const void *data, size_t len, int format, size_t max_bytes,
                             size_t max_values)
{
  tf_parse_options o;
  tf_err rc = tf_py__limits(&o, max_bytes, max_values);
  return rc < 0 ? rc : tf_pool_parse_with(out, (const char *)data, len, format, &o);
}

tf_err tf_py_nodes_parse_with(tf_nodes **out, const void *data, size_t len, size_t max_bytes, size_t max_values)
{
  tf_parse_options o;
  tf_err rc = tf_py__limits(&o, max_bytes, max_values);
  return rc < 0 ? rc : tf_nodes_parse_with(out, (const char *)data, len, &o);
}

tf_err tf_py_existing_parse_with(tf_existing **out, const void *data, size_t len, size_t max_bytes, size_t max_values)
{
  tf_parse_options o;
  tf_err rc = tf_py__limits(&o, max_bytes, max_values);
  return rc < 0 ? rc : tf_existing_parse_with(out, (const char *)data, len, &o);
}
%}

%{
/* One probe's options from plain arguments; 0 or negative keeps the default
 * where the library has one (user NULL, ttl_s, timeout_ms, rto_ms). */
static tf_err tf_py_probe_options(tf_probe_options *o, const char *uri, const char *secret, const char *user,
                                  int64_t ttl_s, int separator, int family, const char *expect_address,
                                  uint16_t expect_port_start, uint16_t expect_port_end, int peer_check,
                                  int timeout_ms, int rto_ms, const char *ca_file, int insecure, int64_t now,
                                  uint32_t lifetime_s, int release, PyObject *log_cb, int log_level)
{
  tf_err rc = tf_probe_options_init(o, TF_PROBE_OPTIONS_VERSION);
  if (rc < 0) return rc;
  o->uri = uri;
  o->secret = secret;
  o->user = user;
  o->ttl_s = ttl_s;
  o->separator = separator;
  o->family = family;
  o->expect_address = expect_address;
  o->expect_port_start = expect_port_start;
  o->expect_port_end = expect_port_end;
  o->peer_check = peer_check;
  o->timeout_ms = timeout_ms;
  o->rto_ms = rto_ms;
  o->ca_file = ca_file;
  o->insecure = insecure;
  o->now = now;
  o->lifetime_s = lifetime_s;
  o->release = release;
  if (log_cb && log_cb != Py_None) {
    o->log_cb = tf_py_log;
    o->log_payload = log_cb;
    o->log_level = (tf_log_level)log_level;
  }
  return TF_OK;
}
%}

%inline %{
/* tf_probe_run() with the options as arguments. @p log_cb: a callable(level,
 * message) or None; it must live until the call returns (it is an argument). */
tf_err tf_py_probe_run(tf_probe_result **out, const char *uri, const char *secret, const char *user, int64_t ttl_s,
                       int separator, int family, const char *expect_address, uint16_t expect_port_start,
                       uint16_t expect_port_end, int peer_check, int timeout_ms, int rto_ms, const char *ca_file,
                       int insecure, int64_t now, uint32_t lifetime_s, int release, PyObject *log_cb,
                       int log_level)
{
  tf_probe_options o;
  tf_err rc = tf_py_probe_options(&o, uri, secret, user, ttl_s, separator, family, expect_address,
                                  expect_port_start, expect_port_end, peer_check, timeout_ms, rto_ms, ca_file,
                                  insecure, now, lifetime_s, release, log_cb, log_level);
  return rc < 0 ? rc : tf_probe_run(out, &o);
}

/* tf_probe_set_add() with the options as arguments. The set keeps @p log_cb
 * (not a reference): the caller keeps the callable alive while the set lives. */
tf_err tf_py_probe_set_add(tf_probe_set *set, const char *uri, const char *secret, const char *user, int64_t ttl_s,
                           int separator, int family, const char *expect_address, uint16_t expect_port_start,
                           uint16_t expect_port_end, int peer_check, int timeout_ms, int rto_ms,
                           const char *ca_file, int insecure, int64_t now, uint32_t lifetime_s, int release,
                           PyObject *log_cb, int log_level)
{
  tf_probe_options o;
  tf_err rc = tf_py_probe_options(&o, uri, secret, user, ttl_s, separator, family, expect_address,
                                  expect_port_start, expect_port_end, peer_check, timeout_ms, rto_ms, ca_file,
                                  insecure, now, lifetime_s, release, log_cb, log_level);
  return rc < 0 ? rc : tf_probe_set_add(set, &o);
}

/* Run a set on one poll() loop (the GIL is released meanwhile). */
tf_err tf_py_probe_set_run(tf_probe_set *set)
{
  return tf_probe_set_run(set, NULL, NULL);
}

/* tf_allocation_new(). An Allocate the relay refused is not an error here:
 * the result says why, and *out is None. The result comes first: SWIG drops a
 * None that is the first of several outputs. */
tf_err tf_py_allocation_new(tf_probe_result **result, tf_allocation **out, const char *uri, const char *secret,
                            const char *user, int64_t ttl_s, int separator, int family,
                            const char *expect_address, uint16_t expect_port_start, uint16_t expect_port_end,
                            int timeout_ms, int rto_ms, const char *ca_file, int insecure, int64_t now,
                            uint32_t lifetime_s, PyObject *log_cb, int log_level)
{
  tf_probe_options o;
  tf_err rc = tf_py_probe_options(&o, uri, secret, user, ttl_s, separator, family, expect_address,
                                  expect_port_start, expect_port_end, 0, timeout_ms, rto_ms, ca_file, insecure,
                                  now, lifetime_s, 0, log_cb, log_level);
  if (rc < 0) return rc;
  rc = tf_allocation_new(out, result, &o);
  return (rc < 0 && *result && rc != TF_EINVALID && rc != TF_ENOMEM) ? TF_OK : rc;
}
%}

/* These build Python objects: they keep the GIL. */
%nothreadallow;
%inline %{
/* The message's bytes. */
PyObject *tf_py_stun_msg_bytes(const tf_stun_msg *msg)
{
  size_t len = 0;
  const uint8_t *p = msg ? tf_stun_msg_bytes(msg, &len) : NULL;
  if (!p) {
    tf_py_invalid("tf_py_stun_msg_bytes: no message");
    return NULL;
  }
  return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)len);
}

/* The 12-byte transaction id. */
PyObject *tf_py_stun_msg_tid(const tf_stun_msg *msg)
{
  const uint8_t *p = msg ? tf_stun_msg_tid(msg) : NULL;
  if (!p) {
    tf_py_invalid("tf_py_stun_msg_tid: no message");
    return NULL;
  }
  return PyBytes_FromStringAndSize((const char *)p, TF_STUN_TID_SIZE);
}

/* Owned handles not yet destroyed (tests: leak check). */
long tf_py_live_handles(void)
{
  return __atomic_load_n(&tf_py_live, __ATOMIC_RELAXED);
}
%}
%clearnothreadallow;
