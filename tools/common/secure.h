/* Secret hygiene shared by the tools that hold secrets (turnfleet up and
 * render, turnfleet-probe). Private to the tools: not part of libturnfleet. */
#ifndef TURNFLEET_TOOLS_SECURE_H
#define TURNFLEET_TOOLS_SECURE_H

#include <stddef.h>

/* Keep the process's memory out of core dumps, first thing in main(): the
 * dump filter leaves no memory mapping in a dump (inherited by children, so
 * a turnserver started by `up` gets it too), the core size limit is 0 soft
 * and hard (cannot be raised again without privilege), and the process is
 * not dumpable (no dump, no ptrace attach by the same user). 0, or -1 with
 * errno from the first step that failed (the others are still done); without
 * /proc the filter is skipped. */
int secure_no_dumps(void);

/* Leave the pages holding [p, p + n) out of any dump (MADV_DONTDUMP), for a
 * buffer that holds a secret. 0, or -1 with errno. */
int secure_dontdump(const void *p, size_t n);

/* Write @p len bytes to @p path as a new file of mode 0600, atomically (a
 * temporary file in the same directory, fsync, rename): a reader sees the old
 * content or the new one, never a part. Refuses a @p path that is a symbolic
 * link (ELOOP) or not a regular file (EINVAL). 0, or -1 with errno. */
int secure_write_file(const char *path, const char *data, size_t len);

#endif
