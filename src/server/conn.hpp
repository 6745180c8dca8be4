// Server::Conn: one connection's state, shared by the files that implement
// Server (server.cpp, listener.cpp, writer.cpp). Loop thread only; private
// to the server folder.
#pragma once
#include <event2/bufferevent.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/access.hpp"
#include "server/server.hpp"

namespace m0::server {

// With --access-log: the line of the request under way, filled as it goes.
struct AccessEntry {
    http::AccessRecord rec;
    double started = 0;       // monotonic: the request arrived
    double hold_started = 0;  // monotonic: a hold's head was written
};

struct Server::Conn {
    Server* server = nullptr;
    SlotRef slot;
    bufferevent* bev = nullptr;
    event* timer = nullptr;
    bool admin = false;
    Phase phase = Phase::reading;
    // Reading phase only: a hold parses nothing more (its answer closes the
    // connection), so the parser, most of a Conn's size, goes when it starts.
    std::unique_ptr<http::RequestParser> parser;
    bool in_process = false;  // inside process_input (no re-entry)
    bool keep_alive = true;
    bool head_request = false;
    int version_minor = 1;
    bool peer_eof = false;       // the client half-closed: answer what it sent, then close
    bool read_paused = false;    // output over the high-water mark: the next request waits
    bool idle_on_drain = false;  // an answer is draining: the keep-alive timer starts after
    bool chunked = false;        // the streaming body is chunk-framed
    double deadline = 0;         // waiting: when --request-timeout answers 504 (monotonic)
    std::shared_ptr<StreamState> stream;
    std::string remote_addr;
    std::optional<std::string> origin;  // the request's Origin, kept for a hold head's CORS fields
    uint16_t remote_port = 0;
    const Listener* via = nullptr;        // the listener it came through (null: adopted)
    std::unique_ptr<AccessEntry> access;  // --access-log only
    // Holding: what the hold table wrote this loop turn, not yet in the
    // output; Server::flush_staged sends it in one sendmsg at the turn's end
    // (hold_output.cpp). References to the shared event bytes, not copies.
    std::vector<SharedBytes> staged;  // loop thread
    size_t staged_bytes = 0;          // loop thread: their total size

    explicit Conn(http::ParserLimits limits)
        : parser(std::make_unique<http::RequestParser>(limits)) {}
};

}  // namespace m0::server
