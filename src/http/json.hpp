// A strict parser for the one JSON shape the admin API takes: a flat object
// whose values are strings (or null). Pure.
#pragma once
#include <map>
#include <string>
#include <string_view>

namespace m0::http {

// Parses `text` into `out`; false with `err` set on anything else (nested
// values, numbers, trailing bytes, bad escapes, invalid surrogates, bytes in a
// string that are not UTF-8). On success every key and value is UTF-8.
bool parse_flat_json(std::string_view text, std::map<std::string, std::string>& out,
                     std::string& err);

}  // namespace m0::http
