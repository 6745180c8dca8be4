// Server, the loop side of the bus: draining its frames (h frames open
// holds, publish frames fan out), asking the bus for each hold's replay, and
// replaying every hold when a shared bus comes back (resync). Loop thread only.
#include "bus/names.hpp"
#include "loop/log.hpp"
#include "server/conn.hpp"
#include "server/h2_conn.hpp"
#include "server/server.hpp"

namespace m0::server {

void Server::on_bus_ready() {
    if (!bus_) return;
    std::deque<bus::Frame> frames;
    bus_->drain(frames);
    double now = monotonic_seconds();
    for (auto& f : frames) {
        if (auto* h = std::get_if<bus::HoldFrame>(&f))
            sse_peer_frame(*h);
        else
            holds_.publish(std::get<bus::PublishFrame>(f), now);
    }
}

void Server::sse_peer_frame(bus::HoldFrame& f) {
    auto slot = bus::parse_reserved_stream_url(f.stream_url);
    Conn* c = slot ? find(*slot) : nullptr;
    // An HTTP/2 stream holds as a connection does.
    H2Stream* st = slot && !c ? find_stream(*slot) : nullptr;
    const bool waiting =
        c ? c->phase == Phase::waiting : st && st->state == H2Stream::State::waiting;
    if (!waiting || holds_.has(*slot)) {
        // The client left (or the index was reused): nobody to hold.
        metrics_.frames_dropped.fetch_add(1);
        metrics_.holds_open.release();
        return;
    }
    // Where the hold starts: after its cursor, or, on a first connect, at the
    // position read before its handler ran. What was published from there up
    // to the frame comes from history; later events arrive live.
    const uint64_t after = f.cursor != 0 ? f.cursor : f.position;
    // A WebSocket only where the loop checked the handshake (c->ws).
    const Transport transport = f.response                  ? Transport::response
                                : f.websocket && c && c->ws ? c->ws->transport()
                                                            : Transport::stream;
    if (f.response && st) {
        st->poll = true;
        st->poll_timeout = f.timeout;
    } else if (f.response) {
        c->poll = std::make_unique<PollState>();
        c->poll->timeout = f.timeout;
    }
    holds_.open_awaiting(*slot, after, f.channels, std::move(f.keepalive), transport);
    if (after < f.upto || f.cursor != 0)
        request_replay(*slot, f.channels, after, f.upto, f.cursor != 0);
    else
        holds_.replayed(*slot, bus::Replay{.upto = f.upto}, 0, monotonic_seconds());
}

void Server::request_replay(SlotRef slot, const std::vector<std::string>& channels, uint64_t after,
                            uint64_t upto, bool report_gap) {
    // In process the answer comes at once; a shared bus answers after a round
    // trip, and the hold's live events wait behind it meanwhile.
    // A resync may ask again before an earlier answer came: only the latest
    // answer is applied (HoldTable::ask_replay).
    const uint16_t ask = holds_.ask_replay(slot);
    bus_->replay_later(channels, after, upto, [this, slot, report_gap, ask](bus::Replay r) {
        uint64_t reset_from = 0;
        if (r.gap && report_gap) reset_from = r.events.empty() ? r.upto + 1 : r.events.front().id;
        holds_.replayed(slot, r, reset_from, monotonic_seconds(), ask);
    });
}

void Server::resync_holds() {
    // The shared bus was down: each hold may have missed events. Replayed
    // from the last id it queued; a gap history cannot fill is an m0-reset.
    std::vector<SlotRef> slots = holds_.open_slots();
    if (!slots.empty())
        M0_LOG(info, "bus: replaying ", std::to_string(slots.size()), " holds from their last ids");
    for (SlotRef s : slots) {
        uint64_t after = 0;
        std::vector<std::string> channels;
        if (holds_.begin_resync(s, after, channels))
            request_replay(s, channels, after, bus::kUptoUnknown, true);
    }
}

}  // namespace m0::server
