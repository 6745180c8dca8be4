// TlsContext: see tls.hpp's DESIGN note.
#include "server/tls.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace m0::server {

namespace {

// TLS 1.2's suites: forward secret and AEAD only (Mozilla's "intermediate"
// list). TLS 1.3 keeps OpenSSL's own (all AEAD, all forward secret).
constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// ALPN (RFC 7301 §3.1: a list of length-prefixed protocol names): h2
// (h2_conn.cpp) first, then http/1.1.
constexpr unsigned char kAlpn[] = "\x02h2\x08http/1.1";
constexpr unsigned char kAlpnHttp1[] = "\x08http/1.1";

// The SSL's ex_data slot that marks a connection whose ALPN offers http/1.1
// alone (new_ssl(false)); made once, any thread.
int http1_only_index() {
    static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    return index;
}

// The SSL_CTX's ex_data slot of its TicketKeyring; made once, any thread.
int keyring_index() {
    static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    return index;
}

// OpenSSL's ticket callback (SSL_CTX_set_tlsext_ticket_key_evp_cb): seals a
// new ticket with the current period's key, opens one with the key its name
// finds (2: with the previous period's, so the client gets a new ticket), or
// none (0: a full handshake). The loop thread that handshakes.
int ticket_key(SSL* ssl, unsigned char* name, unsigned char* iv, EVP_CIPHER_CTX* cipher,
               EVP_MAC_CTX* mac, int enc) {
    auto* ring =
        static_cast<TicketKeyring*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), keyring_index()));
    if (!ring) return -1;
    TicketKeyring::Key k;
    int rc = 1;
    try {
        if (enc) {
            k = ring->sealing(ring->clock());
            std::memcpy(name, k.name.data(), k.name.size());
            if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(EVP_aes_256_cbc())) != 1 ||
                EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, k.aes.data(), iv) != 1)
                rc = -1;
        } else {
            auto found = ring->opening(name, ring->clock(), k);
            if (found == TicketKeyring::Found::none) return 0;
            rc = found == TicketKeyring::Found::previous ? 2 : 1;
            if (EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, k.aes.data(), iv) != 1)
                rc = -1;
        }
    } catch (const std::exception&) {
        return -1;  // no key to be had (out of memory): no ticket, a full handshake
    }
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, k.hmac.data(), k.hmac.size()),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end()};
    if (rc > 0 && EVP_MAC_CTX_set_params(mac, params) != 1) rc = -1;
    OPENSSL_cleanse(&k, sizeof k);  // the copy's key bytes, whatever the outcome
    return rc;
}

// The last OpenSSL error as text, the queue emptied.
std::string openssl_error() {
    unsigned long e = ERR_peek_last_error();
    char buf[256] = "unknown error";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return buf;
}

int select_alpn(SSL* ssl, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void*) {
    unsigned char* chosen = nullptr;
    unsigned char len = 0;
    const bool http1 = SSL_get_ex_data(ssl, http1_only_index()) != nullptr;
    if (SSL_select_next_proto(&chosen, &len, http1 ? kAlpnHttp1 : kAlpn,
                              http1 ? sizeof kAlpnHttp1 - 1 : sizeof kAlpn - 1, in,
                              inlen) != OPENSSL_NPN_NEGOTIATED)
        // RFC 7301 §3.2 would have a fatal no_application_protocol alert; a
        // client that offers none of ours is answered in HTTP/1.1 without
        // ALPN instead, as nginx does (every HTTP client speaks it).
        return SSL_TLSEXT_ERR_NOACK;
    *out = chosen;
    *outlen = len;
    return SSL_TLSEXT_ERR_OK;
}

// Whether `path` opens for reading; `err` says why not.
// pem_password_cb: asks nothing; notes that a passphrase was wanted.
int no_passphrase(char*, int, int, void* wanted) {
    if (wanted) *static_cast<bool*>(wanted) = true;
    return 0;
}

bool readable(const std::string& flag, const std::string& path, std::string& err) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (!f) {
        err = flag + " " + path + ": cannot read: " + std::strerror(errno);
        return false;
    }
    std::fclose(f);
    return true;
}

// A new server context for the two files, its tickets sealed with keys
// from `tickets`; null with `err` set.
SSL_CTX* make_context(const std::string& certfile, const std::string& keyfile,
                      TicketKeyring& tickets, std::string& err) {
    if (!readable("--certfile", certfile, err) || !readable("--keyfile", keyfile, err))
        return nullptr;
    ERR_clear_error();
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        err = "cannot make a TLS context: " + openssl_error();
        return nullptr;
    }
    auto fail = [&](std::string why) {
        err = std::move(why);
        SSL_CTX_free(ctx);
        return nullptr;
    };
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(
        ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1)
        return fail("cannot set the TLS 1.2 ciphers: " + openssl_error());
    // Resumption: a session cache on the server (RFC 5246 §7.3's session
    // ids) and tickets (RFC 5077; TLS 1.3's NewSessionTicket, RFC 8446 §4.6.1),
    // both OpenSSL's defaults for a server, with this context's id. The
    // tickets' keys are the caller's ring's, not the random ones OpenSSL
    // makes for each context (tls.hpp and tls_tickets.hpp say why); a
    // session lives one rotation period (the lifetime hint a ticket carries).
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    static constexpr unsigned char kSessionContext[] = "m0serve";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
    SSL_CTX_set_timeout(ctx, tickets.period());
    if (SSL_CTX_set_ex_data(ctx, keyring_index(), &tickets) != 1 ||
        SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key) != 1)
        return fail("cannot set the TLS session ticket keys: " + openssl_error());
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, nullptr);
    if (SSL_CTX_use_certificate_chain_file(ctx, certfile.c_str()) != 1)
        return fail("--certfile " + certfile + ": not a PEM certificate: " + openssl_error());
    // A passphrase-protected key: OpenSSL's own callback would prompt on the
    // terminal (and a SIGHUP reload would wait there, on the loop); none is
    // asked, and the refusal says why.
    bool encrypted = false;
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, &encrypted);
    const int used = SSL_CTX_use_PrivateKey_file(ctx, keyfile.c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr);
    if (used != 1 && encrypted) {
        ERR_clear_error();
        return fail("--keyfile " + keyfile +
                    ": an encrypted (passphrase-protected) key; m0serve asks for no passphrase: "
                    "keep the key decrypted, readable by its user alone (openssl pkey -in KEY "
                    "-out PLAIN)");
    }
    if (used != 1) {
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            ERR_clear_error();
            return fail("--keyfile " + keyfile + ": not the key of --certfile " + certfile);
        }
        return fail("--keyfile " + keyfile + ": not a PEM private key: " + openssl_error());
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        return fail("--keyfile " + keyfile + ": not the key of --certfile " + certfile);
    }
    return ctx;
}

}  // namespace

TlsContext::TlsContext(std::string certfile, std::string keyfile,
                       std::shared_ptr<TicketKeyring> tickets, SSL_CTX* ctx)
    : certfile_(std::move(certfile)),
      keyfile_(std::move(keyfile)),
      tickets_(std::move(tickets)),
      ctx_(ctx) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

std::shared_ptr<TlsContext> TlsContext::load(const std::string& certfile,
                                             const std::string& keyfile, std::string& err) {
    return load(certfile, keyfile, TicketKeyring::make(TicketKeyring::kDefaultPeriod), err);
}

std::shared_ptr<TlsContext> TlsContext::load(const std::string& certfile,
                                             const std::string& keyfile,
                                             std::shared_ptr<TicketKeyring> tickets,
                                             std::string& err) {
    SSL_CTX* ctx = make_context(certfile, keyfile, *tickets, err);
    if (!ctx) return nullptr;
    return std::shared_ptr<TlsContext>(new TlsContext(certfile, keyfile, std::move(tickets), ctx));
}

bool TlsContext::reload(std::string& err) {
    SSL_CTX* fresh = make_context(certfile_, keyfile_, *tickets_, err);
    if (!fresh) return false;
    SSL_CTX* old;
    {
        std::lock_guard<std::mutex> lock(mu_);
        old = ctx_;
        ctx_ = fresh;
    }
    SSL_CTX_free(old);  // its connections keep their own references
    return true;
}

SSL* TlsContext::new_ssl(bool h2) const {
    SSL* ssl = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        ssl = SSL_new(ctx_);
    }
    static const unsigned char kMark = 1;
    if (ssl && !h2) SSL_set_ex_data(ssl, http1_only_index(), const_cast<unsigned char*>(&kMark));
    return ssl;
}

}  // namespace m0::server
