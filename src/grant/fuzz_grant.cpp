// Fuzzer: the grant decoder and verifier (grant.hpp), four modes chosen by the
// first byte:
//   0  verify() on an arbitrary token with a fixed key ring: an accepted token
//      is the one sign() makes for what it grants (one text per grant), its
//      channels are valid and distinct, it has not expired; a refused token
//      leaves the output untouched; the verdict is the same twice;
//   1  sign() then verify() for channels and an expiry taken from the input:
//      sign() refuses exactly the invalid lists, an accepted list verifies
//      back to itself, expires at its time, and any changed byte fails;
//   2  KeyRing::from_text() on arbitrary text: a ring holds valid, distinct
//      ids and secrets of 32 bytes or more;
//   3  base64url: a text that decodes is the encoding of what it decodes to,
//      and any bytes encode to a text that decodes back to them.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "grant/grant.hpp"
#include "http/fuzz_check.hpp"

namespace {

using namespace m0::grant;

const KeyRing& ring() {
    static const KeyRing keys = [] {
        std::string err;
        auto r = KeyRing::from_text(
            "k2026 " + std::string(64, 'a') + "\n" + "old_key-1 " + std::string(66, '7') + "\n",
            err);
        if (!r) std::abort();
        return *r;
    }();
    return keys;
}

bool distinct(std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return std::adjacent_find(v.begin(), v.end()) == v.end();
}

void check_token(std::string_view token, int64_t now) {
    Grant out;
    out.kid = "untouched";
    Verdict v = verify(ring(), token, now, &out);
    FUZZ_CHECK(verify(ring(), token, now, nullptr) == v);
    FUZZ_CHECK(reason(v) != nullptr);
    if (v != Verdict::ok) {
        FUZZ_CHECK(out.kid == "untouched" && out.channels.empty() && out.expires == 0);
        return;
    }
    FUZZ_CHECK(token.size() <= kMaxTokenSize);
    FUZZ_CHECK(!out.channels.empty());
    for (const auto& c : out.channels) FUZZ_CHECK(valid_channel(c));
    FUZZ_CHECK(distinct(out.channels));
    FUZZ_CHECK(out.expires > now);
    const Key* key = ring().find(out.kid);
    FUZZ_CHECK(key != nullptr);
    FUZZ_CHECK(sign(*key, out.channels, out.expires) == token);
    // Once its time has come the same token is expired, never anything else.
    FUZZ_CHECK(verify(ring(), token, out.expires, nullptr) == Verdict::expired);
}

void sign_and_verify(FuzzedDataProvider& in) {
    const int64_t expires = in.ConsumeIntegral<int64_t>();
    const bool use_old = in.ConsumeBool();
    std::vector<std::string> channels;
    while (in.remaining_bytes() > 0 && channels.size() < 40)
        channels.push_back(in.ConsumeRandomLengthString(300));
    const Key& key = use_old ? *ring().find("old_key-1") : ring().signing();

    bool valid = expires >= 0 && !channels.empty() && distinct(channels) &&
                 std::all_of(channels.begin(), channels.end(),
                             [](const std::string& c) { return valid_channel(c); });
    std::string token;
    try {
        token = sign(key, channels, expires);
    } catch (const std::invalid_argument&) {
        // Refused: an invalid list, or a valid one whose token would be too long.
        if (valid) {
            size_t payload = detail::encode_payload(key.id, expires, channels).size();
            FUZZ_CHECK((payload * 4 + 2) / 3 + 1 + 43 > kMaxTokenSize);
        }
        return;
    }
    FUZZ_CHECK(valid);
    FUZZ_CHECK(token.size() <= kMaxTokenSize);
    for (char c : token)
        FUZZ_CHECK((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_' || c == '.');
    Grant g;
    FUZZ_CHECK(verify(ring(), token, expires - 1, &g) == Verdict::ok);
    FUZZ_CHECK(g.channels == channels);
    FUZZ_CHECK(g.expires == expires);
    FUZZ_CHECK(g.kid == key.id);
    FUZZ_CHECK(verify(ring(), token, expires, nullptr) == Verdict::expired);
    // One byte changed (where and to what, from the expiry): never accepted.
    std::string bad = token;
    size_t at = static_cast<uint64_t>(expires) % bad.size();
    char to = "AQgw-_.=a"[static_cast<uint64_t>(expires) / 7 % 9];
    if (bad[at] == to) to = bad[at] == 'B' ? 'C' : 'B';
    bad[at] = to;
    FUZZ_CHECK(verify(ring(), bad, 0, nullptr) != Verdict::ok);
}

void key_file(std::string_view text) {
    std::string err;
    auto r = KeyRing::from_text(text, err);
    if (!r) {
        FUZZ_CHECK(!err.empty());
        return;
    }
    FUZZ_CHECK(r->size() >= 1);
    FUZZ_CHECK(r->find(r->signing().id) == &r->signing());
    FUZZ_CHECK(valid_key_id(r->signing().id));
    FUZZ_CHECK(r->signing().secret.size() >= kMinSecretSize);
}

void base64(std::string_view text) {
    auto bytes = detail::base64url_decode(text);
    if (bytes) FUZZ_CHECK(detail::base64url_encode(*bytes) == text);
    std::string enc = detail::base64url_encode(text);
    auto back = detail::base64url_decode(enc);
    FUZZ_CHECK(back && *back == text);
    FUZZ_CHECK(enc.find('=') == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    if (size == 0) return 0;
    FuzzedDataProvider in(bytes + 1, size - 1);
    std::string_view rest(reinterpret_cast<const char*>(bytes + 1), size - 1);
    switch (bytes[0] % 4) {
        case 0: {
            const int64_t now = in.ConsumeIntegralInRange<int64_t>(0, 2000000000);
            check_token(in.ConsumeRemainingBytesAsString(), now);
            break;
        }
        case 1:
            sign_and_verify(in);
            break;
        case 2:
            key_file(rest);
            break;
        default:
            base64(rest);
            break;
    }
    return 0;
}
