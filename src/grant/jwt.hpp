// GRIP publisher tokens: the JWT (RFC 7519) a GRIP publisher (gripcontrol,
// django-grip, pushpin-publish's library) sends as `Authorization: Bearer
// JWT`, signed HS256 (RFC 7518 §3.2, HMAC-SHA256) with the shared key, here
// the admin key. Pure, any thread.
//
// Verification order, which fixes the verdict when several things are wrong:
//   1. not three base64url parts, or a header that is not a JSON object -> malformed
//   2. the header's "alg" is not "HS256" ("none" included)               -> bad_alg
//   3. the signature differs (CRYPTO_memcmp, constant time)              -> bad_signature
//   4. the claims are not a JSON object, or "exp" is there and is not
//      a number                                                          -> malformed
//   5. "exp" is there and now >= exp (RFC 7519 §4.1.4)                  -> expired
// So an unsigned or forged token is never reported "expired". Any "iss" is
// taken (the key is what authenticates); "nbf", "aud" and others are not read.
#pragma once
#include <cstdint>
#include <string_view>

namespace m0::grant {

enum class JwtVerdict { ok, malformed, bad_alg, bad_signature, expired };

// A one-line reason for a 401, e.g. "JWT expired"; "ok" for ok.
const char* reason(JwtVerdict v);

// The verdict on `token` signed with `key`, at unix time `now` (seconds).
JwtVerdict verify_jwt(std::string_view token, std::string_view key, int64_t now);

}  // namespace m0::grant
