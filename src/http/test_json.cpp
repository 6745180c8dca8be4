// parse_flat_json: the admin API's one JSON shape, a flat object of strings.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "http/json.hpp"

using m0::http::parse_flat_json;
using Fields = std::map<std::string, std::string>;

namespace {

// Parses `text`; REQUIREs success and returns the fields.
Fields good(std::string_view text) {
    Fields f;
    std::string err;
    INFO(text);
    bool ok = parse_flat_json(text, f, err);
    INFO("err: " << err);
    REQUIRE(ok);
    CHECK(err.empty());
    return f;
}

// Parses `text`; REQUIREs failure and returns the error.
std::string bad(std::string_view text) {
    Fields f;
    std::string err;
    INFO(text);
    REQUIRE_FALSE(parse_flat_json(text, f, err));
    CHECK_FALSE(err.empty());
    return err;
}

}  // namespace

TEST_CASE("json: flat objects of strings parse", "[http][json]") {
    CHECK(good("{}").empty());
    CHECK(good(" \t\r\n{ } \n").empty());
    CHECK(good(R"({"channel":"news"})") == Fields{{"channel", "news"}});
    CHECK(good(R"({ "channel" : "news" , "data" : "hello world", "event": "" })") ==
          Fields{{"channel", "news"}, {"data", "hello world"}, {"event", ""}});
    CHECK(good(R"({"":"empty key"})") == Fields{{"", "empty key"}});
    SECTION("a repeated key keeps the last value") {
        CHECK(good(R"({"a":"1","a":"2"})") == Fields{{"a", "2"}});
    }
    SECTION("raw UTF-8 passes through") {
        CHECK(good("{\"a\":\"caf\xc3\xa9\"}") == Fields{{"a", "caf\xc3\xa9"}});
    }
}

TEST_CASE("json: escapes decode, \\u to UTF-8 and surrogate pairs to one code point",
          "[http][json]") {
    CHECK(good(R"({"a":"q\"b\\s\/n\nr\rt\tb\bf\f"})") == Fields{{"a", "q\"b\\s/n\nr\rt\tb\bf\f"}});
    CHECK(good(R"({"a":"\u0041\u00e9\u20AC"})") == Fields{{"a", "A\xc3\xa9\xe2\x82\xac"}});
    CHECK(good(R"({"a":"\u007f\u0080\u07ff\u0800\uffff"})") ==
          Fields{{"a", "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf"}});
    CHECK(good(R"({"a":"\ud83d\ude00"})") == Fields{{"a", "\xf0\x9f\x98\x80"}});  // U+1F600
    CHECK(good(R"({"a":"\uD800\uDC00"})") == Fields{{"a", "\xf0\x90\x80\x80"}});  // U+10000
    CHECK(good(R"({"a":"\udbff\udfff"})") == Fields{{"a", "\xf4\x8f\xbf\xbf"}});  // U+10FFFF
    CHECK(good(R"({"a":"\u0000"})") == Fields{{"a", std::string("\0", 1)}});
    CHECK(good(R"({"k\u0041":"v"})") == Fields{{"kA", "v"}});
}

TEST_CASE("json: a null value leaves the key absent", "[http][json]") {
    CHECK(good(R"({"channel":"news","event":null})") == Fields{{"channel", "news"}});
    CHECK(good(R"({"event" : null , "data":"x"})") == Fields{{"data", "x"}});
}

TEST_CASE("json: anything but a flat object of strings is refused", "[http][json]") {
    SECTION("not an object") {
        bad("");
        bad("   ");
        bad(R"("str")");
        bad("[]");
        bad("null");
    }
    SECTION("nested values") {
        bad(R"({"a":{"b":"c"}})");
        bad(R"({"a":["b"]})");
    }
    SECTION("numbers, booleans and bare words") {
        bad(R"({"a":1})");
        bad(R"({"a":-1.5e3})");
        bad(R"({"a":true})");
        bad(R"({"a":false})");
        bad(R"({"a":nul})");
        bad(R"({"a":nullx})");
        bad(R"({"a":'b'})");
    }
    SECTION("bad keys and punctuation") {
        bad(R"({a:"b"})");
        bad(R"({1:"b"})");
        bad(R"({null:"b"})");
        bad(R"({"a" "b"})");
        bad(R"({"a":"b" "c":"d"})");
        bad(R"({"a":"b",})");
        bad(R"({,})");
        bad(R"({"a":"b")");
        bad(R"({"a":)");
        bad(R"({"a)");
    }
    SECTION("trailing bytes") {
        CHECK(bad(R"({"a":"b"}x)").find("trailing") != std::string::npos);
        bad(R"({"a":"b"}{})");
        bad(R"({} ,)");
        bad(std::string("{}\0", 3));
    }
    SECTION("bad escapes and raw control characters") {
        bad(R"({"a":"\x41"})");
        bad(R"({"a":"\a"})");
        bad(R"({"a":"\'"})");
        bad(R"({"a":"\u12"})");
        bad(R"({"a":"\u12G4"})");
        bad(R"({"a":"\U0041"})");
        bad(R"({"a":"end\)");
        bad("{\"a\":\"line\nbreak\"}");
        bad("{\"a\":\"tab\there\"}");
        bad(std::string("{\"a\":\"nul\0\"}", 12));  // a raw NUL in a string
    }
    SECTION("lone or misordered surrogates") {
        bad(R"({"a":"\ud83d"})");
        bad(R"({"a":"\ud83dx"})");
        bad(R"({"a":"\ud83d\u0041"})");
        bad(R"({"a":"\ud83d\ud83d"})");
        bad(R"({"a":"\ude00"})");
        bad(R"({"a":"\ude00\ud83d"})");
        bad(R"({"a":"\ud83d\n"})");
    }
}

// Found by fuzz_json (fuzz/corpus/json/regress-invalid-utf8-key): raw bytes in
// a string were copied unchecked, so a key or value could be bytes that are
// not UTF-8 (RFC 8259 §8.1), which m0.publish refuses on the Python side.
TEST_CASE("json: raw bytes in a string must be UTF-8", "[http][json]") {
    SECTION("refused") {
        bad("{\"a\":\"\xff\"}");              // never in UTF-8
        bad("{\"\xff\xff\":\"b\"}");          // in a key
        bad("{\"a\":\"\x80\"}");              // a lone continuation byte
        bad("{\"a\":\"\xc3\"}");              // a sequence cut by the quote
        bad("{\"a\":\"\xe2\x82\"}");          // the same, three bytes
        bad("{\"a\":\"\xc3x\"}");             // a sequence cut by an ASCII byte
        bad("{\"a\":\"\xc0\x80\"}");          // overlong NUL
        bad("{\"a\":\"\xc1\xbf\"}");          // overlong U+007F
        bad("{\"a\":\"\xe0\x9f\xbf\"}");      // overlong U+07FF
        bad("{\"a\":\"\xf0\x8f\xbf\xbf\"}");  // overlong U+FFFF
        bad("{\"a\":\"\xed\xa0\x80\"}");      // U+D800, a surrogate
        bad("{\"a\":\"\xed\xbf\xbf\"}");      // U+DFFF, a surrogate
        bad("{\"a\":\"\xf4\x90\x80\x80\"}");  // U+110000, past Unicode
        bad("{\"a\":\"\xf5\x80\x80\x80\"}");  // never a lead byte
        CHECK(bad("{\"a\":\"\xff\"}").find("UTF-8") != std::string::npos);
    }
    SECTION("accepted: every length at its bounds") {
        CHECK(good("{\"a\":\"\xc2\x80\xdf\xbf\"}") == Fields{{"a", "\xc2\x80\xdf\xbf"}});
        CHECK(good("{\"a\":\"\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\"}") ==
              Fields{{"a", "\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf"}});
        CHECK(good("{\"\xf0\x90\x80\x80\":\"\xf4\x8f\xbf\xbf\"}") ==
              Fields{{"\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"}});
    }
}
