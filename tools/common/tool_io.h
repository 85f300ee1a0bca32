/* Helpers every turnfleet tool shares: the error line, whole-file reads,
 * atomic file writes. Private to the tools (not the library's tf_ names). */
#ifndef TURNFLEET_TOOL_IO_H
#define TURNFLEET_TOOL_IO_H

#include <stddef.h>
#include <sys/types.h>

/* `<prog>: [<what>: ]<message>` on stderr, the one error format of the tools. */
__attribute__((format(printf, 3, 4))) void tool_say(const char *prog, const char *what, const char *fmt, ...);

/* @p text as a whole number from @p min to @p max into *out: 0; -1 with `<prog>: <flag>: "x" is not a whole
 * number from MIN to MAX` said. */
int tool_number(const char *prog, const char *flag, const char *text, long long min, long long max, long long *out);

/* The contents of @p path, NUL-terminated, at most @p max + 1 bytes (so the
 * caller can tell a file over its limit and name the limit); *len gets the
 * byte count (len may be NULL). Release with free(). NULL with errno on
 * failure: fopen()'s, EIO for a read error, ENOMEM. */
char *tool_read_file(const char *path, size_t *len, size_t max);

/* What the tools read when no tighter limit applies (the library's parsers name their own). */
#define TOOL_READ_MAX ((size_t)1 << 30)

/* Write @p len bytes as dir/name through dir/.name.tmp, fsync, rename: readers never see half a file,
 * and a full disk leaves the old file in place. Returns 0, or -1 with errno set. */
int tool_write_atomic(const char *dir, const char *name, const char *data, size_t len, mode_t mode);

/* Block SIGTERM and SIGINT in this thread (call it before any thread starts, so every thread
 * inherits the mask) and return a close-on-exec signalfd that becomes readable when one
 * arrives; -1 with errno. */
int tool_stop_signalfd(void);

/* "a/b" (malloc'd), NULL when out of memory. */
char *tool_join(const char *dir, const char *name);

#endif
