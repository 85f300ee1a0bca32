/**
 * @file turnfleet/common.h
 * @brief Export macros and the one allocator-neutral free function.
 *
 * Thread safety: every libturnfleet function is reentrant; a handle must not
 * be used by two threads at once; finished plans and rendered configs are
 * immutable and may be shared.
 */
#ifndef TURNFLEET_COMMON_H
#define TURNFLEET_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define TF_BEGIN_DECL extern "C" {
#define TF_END_DECL }
#else
#define TF_BEGIN_DECL
#define TF_END_DECL
#endif

#ifndef TF_EXTERN
#if defined(TF_STATIC)
#define TF_EXTERN(type) extern type
#elif defined(__GNUC__) && __GNUC__ >= 4
#define TF_EXTERN(type) extern __attribute__((visibility("default"))) type
#else
#define TF_EXTERN(type) extern type
#endif
#endif

TF_BEGIN_DECL

/**
 * Release memory the library handed out as `char **out` (strings, buffers).
 * @param ptr what the library returned; NULL does nothing.
 */
TF_EXTERN(void) tf_free(void *ptr);

/**
 * Wipe and release a NUL-terminated string of secret material the library
 * handed out (a secret, a password, a rendered config, a CLI login line).
 * NULL does nothing.
 */
TF_EXTERN(void) tf_secret_free(char *secret);

TF_END_DECL

#endif
