// base64_decode: RFC 4648 §4 and §5 through OpenSSL's EVP decoder.
#include <catch2/catch.hpp>
#include <string>

#include "grant/base64.hpp"

using m0::grant::Alphabet;
using m0::grant::base64_decode;

TEST_CASE("base64: RFC 4648 §10 test vectors decode in both alphabets", "[grant][base64]") {
    CHECK(base64_decode("", Alphabet::standard) == "");
    CHECK(base64_decode("Zg==", Alphabet::standard) == "f");
    CHECK(base64_decode("Zm8=", Alphabet::standard) == "fo");
    CHECK(base64_decode("Zm9vYmFy", Alphabet::standard) == "foobar");
    CHECK(base64_decode("Zg", Alphabet::url) == "f");
    CHECK(base64_decode("Zm8", Alphabet::url) == "fo");
    CHECK(base64_decode("Zm9vYmFy", Alphabet::url) == "foobar");
    CHECK(base64_decode("-_8", Alphabet::url) == "\xfb\xff");
    CHECK(base64_decode("+/8=", Alphabet::standard) == "\xfb\xff");
    CHECK(base64_decode("AAEC/w==", Alphabet::standard) == std::string("\0\1\2\xff", 4));
}

TEST_CASE("base64: text outside the alphabet or of a bad length is refused", "[grant][base64]") {
    for (const char* s : {"Zg", "Zg=", "Z===", "Zm 9v", "Zm9v\n", "-_8=", "Zg==Zg==", "=Zg=", "Z"})
        CHECK_FALSE(base64_decode(s, Alphabet::standard));
    for (const char* s : {"Zg==", "+/8", "Z", "Zm9v YmFy", "Zm9v."})
        CHECK_FALSE(base64_decode(s, Alphabet::url));
}

TEST_CASE("base64: base64_encode writes RFC 4648 §4 text that decodes back", "[grant][base64]") {
    CHECK(m0::grant::base64_encode("") == "");
    CHECK(m0::grant::base64_encode("f") == "Zg==");
    CHECK(m0::grant::base64_encode("foobar") == "Zm9vYmFy");
    const std::string bytes("\0\1\2\xff", 4);
    CHECK(base64_decode(m0::grant::base64_encode(bytes), Alphabet::standard) == bytes);
}
