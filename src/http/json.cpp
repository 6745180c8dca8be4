#include "http/json.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "grant/base64.hpp"
#include "http/chars.hpp"
#include "http/parser.hpp"

namespace m0::http {

namespace {

using nlohmann::json;

// Parses `body` into `out`; false with a reason. The parser refuses trailing
// bytes (whitespace aside), bytes that are not UTF-8 and lone surrogates.
bool parse(std::string_view body, json& out, std::string& err) {
    // nlohmann's lexer reads a NUL byte as the end of the input, so a valid
    // value then NUL then anything would pass. RFC 8259 allows a raw NUL
    // nowhere (in a string it must be escaped): refused here.
    if (auto nul = body.find('\0'); nul != std::string_view::npos) {
        err = "bad JSON (NUL byte at " + std::to_string(nul + 1) + ")";
        return false;
    }
    try {
        out = json::parse(body.begin(), body.end());
        return true;
    } catch (const json::parse_error& e) {
        // e.byte counts from 1 and names the byte the parser stopped at: on a
        // sequence that is not UTF-8, that byte or one of the 3 before it
        // (a sequence cut short stops on the ASCII byte after it).
        bool not_utf8 = false;
        for (size_t k = 0; k < 4 && k < e.byte; ++k) {
            size_t at = e.byte - 1 - k;
            if (at < body.size() && static_cast<unsigned char>(body[at]) >= 0x80) not_utf8 = true;
        }
        err = std::string(not_utf8 ? "JSON strings must be UTF-8" : "bad JSON") + " (byte " +
              std::to_string(e.byte) + ")";
        return false;
    } catch (const json::out_of_range&) {
        // Found by fuzz_json (regress-number-overflow): a number past a
        // double's range is out_of_range 406, not a parse_error.
        err = "bad JSON (a number out of range)";
        return false;
    } catch (const json::exception&) {
        err = "bad JSON";
        return false;
    }
}

// The string at `key` of object `o`: true and `out` set, or true and `out`
// untouched when absent or null; false with `err` for any other type.
bool optional_string(const json& o, const char* key, std::string& out, std::string& err) {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return true;
    if (!it->is_string()) {
        err = std::string("'") + key + "' must be a string";
        return false;
    }
    out = it->get_ref<const std::string&>();
    return true;
}

// The old admin shape: a flat object of strings (or nulls), `channel` given.
bool flat_value(const json& j, std::string& err) {
    if (!j.is_object()) {
        err = "body must be a JSON object";
        return false;
    }
    for (const auto& [k, v] : j.items())
        if (!v.is_string() && !v.is_null()) {
            err = "JSON values must be strings";
            return false;
        }
    auto channel = j.find("channel");
    if (channel == j.end() || channel->is_null()) {
        err = "missing channel";
        return false;
    }
    return true;
}

bool flat_object(std::string_view body, json& j, std::string& err) {
    return parse(body, j, err) && flat_value(j, err);
}

bool event_of(const json& j, AdminEvent& out, std::string& err) {
    auto data = j.find("data");
    out.has_data = data != j.end() && !data->is_null();
    return optional_string(j, "channel", out.channel, err) &&
           optional_string(j, "data", out.data, err) && optional_string(j, "event", out.event, err);
}

// A string, or base64 bytes under `key`-bin: `text` names the first, and
// exactly one of the two may be given (neither: `out` untouched).
bool text_or_bin(const json& o, const char* text, std::string& out, std::string& err) {
    const std::string bin_key = std::string(text) + "-bin";
    auto t = o.find(text);
    auto b = o.find(bin_key);
    if (t != o.end() && b != o.end()) {
        err = std::string("give one of '") + text + "' and '" + bin_key + "'";
        return false;
    }
    if (t != o.end()) {
        if (!t->is_string()) {
            err = std::string("'") + text + "' must be a string";
            return false;
        }
        out = t->get_ref<const std::string&>();
    } else if (b != o.end()) {
        auto bytes = b->is_string() ? grant::base64_decode(b->get_ref<const std::string&>(),
                                                           grant::Alphabet::standard)
                                    : std::nullopt;
        if (!bytes) {
            err = "'" + bin_key + "' must be a base64 string";
            return false;
        }
        out = std::move(*bytes);
    }
    return true;
}

bool add_header(const json& name, const json& value, ResponseItem& out, std::string& err) {
    if (!name.is_string() || !value.is_string()) {
        err = "http-response headers must be strings";
        return false;
    }
    const auto& n = name.get_ref<const std::string&>();
    const auto& v = value.get_ref<const std::string&>();
    if (!is_token(n)) {
        err = "http-response header name '" + n + "' is not a token";
        return false;
    }
    if (v.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
        err = "http-response header '" + n + "' has CR, LF or NUL in its value";
        return false;
    }
    out.headers.emplace_back(n, v);
    return true;
}

bool decode_response(const json& r, ResponseItem& out, std::string& err) {
    if (!r.is_object()) {
        err = "'http-response' must be an object";
        return false;
    }
    if (r.contains("body-patch")) {
        err = "http-response 'body-patch' is not supported (send 'body')";
        return false;
    }
    if (auto c = r.find("code"); c != r.end()) {
        if (!c->is_number_integer() || c->get<int64_t>() < 200 || c->get<int64_t>() > 599) {
            err = "http-response 'code' must be a whole number from 200 to 599";
            return false;
        }
        out.code = static_cast<int>(c->get<int64_t>());
    }
    std::string reason;  // checked for type only: the status's own phrase is sent
    if (!optional_string(r, "reason", reason, err)) return false;
    if (auto h = r.find("headers"); h != r.end()) {
        if (h->is_object()) {
            for (auto it = h->begin(); it != h->end(); ++it)
                if (!add_header(json(it.key()), it.value(), out, err)) return false;
        } else if (h->is_array()) {
            for (const auto& pair : *h) {
                if (!pair.is_array() || pair.size() != 2) {
                    err = "http-response headers: each a [name, value] pair";
                    return false;
                }
                if (!add_header(pair[0], pair[1], out, err)) return false;
            }
        } else {
            err = "http-response 'headers' must be an object or a list of pairs";
            return false;
        }
    }
    return text_or_bin(r, "body", out.body, err);
}

// `served`: the item has a format served here (http-stream or http-response).
// A ws-message format: {"content": STRING} or {"content-bin": BASE64}, or
// {"action": "close"} (`close` set).
bool decode_ws_message(const json& ws, PushpinItem& out, bool& close, std::string& err) {
    if (!ws.is_object()) {
        err = "'ws-message' must be an object";
        return false;
    }
    std::string action = "send";
    if (!optional_string(ws, "action", action, err)) return false;
    close = action == "close";
    if (close) return true;
    if (action != "send") {
        err = "ws-message action '" + action + "' is not supported (send or close)";
        return false;
    }
    if (ws.contains("content") == ws.contains("content-bin")) {
        err = "ws-message needs one of 'content' and 'content-bin'";
        return false;
    }
    out.ws_binary = ws.contains("content-bin");
    out.ws.emplace();
    return text_or_bin(ws, "content", *out.ws, err);
}

bool decode_item(const json& item, PushpinItem& out, bool& served, std::string& err) {
    if (!item.is_object()) {
        err = "each item must be a JSON object";
        return false;
    }
    auto ch = item.find("channel");
    if (ch == item.end() || !ch->is_string()) {
        err = "each item needs a string 'channel'";
        return false;
    }
    out.channel = ch->get_ref<const std::string&>();
    std::string ignored;  // the publisher's ids: m0serve numbers events itself
    if (!optional_string(item, "id", ignored, err) ||
        !optional_string(item, "prev-id", ignored, err))
        return false;
    auto formats = item.find("formats");
    if (formats == item.end() || !formats->is_object()) {
        err = "each item needs an object 'formats'";
        return false;
    }
    auto response = formats->find("http-response");
    if (response != formats->end()) {
        out.response.emplace();
        if (!decode_response(*response, *out.response, err)) return false;
    }
    auto ws = formats->find("ws-message");
    bool ws_close = false;
    if (ws != formats->end() && !decode_ws_message(*ws, out, ws_close, err)) return false;
    auto stream = formats->find("http-stream");
    out.has_stream = stream != formats->end();
    served = out.has_stream || out.response.has_value() || out.ws.has_value() || ws_close;
    if (ws_close) {
        // pushpin-publish --close sends it beside http-stream's close: the
        // channel's holds are closed, whatever their transport.
        std::string stream_action = out.has_stream ? "send" : "close";
        if (out.has_stream && stream->is_object() &&
            !optional_string(*stream, "action", stream_action, err))
            return false;
        if (out.response || stream_action != "close") {
            err = "an item cannot both close (ws-message) and send or respond";
            return false;
        }
        out.action = PushpinItem::Action::close;
        out.has_stream = false;
        return true;
    }
    if (!out.has_stream) return true;
    if (!stream->is_object()) {
        err = "'http-stream' must be an object";
        return false;
    }
    std::string action = "send";
    if (!optional_string(*stream, "action", action, err)) return false;
    if (action == "close") {
        if (out.response || out.ws) {
            err =
                "an item cannot both close (http-stream) and respond (http-response) or send "
                "(ws-message)";
            return false;
        }
        out.action = PushpinItem::Action::close;
        return true;
    }
    if (action != "send") {
        err = "http-stream action '" + action + "' is not supported (send or close)";
        return false;
    }
    auto text = stream->find("content");
    auto bin = stream->find("content-bin");
    if ((text == stream->end()) == (bin == stream->end())) {
        err = "http-stream needs one of 'content' and 'content-bin'";
        return false;
    }
    if (text != stream->end()) {
        if (!text->is_string()) {
            err = "'content' must be a string";
            return false;
        }
        out.content = text->get_ref<const std::string&>();
        return true;
    }
    if (!bin->is_string()) {
        err = "'content-bin' must be a base64 string";
        return false;
    }
    auto bytes =
        grant::base64_decode(bin->get_ref<const std::string&>(), grant::Alphabet::standard);
    if (!bytes) {
        err = "'content-bin' is not base64";
        return false;
    }
    out.content = std::move(*bytes);
    return true;
}

}  // namespace

bool decode_publish(std::string_view body, AdminEvent& out, std::string& err) {
    json j;
    return flat_object(body, j, err) && event_of(j, out, err);
}

bool is_batch(std::string_view body) {
    size_t at = body.find_first_not_of(" \t\r\n");  // RFC 8259 §2: ws before the value
    return at != std::string_view::npos && body[at] == '[';
}

bool decode_publish_batch(std::string_view body, std::vector<AdminEvent>& out, std::string& err) {
    out.clear();
    json j;
    if (!parse(body, j, err)) return false;
    if (!j.is_array()) {
        err = "body must be a JSON array of events";
        return false;
    }
    out.reserve(j.size());
    for (const auto& item : j) {
        AdminEvent ev;
        if (!flat_value(item, err) || !event_of(item, ev, err)) {
            err = "event " + std::to_string(out.size()) + ": " + err;
            return false;
        }
        out.push_back(std::move(ev));
    }
    return true;
}

bool decode_close(std::string_view body, std::string& channel, std::string& err) {
    json j;
    return flat_object(body, j, err) && optional_string(j, "channel", channel, err);
}

bool decode_pushpin(std::string_view body, std::vector<PushpinItem>& items, size_t& skipped,
                    std::string& err) {
    items.clear();
    skipped = 0;
    json j;
    if (!parse(body, j, err)) return false;
    auto list = j.is_object() ? j.find("items") : j.end();
    if (list == j.end() || !list->is_array()) {
        err = "body must be a JSON object with an array 'items'";
        return false;
    }
    std::vector<PushpinItem> out;
    for (const auto& item : *list) {
        PushpinItem p;
        bool served = false;
        if (!decode_item(item, p, served, err)) {
            err = "item " + std::to_string(out.size() + skipped) + ": " + err;
            return false;
        }
        if (p.response && p.has_stream) p.response->stream = p.content;
        if (served)
            out.push_back(std::move(p));
        else
            ++skipped;
    }
    items = std::move(out);
    return true;
}

namespace {

void write_spaced(const nlohmann::ordered_json& v, std::string& out) {
    if (!v.is_object() && !v.is_array()) {
        out += v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
        return;
    }
    out += v.is_object() ? '{' : '[';
    for (auto it = v.begin(); it != v.end(); ++it) {
        if (it != v.begin()) out += ", ";
        if (v.is_object()) {
            write_spaced(it.key(), out);
            out += ": ";
        }
        write_spaced(*it, out);
    }
    out += v.is_object() ? '}' : ']';
}

}  // namespace

std::string encode_answer(const nlohmann::ordered_json& value) {
    std::string out;
    write_spaced(value, out);
    out += '\n';
    return out;
}

std::string encode_response_item(const ResponseItem& item) {
    nlohmann::json j = nlohmann::json::object();
    j["code"] = item.code;
    nlohmann::json headers = nlohmann::json::array();
    for (const auto& [k, v] : item.headers) headers.push_back({k, v});
    j["headers"] = std::move(headers);
    j["body-bin"] = grant::base64_encode(item.body);
    if (item.stream) j["stream-bin"] = grant::base64_encode(*item.stream);
    if (item.ws) j[item.ws_binary ? "ws-binary-bin" : "ws-bin"] = grant::base64_encode(*item.ws);
    return j.dump();
}

bool decode_response_item(std::string_view data, ResponseItem& out) {
    nlohmann::json j;
    std::string err;
    if (!parse(data, j, err) || !j.is_object()) return false;
    out = ResponseItem{};
    if (!decode_response(j, out, err)) return false;
    if (j.contains("stream-bin")) {
        std::string stream;
        if (!text_or_bin(j, "stream", stream, err)) return false;
        out.stream = std::move(stream);
    }
    for (const char* key : {"ws", "ws-binary"}) {
        if (!j.contains(std::string(key) + "-bin")) continue;
        std::string ws;
        if (!text_or_bin(j, key, ws, err)) return false;
        out.ws = std::move(ws);
        out.ws_binary = key[2] != '\0';
    }
    return true;
}

bool decode_ws_control(std::string_view body, woh::Control& out, std::string& err) {
    using Type = woh::Control::Type;
    json j;
    if (!parse(body, j, err)) return false;
    if (!j.is_object()) {
        err = "a control message must be a JSON object";
        return false;
    }
    std::string type;
    if (!optional_string(j, "type", type, err)) return false;
    static const std::pair<const char*, Type> kTypes[] = {
        {"subscribe", Type::subscribe}, {"unsubscribe", Type::unsubscribe},
        {"detach", Type::detach},       {"keep-alive", Type::keep_alive},
        {"set-meta", Type::set_meta},
    };
    auto known = std::find_if(std::begin(kTypes), std::end(kTypes),
                              [&](const auto& t) { return type == t.first; });
    if (known == std::end(kTypes)) {
        err = type.empty() ? "a control message without 'type'"
                           : "unknown control message type '" + type.substr(0, 32) + "'";
        return false;
    }
    out = woh::Control{};
    out.type = known->second;
    switch (out.type) {
        case Type::subscribe:
        case Type::unsubscribe:
            if (!optional_string(j, "channel", out.channel, err)) return false;
            if (out.channel.empty()) {
                err = type + " without a channel";
                return false;
            }
            return true;
        case Type::set_meta:
            if (!optional_string(j, "name", out.name, err) ||
                !optional_string(j, "value", out.value, err))
                return false;
            if (!is_token(out.name)) {
                err = "set-meta's name must be a token";
                return false;
            }
            return true;
        case Type::keep_alive: {
            const bool bin = j.contains("content-bin");
            out.message_type = bin ? "binary" : "text";
            std::string mode;
            if (!text_or_bin(j, "content", out.content, err) ||
                !optional_string(j, "message-type", out.message_type, err) ||
                !optional_string(j, "mode", mode, err))
                return false;
            if (out.message_type != "text" && out.message_type != "binary" &&
                out.message_type != "ping" && out.message_type != "pong") {
                err = "keep-alive's message-type must be text, binary, ping or pong";
                return false;
            }
            if (mode != "" && mode != "idle" && mode != "interval") {
                err = "keep-alive's mode must be idle or interval";
                return false;
            }
            out.interval = mode == "interval";
            auto t = j.find("timeout");
            if (t != j.end() && !(t->is_number_unsigned() && t->get<uint64_t>() <= 86400)) {
                err = "keep-alive's timeout must be a whole number of seconds up to 86400";
                return false;
            }
            if (t != j.end()) out.timeout = t->get<uint32_t>();
            return true;
        }
        case Type::detach:
            return true;
    }
    return true;
}

}  // namespace m0::http
