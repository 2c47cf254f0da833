// OpenSSL's libcrypto, used by FIDOClient to verify what a key signs: an implementation independent of the
// BoringSSL inside swift-crypto that fidosim signs with.
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/objects.h>
#include <openssl/err.h>
#include <openssl/rsa.h>

/// Verifies `sig` over `msg` with the public key in `spki` (DER SubjectPublicKeyInfo): pure EdDSA for an Ed25519
/// key; otherwise ECDSA or RSA with SHA-`digest_bits` (256, 384 or 512), RSA with PSS padding (MGF1 with the same
/// hash, any salt length) when `pss` is set. 1: valid, 0: invalid, -1: the key could not be read.
static inline int fidosim_verify_with(const unsigned char *spki, long spki_len, const unsigned char *msg,
                                      size_t msg_len, const unsigned char *sig, size_t sig_len, int digest_bits,
                                      int pss) {
    const unsigned char *p = spki;
    EVP_PKEY *key = d2i_PUBKEY(NULL, &p, spki_len);
    if (key == NULL) { ERR_clear_error(); return -1; }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int result = -1;
    if (ctx != NULL) {
        const EVP_MD *md = digest_bits == 512 ? EVP_sha512() : digest_bits == 384 ? EVP_sha384() : EVP_sha256();
        if (EVP_PKEY_get_id(key) == EVP_PKEY_ED25519) md = NULL;
        EVP_PKEY_CTX *pctx = NULL;
        if (EVP_DigestVerifyInit(ctx, &pctx, md, NULL, key) == 1) {
            int ready = 1;
            if (pss) {
                ready = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1
                    && EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_AUTO) == 1;
            }
            result = ready && EVP_DigestVerify(ctx, sig, sig_len, msg, msg_len) == 1 ? 1 : 0;
        }
        EVP_MD_CTX_free(ctx);
    }
    EVP_PKEY_free(key);
    ERR_clear_error();
    return result;
}

/// fidosim_verify_with for ES256 and EdDSA keys.
static inline int fidosim_verify(const unsigned char *spki, long spki_len, const unsigned char *msg, size_t msg_len,
                                 const unsigned char *sig, size_t sig_len) {
    return fidosim_verify_with(spki, spki_len, msg, msg_len, sig, sig_len, 256, 0);
}
