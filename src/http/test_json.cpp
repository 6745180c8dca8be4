// The admin API's request bodies over nlohmann::json: the m0serve shape
// (decode_publish, decode_close) and Pushpin's items (decode_pushpin); its
// answers (encode_answer).
#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http/json.hpp"

using m0::http::AdminEvent;
using m0::http::decode_close;
using m0::http::decode_publish;
using m0::http::decode_pushpin;
using m0::http::decode_response_item;
using m0::http::encode_answer;
using m0::http::encode_response_item;
using m0::http::PushpinItem;
using m0::http::ResponseItem;

namespace {

// Decodes `text`; REQUIREs success.
AdminEvent good(std::string_view text) {
    AdminEvent ev;
    std::string err;
    INFO(text);
    bool ok = decode_publish(text, ev, err);
    INFO("err: " << err);
    REQUIRE(ok);
    return ev;
}

// Decodes `text`; REQUIREs failure and returns the reason.
std::string bad(std::string_view text) {
    AdminEvent ev;
    std::string err;
    INFO(text);
    REQUIRE_FALSE(decode_publish(text, ev, err));
    CHECK_FALSE(err.empty());
    return err;
}

// `value` as the data of a publish body: {"channel":"c","data":VALUE}.
std::string with_data(std::string_view value) {
    return "{\"channel\":\"c\",\"data\":" + std::string(value) + "}";
}

std::vector<PushpinItem> items_of(std::string_view text, size_t* skipped = nullptr) {
    std::vector<PushpinItem> items;
    size_t sk = 99;
    std::string err;
    INFO(text);
    bool ok = decode_pushpin(text, items, sk, err);
    INFO("err: " << err);
    REQUIRE(ok);
    if (skipped) *skipped = sk;
    return items;
}

std::string pushpin_bad(std::string_view text) {
    std::vector<PushpinItem> items;
    size_t sk = 0;
    std::string err;
    INFO(text);
    REQUIRE_FALSE(decode_pushpin(text, items, sk, err));
    CHECK(items.empty());
    CHECK_FALSE(err.empty());
    return err;
}

}  // namespace

TEST_CASE("json: a publish body gives its channel, data and event", "[http][json]") {
    auto ev = good(R"({"channel":"news","data":"hello world","event":"update"})");
    CHECK(ev.channel == "news");
    CHECK(ev.data == "hello world");
    CHECK(ev.event == "update");
    CHECK(ev.has_data);
    ev = good(" \t\r\n{ \"channel\" : \"a\" } \n");
    CHECK(ev.channel == "a");
    CHECK(ev.data.empty());
    CHECK_FALSE(ev.has_data);  // the admin API refuses it: 400 missing data
    CHECK(ev.event.empty());
    CHECK_FALSE(good(R"({"channel":"a","data":null})").has_data);
    CHECK(good(R"({"channel":"a","data":""})").has_data);
    SECTION("null leaves a key absent, other keys are ignored") {
        ev = good(R"({"channel":"a","event":null,"data":"x","other":"y"})");
        CHECK(ev.event.empty());
        CHECK(ev.data == "x");
    }
    SECTION("a repeated key keeps the last value") {
        CHECK(good(R"({"channel":"a","data":"1","data":"2"})").data == "2");
    }
    SECTION("escapes decode, \\u to UTF-8 and surrogate pairs to one code point") {
        CHECK(good(with_data(R"("q\"b\\s\/n\nr\rt\tb\bf\f")")).data == "q\"b\\s/n\nr\rt\tb\bf\f");
        CHECK(good(with_data(R"("\u0041\u00e9\u20AC")")).data == "A\xc3\xa9\xe2\x82\xac");
        CHECK(good(with_data(R"("\ud83d\ude00")")).data == "\xf0\x9f\x98\x80");
        CHECK(good(with_data(R"("\udbff\udfff")")).data == "\xf4\x8f\xbf\xbf");
        CHECK(good(with_data(R"("\u0000")")).data == std::string("\0", 1));
    }
    SECTION("raw UTF-8 passes through") {
        CHECK(good(with_data("\"caf\xc3\xa9\"")).data == "caf\xc3\xa9");
        CHECK(good(with_data("\"\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"")).data ==
              "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
    }
}

TEST_CASE("json: a close body gives its channel", "[http][json]") {
    std::string channel, err;
    REQUIRE(decode_close(R"({"channel":"news"})", channel, err));
    CHECK(channel == "news");
    CHECK_FALSE(decode_close(R"({"data":"x"})", channel, err));
    CHECK(err == "missing channel");
}

TEST_CASE("json: anything but a flat object of strings with a channel is refused", "[http][json]") {
    SECTION("not an object") {
        CHECK(bad("").find("bad JSON") != std::string::npos);
        bad("   ");
        CHECK(bad(R"("str")") == "body must be a JSON object");
        bad("[]");
        bad("null");
    }
    SECTION("no channel") {
        CHECK(bad("{}") == "missing channel");
        CHECK(bad(R"({"channel":null})") == "missing channel");
    }
    SECTION("values that are not strings") {
        CHECK(bad(with_data(R"({"b":"c"})")) == "JSON values must be strings");
        bad(with_data(R"(["b"])"));
        bad(with_data("1"));
        bad(with_data("-1.5e3"));
        bad(with_data("true"));
        bad(R"({"channel":"c","other":1})");
    }
    SECTION("bad JSON") {
        bad(with_data("nul"));
        bad(with_data("'b'"));
        bad(R"({a:"b"})");
        bad(R"({"channel":"c",})");
        bad(R"({"channel":"c")");
        bad(R"({"channel":"c"}x)");
        bad(R"({"channel":"c"}{})");
        // nlohmann reads NUL as the end of input: what follows must not pass.
        bad(std::string("{\"channel\":\"c\"}\0", 16));
        bad(std::string("{\"channel\":\"c\"}\0{\"x\":1}", 23));
        bad(with_data(R"("\x41")"));
        bad(with_data(R"("\u12G4")"));
        bad(with_data("\"line\nbreak\""));
        bad(with_data(std::string("\"nul\0\"", 6)));
    }
    SECTION("lone or misordered surrogates") {
        bad(with_data(R"("\ud83d")"));
        bad(with_data(R"("\ud83d\u0041")"));
        bad(with_data(R"("\ude00")"));
        bad(with_data(R"("\ude00\ud83d")"));
    }
}

// Found by fuzz_json (fuzz/corpus/json/regress-number-overflow): nlohmann
// throws out_of_range, not parse_error, for a number past a double's range,
// and the decoder let it escape (the server would have ended).
TEST_CASE("json: a number out of range is refused, not thrown", "[http][json]") {
    CHECK(bad(R"({"channel":"c","n":1e999})") == "bad JSON (a number out of range)");
    CHECK(bad(R"({"channel":"c","n":-1e400})") == "bad JSON (a number out of range)");
    std::vector<PushpinItem> items;
    size_t skipped = 0;
    std::string err;
    CHECK_FALSE(decode_pushpin(R"({"items":[],"x":1e999})", items, skipped, err));
}

// RFC 8259 §8.1. The hand-written parser this replaced was found by fuzz_json
// (fuzz/corpus/json/regress-invalid-utf8-key) taking raw bytes unchecked;
// nlohmann's lexer checks them, and this pins that it does.
TEST_CASE("json: raw bytes in a string must be UTF-8", "[http][json]") {
    for (const char* s : {
             "\xff",              // never in UTF-8
             "\x80",              // a lone continuation byte
             "\xc3",              // a sequence cut by the quote
             "\xe2\x82",          // the same, three bytes
             "\xc3x",             // a sequence cut by an ASCII byte
             "\xc0\x80",          // overlong NUL
             "\xe0\x9f\xbf",      // overlong U+07FF
             "\xf0\x8f\xbf\xbf",  // overlong U+FFFF
             "\xed\xa0\x80",      // U+D800, a surrogate
             "\xf4\x90\x80\x80",  // U+110000, past Unicode
             "\xf5\x80\x80\x80",  // never a lead byte
         }) {
        CHECK(bad(with_data("\"" + std::string(s) + "\"")).find("UTF-8") != std::string::npos);
    }
    CHECK(bad("{\"\xff\xff\":\"b\",\"channel\":\"c\"}").find("UTF-8") != std::string::npos);
}

TEST_CASE("json: Pushpin items give their channel and http-stream content", "[http][json]") {
    size_t skipped = 0;
    auto items =
        items_of(R"({"items":[{"channel":"a","id":"x1","prev-id":"x0","formats":{"http-stream":)"
                 R"({"content":"event: m\ndata: 1\n\n"},"http-response":{"body":"1"}}},)"
                 R"({"channel":"b","formats":{"http-stream":{"content-bin":"AAEC/w=="}}},)"
                 R"({"channel":"c","formats":{"http-stream":{"action":"close"}}},)"
                 R"({"channel":"d","formats":{"ws-message":{"content":"1"}}},)"
                 R"({"channel":"e","formats":{"ws-message":{"content-bin":"AAE="}}},)"
                 R"({"channel":"f","formats":{"hint":{}}}]})",
                 &skipped);
    REQUIRE(items.size() == 5);
    CHECK(items[0].channel == "a");
    CHECK(items[0].action == PushpinItem::Action::send);
    CHECK(items[0].content == "event: m\ndata: 1\n\n");
    // Both formats: one item, its response carrying the stream's content too.
    REQUIRE(items[0].response);
    CHECK(items[0].response->body == "1");
    CHECK(items[0].response->code == 200);
    CHECK(items[0].response->stream == "event: m\ndata: 1\n\n");
    CHECK_FALSE(items[1].response);
    CHECK(items[1].content == std::string("\x00\x01\x02\xff", 4));
    CHECK(items[2].channel == "c");
    CHECK(items[2].action == PushpinItem::Action::close);
    CHECK_FALSE(items[2].ws);
    // A ws-message: a text message's content, or a binary one's.
    CHECK_FALSE(items[3].has_stream);
    CHECK(items[3].ws == "1");
    CHECK_FALSE(items[3].ws_binary);
    CHECK(items[4].ws == std::string("\0\1", 2));
    CHECK(items[4].ws_binary);
    CHECK(skipped == 1);  // f: no format m0serve serves
    // pushpin-publish --close: both formats close; the channel's holds end.
    auto closing =
        items_of(R"({"items":[{"channel":"g","formats":{"http-stream":{"action":"close"},)"
                 R"("ws-message":{"action":"close"}}},)"
                 R"({"channel":"h","formats":{"ws-message":{"action":"close"}}}]})");
    REQUIRE(closing.size() == 2);
    CHECK(closing[0].action == PushpinItem::Action::close);
    CHECK(closing[1].action == PushpinItem::Action::close);
    CHECK(items_of(R"({"items":[]})").empty());
}

TEST_CASE("json: a bad ws-message format is refused with a reason", "[http][json]") {
    auto bad = [](const std::string& ws) {
        return pushpin_bad(R"({"items":[{"channel":"a","formats":{"ws-message":)" + ws + "}}]}");
    };
    CHECK(bad("1").find("must be an object") != std::string::npos);
    CHECK(bad("{}").find("one of 'content' and 'content-bin'") != std::string::npos);
    CHECK(bad(R"({"content":"a","content-bin":"YQ=="})").find("one of") != std::string::npos);
    CHECK(bad(R"({"content-bin":"%%"})").find("base64") != std::string::npos);
    CHECK(bad(R"({"action":"hint"})").find("not supported") != std::string::npos);
    CHECK(pushpin_bad(R"({"items":[{"channel":"a","formats":{"ws-message":{"action":"close"},)"
                      R"("http-stream":{"content":"a"}}}]})")
              .find("cannot both close") != std::string::npos);
    CHECK(pushpin_bad(R"({"items":[{"channel":"a","formats":{"ws-message":{"content":"a"},)"
                      R"("http-stream":{"action":"close"}}}]})")
              .find("cannot both close") != std::string::npos);
}

TEST_CASE("json: a Pushpin body with one bad item is refused whole", "[http][json]") {
    CHECK(pushpin_bad(R"({"channel":"a"})").find("'items'") != std::string::npos);
    pushpin_bad(R"({"items":{}})");
    pushpin_bad(R"([])");
    CHECK(pushpin_bad(R"({"items":["a"]})") == "item 0: each item must be a JSON object");
    CHECK(pushpin_bad(R"({"items":[{"formats":{}}]})").find("'channel'") != std::string::npos);
    pushpin_bad(R"({"items":[{"channel":1,"formats":{}}]})");
    pushpin_bad(R"({"items":[{"channel":"a"}]})");
    pushpin_bad(R"({"items":[{"channel":"a","id":7,"formats":{}}]})");
    std::string ok = R"({"channel":"a","formats":{"http-stream":{"content":"x"}}})";
    auto second = [&](std::string_view item) {
        return pushpin_bad("{\"items\":[" + ok + "," + std::string(item) + "]}");
    };
    CHECK(second(R"({"channel":"b","formats":{"http-stream":{"content":1}}})") ==
          "item 1: 'content' must be a string");
    second(R"({"channel":"b","formats":{"http-stream":"x"}})");
    second(R"({"channel":"b","formats":{"http-stream":{}}})");
    second(R"({"channel":"b","formats":{"http-stream":{"content":"x","content-bin":"eA=="}}})");
    CHECK(second(R"({"channel":"b","formats":{"http-stream":{"content-bin":"e A=="}}})")
              .find("base64") != std::string::npos);
    second(R"({"channel":"b","formats":{"http-stream":{"content-bin":"eA"}}})");
    CHECK(second(R"({"channel":"b","formats":{"http-stream":{"action":"hint"}}})")
              .find("'hint' is not supported") != std::string::npos);
}

TEST_CASE("json: an answer has a space after each comma and colon, keys in the order given",
          "[http][json]") {
    CHECK(encode_answer({{"id", uint64_t{7}}}) == "{\"id\": 7}\n");
    CHECK(encode_answer({{"ids", std::vector<uint64_t>{1, 2}},
                         {"closed", size_t{1}},
                         {"skipped", size_t{0}}}) ==
          "{\"ids\": [1, 2], \"closed\": 1, \"skipped\": 0}\n");
    CHECK(encode_answer({{"ids", std::vector<uint64_t>{}}}) == "{\"ids\": []}\n");
    // Escaped as JSON wants; a byte that is not UTF-8 becomes U+FFFD.
    CHECK(encode_answer({{"a\"b", "x\xff"}}) == "{\"a\\\"b\": \"x\xEF\xBF\xBD\"}\n");
}

TEST_CASE("json: Pushpin's http-response format, and the item as the bus carries it",
          "[http][json][poll]") {
    size_t skipped = 0;
    auto items = items_of(
        R"({"items":[{"channel":"a","formats":{"http-response":{"code":201,"reason":"Made",)"
        R"("headers":{"Content-Type":"text/plain","X-A":"1"},"body":"made"}}},)"
        R"({"channel":"b","formats":{"http-response":{"headers":[["X-B","2"],["X-B","3"]],)"
        R"("body-bin":"AAEC/w=="}}}]})",
        &skipped);
    REQUIRE(items.size() == 2);
    CHECK(skipped == 0);
    REQUIRE(items[0].response);
    CHECK_FALSE(items[0].has_stream);
    CHECK(items[0].response->code == 201);
    CHECK(items[0].response->headers.size() == 2);
    CHECK(items[0].response->body == "made");
    CHECK_FALSE(items[0].response->stream);
    REQUIRE(items[1].response);
    CHECK(items[1].response->code == 200);
    CHECK(items[1].response->headers ==
          std::vector<std::pair<std::string, std::string>>{{"X-B", "2"}, {"X-B", "3"}});
    CHECK(items[1].response->body == std::string("\0\1\2\xff", 4));
    // Through the bus and back: every byte and header, the stream content too.
    ResponseItem r = *items[1].response;
    r.stream = std::string("\xff\0", 2);
    ResponseItem back;
    REQUIRE(decode_response_item(encode_response_item(r), back));
    CHECK(back.code == r.code);
    CHECK(back.headers == r.headers);
    CHECK(back.body == r.body);
    CHECK(back.stream == r.stream);
    CHECK_FALSE(back.ws);
    // Its ws-message content too (pushpin-publish's items carry every format).
    for (bool binary : {false, true}) {
        r.ws = std::string("w\0s", 3);
        r.ws_binary = binary;
        REQUIRE(decode_response_item(encode_response_item(r), back));
        CHECK(back.ws == r.ws);
        CHECK(back.ws_binary == binary);
    }
    CHECK_FALSE(decode_response_item("not json", back));
    CHECK_FALSE(decode_response_item(R"({"code":99})", back));

    auto bad_response = [](const std::string& response) {
        return pushpin_bad(R"({"items":[{"channel":"a","formats":{"http-response":)" + response +
                           "}}]}");
    };
    CHECK(bad_response(R"({"code":99})").find("'code'") != std::string::npos);
    CHECK(bad_response(R"({"code":600})").find("'code'") != std::string::npos);
    CHECK(bad_response(R"({"code":"200"})").find("'code'") != std::string::npos);
    CHECK(bad_response(R"({"headers":{"Bad Name":"x"}})").find("token") != std::string::npos);
    CHECK(bad_response(R"({"headers":{"X":"a\r\nInjected: 1"}})").find("CR") != std::string::npos);
    CHECK(bad_response(R"({"headers":[["X"]]})").find("pair") != std::string::npos);
    CHECK(bad_response(R"({"headers":"X: 1"})").find("'headers'") != std::string::npos);
    CHECK(bad_response(R"({"body":"a","body-bin":"YQ=="})").find("one of") != std::string::npos);
    CHECK(bad_response(R"({"body-bin":"!!"})").find("base64") != std::string::npos);
    CHECK(bad_response(R"({"body-patch":[]})").find("body-patch") != std::string::npos);
    CHECK(bad_response(R"("x")").find("object") != std::string::npos);
    CHECK(pushpin_bad(R"({"items":[{"channel":"a","formats":{"http-stream":{"action":"close"},)"
                      R"("http-response":{"body":"x"}}}]})")
              .find("close") != std::string::npos);
}
