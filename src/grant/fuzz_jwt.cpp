// Fuzzer: GRIP publishers' JWTs (jwt.hpp) and the EVP base64 decoder
// (base64.hpp), three modes chosen by the first byte (the rest read by a
// FuzzedDataProvider: mode 1's numbers come from its end):
//   0  verify_jwt() on an arbitrary token: the verdict is the same twice; an
//      accepted token has three parts whose signature decodes to the HMAC of
//      the first two under the key, and is refused under another key;
//   1  a token signed here over claims taken from the input (exp from the
//      input too): it verifies, or is expired exactly when now >= exp, or is
//      malformed when the claims are not an object; changing any byte of its
//      first two parts makes it fail;
//   2  base64_decode() on arbitrary text in both alphabets: what decodes has
//      the length the text says, and re-encoded decodes to the same bytes.
#include <fuzzer/FuzzedDataProvider.h>

#include <nlohmann/json.hpp>
#include <string>

#include "grant/base64.hpp"
#include "grant/grant.hpp"
#include "grant/jwt.hpp"
#include "http/fuzz_check.hpp"

namespace {

using namespace m0::grant;

constexpr std::string_view kKey = "fuzz-admin-key-0123456789";
constexpr int64_t kNow = 1700000000;

std::string mac_text(std::string_view input, std::string_view key) {
    auto mac = hmac_sha256(key, input);
    return std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
}

std::string sign(std::string_view claims) {
    std::string input = detail::base64url_encode(R"({"alg":"HS256","typ":"JWT"})") + "." +
                        detail::base64url_encode(claims);
    return input + "." + detail::base64url_encode(mac_text(input, kKey));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    if (size == 0) return 0;
    const int mode = bytes[0] % 3;
    FuzzedDataProvider in(bytes + 1, size - 1);
    if (mode == 0) {
        std::string token = in.ConsumeRemainingBytesAsString();
        JwtVerdict v = verify_jwt(token, kKey, kNow);
        FUZZ_CHECK(v == verify_jwt(token, kKey, kNow));
        if (v != JwtVerdict::ok) return 0;
        size_t d2 = token.rfind('.');
        FUZZ_CHECK(d2 != std::string::npos);
        auto sig = base64_decode(std::string_view(token).substr(d2 + 1), Alphabet::url);
        FUZZ_CHECK(sig && *sig == mac_text(std::string_view(token).substr(0, d2), kKey));
        FUZZ_CHECK(verify_jwt(token, "another-key-0123456789", kNow) == JwtVerdict::bad_signature);
        return 0;
    }
    if (mode == 1) {
        const int64_t exp = in.ConsumeIntegralInRange<int64_t>(kNow - 100, kNow + 100);
        const bool with_exp = in.ConsumeBool();
        const size_t flip = in.ConsumeIntegral<size_t>();
        std::string claims = in.ConsumeRemainingBytesAsString();
        auto j = nlohmann::json::parse(claims, nullptr, false);
        const bool object = j.is_object() && claims.find('\0') == std::string::npos;
        if (object && with_exp) {
            j["exp"] = exp;
            claims = j.dump();
        }
        std::string token = sign(claims);
        JwtVerdict v = verify_jwt(token, kKey, kNow);
        if (!object) {
            FUZZ_CHECK(v == JwtVerdict::malformed);
            return 0;
        }
        auto e = j.find("exp");
        if (e != j.end() && !e->is_number())
            FUZZ_CHECK(v == JwtVerdict::malformed);
        else if (e != j.end() && static_cast<double>(kNow) >= e->get<double>())
            FUZZ_CHECK(v == JwtVerdict::expired);
        else
            FUZZ_CHECK(v == JwtVerdict::ok);
        size_t d2 = token.rfind('.');
        std::string changed = token;
        size_t at = flip % d2;
        changed[at] = static_cast<char>(changed[at] ^ 0x01);
        FUZZ_CHECK(verify_jwt(changed, kKey, kNow) != JwtVerdict::ok);
        return 0;
    }
    std::string text = in.ConsumeRemainingBytesAsString();
    for (Alphabet a : {Alphabet::standard, Alphabet::url}) {
        auto out = base64_decode(text, a);
        if (!out) continue;
        size_t pad = 0;
        while (pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
        FUZZ_CHECK(out->size() == (text.size() - pad) * 3 / 4);
        auto again = base64_decode(m0::grant::base64_encode(*out), Alphabet::standard);
        FUZZ_CHECK(again && *again == *out);
    }
    return 0;
}
