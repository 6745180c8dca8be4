#include "http/ws_deflate.hpp"

#include <zlib.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "http/websocket.hpp"

namespace m0::http::ws {

namespace {

constexpr std::string_view kTail("\x00\x00\xff\xff", 4);  // §7.2.1's

// Unquotes a parameter's value (§7.1: a token, or a quoted string of one).
std::string_view unquote(std::string_view v) {
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') return v.substr(1, v.size() - 2);
    return v;
}

bool window_bits(std::string_view v) {
    return v.size() >= 1 && v.size() <= 2 && v.find_first_not_of("0123456789") == v.npos &&
           std::stoi(std::string(v)) >= 8 && std::stoi(std::string(v)) <= 15 && v.front() != '0';
}

// Whether the server takes one permessage-deflate offer (its parameters).
bool acceptable(std::string_view params) {
    bool seen[4] = {};
    static constexpr std::string_view kNames[4] = {
        "server_no_context_takeover", "client_no_context_takeover", "server_max_window_bits",
        "client_max_window_bits"};
    while (!params.empty()) {
        const size_t semi = params.find(';');
        std::string_view param = trim_ows(params.substr(0, semi));
        params = semi == params.npos ? std::string_view() : params.substr(semi + 1);
        const size_t eq = param.find('=');
        std::string_view name = trim_ows(param.substr(0, eq));
        std::optional<std::string_view> value;
        if (eq != param.npos) value = unquote(trim_ows(param.substr(eq + 1)));
        size_t k = 0;
        while (k < 4 && kNames[k] != name) ++k;
        if (k == 4 || seen[k]) return false;  // §7.1: unknown or repeated: declined
        seen[k] = true;
        if (k < 2 && value) return false;  // the no_context_takeover ones take no value
        if (k == 2 && !(value && window_bits(*value) && *value == "15")) return false;
        if (k == 3 && value && !window_bits(*value)) return false;
    }
    return true;
}

struct Deflater {
    z_stream z{};
    bool ok = false;
    Deflater() {
        ok =
            deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK;
    }
    ~Deflater() {
        if (ok) deflateEnd(&z);
    }
};

}  // namespace

std::string negotiate_deflate(const Headers& request) {
    for (const std::string& offer : list_items(request, "Sec-WebSocket-Extensions")) {
        std::string_view o = offer;
        const size_t semi = o.find(';');
        if (trim_ows(o.substr(0, semi)) != "permessage-deflate") continue;
        if (acceptable(semi == o.npos ? std::string_view() : o.substr(semi + 1)))
            return "permessage-deflate; server_no_context_takeover";
    }
    return {};
}

std::string deflate_message(std::string_view payload) {
    thread_local Deflater d;  // reset for each message: no context is kept
    std::string out;
    if (!d.ok) return out;
    deflateReset(&d.z);
    d.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(payload.data()));
    d.z.avail_in = static_cast<uInt>(payload.size());
    uint8_t buf[16384];
    do {
        d.z.next_out = buf;
        d.z.avail_out = sizeof buf;
        deflate(&d.z, Z_SYNC_FLUSH);
        out.append(reinterpret_cast<char*>(buf), sizeof buf - d.z.avail_out);
    } while (d.z.avail_out == 0);
    if (std::string_view(out).ends_with(kTail)) out.resize(out.size() - kTail.size());
    return out;
}

std::string deflate_frame(std::string_view frame) {
    if (frame.size() < 2 || (uint8_t(frame[0]) & 0x08) != 0) return std::string(frame);
    const uint8_t len7 = uint8_t(frame[1]) & 0x7F;
    const size_t header = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0);
    std::string out = server_frame(static_cast<Opcode>(uint8_t(frame[0]) & 0x0F),
                                   deflate_message(frame.substr(header)));
    out[0] = char(uint8_t(out[0]) | 0x40);  // RSV1: compressed (§6)
    return out;
}

struct Inflater::Stream {
    z_stream z{};
    bool ok = false;
};

Inflater::Inflater() : z_(std::make_unique<Stream>()) {
    z_->ok = inflateInit2(&z_->z, -15) == Z_OK;
}

Inflater::~Inflater() {
    if (z_->ok) inflateEnd(&z_->z);
}

Inflater::Result Inflater::inflate(std::string_view message, size_t limit, std::string& out) {
    out.clear();
    if (!z_->ok) return Result::bad;
    uint8_t buf[16384];
    for (std::string_view part : {message, kTail}) {
        z_->z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(part.data()));
        z_->z.avail_in = static_cast<uInt>(part.size());
        do {
            z_->z.next_out = buf;
            z_->z.avail_out = sizeof buf;
            const int rc = ::inflate(&z_->z, Z_SYNC_FLUSH);
            if (rc != Z_OK && rc != Z_BUF_ERROR && rc != Z_STREAM_END) return Result::bad;
            const size_t n = sizeof buf - z_->z.avail_out;
            if (out.size() + n > limit) return Result::too_big;
            out.append(reinterpret_cast<char*>(buf), n);
            if (rc == Z_STREAM_END) {
                // A final block ends the stream: the next message starts a new one.
                inflateReset(&z_->z);
                break;
            }
            if (rc == Z_BUF_ERROR && z_->z.avail_in == 0) break;
        } while (z_->z.avail_in > 0 || z_->z.avail_out == 0);
    }
    return Result::ok;
}

}  // namespace m0::http::ws
