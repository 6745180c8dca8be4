// Base64 decoding (RFC 4648) through OpenSSL's EVP decoder. Pure, any thread.
// Used by the admin API (Pushpin's `content-bin`), GRIP's `Grip-Keep-Alive:
// ...; format=base64`, and the JWTs GRIP publishers sign (base64url).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace m0::grant {

enum class Alphabet {
    standard,  // RFC 4648 §4: A-Z a-z 0-9 + /, "=" padding to a multiple of 4
    url,       // RFC 4648 §5: A-Z a-z 0-9 - _, no padding (RFC 7515 §2, as JWTs write it)
};

// The bytes `text` encodes; nullopt on a character outside the alphabet
// (whitespace included), a length no encoding has, or misplaced padding.
std::optional<std::string> base64_decode(std::string_view text, Alphabet alphabet);

// RFC 4648 §4 text (standard alphabet, "=" padding) of `bytes`, through
// OpenSSL's EVP_EncodeBlock; what the fuzzers re-encode with.
std::string base64_encode(std::string_view bytes);

}  // namespace m0::grant
