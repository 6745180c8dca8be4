// Mojo mounts: native C++ handlers compiled into the binary.
//
// DESIGN
// A mount is a compile-time type satisfying MojoMount: a static `name` (what
// `--mount PREFIX=NAME` says) and `serve(const Request&) -> Response`, called on
// a MojoPool thread (never with the GIL). A program serves the mounts of the
// Registry it hands m0::app::run (mojo/registry.hpp): m0serve's own main()
// lists BuiltinMount; an application's main() lists its own types beside it.
// This header and what it includes are installed (`make install`): they must
// stay free of the server's internals. A serve function may answer
//   - an ordinary response;
//   - a hold: `M0-Hold: stream` + `M0-Channel: NAME` on an ordinary response,
//     the body being the head of the stream (see hold/hold.hpp);
//   - a streamed body (Response::stream) that is not a hold: refused 409,
//     because a stream begun on a pool thread has no producer the loop drains.
// A mount whose serve never blocks and takes microseconds (no I/O, no lock
// held long) may say so with `static constexpr bool quick = true;`: with
// --mojo-in-loop the loop thread that read the request runs it in place, the
// same steps as a pool thread (the hold frame before the completion),
// without the two thread hand-offs the pool costs. A quick mount that blocks
// would stall every connection of its loop.
// A mount may list native WebSocket routes (`ws_paths`, mojo/ws_handler.hpp):
// an upgrade there is served with on_open / on_message / on_close.
// A mount's request fields: method, path (PATH_INFO, below the prefix), query,
// headers, body; script_name is the mount prefix.
#pragma once
#include <concepts>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"

namespace m0::grant {
class KeyRing;
class SharedKeyRing;
}  // namespace m0::grant

namespace m0::mojo {

// What a mount may use from the server; fixed after start-up.
struct MojoEnv {
    // --grant-key-file, or null; SIGHUP replaces the ring inside it.
    const grant::SharedKeyRing* grant_keys = nullptr;
};

template <class M>
concept MojoMount = requires(M& m, const http::Request& r, const MojoEnv& env) {
    { M::name } -> std::convertible_to<std::string_view>;
    { m.serve(r) } -> std::same_as<http::Response>;
    {M(env)};
};

// The type-erased handle the pool calls.
class Handler {
  public:
    virtual ~Handler() = default;
    virtual http::Response serve(const http::Request& req) = 0;
    // The mount declared itself quick: its loop may run it in place.
    virtual bool quick() const { return false; }
    // Its native WebSocket routes, below its prefix (mojo/ws_handler.hpp).
    virtual std::vector<std::string> ws_paths() const { return {}; }
};

template <MojoMount M>
class HandlerFor final : public Handler {
  public:
    explicit HandlerFor(const MojoEnv& env) : mount_(env) {}
    http::Response serve(const http::Request& req) override { return mount_.serve(req); }
    bool quick() const override {
        if constexpr (requires { M::quick; })
            return M::quick;
        else
            return false;
    }
    std::vector<std::string> ws_paths() const override {
        if constexpr (requires { M::ws_paths; })
            return {std::begin(M::ws_paths), std::end(M::ws_paths)};
        else
            return {};
    }

  private:
    M mount_;
};

}  // namespace m0::mojo
