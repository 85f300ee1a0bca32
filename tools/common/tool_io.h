/* Helpers every turnfleet tool shares: the error line, whole-file reads,
 * atomic file writes. Private to the tools (not the library's tf_ names). */
#ifndef TURNFLEET_TOOL_IO_H
#define TURNFLEET_TOOL_IO_H

#include <stddef.h>
#include <sys/types.h>

/* `<prog>: [<what>: ]<message>` on stderr, the one error format of the tools. */
__attribute__((format(printf, 3, 4))) void tool_say(const char *prog, const char *what, const char *fmt, ...);

/* The whole file, NUL-terminated (*len without the NUL; len may be NULL). NULL with errno set. Free with free(). */
char *tool_read_file(const char *path, size_t *len);

/* Write @p len bytes as dir/name through dir/.name.tmp, fsync, rename: readers never see half a file,
 * and a full disk leaves the old file in place. Returns 0, or -1 with errno set. */
int tool_write_atomic(const char *dir, const char *name, const char *data, size_t len, mode_t mode);

/* "a/b" (malloc'd), NULL when out of memory. */
char *tool_join(const char *dir, const char *name);

#endif
