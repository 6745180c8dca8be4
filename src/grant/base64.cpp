#include "grant/base64.hpp"

#include <openssl/evp.h>

#include <climits>
#include <memory>

namespace m0::grant {

namespace {
bool alnum(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
}  // namespace

std::optional<std::string> base64_decode(std::string_view text, Alphabet alphabet) {
    if (text.size() > INT_MAX / 2) return std::nullopt;
    // EVP's decoder skips whitespace and stops at "-": the alphabet is checked
    // here, so it only ever sees canonical RFC 4648 §4 text.
    std::string in;
    in.reserve(text.size() + 3);
    if (alphabet == Alphabet::url) {
        if (text.size() % 4 == 1) return std::nullopt;
        for (char c : text) {
            if (c == '-')
                c = '+';
            else if (c == '_')
                c = '/';
            else if (!alnum(c))
                return std::nullopt;
            in.push_back(c);
        }
        while (in.size() % 4 != 0) in.push_back('=');
    } else {
        if (text.size() % 4 != 0) return std::nullopt;
        size_t pad = 0;
        while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
        for (size_t i = 0; i < text.size() - pad; ++i)
            if (!alnum(text[i]) && text[i] != '+' && text[i] != '/') return std::nullopt;
        in.assign(text);
    }
    std::unique_ptr<EVP_ENCODE_CTX, decltype(&EVP_ENCODE_CTX_free)> ctx(EVP_ENCODE_CTX_new(),
                                                                        EVP_ENCODE_CTX_free);
    if (!ctx) return std::nullopt;
    EVP_DecodeInit(ctx.get());
    std::string out(in.size() / 4 * 3 + 3, '\0');
    auto* o = reinterpret_cast<unsigned char*>(out.data());
    int n = 0, tail = 0;
    if (EVP_DecodeUpdate(ctx.get(), o, &n, reinterpret_cast<const unsigned char*>(in.data()),
                         static_cast<int>(in.size())) < 0 ||
        EVP_DecodeFinal(ctx.get(), o + n, &tail) < 0)
        return std::nullopt;
    out.resize(static_cast<size_t>(n + tail));
    return out;
}

std::string base64_encode(std::string_view bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(bytes.data()),
                            static_cast<int>(bytes.size()));
    out.resize(static_cast<size_t>(n));
    return out;
}

}  // namespace m0::grant
