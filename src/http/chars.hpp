// Character classes of the HTTP grammar, shared by the parser's files. Pure.
#pragma once

namespace m0::http {

// RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
//                          "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
inline bool is_tchar(char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    switch (c) {
        case '!':
        case '#':
        case '$':
        case '%':
        case '&':
        case '\'':
        case '*':
        case '+':
        case '-':
        case '.':
        case '^':
        case '_':
        case '`':
        case '|':
        case '~':
            return true;
        default:
            return false;
    }
}

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
// ASCII's lower case, whatever the C locale (the embedded Python sets
// LC_CTYPE from the environment): field names and tokens are ASCII.
inline char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
inline bool is_hexdig(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace m0::http
