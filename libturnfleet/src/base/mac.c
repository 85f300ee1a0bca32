/* mac: HMAC-SHA1 with its keyed state made once per key, and the MD5 of a TURN
 * long-term key, on OpenSSL's SHA-1 and MD5 (the hardware's SHA extensions where
 * the CPU has them) without its EVP layer. OpenSSL 3.0's EVP_MAC and HMAC_CTX
 * duplicate a provider digest context, one allocation and one free, twice per
 * message, and the EVP layer's first use loads OpenSSL's provider tables: the
 * probe signs or checks four messages per allocation. Here the state after the
 * key's inner and outer pad blocks (RFC 2104) is kept as two SHA_CTX values, and
 * a message costs two copies by value, the inner hash and one SHA1_Transform() of
 * the outer block. tests/check_common.c holds every result to OpenSSL's HMAC() and
 * EVP MD5. */
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA1_*, MD5_*: deprecated in 3.0, not removed */
#include <openssl/md5.h>
#include <openssl/sha.h>
#include <string.h>

#include "internal.h"

#define TF_MAC__BLOCK 64 /* SHA-1's block */

void tf_mac__init(tf_mac *m, const void *key, size_t len)
{
  uint8_t block[TF_MAC__BLOCK] = {0};
  if (len > TF_MAC__BLOCK)
    SHA1(key, len, block); /* a longer key is its digest (RFC 2104 section 2) */
  else if (len)
    memcpy(block, key, len);
  for (size_t i = 0; i < TF_MAC__BLOCK; i++) block[i] ^= 0x36;
  SHA1_Init(&m->inner);
  SHA1_Update(&m->inner, block, sizeof(block));
  for (size_t i = 0; i < TF_MAC__BLOCK; i++) block[i] ^= 0x36 ^ 0x5c;
  SHA1_Init(&m->outer);
  SHA1_Update(&m->outer, block, sizeof(block));
  tf_crypto__wipe(block, sizeof(block));
}

void tf_mac__sign(const tf_mac *m, const void *a, size_t alen, const void *b, size_t blen,
                  uint8_t out[TF_MAC_SIZE])
{
  SHA_CTX c = m->inner;
  SHA1_Update(&c, a, alen);
  if (blen) SHA1_Update(&c, b, blen);
  /* The outer hash takes the inner digest after the pad block: one more block, always the
   * digest then SHA-1's padding of a 64 + 20-byte message (0x80, zeros, the length in bits,
   * 672 = 0x2A0), so it is built here and hashed by one SHA1_Transform(), and the MAC read
   * from the state words, rather than buffered, padded and cleansed by SHA1_Update/Final. */
  uint8_t block[TF_MAC__BLOCK] = {0};
  SHA1_Final(block, &c); /* cleanses the block it buffered: the message's, not secret */
  block[TF_MAC_SIZE] = 0x80;
  block[TF_MAC__BLOCK - 2] = 0x02;
  block[TF_MAC__BLOCK - 1] = 0xA0;
  c = m->outer;
  SHA1_Transform(&c, block);
  const SHA_LONG h[5] = {c.h0, c.h1, c.h2, c.h3, c.h4};
  for (int i = 0; i < 5; i++) {
    out[4 * i] = (uint8_t)(h[i] >> 24);
    out[4 * i + 1] = (uint8_t)(h[i] >> 16);
    out[4 * i + 2] = (uint8_t)(h[i] >> 8);
    out[4 * i + 3] = (uint8_t)h[i];
  }
  /* left in block and c: the inner digest and the MAC's state, from which neither the key nor
   * another message's MAC follows */
}

void tf_mac__wipe(tf_mac *m) { tf_crypto__wipe(m, sizeof(*m)); }

void tf_mac__md5(uint8_t out[16], const char *const *parts, size_t n)
{
  MD5_CTX c;
  MD5_Init(&c);
  for (size_t i = 0; i < n; i++) MD5_Update(&c, parts[i], strlen(parts[i]));
  MD5_Final(out, &c);
  tf_crypto__wipe(&c, sizeof(c));
}
