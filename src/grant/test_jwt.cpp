// verify_jwt: GRIP publishers' HS256 JWTs. Tokens made by python3-jwt (PyJWT
// 2.6, Debian) pin the format from the outside; tokens signed here vary it.
#include <catch2/catch.hpp>
#include <string>

#include "grant/grant.hpp"
#include "grant/jwt.hpp"

using namespace m0::grant;

namespace {

constexpr std::string_view kKey = "0123456789abcdef-admin";
constexpr int64_t kNow = 1700000000;

// jwt.encode({"iss": "pushpin-publisher", "exp": 4102444800}, kKey, algorithm="HS256")
constexpr std::string_view kPyJwt =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJpc3MiOiJwdXNocGluLXB1Ymxpc2hlciIsImV4cCI6NDEwMjQ0NDgwMH0."
    "0aMjpV5ZM_WzyCD55oRSzFvUiULq-9tQpeiOHycrk-s";
// jwt.encode({"iss": "x", "exp": 1000000000}, kKey, algorithm="HS256")
constexpr std::string_view kPyJwtExpired =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJ4IiwiZXhwIjoxMDAwMDAwMDAwfQ."
    "VS7HOD0XUrVNNL9JzRBaNj6OAIRkOdGc-7jF-keQRn4";
// jwt.encode({"iss": "x"}, None, algorithm="none")
constexpr std::string_view kPyJwtNone = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJpc3MiOiJ4In0.";
// jwt.encode({"iss": "x"}, kKey, algorithm="HS384")
constexpr std::string_view kPyJwtHs384 =
    "eyJhbGciOiJIUzM4NCIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJ4In0."
    "wtmijKvDaQ2nc_vKwniDeVxyfGRpXnO8M0OWyGSfGeli3OlUIb-g6umkd3JmWbcp";

// A token of `header` and `claims` (JSON texts) signed with `key`.
std::string sign_jwt(std::string_view header, std::string_view claims, std::string_view key) {
    std::string input = detail::base64url_encode(header) + "." + detail::base64url_encode(claims);
    auto mac = hmac_sha256(key, input);
    return input + "." +
           detail::base64url_encode(
               std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

constexpr std::string_view kHs256 = R"({"alg":"HS256","typ":"JWT"})";

}  // namespace

TEST_CASE("jwt: python3-jwt's HS256 tokens verify; expired, none and HS384 do not",
          "[grant][jwt]") {
    CHECK(verify_jwt(kPyJwt, kKey, kNow) == JwtVerdict::ok);
    CHECK(verify_jwt(kPyJwt, "another-key-entirely", kNow) == JwtVerdict::bad_signature);
    CHECK(verify_jwt(kPyJwtExpired, kKey, kNow) == JwtVerdict::expired);
    CHECK(verify_jwt(kPyJwtExpired, kKey, 999999999) == JwtVerdict::ok);
    CHECK(verify_jwt(kPyJwtNone, kKey, kNow) == JwtVerdict::bad_alg);
    CHECK(verify_jwt(kPyJwtHs384, kKey, kNow) == JwtVerdict::bad_alg);
}

TEST_CASE("jwt: exp is honoured when present, any iss is taken", "[grant][jwt]") {
    CHECK(verify_jwt(sign_jwt(kHs256, R"({"iss":"anyone"})", kKey), kKey, kNow) == JwtVerdict::ok);
    CHECK(verify_jwt(sign_jwt(kHs256, "{}", kKey), kKey, kNow) == JwtVerdict::ok);
    // RFC 7519 §4.1.4: valid only before exp.
    CHECK(verify_jwt(sign_jwt(kHs256, R"({"exp":1700000001})", kKey), kKey, kNow) ==
          JwtVerdict::ok);
    CHECK(verify_jwt(sign_jwt(kHs256, R"({"exp":1700000000})", kKey), kKey, kNow) ==
          JwtVerdict::expired);
    CHECK(verify_jwt(sign_jwt(kHs256, R"({"exp":1699999999.5})", kKey), kKey, kNow) ==
          JwtVerdict::expired);
    CHECK(verify_jwt(sign_jwt(kHs256, R"({"exp":"2100"})", kKey), kKey, kNow) ==
          JwtVerdict::malformed);
    CHECK(verify_jwt(sign_jwt(kHs256, "[]", kKey), kKey, kNow) == JwtVerdict::malformed);
}

TEST_CASE("jwt: forged, re-keyed, alg-swapped and garbage tokens are refused", "[grant][jwt]") {
    std::string good = sign_jwt(kHs256, R"({"iss":"a"})", kKey);
    SECTION("the signature covers header and claims") {
        std::string forged = sign_jwt(kHs256, R"({"iss":"b"})", "wrong-key-wrong-key");
        CHECK(verify_jwt(forged, kKey, kNow) == JwtVerdict::bad_signature);
        std::string swapped = forged.substr(0, forged.rfind('.')) + good.substr(good.rfind('.'));
        CHECK(verify_jwt(swapped, kKey, kNow) == JwtVerdict::bad_signature);
        CHECK(verify_jwt(good.substr(0, good.size() - 1), kKey, kNow) == JwtVerdict::bad_signature);
        CHECK(verify_jwt(good.substr(0, good.rfind('.') + 1), kKey, kNow) ==
              JwtVerdict::bad_signature);
    }
    SECTION("the alg is HS256, whatever else the header names") {
        for (const char* h : {R"({"alg":"none"})", R"({"alg":"hs256"})", R"({"typ":"JWT"})",
                              R"({"alg":["HS256"]})", R"({"alg":"RS256"})"})
            CHECK(verify_jwt(sign_jwt(h, "{}", kKey), kKey, kNow) == JwtVerdict::bad_alg);
    }
    SECTION("garbage") {
        for (std::string_view t : {"", ".", "..", "a.b.c", "x", "Bearer", "a.b", "a.b.c.d"})
            CHECK(verify_jwt(t, kKey, kNow) == JwtVerdict::malformed);
        CHECK(verify_jwt(good + ".", kKey, kNow) == JwtVerdict::malformed);
        CHECK(verify_jwt(sign_jwt("not json", "{}", kKey), kKey, kNow) == JwtVerdict::malformed);
        CHECK(verify_jwt(sign_jwt(kHs256, "not json", kKey), kKey, kNow) == JwtVerdict::malformed);
        CHECK(verify_jwt("=" + good, kKey, kNow) == JwtVerdict::malformed);
        CHECK(verify_jwt(std::string(9000, 'a') + ".b.c", kKey, kNow) == JwtVerdict::malformed);
    }
    CHECK(std::string(reason(JwtVerdict::expired)) == "JWT expired");
}
