// The built-in `mojo` mount: the native handlers m0serve ships with.
//   GET  /hello                  plain text
//   ANY  /echo                   the request back as JSON
//   GET  /hold?channel=A[,B]     a hold, unauthenticated (see builtin.cpp)
//   GET  /poll?channel=A[&timeout=S][&prev_id=ID]
//                                a long-poll (GRIP's Grip-Hold: response),
//                                unauthenticated: the first event's data as a
//                                200 text/plain, or a 204 after S seconds
//   GET  /ws?channel=A[,B][&lastEventID=N]
//                                a WebSocket subscriber, unauthenticated: each
//                                event a JSON text message (server/ws_subscriber.cpp)
//   GET  /ws-echo[?channel=A]    a native WebSocket handler (mojo/ws_handler.hpp):
//                                each message echoed ("echo: " before text),
//                                the channel's events if one is named
//   GET  /stream                 a streamed body that is not a hold: refused 409
//   GET  /live?grant=TOKEN       a hold on the channels a verified grant names
//   GET  /live-ws?grant=TOKEN[&lastEventID=N]
//                                /live's twin for WebSockets: the same grant
//                                check (403 before any 101), then /ws's subscriber
#pragma once
#include <array>
#include <optional>
#include <string>

#include "mojo/mojo.hpp"
#include "mojo/ws_handler.hpp"

namespace m0::mojo {

struct BuiltinMount {
    static constexpr std::string_view name = "mojo";
    static constexpr bool quick = true;  // every handler answers at once
    static constexpr std::array<std::string_view, 1> ws_paths = {"/ws-echo"};
    explicit BuiltinMount(const MojoEnv& env) : env_(env) {}
    http::Response serve(const http::Request& req);

    // /ws-echo's handler.
    struct Echo {
        void on_open(WsContext& c);
        void on_message(WsContext& c, bool text, std::string_view message);
        void on_close(WsContext&, uint16_t) {}
    };

  private:
    // /live's and /live-ws's check: nullopt with `channels` set to the
    // verified grant's channels (comma-separated), or the refusal to answer
    // (503 without a key ring, 403 with the reason for a missing or bad grant).
    std::optional<http::Response> granted_channels(const http::Request& req,
                                                   std::string& channels) const;

    MojoEnv env_;
    Echo echo_;
};

static_assert(MojoMount<BuiltinMount>);

std::string json_escape(std::string_view s);

}  // namespace m0::mojo
