// Transport::response: GRIP's long-poll (Grip-Hold: response). The first
// event on the hold's channels answers the request: the handler's own answer
// (its status, 200 where that has no body, and its headers) with the event's
// data as the body (as an EventSource client reads it: line ends as LF), or, for
// Pushpin's http-response item, the item's code, its headers over the
// handler's (by name) and its body. http-stream content is not a long-poll's.
// The answer names the event: M0-Event-Id (the cursor of the next poll, as
// ?lastEventID= or Grip-Channel's prev-id) and, when it has one, M0-Event.
#include "http/body_length.hpp"
#include "http/json.hpp"
#include "http/sse.hpp"
#include "loop/log.hpp"
#include "server/subscriber.hpp"

namespace m0::server {

namespace {

bool response_item(const bus::PublishFrame& f) { return f.raw && f.event == bus::kResponseFormat; }

class PollSubscriber final : public Subscriber {
  public:
    bool answers_once() const override { return true; }
    bool carries(const bus::PublishFrame& f) const override { return !f.raw || response_item(f); }
    SharedBytes event(const bus::PublishFrame&) const override { return nullptr; }
    SharedBytes reset(uint64_t) const override { return nullptr; }
    std::string end(uint64_t, EndWhy) const override { return {}; }
    const SharedBytes& heartbeat() const override { return none_; }

    http::Response answer(const http::Response& held, const bus::PublishFrame& f) const override {
        http::Response r;
        // The handler's status, unless it carries no body (a 204 for the
        // timeout, say): an event's answer has one, so it is then 200.
        r.status = http::bodiless_status(held.status) ? 200 : held.status;
        r.headers = held.headers;
        // The body is the event's: the held answer's framing does not apply.
        r.headers.remove("Content-Length");
        r.headers.remove("Transfer-Encoding");
        http::ResponseItem item;
        if (response_item(f) && http::decode_response_item(f.data, item)) {
            r.status = item.code;
            for (const auto& [k, v] : item.headers) r.headers.remove(k);
            for (auto& [k, v] : item.headers)
                if (!http::iequals(k, "Content-Length") && !http::iequals(k, "Transfer-Encoding"))
                    r.headers.add(k, v);
            r.body = std::move(item.body);
        } else if (response_item(f)) {
            // Not what the admin API writes: a newer or foreign publisher.
            M0_LOG(warn, "long-poll: event ", std::to_string(f.id),
                   " is not a readable http-response item; answered with its data");
            r.body = f.data;
        } else {
            // What an EventSource client would read as the event's data (line
            // ends as LF): the bytes the stream holds are written, which are
            // all a replay from history has of it.
            std::string name;
            if (!sse::decode_event(*sse_subscriber().event(f), name, r.body)) r.body = f.data;
            if (!name.empty()) r.headers.set("M0-Event", name);
        }
        r.headers.set("M0-Event-Id", std::to_string(f.id));
        return r;
    }

  private:
    const SharedBytes none_;
};

}  // namespace

const Subscriber& poll_subscriber() {
    static const PollSubscriber s;
    return s;
}

}  // namespace m0::server
