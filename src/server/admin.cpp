#include "server/admin.hpp"

#include <openssl/crypto.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "bus/names.hpp"
#include "grant/jwt.hpp"
#include "http/json.hpp"
#include "server/metrics_text.hpp"

namespace m0::server {

using http::error_response;
using http::Request;
using http::Response;

namespace {

// The credentials of a Bearer `auth`; empty for any other scheme. RFC 9110
// §11.4: credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ], and
// §11.1: the auth-scheme is "a case-insensitive token".
std::string_view bearer_token(std::string_view auth) {
    constexpr std::string_view kScheme = "Bearer";
    if (auth.size() <= kScheme.size() || !http::iequals(auth.substr(0, kScheme.size()), kScheme) ||
        auth[kScheme.size()] != ' ')
        return {};
    auth.remove_prefix(kScheme.size());
    while (!auth.empty() && auth.front() == ' ') auth.remove_prefix(1);
    return auth;
}

// The key is compared in constant time; its length is not secret.
bool bearer_matches(std::string_view auth, std::string_view key) {
    auth = bearer_token(auth);
    return !auth.empty() && auth.size() == key.size() &&
           CRYPTO_memcmp(auth.data(), key.data(), key.size()) == 0;
}

}  // namespace

AdminApi::AdminApi(std::string key, bool open, Metrics& metrics, bus::Bus* bus, CloseChannel close)
    : key_(std::move(key)), open_(open), metrics_(metrics), bus_(bus), close_(std::move(close)) {}

std::optional<Response> AdminApi::refuse(const Request& req) const {
    if (open_) return std::nullopt;
    if (key_.empty()) return error_response(403, "the admin API needs --admin-key-file");
    auto auth = req.headers.get("Authorization");
    if (auth && bearer_matches(*auth, key_)) return std::nullopt;
    // Not the key itself: a GRIP publisher's JWT signed with it?
    std::string_view why = "bad or missing bearer key";
    if (auto token = bearer_token(auth.value_or("")); token.find('.') != std::string_view::npos) {
        auto v = grant::verify_jwt(token, key_, static_cast<int64_t>(std::time(nullptr)));
        if (v == grant::JwtVerdict::ok) return std::nullopt;
        why = grant::reason(v);
    }
    auto r = error_response(401, why);
    r.headers.add("WWW-Authenticate", "Bearer");
    return r;
}

Response AdminApi::handle(const Request& req) {
    Response out = error_response(500, "the admin answer did not come at once");
    handle(req, [&out](Response r) { out = std::move(r); });
    return out;
}

namespace {
// Why an admin event is refused before the bus sees it, if it is: the
// channel's own reason first; then an event with no data at all, which
// would go out as an empty event, is the caller's slip.
std::optional<std::string> refused_event(const http::AdminEvent& ev) {
    if (auto e = bus::check_channel(ev.channel); e != bus::NameError::ok) return bus::reason(e);
    if (!ev.has_data) return "missing data (give \"data\": \"\" for an empty event)";
    return std::nullopt;
}

// A publish's answer: its id, or why it was refused.
Response publish_answer(const bus::PublishResult& res) {
    switch (res.error) {
        case bus::PublishError::ok:
            break;
        case bus::PublishError::bad_name:
            return error_response(400, bus::reason(res));
        case bus::PublishError::too_large:
            return error_response(413, bus::reason(res));
        case bus::PublishError::refused:
            return error_response(503, "the bus channel is full");
        case bus::PublishError::unavailable:
            return error_response(503, bus::reason(res));
    }
    Response r;
    r.headers.add("Content-Type", "application/json");
    r.body = http::encode_answer({{"id", res.id}});
    return r;
}
}  // namespace

void AdminApi::handle(const Request& req, Answer answer) {
    Deferred later;
    Response r = answer_now(req, later);
    if (!later) {
        answer(std::move(r));
        return;
    }
    // The bus answers at once (in process) or after a round trip (Redis): the
    // loop does not wait for it.
    later(std::move(answer));
}

Response AdminApi::answer_now(const Request& req, Deferred& later) {
    if (req.path == "/metrics") {
        // RFC 9110 §15.5.6: "The origin server MUST generate an Allow header
        // field in a 405 response".
        if (req.method != "GET" && req.method != "HEAD") {
            auto r = error_response(405, "use GET");
            r.headers.add("Allow", "GET, HEAD");
            return r;
        }
        Response r;
        r.headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
        r.body = render_metrics(metrics_, pools_, bus_);
        return r;
    }
    if (req.path == "/ready") {
        if (req.method != "GET" && req.method != "HEAD") {
            auto r = error_response(405, "use GET");
            r.headers.add("Allow", "GET, HEAD");
            return r;
        }
        // A draining server still finishes what it has, but takes nothing
        // new: a balancer or a probe sends the next clients elsewhere.
        if (draining_) {
            auto r = error_response(503, "draining");
            r.headers.add("Retry-After", "1");
            return r;
        }
        Response r;
        r.headers.add("Content-Type", "text/plain; charset=utf-8");
        r.body = "ready\n";
        return r;
    }
    if (req.path == "/publish" || req.path == "/publish/" || req.path == "/close") {
        if (req.method != "POST") {
            auto r = error_response(405, "use POST");
            r.headers.add("Allow", "POST");
            return r;
        }
        if (auto no = refuse(req)) return std::move(*no);
        if (!bus_) return error_response(503, "the admin API needs --realtime");
        if (req.path == "/publish/") return publish_items(req, later);
        std::string err;
        Response r;
        r.headers.add("Content-Type", "application/json");
        if (req.path == "/close") {
            std::string channel;
            if (!http::decode_close(req.body, channel, err)) return error_response(400, err);
            auto e = bus::check_channel(channel);
            if (e != bus::NameError::ok) return error_response(400, bus::reason(e));
            later = [this, channel](Answer answer) {
                close_(channel, [answer](size_t n) {
                    Response out;
                    out.headers.add("Content-Type", "application/json");
                    out.body = http::encode_answer({{"closed", n}});
                    answer(std::move(out));
                });
            };
            return r;
        }
        if (http::is_batch(req.body)) return publish_batch(req, later);
        http::AdminEvent ev;
        if (!http::decode_publish(req.body, ev, err)) return error_response(400, err);
        if (auto why = refused_event(ev)) return error_response(400, *why);
        later = [this, ev = std::move(ev)](Answer answer) mutable {
            bus_->publish_later(std::move(ev.channel), std::move(ev.data), std::move(ev.event),
                                false,
                                [answer](bus::PublishResult res) { answer(publish_answer(res)); });
        };
        return r;
    }
    return error_response(404, "admin serves /metrics, /ready, /publish, /publish/ and /close");
}

namespace {
// A batch's answer: every id, or why it was refused (naming the event), or
// which events a failing bus took.
Response batch_answer(bus::BatchResult& b) {
    if (b.ok()) {
        Response r;
        r.headers.add("Content-Type", "application/json");
        r.body = http::encode_answer({{"ids", b.ids}});
        return r;
    }
    Response r = publish_answer(b.error);
    std::string why = "event " + std::to_string(b.failed) + ": " + bus::reason(b.error);
    if (b.error.error == bus::PublishError::refused) why = "the bus channel is full";
    if (!b.ids.empty())
        why += " (the " + std::to_string(b.ids.size()) + " events before it were taken: ids " +
               std::to_string(b.ids.front()) + " to " + std::to_string(b.ids.back()) + ")";
    else if (b.error.error != bus::PublishError::bad_name &&
             b.error.error != bus::PublishError::too_large)
        why += " (no event of the batch was taken)";
    return error_response(r.status, why);
}
}  // namespace

Response AdminApi::publish_batch(const Request& req, Deferred& later) {
    auto events = std::make_shared<std::vector<http::AdminEvent>>();
    std::string err;
    if (!http::decode_publish_batch(req.body, *events, err)) return error_response(400, err);
    if (events->size() > batch_max_)
        return error_response(413, "batch of " + std::to_string(events->size()) +
                                       " events, over --publish-batch-max " +
                                       std::to_string(batch_max_));
    // What a single publish refuses at once, refused here for the whole batch.
    for (size_t i = 0; i < events->size(); ++i) {
        if (auto why = refused_event((*events)[i]))
            return error_response(400, "event " + std::to_string(i) + ": " + *why);
    }
    later = [this, events](Answer answer) {
        std::vector<bus::PublishEvent> batch;
        batch.reserve(events->size());
        for (auto& ev : *events)
            batch.push_back({std::move(ev.channel), std::move(ev.data), std::move(ev.event)});
        bus_->publish_batch_later(std::move(batch),
                                  [answer](bus::BatchResult b) { answer(batch_answer(b)); });
    };
    return {};
}

Response AdminApi::publish_items(const Request& req, Deferred& later) {
    auto items = std::make_shared<std::vector<http::PushpinItem>>();
    size_t skipped = 0;
    std::string err;
    if (!http::decode_pushpin(req.body, *items, skipped, err)) return error_response(400, err);
    // Every item is checked before any is published: a request is taken or
    // refused whole (but for a bus that refuses on the way: 503).
    for (size_t i = 0; i < items->size(); ++i) {
        auto& it = (*items)[i];
        // An http-response item travels as its JSON (a raw event of that
        // format), its http-stream content inside it; its size is that.
        // An item with both (pushpin-publish sends every format) is one
        // event: its ws-message travels inside the response item too.
        if (it.response && it.ws) {
            it.response->ws = std::move(it.ws);
            it.response->ws_binary = it.ws_binary;
            it.ws.reset();
        }
        if (it.response) it.content = http::encode_response_item(*it.response);
        auto e = bus::check_channel(it.channel);
        if (e != bus::NameError::ok)
            return error_response(400, "item " + std::to_string(i) + ": " + bus::reason(e));
        const size_t size = std::max(it.content.size(), it.ws ? it.ws->size() : 0);
        if (size > bus_->max_event_size()) {
            bus_->too_large.fetch_add(1);  // m0_events_too_large_total, as publish() counts
            return error_response(413, "item " + std::to_string(i) + ": content is " +
                                           std::to_string(size) + " bytes, over --max-event-size " +
                                           std::to_string(bus_->max_event_size()));
        }
    }
    later = [this, items, skipped](Answer answer) {
        auto run = std::make_shared<ItemRun>();
        run->items = items;
        run->skipped = skipped;
        run->answer = std::move(answer);
        publish_item(std::move(run));
    };
    return {};
}

void AdminApi::publish_item(std::shared_ptr<ItemRun> run) {
    // In order (ids in item order): a close, or a run of send items as one
    // batch, is handed to the bus when what is before it is done. A bus that answers at
    // once (in process) is driven by this loop, not by recursion, however
    // many items there are; one that answers later resumes it.
    run->driving = true;
    while (run->next < run->items->size() && !run->failed) {
        size_t i = run->next++;
        auto& it = (*run->items)[i];
        run->waiting = true;
        if (it.action == http::PushpinItem::Action::close) {
            close_(it.channel, [this, run](size_t n) {
                run->waiting = false;
                run->closed += n;
                if (!run->driving) publish_item(run);
            });
            if (run->waiting) {
                run->driving = false;  // the other loops answer later, and resume from there
                return;
            }
            continue;
        }
        // A run of send items goes to the bus as one batch (one step in
        // process, one script call on Redis), ids in item order.
        // Pushpin's http-stream content goes out as it is: the publisher
        // formats its own SSE. m0serve still numbers it and keeps it in history.
        // An http-response item is a raw event of its format (bus::kResponseFormat).
        // A ws-message without an http-response is one more raw event, after
        // the item's http-stream
        // (bus::kWsTextFormat or kWsBinaryFormat): WebSocket subscribers
        // are sent its content, the others nothing.
        std::vector<bus::PublishEvent> batch;
        auto item_of = std::make_shared<std::vector<size_t>>();  // each event's item
        for (size_t k = i;; ++k) {
            auto& send = (*run->items)[k];
            if (send.has_stream || send.response) {
                batch.push_back({send.channel, std::move(send.content),
                                 send.response ? std::string(bus::kResponseFormat) : std::string(),
                                 true});
                item_of->push_back(k);
            }
            if (send.ws) {
                batch.push_back(
                    {send.channel, std::move(*send.ws),
                     std::string(send.ws_binary ? bus::kWsBinaryFormat : bus::kWsTextFormat),
                     true});
                item_of->push_back(k);
            }
            if (k + 1 == run->items->size() ||
                (*run->items)[k + 1].action == http::PushpinItem::Action::close)
                break;
            ++run->next;
        }
        bus_->publish_batch_later(std::move(batch), [this, run, i, item_of](bus::BatchResult b) {
            run->waiting = false;
            if (!b.ok()) {
                run->failed = true;
                const auto& res = b.error;
                int status = res.error == bus::PublishError::bad_name    ? 400
                             : res.error == bus::PublishError::too_large ? 413
                                                                         : 503;
                run->answer(error_response(
                    status,
                    "item " + std::to_string((*item_of)[std::min(b.failed, item_of->size() - 1)]) +
                        ": " + bus::reason(res) + " (the items before item " + std::to_string(i) +
                        " were taken; from it on none)"));
                return;
            }
            run->ids.insert(run->ids.end(), b.ids.begin(), b.ids.end());
            if (!run->driving) publish_item(run);
        });
        if (run->waiting) {
            run->driving = false;  // the bus answers later, and resumes from there
            return;
        }
    }
    run->driving = false;
    if (run->failed) return;  // answered
    Response r;
    r.headers.add("Content-Type", "application/json");
    r.body = http::encode_answer(
        {{"ids", run->ids}, {"closed", run->closed}, {"skipped", run->skipped}});
    run->answer(std::move(r));
}

}  // namespace m0::server
