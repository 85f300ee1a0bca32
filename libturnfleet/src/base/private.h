/* TF__PRIVATE marks the few internal helpers libturnfleet exports for libturnfleet-kube alone,
 * under the version node tf_private (turnfleet.map.in): one copy of the thread-local error,
 * the allocators, the buffers, the string map and the document parser for both libraries.
 * Never installed, never in a public header; not for users (docs/api-stability.md). */
#ifndef TF_PRIVATE_H
#define TF_PRIVATE_H

#if defined(__GNUC__)
#define TF__PRIVATE __attribute__((visibility("default")))
#else
#define TF__PRIVATE
#endif

#endif
