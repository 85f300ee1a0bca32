/* Fuzz target: the STUN decoder, the response validator, the integrity check,
 * framing and ChannelData, and re-encoding every decoded attribute. Any
 * inconsistency aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tf_fuzz.h"

static const uint8_t tf_fuzz_key[TF_STUN_KEY_SIZE] = {0x80, 0xfa, 0x6e, 0x2b, 0x87, 0x9f, 0x8e, 0x61,
                                                      0xe7, 0x03, 0xbe, 0x9e, 0x34, 0x6e, 0xe0, 0x31};

/* Rebuild @p m from its attributes; the copy must decode to the same list. */
static void tf_fuzz_reencode(const tf_stun_msg *m)
{
  int method = tf_stun_msg_method(m);
  if (method <= 0) return;
  tf_stun_msg *e = NULL;
  TF_FUZZ_CHECK(tf_stun_msg_new(&e, method, tf_stun_msg_class(m), tf_stun_msg_tid(m)) == 0);
  int has_mi = 0, has_fp = 0;
  size_t n = tf_stun_msg_attr_count(m);
  for (size_t i = 0; i < n; i++) {
    uint16_t type = 0;
    const uint8_t *value = NULL;
    size_t len = 0;
    TF_FUZZ_CHECK(tf_stun_msg_attr(m, i, &type, &value, &len) == 0);
    if (type == TF_STUN_ATTR_MESSAGE_INTEGRITY) {
      has_mi = 1;
      continue;
    }
    if (type == TF_STUN_ATTR_FINGERPRINT) {
      has_fp = 1;
      continue;
    }
    TF_FUZZ_CHECK(tf_stun_msg_add(e, type, value, len) == 0);
  }
  if (has_mi) TF_FUZZ_CHECK(tf_stun_msg_add_integrity(e, tf_fuzz_key, sizeof(tf_fuzz_key)) == 0);
  if (has_fp) TF_FUZZ_CHECK(tf_stun_msg_add_fingerprint(e) == 0);
  size_t len = 0, olen = 0;
  const uint8_t *bytes = tf_stun_msg_bytes(e, &len);
  (void)tf_stun_msg_bytes(m, &olen);
  TF_FUZZ_CHECK(len == olen);
  tf_stun_msg *d = NULL;
  TF_FUZZ_CHECK(tf_stun_decode(&d, bytes, len) == 0);
  TF_FUZZ_CHECK(tf_stun_msg_attr_count(d) == n);
  if (has_mi) TF_FUZZ_CHECK(tf_stun_check_integrity(bytes, len, tf_fuzz_key, sizeof(tf_fuzz_key)) == 0);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    uint16_t t1 = 0, t2 = 0;
    const uint8_t *v1 = NULL, *v2 = NULL;
    size_t l1 = 0, l2 = 0;
    TF_FUZZ_CHECK(tf_stun_msg_attr(m, i, &t1, &v1, &l1) == 0);
    if (t1 == TF_STUN_ATTR_MESSAGE_INTEGRITY || t1 == TF_STUN_ATTR_FINGERPRINT) continue;
    do {
      TF_FUZZ_CHECK(tf_stun_msg_attr(d, k++, &t2, &v2, &l2) == 0);
    } while (t2 == TF_STUN_ATTR_MESSAGE_INTEGRITY || t2 == TF_STUN_ATTR_FINGERPRINT);
    TF_FUZZ_CHECK(t1 == t2 && l1 == l2 && (l1 == 0 || memcmp(v1, v2, l1) == 0));
  }
  tf_stun_msg_free(d);
  tf_stun_msg_free(e);
}

/* Every accessor over a decoded message stays in bounds and agrees. */
static void tf_fuzz_accessors(const tf_stun_msg *m)
{
  size_t len = 0;
  const uint8_t *base = tf_stun_msg_bytes(m, &len);
  for (size_t i = 0; i < tf_stun_msg_attr_count(m); i++) {
    uint16_t type = 0;
    const uint8_t *value = NULL;
    size_t vlen = 0;
    TF_FUZZ_CHECK(tf_stun_msg_attr(m, i, &type, &value, &vlen) == 0);
    TF_FUZZ_CHECK(value >= base + 24 && value + vlen <= base + len);
    char *text = NULL;
    if (tf_stun_msg_text(&text, m, type) == 0) tf_free(text);
    tf_addr a;
    uint16_t port = 0;
    if (type == TF_STUN_ATTR_MAPPED_ADDRESS || type == TF_STUN_ATTR_XOR_MAPPED_ADDRESS ||
        type == TF_STUN_ATTR_XOR_PEER_ADDRESS || type == TF_STUN_ATTR_XOR_RELAYED_ADDRESS)
      TF_FUZZ_CHECK(tf_stun_msg_address(m, type, 0, &a, &port) == 0);
    if (type == TF_STUN_ATTR_ALTERNATE_SERVER) (void)tf_stun_msg_address(m, type, 0, &a, &port);
  }
  TF_FUZZ_CHECK(tf_stun_msg_attr(m, tf_stun_msg_attr_count(m), NULL, NULL, NULL) == TF_ENOTFOUND);
  int code = 0;
  const char *reason = NULL;
  if (tf_stun_msg_error(m, &code, &reason) == 0) TF_FUZZ_CHECK(code >= 300 && code <= 699 && reason);
  uint32_t v = 0;
  (void)tf_stun_msg_u32(m, TF_STUN_ATTR_LIFETIME, &v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  tf_stun_msg *m = NULL;
  tf_err rc = tf_stun_decode(&m, data, size);
  if (rc == 0) {
    tf_fuzz_accessors(m);
    tf_fuzz_reencode(m);
    tf_stun_msg_free(m);
  } else {
    TF_FUZZ_CHECK(rc == TF_EPROTO && m == NULL);
  }
  /* validate as a response to the request it names (tid and method) */
  uint8_t tid[TF_STUN_TID_SIZE] = {0};
  int method = TF_STUN_ALLOCATE;
  if (size >= 20) {
    memcpy(tid, data + 8, sizeof(tid));
    uint16_t t = (uint16_t)((data[0] << 8) | data[1]);
    int mm = (t & 0x000F) | ((t & 0x00E0) >> 1) | ((t & 0x3E00) >> 2);
    if (mm > 0) method = mm;
  }
  tf_stun_msg *r = NULL;
  tf_err vr =
      tf_stun_validate_response(&r, data, size, tid, method, (size & 1) ? tf_fuzz_key : NULL, sizeof(tf_fuzz_key));
  TF_FUZZ_CHECK(rc == 0 || vr < 0);
  if (vr == 0) {
    TF_FUZZ_CHECK(tf_stun_msg_class(r) == TF_STUN_SUCCESS || tf_stun_msg_class(r) == TF_STUN_ERROR);
    tf_stun_msg_free(r);
  }
  tf_err ir = tf_stun_check_integrity(data, size, tf_fuzz_key, sizeof(tf_fuzz_key));
  TF_FUZZ_CHECK(ir == 0 || ir == TF_EAUTH || ir == TF_ENOTFOUND || ir == TF_EPROTO);
  size_t frame = 0;
  if (tf_stun_frame_length(data, size, &frame) == 0) TF_FUZZ_CHECK(frame >= 4);
  uint16_t ch = 0;
  const uint8_t *cd = NULL;
  size_t cdl = 0;
  if (tf_stun_channel_data_decode(data, size, &ch, &cd, &cdl) == 0) {
    TF_FUZZ_CHECK(cd == data + 4 && cdl <= size - 4 && ch >= 0x4000 && ch <= 0x4FFF);
    uint8_t buf[4 + 65535 + 3];
    size_t out = 0;
    TF_FUZZ_CHECK(tf_stun_channel_data_encode(buf, sizeof(buf), &out, ch, cd, cdl, 1) == 0);
    TF_FUZZ_CHECK(out % 4 == 0 && memcmp(buf, data, 4 + cdl) == 0);
  }
  return 0;
}
