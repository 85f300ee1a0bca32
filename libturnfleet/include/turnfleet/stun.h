/**
 * @file turnfleet/stun.h
 * @brief STUN/TURN messages (RFC 8489, RFC 8656), sans I/O: encode, decode,
 * MESSAGE-INTEGRITY (HMAC-SHA1, long-term key), FINGERPRINT, ChannelData and
 * stream framing. The decoder takes untrusted bytes: it never reads past the
 * buffer and rejects malformed input with the byte offset and a reason code.
 */
#ifndef TURNFLEET_STUN_H
#define TURNFLEET_STUN_H

#include "addr.h"
#include "common.h"
#include "errors.h"

TF_BEGIN_DECL

/** Largest message the library encodes or accepts (bytes). */
#define TF_STUN_MAX_MESSAGE 4096
/** Size of a transaction id. */
#define TF_STUN_TID_SIZE 12
/** Size of a long-term key (MD5). */
#define TF_STUN_KEY_SIZE 16
/** Most attributes a message may carry (probe policy). */
#define TF_STUN_MAX_ATTRIBUTES 64

/** Methods. */
typedef enum tf_stun_method {
  TF_STUN_BINDING = 0x001,
  TF_STUN_ALLOCATE = 0x003,
  TF_STUN_REFRESH = 0x004,
  TF_STUN_SEND = 0x006,
  TF_STUN_DATA = 0x007,
  TF_STUN_CREATE_PERMISSION = 0x008,
  TF_STUN_CHANNEL_BIND = 0x009
} tf_stun_method;

/** Classes. */
typedef enum tf_stun_class {
  TF_STUN_REQUEST = 0,
  TF_STUN_INDICATION = 1,
  TF_STUN_SUCCESS = 2,
  TF_STUN_ERROR = 3
} tf_stun_class;

/** Attribute types. */
typedef enum tf_stun_attr {
  TF_STUN_ATTR_MAPPED_ADDRESS = 0x0001,
  TF_STUN_ATTR_USERNAME = 0x0006,
  TF_STUN_ATTR_MESSAGE_INTEGRITY = 0x0008,
  TF_STUN_ATTR_ERROR_CODE = 0x0009,
  TF_STUN_ATTR_UNKNOWN_ATTRIBUTES = 0x000A,
  TF_STUN_ATTR_CHANNEL_NUMBER = 0x000C,
  TF_STUN_ATTR_LIFETIME = 0x000D,
  TF_STUN_ATTR_XOR_PEER_ADDRESS = 0x0012,
  TF_STUN_ATTR_DATA = 0x0013,
  TF_STUN_ATTR_REALM = 0x0014,
  TF_STUN_ATTR_NONCE = 0x0015,
  TF_STUN_ATTR_XOR_RELAYED_ADDRESS = 0x0016,
  TF_STUN_ATTR_REQUESTED_ADDRESS_FAMILY = 0x0017,
  TF_STUN_ATTR_EVEN_PORT = 0x0018,
  TF_STUN_ATTR_REQUESTED_TRANSPORT = 0x0019,
  TF_STUN_ATTR_DONT_FRAGMENT = 0x001A,
  TF_STUN_ATTR_XOR_MAPPED_ADDRESS = 0x0020,
  TF_STUN_ATTR_RESERVATION_TOKEN = 0x0022,
  TF_STUN_ATTR_SOFTWARE = 0x8022,
  TF_STUN_ATTR_ALTERNATE_SERVER = 0x8023,
  TF_STUN_ATTR_FINGERPRINT = 0x8028
} tf_stun_attr;

/** A STUN message: decoded from bytes, or being built. Owns its bytes. */
typedef struct tf_stun_msg tf_stun_msg;

/** TF_STUN_MAX_MESSAGE, for bindings and older binaries. */
TF_EXTERN(size_t) tf_stun_max_message(void);

/**
 * Decode one STUN message (exactly @p len bytes, as one UDP datagram).
 * Structure only: header, length, attribute walk, fixed attribute lengths,
 * FINGERPRINT when present. It does not check MESSAGE-INTEGRITY.
 * @param[out] out release with tf_stun_msg_free()
 * @param data the bytes, borrowed for the call (copied)
 * @return 0; TF_EPROTO with "REASON_CODE at byte N: why" (e.g. `TRUNCATED_HEADER`,
 *         `LENGTH_MISMATCH`, `ATTR_OVERRUN`, `FINGERPRINT_MISMATCH`); TF_EINVALID; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_stun_decode(tf_stun_msg **out, const void *data, size_t len);

/**
 * Decode and validate a response to a request the caller sent: structure,
 * class (success or error), method, transaction id, required attributes
 * (XOR-RELAYED-ADDRESS on an Allocate success, ERROR-CODE on an error, REALM and
 * NONCE on 401/438), and MESSAGE-INTEGRITY with @p key when @p key is given
 * (an authenticated request's success must carry a valid one). The reason codes
 * are those of reference vectors `stun_malformed.jsonl`.
 * @param[out] out the decoded message, release with tf_stun_msg_free(); may be NULL
 * @param tid the transaction id of the request (12 bytes)
 * @param method the request's method
 * @param key long-term key (16 bytes) when the request was authenticated, else NULL
 * @return 0; TF_EPROTO with "REASON_CODE at byte N: why"; TF_EAUTH with
 *         "INTEGRITY_MISMATCH ..." or "MISSING_MESSAGE_INTEGRITY ..."; TF_EINVALID; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_stun_validate_response(tf_stun_msg **out, const void *data, size_t len, const uint8_t *tid,
                                            int method, const uint8_t *key, size_t key_len);

/**
 * Check MESSAGE-INTEGRITY of raw message bytes (HMAC-SHA1, constant-time compare).
 * @return 0 valid; TF_EAUTH mismatch; TF_ENOTFOUND no MESSAGE-INTEGRITY; TF_EPROTO malformed
 */
TF_EXTERN(tf_err) tf_stun_check_integrity(const void *data, size_t len, const uint8_t *key, size_t key_len);

/**
 * The long-term credential key MD5(username ":" realm ":" password).
 * @param[out] key 16 bytes
 */
TF_EXTERN(tf_err) tf_stun_long_term_key(uint8_t *key, const char *username, const char *realm,
                                        const char *password);

/**
 * Start a message to encode.
 * @param[out] out release with tf_stun_msg_free()
 * @param method a TF_STUN_* method
 * @param cls TF_STUN_REQUEST, _INDICATION, _SUCCESS or _ERROR
 * @param tid 12 bytes; NULL draws a fresh one from a CSPRNG
 */
TF_EXTERN(tf_err) tf_stun_msg_new(tf_stun_msg **out, int method, int cls, const uint8_t *tid);

/** Append an attribute (value copied, padded to 4 bytes). TF_EBUFS past TF_STUN_MAX_MESSAGE. */
TF_EXTERN(tf_err) tf_stun_msg_add(tf_stun_msg *msg, uint16_t type, const void *value, size_t len);
/** Append a 32-bit attribute (LIFETIME, REQUESTED-TRANSPORT as protocol << 24, ...). */
TF_EXTERN(tf_err) tf_stun_msg_add_u32(tf_stun_msg *msg, uint16_t type, uint32_t value);
/** Append an XOR address attribute (XOR-PEER-ADDRESS, ...). */
TF_EXTERN(tf_err) tf_stun_msg_add_xor_address(tf_stun_msg *msg, uint16_t type, const tf_addr *addr, uint16_t port);
/** Append MESSAGE-INTEGRITY (HMAC-SHA1 with @p key). Nothing but FINGERPRINT may follow. */
TF_EXTERN(tf_err) tf_stun_msg_add_integrity(tf_stun_msg *msg, const uint8_t *key, size_t key_len);
/** Append FINGERPRINT; the message is complete afterwards. */
TF_EXTERN(tf_err) tf_stun_msg_add_fingerprint(tf_stun_msg *msg);

/** The message's bytes (borrowed from @p msg); @p len receives the size. */
TF_EXTERN(const uint8_t *) tf_stun_msg_bytes(const tf_stun_msg *msg, size_t *len);
/** Method (TF_STUN_*). */
TF_EXTERN(int) tf_stun_msg_method(const tf_stun_msg *msg);
/** Class (TF_STUN_REQUEST ... TF_STUN_ERROR). */
TF_EXTERN(int) tf_stun_msg_class(const tf_stun_msg *msg);
/** The 12-byte transaction id (borrowed). */
TF_EXTERN(const uint8_t *) tf_stun_msg_tid(const tf_stun_msg *msg);
/** Number of attributes. */
TF_EXTERN(size_t) tf_stun_msg_attr_count(const tf_stun_msg *msg);
/**
 * Attribute @p i in message order. Outputs may be NULL; @p value is borrowed.
 * @return 0, TF_ENOTFOUND when out of range
 */
TF_EXTERN(tf_err) tf_stun_msg_attr(const tf_stun_msg *msg, size_t i, uint16_t *type, const uint8_t **value,
                                   size_t *len);
/**
 * The first attribute of @p type. @p value is borrowed.
 * @return 0, TF_ENOTFOUND
 */
TF_EXTERN(tf_err) tf_stun_msg_find(const tf_stun_msg *msg, uint16_t type, const uint8_t **value, size_t *len);
/**
 * Decode the @p n-th (0-based) address attribute of @p type: XOR-decoded for
 * XOR types, plain for MAPPED-ADDRESS and ALTERNATE-SERVER.
 * @return 0, TF_ENOTFOUND, TF_EPROTO (bad family or length)
 */
TF_EXTERN(tf_err) tf_stun_msg_address(const tf_stun_msg *msg, uint16_t type, size_t n, tf_addr *addr,
                                      uint16_t *port);
/**
 * ERROR-CODE: @p code = class * 100 + number; @p reason is borrowed, NUL-terminated,
 * trailing NULs stripped (coturn pads with them). Either may be NULL.
 * @return 0, TF_ENOTFOUND
 */
TF_EXTERN(tf_err) tf_stun_msg_error(const tf_stun_msg *msg, int *code, const char **reason);
/** A 32-bit attribute (LIFETIME, ...). @return 0, TF_ENOTFOUND, TF_EPROTO */
TF_EXTERN(tf_err) tf_stun_msg_u32(const tf_stun_msg *msg, uint16_t type, uint32_t *value);
/**
 * A text attribute (REALM, NONCE, SOFTWARE, USERNAME) as a NUL-terminated copy.
 * @param[out] out release with tf_free()
 * @return 0, TF_ENOTFOUND, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_stun_msg_text(char **out, const tf_stun_msg *msg, uint16_t type);
/** Release a message. NULL does nothing. */
TF_EXTERN(void) tf_stun_msg_free(tf_stun_msg *msg);

/**
 * Encode ChannelData: channel(16) | length(16) | data [| padding].
 * @param[out] buf receives the frame
 * @param[out] out_len the frame size
 * @param pad 1 to pad to 4 bytes (required on TCP/TLS)
 * @return 0, TF_EINVALID (channel outside 0x4000-0x4FFF), TF_EBUFS
 */
TF_EXTERN(tf_err) tf_stun_channel_data_encode(uint8_t *buf, size_t size, size_t *out_len, uint16_t channel,
                                              const void *data, size_t len, int pad);
/**
 * Decode ChannelData (padding, if any, is ignored and never checked).
 * @param[out] data borrowed from @p buf
 * @return 0, TF_EPROTO with the byte offset
 */
TF_EXTERN(tf_err) tf_stun_channel_data_decode(const void *buf, size_t len, uint16_t *channel, const uint8_t **data,
                                              size_t *data_len);
/**
 * Stream framing (TCP/TLS): how long the frame starting at @p buf is (STUN:
 * 20 + length; ChannelData: 4 + length rounded up to 4).
 * @param[out] frame_len bytes of the whole frame
 * @return 0; TF_EBUFS when fewer than 4 bytes are available; TF_EPROTO when the
 *         first bits are neither STUN nor ChannelData (close the stream)
 */
TF_EXTERN(tf_err) tf_stun_frame_length(const void *buf, size_t len, size_t *frame_len);

TF_END_DECL

#endif
