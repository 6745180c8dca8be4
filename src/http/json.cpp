#include "http/json.hpp"

namespace m0::http {

namespace {
struct P {
    std::string_view s;
    size_t i = 0;
    const char* why = nullptr;  // set when a string fails for a reason worth naming
    void ws() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
    }
    bool eat(char c) {
        ws();
        if (i < s.size() && s[i] == c) {
            ++i;
            return true;
        }
        return false;
    }
    static void utf8(std::string& out, uint32_t cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }
    bool hex4(uint32_t& v) {
        if (i + 4 > s.size()) return false;
        v = 0;
        for (int k = 0; k < 4; ++k) {
            char c = s[i++];
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= static_cast<uint32_t>(c - '0');
            else if (c >= 'a' && c <= 'f')
                v |= static_cast<uint32_t>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                v |= static_cast<uint32_t>(c - 'A' + 10);
            else
                return false;
        }
        return true;
    }
    // RFC 8259 §8.1: JSON text is UTF-8. Takes the rest of the sequence whose
    // lead byte `c` was just read: RFC 3629 §4, so no overlong form, no
    // surrogate (U+D800..U+DFFF) and nothing past U+10FFFF.
    bool utf8_rest(unsigned char c, std::string& out) {
        size_t n;
        unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c == 0xE0) {
            n = 2, lo = 0xA0;
        } else if (c == 0xED) {
            n = 2, hi = 0x9F;
        } else if (c >= 0xE1 && c <= 0xEF) {
            n = 2;
        } else if (c == 0xF0) {
            n = 3, lo = 0x90;
        } else if (c >= 0xF1 && c <= 0xF3) {
            n = 3;
        } else if (c == 0xF4) {
            n = 3, hi = 0x8F;
        } else {
            return false;
        }
        if (s.size() - i < n) return false;
        for (size_t k = 0; k < n; ++k) {
            auto b = static_cast<unsigned char>(s[i + k]);
            if (b < (k == 0 ? lo : 0x80) || b > (k == 0 ? hi : 0xBF)) return false;
        }
        out += static_cast<char>(c);
        out.append(s.substr(i, n));
        i += n;
        return true;
    }
    bool str(std::string& out) {
        ws();
        if (i >= s.size() || s[i] != '"') return false;
        ++i;
        while (i < s.size()) {
            char c = s[i++];
            if (c == '"') return true;
            if (static_cast<unsigned char>(c) < 0x20) return false;
            if (static_cast<unsigned char>(c) >= 0x80) {
                if (utf8_rest(static_cast<unsigned char>(c), out)) continue;
                why = "JSON strings must be UTF-8";
                return false;
            }
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i >= s.size()) return false;
            char e = s[i++];
            switch (e) {
                case '"':
                    out += '"';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '/':
                    out += '/';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'n':
                    out += '\n';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'u': {
                    uint32_t cp;
                    if (!hex4(cp)) return false;
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        uint32_t lo;
                        if (i + 2 > s.size() || s[i] != '\\' || s[i + 1] != 'u') return false;
                        i += 2;
                        if (!hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        return false;
                    }
                    utf8(out, cp);
                    break;
                }
                default:
                    return false;
            }
        }
        return false;
    }
};
}  // namespace

bool parse_flat_json(std::string_view text, std::map<std::string, std::string>& out,
                     std::string& err) {
    P p{text};
    if (!p.eat('{')) {
        err = "body must be a JSON object";
        return false;
    }
    if (!p.eat('}')) {
        for (;;) {
            std::string k, v;
            if (!p.str(k)) {
                err = p.why ? p.why : "bad JSON key";
                return false;
            }
            if (!p.eat(':')) {
                err = "expected ':' in JSON";
                return false;
            }
            p.ws();
            if (p.s.substr(p.i).starts_with("null")) {
                p.i += 4;
            } else if (!p.str(v)) {
                err = p.why ? p.why : "JSON values must be strings";
                return false;
            } else {
                out[k] = std::move(v);
            }
            if (p.eat(',')) continue;
            if (p.eat('}')) break;
            err = "expected ',' or '}' in JSON";
            return false;
        }
    }
    p.ws();
    if (p.i != text.size()) {
        err = "trailing bytes after JSON";
        return false;
    }
    return true;
}

}  // namespace m0::http
