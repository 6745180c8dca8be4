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
//   GET  /stream                 a streamed body that is not a hold: refused 409
//   GET  /live?grant=TOKEN       a hold on the channels a verified grant names
#pragma once
#include "mojo/mojo.hpp"

namespace m0::mojo {

struct BuiltinMount {
    static constexpr std::string_view name = "mojo";
    static constexpr bool quick = true;  // every handler answers at once
    explicit BuiltinMount(const MojoEnv& env) : env_(env) {}
    http::Response serve(const http::Request& req);

  private:
    MojoEnv env_;
};

static_assert(MojoMount<BuiltinMount>);

std::string json_escape(std::string_view s);

}  // namespace m0::mojo
