// ECDSA on secp256k1 (COSE ES256K) through the system's OpenSSL libcrypto: swift-crypto has no secp256k1. Only
// plain bytes cross this boundary. OpenSSL's EC code multiplies by secret scalars in constant time (its Montgomery
// ladder) and draws ECDSA nonces from its own CSPRNG.
#include <string.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"

/// The key of a 32-byte scalar, or NULL when it is not in [1, n-1].
static inline EC_KEY *fidosim_k1_key(const unsigned char *scalar) {
    EC_KEY *key = EC_KEY_new_by_curve_name(NID_secp256k1);
    BIGNUM *d = BN_bin2bn(scalar, 32, NULL);
    BN_CTX *ctx = BN_CTX_new();
    EC_POINT *point = key ? EC_POINT_new(EC_KEY_get0_group(key)) : NULL;
    int ok = key && d && ctx && point && !BN_is_zero(d)
        && BN_cmp(d, EC_GROUP_get0_order(EC_KEY_get0_group(key))) < 0
        && EC_POINT_mul(EC_KEY_get0_group(key), point, d, NULL, NULL, ctx) == 1
        && EC_KEY_set_private_key(key, d) == 1 && EC_KEY_set_public_key(key, point) == 1;
    EC_POINT_free(point);
    BN_CTX_free(ctx);
    BN_clear_free(d);
    if (!ok) { EC_KEY_free(key); ERR_clear_error(); return NULL; }
    return key;
}

/// The uncompressed public point (65 bytes: 0x04 | x | y) of a scalar. 1, or 0 for a scalar that is no key.
static inline int fidosim_k1_public(const unsigned char *scalar, unsigned char *point65) {
    EC_KEY *key = fidosim_k1_key(scalar);
    if (!key) return 0;
    size_t n = EC_POINT_point2oct(EC_KEY_get0_group(key), EC_KEY_get0_public_key(key),
                                  POINT_CONVERSION_UNCOMPRESSED, point65, 65, NULL);
    EC_KEY_free(key);
    return n == 65;
}

/// A DER ECDSA signature over SHA-256(msg) into der (at least 72 bytes); its length, or -1.
static inline int fidosim_k1_sign(const unsigned char *scalar, const unsigned char *msg, size_t msg_len,
                                  unsigned char *der, unsigned int der_capacity) {
    EC_KEY *key = fidosim_k1_key(scalar);
    if (!key) return -1;
    unsigned char digest[32];
    SHA256(msg, msg_len, digest);
    unsigned int length = der_capacity;
    int ok = (unsigned int)ECDSA_size(key) <= der_capacity && ECDSA_sign(0, digest, 32, der, &length, key) == 1;
    EC_KEY_free(key);
    ERR_clear_error();
    return ok ? (int)length : -1;
}

/// Whether a DER signature over SHA-256(msg) verifies with an uncompressed point: 1, 0, or -1 for a bad point.
static inline int fidosim_k1_verify(const unsigned char *point65, const unsigned char *msg, size_t msg_len,
                                    const unsigned char *der, size_t der_len) {
    EC_KEY *key = EC_KEY_new_by_curve_name(NID_secp256k1);
    EC_POINT *point = key ? EC_POINT_new(EC_KEY_get0_group(key)) : NULL;
    if (!point || EC_POINT_oct2point(EC_KEY_get0_group(key), point, point65, 65, NULL) != 1
        || EC_KEY_set_public_key(key, point) != 1) {
        EC_POINT_free(point);
        EC_KEY_free(key);
        ERR_clear_error();
        return -1;
    }
    unsigned char digest[32];
    SHA256(msg, msg_len, digest);
    int result = ECDSA_verify(0, digest, 32, der, (int)der_len, key) == 1;
    EC_POINT_free(point);
    EC_KEY_free(key);
    ERR_clear_error();
    return result;
}

/// The PKCS#8 DER of a scalar's key into out; its length, or -1.
static inline int fidosim_k1_pkcs8(const unsigned char *scalar, unsigned char *out, size_t capacity) {
    EC_KEY *key = fidosim_k1_key(scalar);
    if (!key) return -1;
    EVP_PKEY *pkey = EVP_PKEY_new();
    int length = -1;
    if (pkey && EVP_PKEY_set1_EC_KEY(pkey, key) == 1) {
        PKCS8_PRIV_KEY_INFO *info = EVP_PKEY2PKCS8(pkey);
        if (info) {
            int n = i2d_PKCS8_PRIV_KEY_INFO(info, NULL);
            unsigned char *p = out;
            if (n > 0 && (size_t)n <= capacity) length = i2d_PKCS8_PRIV_KEY_INFO(info, &p);
            PKCS8_PRIV_KEY_INFO_free(info);
        }
    }
    EVP_PKEY_free(pkey);
    EC_KEY_free(key);
    ERR_clear_error();
    return length;
}

/// The 32-byte scalar of a PKCS#8 secp256k1 key: 1, or 0 when der is not one.
static inline int fidosim_k1_from_pkcs8(const unsigned char *der, size_t length, unsigned char *scalar) {
    const unsigned char *p = der;
    PKCS8_PRIV_KEY_INFO *info = d2i_PKCS8_PRIV_KEY_INFO(NULL, &p, (long)length);
    EVP_PKEY *pkey = info ? EVP_PKCS82PKEY(info) : NULL;
    const EC_KEY *key = pkey ? EVP_PKEY_get0_EC_KEY(pkey) : NULL;
    int ok = key && p == der + length && EC_GROUP_get_curve_name(EC_KEY_get0_group(key)) == NID_secp256k1
        && EC_KEY_get0_private_key(key) && BN_bn2binpad(EC_KEY_get0_private_key(key), scalar, 32) == 32;
    EVP_PKEY_free(pkey);
    PKCS8_PRIV_KEY_INFO_free(info);
    ERR_clear_error();
    return ok;
}

#pragma clang diagnostic pop
