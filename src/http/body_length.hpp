// What an answer's body may put on the wire, given its declared length.
//
// DESIGN
// PEP 3333, "Handling the Content-Length Header": "the server should not
// transmit more bytes than the Content-Length allows, and should stop
// iterating over the response when enough data has been sent ... (Of course,
// if the application does not provide enough data to meet its stated
// Content-Length, the server should close the connection and log or otherwise
// report the error.)" RFC 9112 §6.3: the declared length is where the
// recipient takes the message to end, so a byte past it is the start of the
// next answer (a desync), and a body short of it leaves the client waiting.
//
// One rule for every body shape (a list, an iterator, write(), a file): the
// bytes are admitted up to the declared length, the rest dropped and counted;
// iteration stops once the length is complete; a body that ends short of it
// is reported, and the connection carrying it closes. An answer that carries
// no body (HEAD; 1xx, 204, 304) is never short: its Content-Length describes
// the GET's body, not this one.
//
// Any thread: a value owned by whoever accounts one answer.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace m0::http {

class BodyLength {
  public:
    // declared: the answer's Content-Length, if it has one; carries_body:
    // false for a HEAD request's answer and for 1xx, 204 and 304.
    BodyLength(std::optional<uint64_t> declared, bool carries_body)
        : declared_(declared), carries_body_(carries_body) {}

    // How many of `n` more bytes go out: all of them without a declared
    // length, else no more than what completes it (the rest are counted in
    // over()).
    uint64_t admit(uint64_t n) {
        uint64_t take = n;
        if (declared_) {
            uint64_t room = *declared_ - taken_;
            if (take > room) take = room;
        }
        taken_ += take;
        over_ += n - take;
        return take;
    }
    // The declared length is complete: nothing more may go out, so the
    // producer stops (PEP 3333: "stop iterating").
    bool complete() const { return declared_ && taken_ == *declared_; }
    // At the end of the body: it carried fewer bytes than it declared.
    bool short_of_declared() const { return carries_body_ && declared_ && taken_ < *declared_; }
    const std::optional<uint64_t>& declared() const { return declared_; }
    bool carries_body() const { return carries_body_; }
    uint64_t taken() const { return taken_; }  // bytes admitted
    uint64_t over() const { return over_; }    // bytes dropped past the declared length

  private:
    std::optional<uint64_t> declared_;
    bool carries_body_;
    uint64_t taken_ = 0;
    uint64_t over_ = 0;
};

// RFC 9110 §8.6: Content-Length = 1*DIGIT. The value, or nullopt when it is
// not one (empty, a sign, a space, a list, or past 2^64).
std::optional<uint64_t> parse_content_length(std::string_view v);

// RFC 9110 §6.4.1: the answers that never carry content.
inline bool bodiless_status(int status) {
    return (status >= 100 && status < 200) || status == 204 || status == 304;
}

}  // namespace m0::http
