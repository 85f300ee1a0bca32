/**
 * @file turnfleet/version.h
 * @brief Build-time and run-time versions of libturnfleet.
 */
#ifndef TURNFLEET_VERSION_H
#define TURNFLEET_VERSION_H

#include "common.h"

#define TF_VERSION_MAJOR 0
#define TF_VERSION_MINOR 2
#define TF_VERSION_PATCH 0
#define TF_VERSION_STRING "0.2.0"
#define TF_VERSION_HEX ((TF_VERSION_MAJOR << 16) | (TF_VERSION_MINOR << 8) | TF_VERSION_PATCH)

TF_BEGIN_DECL

/**
 * The version of the library loaded at run time.
 * @param[out] major may be NULL
 * @param[out] minor may be NULL
 * @param[out] patch may be NULL
 */
TF_EXTERN(void) tf_version(int *major, int *minor, int *patch);

/** The run-time version as "MAJOR.MINOR.PATCH"; static, never NULL. */
TF_EXTERN(const char *) tf_version_string(void);

TF_END_DECL

#endif
