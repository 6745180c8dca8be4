#include "http/json.hpp"

#include <nlohmann/json.hpp>

#include "grant/base64.hpp"

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
bool flat_object(std::string_view body, json& j, std::string& err) {
    if (!parse(body, j, err)) return false;
    if (!j.is_object()) {
        err = "body must be a JSON object";
        return false;
    }
    for (const auto& [k, v] : j.items())
        if (!v.is_string() && !v.is_null()) {
            err = "JSON values must be strings";
            return false;
        }
    if (j.find("channel") == j.end() || j["channel"].is_null()) {
        err = "missing channel";
        return false;
    }
    return true;
}

bool decode_item(const json& item, PushpinItem& out, bool& has_stream, std::string& err) {
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
    auto stream = formats->find("http-stream");
    has_stream = stream != formats->end();
    if (!has_stream) return true;
    if (!stream->is_object()) {
        err = "'http-stream' must be an object";
        return false;
    }
    std::string action = "send";
    if (!optional_string(*stream, "action", action, err)) return false;
    if (action == "close") {
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
    if (!flat_object(body, j, err)) return false;
    auto data = j.find("data");
    out.has_data = data != j.end() && !data->is_null();
    return optional_string(j, "channel", out.channel, err) &&
           optional_string(j, "data", out.data, err) && optional_string(j, "event", out.event, err);
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
        bool has_stream = false;
        if (!decode_item(item, p, has_stream, err)) {
            err = "item " + std::to_string(out.size() + skipped) + ": " + err;
            return false;
        }
        if (has_stream)
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

}  // namespace m0::http
