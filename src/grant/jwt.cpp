#include "grant/jwt.hpp"

#include <openssl/crypto.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "grant/base64.hpp"
#include "grant/grant.hpp"

namespace m0::grant {

namespace {

constexpr size_t kMaxToken = 8192;  // a publisher's token is a few hundred bytes

// The JSON object a base64url part encodes, or nullopt.
std::optional<nlohmann::json> json_part(std::string_view part) {
    auto bytes = base64_decode(part, Alphabet::url);
    if (!bytes || bytes->find('\0') != std::string::npos) return std::nullopt;
    auto j = nlohmann::json::parse(*bytes, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    return j;
}

}  // namespace

const char* reason(JwtVerdict v) {
    switch (v) {
        case JwtVerdict::ok:
            return "ok";
        case JwtVerdict::malformed:
            return "malformed JWT";
        case JwtVerdict::bad_alg:
            return "JWT alg must be HS256";
        case JwtVerdict::bad_signature:
            return "bad JWT signature";
        case JwtVerdict::expired:
            return "JWT expired";
    }
    return "bad JWT";
}

JwtVerdict verify_jwt(std::string_view token, std::string_view key, int64_t now) {
    // RFC 7515 §7.1: header "." payload "." signature, each base64url.
    size_t d1 = token.find('.');
    size_t d2 = d1 == std::string_view::npos ? d1 : token.find('.', d1 + 1);
    if (token.size() > kMaxToken || d2 == std::string_view::npos ||
        token.find('.', d2 + 1) != std::string_view::npos)
        return JwtVerdict::malformed;
    auto header = json_part(token.substr(0, d1));
    if (!header) return JwtVerdict::malformed;
    // RFC 8725 §3.1: the algorithm is the one expected, never the one the
    // token names; "none" and every other alg are refused.
    auto alg = header->find("alg");
    if (alg == header->end() || !alg->is_string() || *alg != "HS256") return JwtVerdict::bad_alg;
    auto sig = base64_decode(token.substr(d2 + 1), Alphabet::url);
    auto mac = hmac_sha256(key, token.substr(0, d2));
    if (!sig || sig->size() != mac.size() ||
        CRYPTO_memcmp(sig->data(), mac.data(), mac.size()) != 0)
        return JwtVerdict::bad_signature;
    auto claims = json_part(token.substr(d1 + 1, d2 - d1 - 1));
    if (!claims) return JwtVerdict::malformed;
    auto exp = claims->find("exp");
    if (exp == claims->end()) return JwtVerdict::ok;
    if (!exp->is_number()) return JwtVerdict::malformed;
    // RFC 7519 §4.1.4: "the current date/time MUST be before the expiration date/time".
    if (static_cast<double>(now) >= exp->get<double>()) return JwtVerdict::expired;
    return JwtVerdict::ok;
}

}  // namespace m0::grant
