/* TF__PRIVATE marks the few internal helpers libturnfleet exports for libturnfleet-kube alone,
 * under the version node tf_private (turnfleet.map.in): one copy of the thread-local error,
 * the allocators, the buffers, the string map and the document parser for both libraries.
 * Never installed, never in a public header; not for users (docs/api-stability.md).
 * Another one for libturnfleet-kube (its link fails with an undefined reference until then): mark its
 * declaration TF__PRIVATE, name it in turnfleet.map.in's tf_private and under [private] in
 * docs/symbols.txt (the symbols test compares the three). */
#ifndef TF_PRIVATE_H
#define TF_PRIVATE_H

#if defined(__GNUC__)
#define TF__PRIVATE __attribute__((visibility("default")))
#else
#define TF__PRIVATE
#endif

#endif
