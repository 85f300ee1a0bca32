/**
 * @file turnfleet/log.h
 * @brief Per-handle log callback. The library never writes to stdout or stderr.
 */
#ifndef TURNFLEET_LOG_H
#define TURNFLEET_LOG_H

#include "common.h"

TF_BEGIN_DECL

/** Log levels, most verbose first. */
typedef enum tf_log_level {
  TF_LOG_DEBUG = 0,
  TF_LOG_INFO = 1,
  TF_LOG_WARN = 2,
  TF_LOG_ERROR = 3
} tf_log_level;

/**
 * A log sink given to handles that log. Messages never contain secrets.
 * @param level   the message's level
 * @param message NUL-terminated, borrowed for the call
 * @param payload what the caller registered with the callback
 */
typedef void (*tf_log_cb)(tf_log_level level, const char *message, void *payload);

TF_END_DECL

#endif
