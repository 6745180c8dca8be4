// m0::grant — HMAC-SHA256 grants: signing, strict parsing, verification.
// The token format, the verification order and the key-file format are
// documented at the top of grant.hpp; src/grant/vectors.txt pins them.
// Everything here is pure: no globals, no locks, any thread.
#include "grant/grant.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace m0::grant {

namespace {

constexpr char kB64Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// Returns the 6-bit value of a base64url character, or -1.
int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

// Returns the value of a hex digit, or -1.
int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Parses canonical unsigned decimal ("0" or no leading zero) into int64.
std::optional<int64_t> parse_expires(std::string_view text) {
    if (text.empty() || text.size() > 19) return std::nullopt;
    if (text.size() > 1 && text[0] == '0') return std::nullopt;  // canonical: no leading zeros
    uint64_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;          // also refuses "+", "-", spaces
        value = value * 10 + static_cast<uint64_t>(c - '0');  // 19 digits fit in uint64
    }
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(value);
}

// Returns true when no name occurs twice.
bool all_distinct(const std::vector<std::string_view>& names) {
    std::vector<std::string_view> sorted(names);
    std::sort(sorted.begin(), sorted.end());
    return std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
}

bool is_blank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

const char* reason(Verdict verdict) {
    switch (verdict) {
        case Verdict::ok:
            return "grant ok";
        case Verdict::malformed:
            return "malformed grant";
        case Verdict::unknown_key:
            return "unknown grant key";
        case Verdict::bad_signature:
            return "bad grant signature";
        case Verdict::expired:
            return "grant expired";
    }
    return "bad grant";
}

// ---- primitives ----------------------------------------------------------

std::array<unsigned char, 32> hmac_sha256(std::string_view key, std::string_view data) {
    if (key.size() > static_cast<std::size_t>(INT_MAX)) {
        throw std::runtime_error("hmac_sha256: key too long");
    }
    // OpenSSL 3.0 HMAC() treats a null key as "no key given"; an empty key
    // must still be an (empty) key, so never pass null.
    static const unsigned char empty = 0;
    const void* key_ptr = key.empty() ? static_cast<const void*>(&empty) : key.data();
    std::array<unsigned char, 32> mac{};
    unsigned int mac_len = 0;
    const auto* data_ptr = reinterpret_cast<const unsigned char*>(data.data());
    if (HMAC(EVP_sha256(), key_ptr, static_cast<int>(key.size()), data.empty() ? &empty : data_ptr,
             data.size(), mac.data(), &mac_len) == nullptr ||
        mac_len != mac.size()) {
        throw std::runtime_error("hmac_sha256: OpenSSL HMAC failed");
    }
    return mac;
}

bool valid_channel(std::string_view name) {
    if (name.empty() || name.size() > kMaxChannelSize) return false;
    if (name.starts_with(kReservedChannelPrefix)) return false;
    // The hold trims SP and HTAB around M0-Channel's commas: a name that
    // begins or ends with one would be held as another name.
    if (is_blank(name.front()) || is_blank(name.back())) return false;
    // spec: CR, LF and NUL are refused names; "," separates channels here.
    return name.find_first_of(std::string_view("\r\n\0,", 4)) == std::string_view::npos;
}

bool valid_key_id(std::string_view id) {
    if (id.empty() || id.size() > kMaxKeyIdSize) return false;
    return std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    });
}

namespace detail {

std::string base64url_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() * 4 + 2) / 3);
    std::size_t i = 0;
    auto byte = [&](std::size_t k) {
        return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k]));
    };
    for (; i + 3 <= bytes.size(); i += 3) {
        uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
        out += kB64Alphabet[(v >> 18) & 63];
        out += kB64Alphabet[(v >> 12) & 63];
        out += kB64Alphabet[(v >> 6) & 63];
        out += kB64Alphabet[v & 63];
    }
    std::size_t rest = bytes.size() - i;
    if (rest == 1) {
        uint32_t v = byte(i) << 16;
        out += kB64Alphabet[(v >> 18) & 63];
        out += kB64Alphabet[(v >> 12) & 63];
    } else if (rest == 2) {
        uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8);
        out += kB64Alphabet[(v >> 18) & 63];
        out += kB64Alphabet[(v >> 12) & 63];
        out += kB64Alphabet[(v >> 6) & 63];
    }
    return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
    if (text.size() % 4 == 1) return std::nullopt;  // no byte string encodes to this length
    std::string out;
    out.reserve(text.size() / 4 * 3 + 2);
    uint32_t acc = 0;
    unsigned bits = 0;
    for (char c : text) {
        int v = b64_value(c);
        if (v < 0) return std::nullopt;  // also "=" padding: canonical form has none
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>(static_cast<unsigned char>((acc >> bits) & 0xff));
        }
    }
    // RFC 4648 §3.5: the pad bits must be zero, or the same bytes have
    // several spellings and the token is not canonical.
    if ((acc & ((1u << bits) - 1u)) != 0) return std::nullopt;
    return out;
}

std::optional<std::string> hex_decode(std::string_view text) {
    if (text.size() % 2 != 0) return std::nullopt;
    std::string out;
    out.reserve(text.size() / 2);
    for (std::size_t i = 0; i < text.size(); i += 2) {
        int hi = hex_value(text[i]);
        int lo = hex_value(text[i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out += static_cast<char>(static_cast<unsigned char>(hi * 16 + lo));
    }
    return out;
}

std::string encode_payload(std::string_view kid, int64_t expires,
                           const std::vector<std::string>& channels) {
    std::string payload(kPayloadVersion);
    payload += '\n';
    payload += kid;
    payload += '\n';
    payload += std::to_string(expires);
    payload += '\n';
    for (std::size_t i = 0; i < channels.size(); ++i) {
        if (i > 0) payload += ',';
        payload += channels[i];
    }
    return payload;
}

std::optional<Grant> decode_payload(std::string_view payload) {
    // payload = "v1" LF kid LF expires LF channel *( "," channel )
    std::string_view rest = payload;
    if (!rest.starts_with(kPayloadVersion)) return std::nullopt;
    rest.remove_prefix(kPayloadVersion.size());
    if (rest.empty() || rest.front() != '\n') return std::nullopt;
    rest.remove_prefix(1);

    std::size_t lf = rest.find('\n');
    if (lf == std::string_view::npos) return std::nullopt;
    std::string_view kid = rest.substr(0, lf);
    if (!valid_key_id(kid)) return std::nullopt;
    rest.remove_prefix(lf + 1);

    lf = rest.find('\n');
    if (lf == std::string_view::npos) return std::nullopt;
    std::optional<int64_t> expires = parse_expires(rest.substr(0, lf));
    if (!expires) return std::nullopt;
    rest.remove_prefix(lf + 1);

    // The rest is the channel list; a further LF fails valid_channel().
    std::vector<std::string_view> names;
    for (;;) {
        std::size_t comma = rest.find(',');
        std::string_view name = rest.substr(0, comma);
        if (!valid_channel(name)) return std::nullopt;  // also "" from ",," or a trailing ","
        names.push_back(name);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    if (!all_distinct(names)) return std::nullopt;

    Grant grant;
    grant.kid = std::string(kid);
    grant.expires = *expires;
    grant.channels.assign(names.begin(), names.end());
    return grant;
}

}  // namespace detail

// ---- sign / verify -------------------------------------------------------

std::string sign(const Key& key, const std::vector<std::string>& channels, int64_t expires) {
    if (!valid_key_id(key.id)) throw std::invalid_argument("grant: bad key id");
    if (key.secret.size() < kMinSecretSize)
        throw std::invalid_argument("grant: key secret shorter than 32 bytes");
    if (expires < 0) throw std::invalid_argument("grant: negative expiry");
    if (channels.empty()) throw std::invalid_argument("grant: no channel");
    std::vector<std::string_view> names;
    names.reserve(channels.size());
    for (const std::string& name : channels) {
        if (!valid_channel(name)) throw std::invalid_argument("grant: bad channel name");
        names.emplace_back(name);
    }
    if (!all_distinct(names)) throw std::invalid_argument("grant: duplicate channel");

    std::string payload = detail::encode_payload(key.id, expires, channels);
    std::array<unsigned char, 32> mac = hmac_sha256(key.secret, payload);
    std::string token = detail::base64url_encode(payload);
    token += '.';
    token += detail::base64url_encode(
        std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
    if (token.size() > kMaxTokenSize) throw std::invalid_argument("grant: token over 4096 bytes");
    return token;
}

Verdict verify(const KeyRing& keys, std::string_view token, int64_t now, Grant* out) {
    // 1. Shape: bounded size, one ".", canonical base64url, canonical payload.
    if (token.empty() || token.size() > kMaxTokenSize) return Verdict::malformed;
    std::size_t dot = token.find('.');
    if (dot == std::string_view::npos) return Verdict::malformed;
    std::optional<std::string> payload = detail::base64url_decode(token.substr(0, dot));
    std::optional<std::string> mac =
        detail::base64url_decode(token.substr(dot + 1));  // a 2nd "." fails here
    if (!payload || !mac || mac->size() != 32) return Verdict::malformed;
    std::optional<Grant> grant = detail::decode_payload(*payload);
    if (!grant) return Verdict::malformed;

    // 2. Key.
    const Key* key = keys.find(grant->kid);
    if (key == nullptr) return Verdict::unknown_key;

    // 3. Signature, compared in constant time.
    std::array<unsigned char, 32> expected = hmac_sha256(key->secret, *payload);
    if (CRYPTO_memcmp(expected.data(), mac->data(), expected.size()) != 0) {
        return Verdict::bad_signature;
    }

    // 4. Expiry, only once the grant is known to be authentic.
    if (grant->expires <= now) return Verdict::expired;

    if (out != nullptr) *out = std::move(*grant);
    return Verdict::ok;
}

// ---- key ring ------------------------------------------------------------

std::optional<KeyRing> KeyRing::from_text(std::string_view text, std::string& error) {
    std::vector<Key> keys;
    std::size_t line_no = 0;
    while (!text.empty()) {
        std::size_t lf = text.find('\n');
        std::string_view line = text.substr(0, lf);
        text.remove_prefix(lf == std::string_view::npos ? text.size() : lf + 1);
        ++line_no;
        auto where = [&] { return "line " + std::to_string(line_no) + ": "; };

        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF files
        while (!line.empty() && is_blank(line.front())) line.remove_prefix(1);
        while (!line.empty() && is_blank(line.back())) line.remove_suffix(1);
        if (line.empty() || line.front() == '#') continue;

        std::vector<std::string_view> fields;
        while (!line.empty()) {
            std::size_t end = 0;
            while (end < line.size() && !is_blank(line[end])) ++end;
            fields.push_back(line.substr(0, end));
            line.remove_prefix(end);
            while (!line.empty() && is_blank(line.front())) line.remove_prefix(1);
        }
        if (fields.size() != 2) {
            error = where() + "expected `KID SECRET_HEX`";
            return std::nullopt;
        }
        if (!valid_key_id(fields[0])) {
            error = where() + "bad key id (want [A-Za-z0-9_-]{1,32})";
            return std::nullopt;
        }
        std::optional<std::string> secret = detail::hex_decode(fields[1]);
        if (!secret) {
            error = where() + "secret is not hex (an even number of 0-9a-fA-F digits)";
            return std::nullopt;
        }
        if (secret->size() < kMinSecretSize) {
            error = where() + "secret is " + std::to_string(secret->size()) +
                    " bytes, need at least 32 (64 hex digits)";
            return std::nullopt;
        }
        for (const Key& k : keys) {
            if (k.id == fields[0]) {
                error = where() + "duplicate key id " + std::string(fields[0]);
                return std::nullopt;
            }
        }
        keys.push_back(Key{std::string(fields[0]), std::move(*secret)});
    }
    if (keys.empty()) {
        error = "no keys";
        return std::nullopt;
    }
    return KeyRing(std::move(keys));
}

std::optional<KeyRing> KeyRing::load_file(const std::string& path, std::string& error) {
    constexpr std::size_t kMaxKeyFileSize = 1 << 20;  // a key file is a few lines
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) {
        error = path + ": cannot open: " + std::strerror(errno);
        return std::nullopt;
    }
    std::string text;
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, file)) > 0 && text.size() <= kMaxKeyFileSize) {
        text.append(buf, n);
    }
    bool failed = std::ferror(file) != 0;
    int read_errno = errno;
    std::fclose(file);
    if (failed) {
        error = path + ": cannot read: " + std::strerror(read_errno);
        return std::nullopt;
    }
    if (text.size() > kMaxKeyFileSize) {
        error = path + ": larger than 1 MiB, not a key file";
        return std::nullopt;
    }
    std::optional<KeyRing> ring = from_text(text, error);
    if (!ring) error = path + ": " + error;
    return ring;
}

const Key* KeyRing::find(std::string_view id) const {
    for (const Key& key : keys_) {
        if (key.id == id) return &key;
    }
    return nullptr;
}

}  // namespace m0::grant
