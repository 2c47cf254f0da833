// OpenSSL's libcrypto, used by FIDOClient to verify what a key signs: an implementation independent of the
// BoringSSL inside swift-crypto that fidosim signs with.
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/objects.h>
#include <openssl/err.h>

/// Verifies `sig` over `msg` with the public key in `spki` (DER SubjectPublicKeyInfo): ECDSA with SHA-256 for an
/// EC key, pure EdDSA for an Ed25519 key. 1: valid, 0: invalid, -1: the key could not be read.
static inline int fidosim_verify(const unsigned char *spki, long spki_len, const unsigned char *msg, size_t msg_len,
                                 const unsigned char *sig, size_t sig_len) {
    const unsigned char *p = spki;
    EVP_PKEY *key = d2i_PUBKEY(NULL, &p, spki_len);
    if (key == NULL) { ERR_clear_error(); return -1; }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int result = -1;
    if (ctx != NULL) {
        const EVP_MD *md = EVP_PKEY_get_id(key) == EVP_PKEY_ED25519 ? NULL : EVP_sha256();
        if (EVP_DigestVerifyInit(ctx, NULL, md, NULL, key) == 1) {
            result = EVP_DigestVerify(ctx, sig, sig_len, msg, msg_len) == 1 ? 1 : 0;
        }
        EVP_MD_CTX_free(ctx);
    }
    EVP_PKEY_free(key);
    ERR_clear_error();
    return result;
}
