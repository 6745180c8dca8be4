// Unit tests for m0::grant: HMAC-SHA256 (RFC 4231), the shared vectors in
// src/grant/vectors.txt (the same file src/wsgi/tests/test_grant.py checks:
// that is the cross-check between the two sides), sign/verify, key files,
// rotation, and the strict base64url decoder.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "grant/grant.hpp"

using namespace m0::grant;

namespace {

std::string unhex(std::string_view hex) {
    std::optional<std::string> bytes = detail::hex_decode(hex);
    REQUIRE(bytes.has_value());
    return *bytes;
}

std::string hex(const std::array<unsigned char, 32>& mac, std::size_t n = 32) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
        out += digits[mac[i] >> 4];
        out += digits[mac[i] & 15];
    }
    return out;
}

// ---- vectors.txt (format: src/grant/make_vectors.py) ----------------------

struct Vector {
    std::string name;
    int64_t now = 0;
    std::string expect;
    bool has_channels = false;
    std::vector<std::string> channels;
    std::string token;
};

struct VectorFile {
    std::string key_text;  // the `key` lines, as a key file
    std::vector<Vector> vectors;
};

std::string percent_decode(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '%') {
            REQUIRE(i + 2 < text.size());
            out += unhex(text.substr(i + 1, 2));
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

std::vector<std::string> split(std::string_view text, char sep) {
    std::vector<std::string> out;
    for (;;) {
        std::size_t at = text.find(sep);
        out.emplace_back(text.substr(0, at));
        if (at == std::string_view::npos) return out;
        text.remove_prefix(at + 1);
    }
}

VectorFile read_vectors() {
    const std::string path = M0_SOURCE_DIR "/src/grant/vectors.txt";
    std::ifstream in(path);
    REQUIRE(in.good());
    VectorFile file;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> words = split(line, ' ');
        if (words[0] == "key") {
            REQUIRE(words.size() == 3);
            file.key_text += words[1] + " " + words[2] + "\n";
            continue;
        }
        REQUIRE(words[0] == "vector");
        REQUIRE(words.size() >= 5);
        Vector v;
        v.name = words[1];
        bool has_token = false;
        for (std::size_t i = 2; i < words.size(); ++i) {
            std::size_t eq = words[i].find('=');
            REQUIRE(eq != std::string::npos);
            std::string name = words[i].substr(0, eq);
            std::string value = words[i].substr(eq + 1);
            if (name == "now") {
                v.now = std::stoll(value);
            } else if (name == "expect") {
                v.expect = value;
            } else if (name == "channels") {
                v.has_channels = true;
                for (const std::string& c : split(value, ','))
                    v.channels.push_back(percent_decode(c));
            } else if (name == "token") {
                v.token = percent_decode(value);
                has_token = true;
            } else {
                FAIL("unknown field " << name << " in " << v.name);
            }
        }
        REQUIRE(has_token);
        file.vectors.push_back(v);
    }
    return file;
}

Verdict verdict_named(const std::string& name) {
    static const std::map<std::string, Verdict> names = {
        {"ok", Verdict::ok},
        {"malformed", Verdict::malformed},
        {"unknown_key", Verdict::unknown_key},
        {"bad_signature", Verdict::bad_signature},
        {"expired", Verdict::expired},
    };
    auto it = names.find(name);
    REQUIRE(it != names.end());
    return it->second;
}

KeyRing ring_from(std::string_view text) {
    std::string error;
    std::optional<KeyRing> ring = KeyRing::from_text(text, error);
    INFO(error);
    REQUIRE(ring.has_value());
    return *ring;
}

const std::string secret_a(64, 'a');  // 32 bytes of 0xaa as hex
const std::string secret_b(64, 'b');
const std::string secret_c(64, 'c');

// A scratch file under the system temp dir, removed at the end of scope.
struct TempFile {
    std::filesystem::path path;
    explicit TempFile(const std::string& content) {
        static int counter = 0;
        path = std::filesystem::temp_directory_path() /
               ("m0-grant-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
        std::ofstream(path, std::ios::binary) << content;
    }
    ~TempFile() { std::filesystem::remove(path); }
};

std::string load_error(const std::string& content) {
    TempFile file(content);
    std::string error;
    std::optional<KeyRing> ring = KeyRing::load_file(file.path.string(), error);
    CHECK_FALSE(ring.has_value());
    CHECK(error.find('\n') == std::string::npos);           // one line
    CHECK(error.rfind(file.path.string() + ": ", 0) == 0);  // names the file
    return error;
}

}  // namespace

// ---- HMAC-SHA256 -----------------------------------------------------------

TEST_CASE("grant: hmac_sha256 matches every RFC 4231 HMAC-SHA-256 test case", "[grant]") {
    struct Case {
        const char* name;
        std::string key;
        std::string data;
        const char* mac;  // hex; case 5 is the 128-bit truncation
    };
    const std::vector<Case> cases = {
        {"4.2 test case 1", std::string(20, '\x0b'), "Hi There",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"4.3 test case 2 (key shorter than the length of the HMAC output)", "Jefe",
         "what do ya want for nothing?",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {"4.4 test case 3 (combined length of key and data larger than 64 bytes)",
         std::string(20, '\xaa'), std::string(50, '\xdd'),
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {"4.5 test case 4", unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
         std::string(50, '\xcd'),
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {"4.6 test case 5 (truncation to 128 bits)", std::string(20, '\x0c'),
         "Test With Truncation", "a3b6167473100ee06e0c796c2955552b"},
        {"4.7 test case 6 (key larger than the block size)", std::string(131, '\xaa'),
         "Test Using Larger Than Block-Size Key - Hash Key First",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {"4.8 test case 7 (key and data larger than the block size)", std::string(131, '\xaa'),
         "This is a test using a larger than block-size key and a larger than block-size data. "
         "The key needs to be hashed before being used by the HMAC algorithm.",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };
    for (const Case& c : cases) {
        SECTION(c.name) {
            std::string expected = c.mac;
            CHECK(hex(hmac_sha256(c.key, c.data), expected.size() / 2) == expected);
        }
    }
    SECTION("an empty key and empty data are still an HMAC, not an error") {
        // HMAC-SHA256("", "") is a fixed, well-known value.
        CHECK(hex(hmac_sha256("", "")) ==
              "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
    }
}

// ---- the shared vectors ------------------------------------------------------

TEST_CASE("grant: every shared vector gets its expected verdict", "[grant]") {
    VectorFile file = read_vectors();
    KeyRing ring = ring_from(file.key_text);
    REQUIRE(ring.size() == 2);
    REQUIRE(file.vectors.size() >= 50);

    std::set<std::string> names;
    std::set<std::string> verdicts;
    for (const Vector& v : file.vectors) {
        INFO("vector " << v.name);
        CHECK(names.insert(v.name).second);  // names are unique
        verdicts.insert(v.expect);
        Grant grant;
        grant.kid = "untouched";
        Verdict got = verify(ring, v.token, v.now, &grant);
        CHECK(std::string(reason(got)) == reason(verdict_named(v.expect)));
        if (verdict_named(v.expect) == Verdict::ok) {
            REQUIRE(v.has_channels);
            CHECK(grant.channels == v.channels);
            CHECK(grant.expires > v.now);
            CHECK(ring.find(grant.kid) != nullptr);
        } else {
            CHECK(grant.kid == "untouched");
            CHECK(grant.channels.empty());
        }
    }
    CHECK(verdicts ==
          std::set<std::string>{"ok", "malformed", "unknown_key", "bad_signature", "expired"});
}

TEST_CASE("grant: sign reproduces every ok vector byte for byte", "[grant]") {
    // make_vectors.py built these tokens by hand; equal tokens mean the C++
    // signer and the Python one (test_grant.py does the same) share one format.
    VectorFile file = read_vectors();
    KeyRing ring = ring_from(file.key_text);
    int checked = 0;
    for (const Vector& v : file.vectors) {
        if (v.expect != "ok") continue;
        INFO("vector " << v.name);
        Grant grant;
        REQUIRE(verify(ring, v.token, v.now, &grant) == Verdict::ok);
        const Key* key = ring.find(grant.kid);
        REQUIRE(key != nullptr);
        CHECK(sign(*key, v.channels, grant.expires) == v.token);
        ++checked;
    }
    CHECK(checked >= 5);
}

// ---- sign / verify -----------------------------------------------------------

TEST_CASE("grant: a signed grant verifies until it expires, then is refused", "[grant]") {
    KeyRing ring = ring_from("main " + secret_a + "\n");
    const std::vector<std::string> channels = {"notifications_user_7", "room 12", "é"};
    const std::string token = sign(ring.signing(), channels, 1000);

    CHECK(token.size() <= kMaxTokenSize);
    CHECK(token.find_first_not_of(
              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.") ==
          std::string::npos);

    Grant grant;
    REQUIRE(verify(ring, token, 999, &grant) == Verdict::ok);
    CHECK(grant.channels == channels);
    CHECK(grant.expires == 1000);
    CHECK(grant.kid == "main");
    CHECK(verify(ring, token, 999, nullptr) == Verdict::ok);

    SECTION("at and past the expiry it is expired") {
        CHECK(verify(ring, token, 1000, nullptr) == Verdict::expired);
        CHECK(verify(ring, token, 1001, nullptr) == Verdict::expired);
    }
    SECTION("another ring with the same kid but another secret refuses it") {
        KeyRing other = ring_from("main " + secret_b + "\n");
        CHECK(verify(other, token, 999, nullptr) == Verdict::bad_signature);
    }
    SECTION("any one-character edit is refused") {
        for (std::size_t i = 0; i < token.size(); ++i) {
            std::string edited = token;
            edited[i] = edited[i] == 'A' ? 'B' : 'A';
            INFO("position " << i);
            CHECK(verify(ring, edited, 999, nullptr) != Verdict::ok);
        }
    }
    SECTION("every truncation is refused") {
        for (std::size_t n = 0; n < token.size(); ++n) {
            INFO("length " << n);
            CHECK(verify(ring, token.substr(0, n), 999, nullptr) != Verdict::ok);
        }
    }
}

TEST_CASE("grant: sign refuses bad channels, keys, expiries and sizes", "[grant]") {
    const Key key{"main", std::string(32, '\x01')};
    CHECK_NOTHROW(sign(key, {std::string(256, 'x')}, 1));
    CHECK_NOTHROW(sign(key, {"news"}, 0));
    CHECK_NOTHROW(sign(key, {"news"}, std::numeric_limits<int64_t>::max()));

    SECTION("bad channels") {
        CHECK_THROWS_AS(sign(key, {}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(key, {""}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(key, {std::string(257, 'x')}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(key, {"a,b"}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(key, {"a\rb"}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(key, {"a\nb"}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(key, {std::string("a\0b", 3)}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(key, {"m0.slot.3"}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(key, {"news", "news"}, 1), std::invalid_argument);
    }
    SECTION("a channel that begins or ends with SP or HTAB") {
        // The hold trims OWS around M0-Channel's commas: such a grant would
        // hold another name than the one it was signed for.
        for (const char* name : {" admin", "admin ", "\tadmin", "admin\t", " ", "\t"}) {
            INFO("'" << name << "'");
            CHECK_FALSE(valid_channel(name));
            CHECK_THROWS_AS(sign(key, {"news", name}, 1), std::invalid_argument);
        }
        CHECK(valid_channel("salle de r\xc3\xa9union"));
        CHECK(valid_channel("a\tb"));
    }
    SECTION("bad keys and expiries") {
        CHECK_THROWS_AS(sign(Key{"", key.secret}, {"news"}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(Key{"a.b", key.secret}, {"news"}, 1), std::invalid_argument);
        CHECK_THROWS_AS(sign(Key{std::string(33, 'k'), key.secret}, {"news"}, 1),
                        std::invalid_argument);
        CHECK_THROWS_AS(sign(Key{"main", std::string(31, 'x')}, {"news"}, 1),
                        std::invalid_argument);
        CHECK_THROWS_AS(sign(key, {"news"}, -1), std::invalid_argument);
    }
    SECTION("a token that would pass 4096 bytes") {
        std::vector<std::string> many;
        for (int i = 0; i < 13; ++i) many.push_back(std::to_string(i) + std::string(250, 'x'));
        CHECK_THROWS_AS(sign(key, many, 1), std::invalid_argument);
    }
}

TEST_CASE("grant: verify refuses oversized tokens before decoding them", "[grant]") {
    KeyRing ring = ring_from("main " + secret_a + "\n");
    std::string huge(kMaxTokenSize + 1, 'A');
    CHECK(verify(ring, huge, 0, nullptr) == Verdict::malformed);
    CHECK(verify(ring, std::string(1 << 20, 'A') + "." + std::string(43, 'A'), 0, nullptr) ==
          Verdict::malformed);
}

TEST_CASE("grant: reason gives one distinct phrase per verdict", "[grant]") {
    std::set<std::string> phrases;
    for (Verdict v : {Verdict::ok, Verdict::malformed, Verdict::unknown_key, Verdict::bad_signature,
                      Verdict::expired}) {
        std::string phrase = reason(v);
        CHECK_FALSE(phrase.empty());
        CHECK(phrase.find('\n') == std::string::npos);
        phrases.insert(phrase);
    }
    CHECK(phrases.size() == 5);
    CHECK(std::string(reason(Verdict::expired)) == "grant expired");
}

// ---- rotation ----------------------------------------------------------------

TEST_CASE("grant: a grant signed by a rotated-out key verifies while its key is in the ring",
          "[grant]") {
    KeyRing before = ring_from("old " + secret_a + "\n");
    const std::string old_token = sign(before.signing(), {"news"}, 5000);

    KeyRing during = ring_from("new " + secret_b + "\nold " + secret_a + "\n");
    CHECK(during.signing().id == "new");
    CHECK(verify(during, old_token, 100, nullptr) == Verdict::ok);
    const std::string new_token = sign(during.signing(), {"news"}, 5000);
    CHECK(new_token != old_token);
    CHECK(verify(during, new_token, 100, nullptr) == Verdict::ok);

    KeyRing after = ring_from("new " + secret_b + "\n");
    CHECK(verify(after, old_token, 100, nullptr) == Verdict::unknown_key);
    CHECK(verify(after, new_token, 100, nullptr) == Verdict::ok);
}

// ---- key files -----------------------------------------------------------------

TEST_CASE("grant: a key file loads with comments, blank lines, tabs and CRLF", "[grant]") {
    TempFile file("# grant keys, newest first\n\n  k2026\t" + secret_a + "  \r\n" +
                  "   # rotated out next month\n" + "k2025 " + secret_b + "\n" + "K_3-x " +
                  std::string(80, 'C'));  // no final newline, upper-case hex
    std::string error;
    std::optional<KeyRing> ring = KeyRing::load_file(file.path.string(), error);
    INFO(error);
    REQUIRE(ring.has_value());
    CHECK(ring->size() == 3);
    CHECK(ring->signing().id == "k2026");
    CHECK(ring->signing().secret == std::string(32, '\xaa'));
    REQUIRE(ring->find("K_3-x") != nullptr);
    CHECK(ring->find("K_3-x")->secret == std::string(40, '\xcc'));
    CHECK(ring->find("k2025") != nullptr);
    CHECK(ring->find("k2024") == nullptr);
    CHECK(ring->find("") == nullptr);
}

TEST_CASE("grant: key file loading reports each problem on one line", "[grant]") {
    SECTION("a missing file") {
        std::string error;
        CHECK_FALSE(KeyRing::load_file("/nonexistent/m0-grant-keys", error).has_value());
        CHECK(error == "/nonexistent/m0-grant-keys: cannot open: No such file or directory");
    }
    SECTION("a directory") {
        std::string error;
        CHECK_FALSE(
            KeyRing::load_file(std::filesystem::temp_directory_path().string(), error).has_value());
        CHECK_FALSE(error.empty());
    }
    SECTION("a short key, with its line number") {
        std::string error = load_error("# keys\nk1 " + std::string(62, 'a') + "\n");
        CHECK(error.find("line 2: secret is 31 bytes, need at least 32") != std::string::npos);
    }
    SECTION("bad hex") {
        CHECK(load_error("k1 " + std::string(63, 'a') + "g\n").find("line 1: secret is not hex") !=
              std::string::npos);
        CHECK(load_error("k1 " + std::string(65, 'a') + "\n").find("line 1: secret is not hex") !=
              std::string::npos);  // odd number of digits
    }
    SECTION("a duplicate id") {
        std::string error = load_error("k1 " + secret_a + "\nk2 " + secret_b + "\nk1 " + secret_c);
        CHECK(error.find("line 3: duplicate key id k1") != std::string::npos);
    }
    SECTION("an empty file, or only comments") {
        CHECK(load_error("").find(": no keys") != std::string::npos);
        CHECK(load_error("# nothing yet\n\n   \n").find(": no keys") != std::string::npos);
    }
    SECTION("a line that is not two fields, or a bad id") {
        CHECK(load_error("k1\n").find("line 1: expected `KID SECRET_HEX`") != std::string::npos);
        CHECK(load_error("k1 " + secret_a + " extra\n").find("line 1: expected") !=
              std::string::npos);
        CHECK(load_error("k.1 " + secret_a + "\n").find("line 1: bad key id") != std::string::npos);
        CHECK(load_error(std::string(33, 'k') + " " + secret_a + "\n").find("line 1: bad key id") !=
              std::string::npos);
    }
}

// ---- encoding helpers ------------------------------------------------------------

TEST_CASE("grant: base64url round-trips the RFC 4648 examples without padding", "[grant]") {
    const std::vector<std::pair<std::string, std::string>> examples = {
        {"", ""},
        {"f", "Zg"},
        {"fo", "Zm8"},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg"},
        {"fooba", "Zm9vYmE"},
        {"foobar", "Zm9vYmFy"},
        {"\xfb\xff", "-_8"},  // the two characters that differ from base64
    };
    for (const auto& [bytes, text] : examples) {
        INFO(text);
        CHECK(detail::base64url_encode(bytes) == text);
        std::optional<std::string> back = detail::base64url_decode(text);
        REQUIRE(back.has_value());
        CHECK(*back == bytes);
    }
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    for (std::size_t n = 0; n <= all.size(); ++n) {
        std::string part = all.substr(0, n);
        CHECK(detail::base64url_decode(detail::base64url_encode(part)) == part);
    }
}

TEST_CASE("grant: base64url decoding refuses every non-canonical spelling", "[grant]") {
    CHECK_FALSE(detail::base64url_decode("Zg==").has_value());   // padding
    CHECK_FALSE(detail::base64url_decode("Zm8=").has_value());   // padding
    CHECK_FALSE(detail::base64url_decode("Zh").has_value());     // trailing bits set ("f" is Zg)
    CHECK_FALSE(detail::base64url_decode("Zm9").has_value());    // trailing bits set ("fo" is Zm8)
    CHECK_FALSE(detail::base64url_decode("Z").has_value());      // length 1 mod 4
    CHECK_FALSE(detail::base64url_decode("Zm9vY").has_value());  // length 1 mod 4
    CHECK_FALSE(detail::base64url_decode("Zm9vA").has_value());  // length 1 mod 4, zero bits
    CHECK_FALSE(detail::base64url_decode("A").has_value());
    CHECK_FALSE(detail::base64url_decode("+/8").has_value());     // standard alphabet
    CHECK_FALSE(detail::base64url_decode("Zm9v\n").has_value());  // whitespace
    CHECK_FALSE(detail::base64url_decode("Zm 9v").has_value());
    CHECK_FALSE(detail::base64url_decode(std::string("Zm\0v", 4)).has_value());
    CHECK_FALSE(detail::base64url_decode("Zm9v.").has_value());
}

TEST_CASE("grant: hex_decode takes either case and refuses odd or non-hex text", "[grant]") {
    CHECK(detail::hex_decode("") == std::string());
    CHECK(detail::hex_decode("00ffAbcD") == std::string("\x00\xff\xab\xcd", 4));
    CHECK_FALSE(detail::hex_decode("abc").has_value());
    CHECK_FALSE(detail::hex_decode("zz").has_value());
    CHECK_FALSE(detail::hex_decode("0x").has_value());
    CHECK_FALSE(detail::hex_decode(" 0").has_value());
}

TEST_CASE("grant: payloads decode only when canonical", "[grant]") {
    const std::vector<std::string> channels = {"a", "b"};
    std::string payload = detail::encode_payload("k", 42, channels);
    CHECK(payload == "v1\nk\n42\na,b");
    std::optional<Grant> grant = detail::decode_payload(payload);
    REQUIRE(grant.has_value());
    CHECK(grant->channels == channels);
    CHECK(grant->expires == 42);
    CHECK(grant->kid == "k");
    CHECK(detail::decode_payload("v1\nk\n0\na").has_value());
    CHECK(detail::decode_payload("v1\nk\n9223372036854775807\na").has_value());

    for (const char* bad : {"v1\nk\n042\na",
                            "v1\nk\n42\n",
                            "v1\nk\n42\na,,b",
                            "v1\nk\n42\na,b,a",
                            "v1\nk\n42\na,",
                            "v1\nk\n42",
                            "v1\nk\n\na",
                            "v1\n\n42\na",
                            "v1\nk\n9223372036854775808\na",
                            "v1\nk\n-1\na",
                            "v2\nk\n42\na",
                            "v1 \nk\n42\na",
                            "v1\nk\n42\na\n",
                            "v1\nk\n42\nm0.slot.1",
                            "v1\nk\n42\n a",
                            "v1\nk\n42\na ",
                            "v1\nk\n42\na, b",
                            "v1\nk\n42\na\t,b",
                            "v1\nk\n42\n ",
                            ""}) {
        INFO(bad);
        CHECK_FALSE(detail::decode_payload(bad).has_value());
    }
}

TEST_CASE(
    "grant: a shared key ring replaced whole (SIGHUP) verifies with the new keys, while a "
    "verifier holding the old ring keeps it intact",
    "[grant]") {
    std::string err;
    auto old_ring = KeyRing::from_text("old " + std::string(64, 'b') + "\n", err);
    auto new_ring = KeyRing::from_text(
        "new " + std::string(64, 'a') + "\nold " + std::string(64, 'b') + "\n", err);
    REQUIRE(old_ring);
    REQUIRE(new_ring);
    const int64_t now = 1700000000;
    std::string new_token = sign(*new_ring->find("new"), {"a"}, now + 60);
    SharedKeyRing shared(*old_ring);
    auto held = shared.get();  // a verifier in the middle of a grant
    CHECK(verify(*shared.get(), new_token, now, nullptr) == Verdict::unknown_key);
    shared.set(*new_ring);
    CHECK(verify(*shared.get(), new_token, now, nullptr) == Verdict::ok);
    CHECK(shared.get()->size() == 2);
    CHECK(held->size() == 1);  // still the ring it took
    CHECK(verify(*held, new_token, now, nullptr) == Verdict::unknown_key);
}
