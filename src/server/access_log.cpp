#include "server/access_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace m0::server {

AccessLog::~AccessLog() {
    if (own_ && fd_ >= 0) ::close(fd_);
}

bool AccessLog::open(const std::string& path, std::string& err) {
    path_ = path;
    if (path == "-") {
        fd_ = STDOUT_FILENO;
        own_ = false;
        return true;
    }
    return reopen(err);
}

bool AccessLog::reopen(std::string& err) {
    if (path_.empty() || path_ == "-") return true;
    int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        err = "cannot open " + path_ + ": " + std::strerror(errno);
        return false;
    }
    if (own_ && fd_ >= 0) ::close(fd_);
    fd_ = fd;
    own_ = true;
    return true;
}

void AccessLog::write(std::string line) {
    if (fd_ < 0) return;
    line.push_back('\n');
    // A regular file or a pipe: a short write is finished, a failed one (a
    // full disk) loses the line, not the request.
    size_t off = 0;
    while (off < line.size()) {
        ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        off += static_cast<size_t>(n);
    }
}

}  // namespace m0::server
