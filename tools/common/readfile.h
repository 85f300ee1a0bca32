/* Reading a whole input file, shared by the tools. Private to the tools: not
 * part of libturnfleet. */
#ifndef TURNFLEET_TOOLS_READFILE_H
#define TURNFLEET_TOOLS_READFILE_H

#include <stddef.h>

/* The contents of @p path, NUL-terminated, at most @p max + 1 bytes (so the
 * caller can tell a file over its limit and name the limit); *len gets the
 * byte count. Release with free(). NULL with errno on failure: fopen()'s,
 * EIO for a read error, ENOMEM. */
char *tool_read_file(const char *path, size_t *len, size_t max);

#endif
