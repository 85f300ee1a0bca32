/**
 * @file turnfleet/addr.h
 * @brief IPv4/IPv6 address, prefix and port-range value types.
 */
#ifndef TURNFLEET_ADDR_H
#define TURNFLEET_ADDR_H

#include "common.h"
#include "errors.h"

TF_BEGIN_DECL

typedef enum tf_af {
  TF_AF_INET = 4, /**< tf_addr.family for IPv4 */
  TF_AF_INET6 = 6 /**< tf_addr.family for IPv6 */
} tf_af;

/** Longest formatted address, NUL included (as INET6_ADDRSTRLEN). */
#define TF_ADDR_STRLEN 46

/** An IPv4 or IPv6 address. IPv4 uses bytes[0..3]; the rest is zero. */
typedef struct tf_addr {
  uint8_t family;    /**< TF_AF_INET or TF_AF_INET6 */
  uint8_t bytes[16]; /**< network byte order */
} tf_addr;

/** An address prefix (CIDR). */
typedef struct tf_prefix {
  tf_addr addr; /**< the first address of the prefix */
  uint8_t bits; /**< prefix length: 0-32 or 0-128 */
} tf_prefix;

/** An inclusive port range. */
typedef struct tf_port_range {
  uint16_t start;
  uint16_t end;
} tf_port_range;

/**
 * Parse an IPv4 dotted quad or an IPv6 address (no brackets, no zone).
 * @param[out] out the address
 * @param text NUL-terminated
 * @return 0, or TF_EINVALID naming the text
 */
TF_EXTERN(tf_err) tf_addr_parse(tf_addr *out, const char *text);

/**
 * Format an address in canonical inet_ntop form ("2001:db8::7").
 * @param[out] buf receives the text; TF_ADDR_STRLEN bytes always suffice
 * @return 0, TF_EINVALID for a bad family, TF_EBUFS if @p size is too small
 */
TF_EXTERN(tf_err) tf_addr_format(char *buf, size_t size, const tf_addr *addr);

/** Total order: IPv4 before IPv6, then by bytes. Returns <0, 0 or >0. */
TF_EXTERN(int) tf_addr_compare(const tf_addr *a, const tf_addr *b);

/**
 * Parse "ADDR/BITS" or a bare address (a host prefix).
 * @return 0, or TF_EINVALID (bad address, bad length, host bits set)
 */
TF_EXTERN(tf_err) tf_prefix_parse(tf_prefix *out, const char *text);

/** 1 if @p addr lies in @p prefix, else 0. */
TF_EXTERN(int) tf_prefix_contains(const tf_prefix *prefix, const tf_addr *addr);

/**
 * The first and last address of @p prefix (for coturn's `a-b` ranges).
 * @param[out] first may be NULL
 * @param[out] last may be NULL
 */
TF_EXTERN(void) tf_prefix_bounds(const tf_prefix *prefix, tf_addr *first, tf_addr *last);

/**
 * Parse a comma list of addresses as a person writes it: `127.0.0.11-13` (the last
 * IPv4 octet in decimal, or the last IPv6 group in hex, may be a range),
 * `127.0.0.20`, `fd00::1-3`, `127.0.0.80/30` (a prefix: its addresses, at most 256).
 * @param[out] out the addresses, in the order written
 * @param max room in @p out
 * @param[out] count how many were written
 * @return 0; TF_EINVALID naming the item (`item 2 "127.0.0.300": ...`), also for an
 *         empty list; TF_EBUFS when more than @p max
 */
TF_EXTERN(tf_err) tf_addr_list_parse(tf_addr *out, size_t max, size_t *count, const char *text);

/**
 * Parse "START-END" (inclusive, 1-65535, START <= END).
 * @return 0, or TF_EINVALID naming the defect
 */
TF_EXTERN(tf_err) tf_port_range_parse(tf_port_range *out, const char *text);

/** Number of ports in @p range, 0 if end < start. */
TF_EXTERN(uint32_t) tf_port_range_size(tf_port_range range);

TF_END_DECL

#endif
