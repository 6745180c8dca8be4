// m0::grant — authorization that travels: HMAC-SHA256 grants.
//
// DESIGN
// A Django view authorizes a user (session, membership query), then hands the
// browser a stream URL into the mojo mount carrying a grant. The mount checks
// the grant here, without asking Python: which channels, until when, signed by
// which of the keys both sides share. Python signs with the standard library
// (src/wsgi/m0/grant.py); src/grant/vectors.txt, generated once by
// src/grant/make_vectors.py, pins the format for both sides.
//
// Threads: every function here is pure; a KeyRing is immutable once loaded, so
// any thread may verify against a shared const KeyRing without a lock.
//
// TOKEN FORMAT (version 1)
//
//   token   = B64(payload) "." B64(mac)
//   payload = "v1" LF kid LF expires LF channel *( "," channel )
//   mac     = HMAC-SHA256(secret of the key named kid, payload)     ; 32 bytes
//
//   B64      base64url (RFC 4648 §5), alphabet A-Z a-z 0-9 - _, no "=" padding,
//            unused trailing bits zero: every byte string has exactly one text.
//   LF       one byte 0x0A.
//   kid      [A-Za-z0-9_-]{1,32}: the id of the key in the key file.
//   expires  unix seconds, decimal, "0" or [1-9][0-9]*, at most INT64_MAX.
//            The grant is valid while now < expires.
//   channel  1..256 bytes, none of CR, LF, NUL or ",", neither first nor last
//            byte SP or HTAB (a hold trims those around M0-Channel's commas,
//            so such a name would be held as another), not starting with the
//            reserved prefix "m0.slot." (the per-slot namespace no client may
//            subscribe to); no channel twice in one grant. Order is kept.
//   token    at most 4096 bytes. Only URL-safe characters: it goes into a
//            query string as is (`/native/live?grant=TOKEN`).
//
// Example (vector valid-single-channel, test key k2026 of vectors.txt): the
// payload "v1\nk2026\n1700000600\nnews" gives the token
//   djEKazIwMjYKMTcwMDAwMDYwMApuZXdz.VPh4ZPonH-ct5tQvOmQmLG9aexpfZRT9koNLhyTXE0I
//
// Verification order, which fixes the verdict when several things are wrong:
//   1. size > 4096, not exactly one ".", either part not canonical base64url,
//      mac not 32 bytes, payload not canonical as above        -> malformed
//   2. kid not in the ring                                      -> unknown_key
//   3. mac differs (CRYPTO_memcmp, constant time)               -> bad_signature
//   4. expires <= now                                           -> expired
// so an unauthenticated token is never reported "expired", and a channel-,
// expiry- or kid-edited payload fails the MAC.
//
// KEY FILE (--grant-key-file, M0_GRANT_KEY_FILE on the Python side)
//   One key per line: `KID SECRET_HEX`, separated by spaces or tabs; the
//   secret is 64 or more hex digits (32+ bytes, either case). Blank lines and
//   lines whose first non-blank character is '#' are ignored. The FIRST key
//   signs; every key verifies, so rotation is: put the new key first, keep
//   the old one below it until the grants it signed have expired, remove it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace m0::grant {

inline constexpr std::size_t kMaxTokenSize = 4096;                      // bytes of the whole token
inline constexpr std::size_t kMaxChannelSize = 256;                     // bytes of one channel name
inline constexpr std::size_t kMaxKeyIdSize = 32;                        // bytes of a kid
inline constexpr std::size_t kMinSecretSize = 32;                       // bytes of a key secret
inline constexpr std::string_view kReservedChannelPrefix = "m0.slot.";  // spec: refused names
inline constexpr std::string_view kPayloadVersion = "v1";

// The outcome of verify(). Compared as values, never as strings.
enum class Verdict { ok, malformed, unknown_key, bad_signature, expired };

// Returns one short lower-case phrase for a 403 body or a log line, e.g.
// "grant expired". Never null; an out-of-range value gives "bad grant".
const char* reason(Verdict verdict);

struct Key {
    std::string id;      // kid: [A-Za-z0-9_-]{1,32}
    std::string secret;  // raw bytes, >= kMinSecretSize
};

// The keys that sign and verify grants, loaded once at start-up and then
// only read (any thread). Always holds at least one key.
class KeyRing {
  public:
    // Loads a key file (format above). Returns nullopt and sets `error` to one
    // line when: the file cannot be opened or read ("PATH: cannot open: why"),
    // or from_text() refuses its content ("PATH: line N: why", "PATH: no keys").
    static std::optional<KeyRing> load_file(const std::string& path, std::string& error);

    // Parses key-file text. Returns nullopt and sets `error` to one line on the
    // first problem: a line that is not exactly two fields, a bad key id, a
    // secret that is not hex or has an odd number of digits, a secret shorter
    // than 32 bytes, a duplicate key id (each "line N: ..."), or no key at all.
    static std::optional<KeyRing> from_text(std::string_view text, std::string& error);

    // Returns the key named `id`, or nullptr when there is none.
    const Key* find(std::string_view id) const;

    // Returns the signing (current) key: the first one in the file.
    const Key& signing() const { return keys_.front(); }

    // Returns the number of keys; always >= 1.
    std::size_t size() const { return keys_.size(); }

  private:
    explicit KeyRing(std::vector<Key> keys) : keys_(std::move(keys)) {}
    std::vector<Key> keys_;  // file order; immutable after load
};

// A verified grant: what verify() fills in on Verdict::ok.
struct Grant {
    std::vector<std::string> channels;  // in token order, no duplicates
    int64_t expires = 0;                // unix seconds
    std::string kid;                    // the key that signed it
};

// Returns HMAC-SHA256(key, data) (RFC 2104, FIPS 180-4). Any key length.
// Throws std::runtime_error only if OpenSSL fails (out of memory) or the key
// is longer than INT_MAX bytes.
std::array<unsigned char, 32> hmac_sha256(std::string_view key, std::string_view data);

// Returns true when `name` may be a grant channel: 1..256 bytes, no CR, LF,
// NUL or comma, no SP or HTAB as its first or last byte, not starting with
// kReservedChannelPrefix. The same rule as bus::check_channel().
bool valid_channel(std::string_view name);

// Returns true when `id` may be a key id: [A-Za-z0-9_-]{1,32}.
bool valid_key_id(std::string_view id);

// Returns the token granting `channels` until `expires`, signed with `key`.
// Deterministic: the same arguments give the same token, byte for byte, as
// the Python side. Throws std::invalid_argument when: `channels` is empty,
// a channel is not valid_channel(), a channel repeats, `expires` < 0, the key
// id is not valid_key_id(), the secret is shorter than 32 bytes, or the token
// would exceed kMaxTokenSize.
std::string sign(const Key& key, const std::vector<std::string>& channels, int64_t expires);

// Checks `token` against `keys` at time `now` (unix seconds). Returns
// Verdict::ok and, when `out` is not null, fills *out; any other verdict
// leaves *out untouched. Errors (see "Verification order" above):
// malformed, unknown_key, bad_signature, expired. Throws only when memory
// runs out (std::bad_alloc, or std::runtime_error from hmac_sha256).
Verdict verify(const KeyRing& keys, std::string_view token, int64_t now, Grant* out);

// The key ring in use, replaced whole when the key file is read again
// (SIGHUP): a verifier takes the ring current at that moment and keeps it for
// the one grant. Any thread.
class SharedKeyRing {
  public:
    explicit SharedKeyRing(KeyRing keys)
        : ring_(std::make_shared<const KeyRing>(std::move(keys))) {}
    std::shared_ptr<const KeyRing> get() const {
        std::lock_guard<std::mutex> lock(mu_);
        return ring_;
    }
    void set(KeyRing keys) {
        auto next = std::make_shared<const KeyRing>(std::move(keys));
        std::lock_guard<std::mutex> lock(mu_);
        ring_.swap(next);  // the old ring is freed outside the lock, by its last reader
    }

  private:
    mutable std::mutex mu_;
    std::shared_ptr<const KeyRing> ring_;  // guarded by mu_
};

namespace detail {

// Returns the base64url text (RFC 4648 §5) of `bytes`, without padding.
std::string base64url_encode(std::string_view bytes);

// Returns the bytes of canonical unpadded base64url `text`; nullopt when it
// holds a character outside A-Z a-z 0-9 - _ (so also "=" padding), its
// length is 1 mod 4, or the unused trailing bits of the last character are
// not zero (a second spelling of the same bytes). "" decodes to "".
std::optional<std::string> base64url_decode(std::string_view text);

// Returns the bytes of hex `text` (either case); nullopt on an odd length or
// a non-hex character. "" decodes to "".
std::optional<std::string> hex_decode(std::string_view text);

// Returns the canonical payload for these fields (no validation).
std::string encode_payload(std::string_view kid, int64_t expires,
                           const std::vector<std::string>& channels);

// Parses a payload; returns nullopt unless it is exactly the canonical
// encoding of valid fields (version, kid, expires, channels as above).
std::optional<Grant> decode_payload(std::string_view payload);

}  // namespace detail
}  // namespace m0::grant
