// The access log file (--access-log PATH, or - for standard output): one
// line per request as it ends (http/access.hpp), appended with one write(2).
// Loop thread only: the server writes it; SIGHUP's handler, also on the
// loop, reopens it.
#pragma once
#include <string>

#include "http/access.hpp"

namespace m0::server {

// With --access-log: the line of the request under way (a connection's, an
// HTTP/2 stream's), filled as it goes.
struct AccessEntry {
    http::AccessRecord rec;
    double started = 0;       // monotonic: the request arrived
    double hold_started = 0;  // monotonic: a hold's head was written
};

class AccessLog {
  public:
    AccessLog() = default;
    ~AccessLog();
    AccessLog(const AccessLog&) = delete;
    AccessLog& operator=(const AccessLog&) = delete;

    // Opens `path` for appending (created 0640), or takes standard output
    // for "-". False with `err` set when it cannot.
    bool open(const std::string& path, std::string& err);
    // logrotate: the path opened again; on failure the old file is kept and
    // `err` says why.
    bool reopen(std::string& err);
    bool enabled() const { return fd_ >= 0; }
    // Appends `line` and a LF.
    void write(std::string line);

  private:
    std::string path_;
    int fd_ = -1;
    bool own_ = false;  // not standard output
};

}  // namespace m0::server
