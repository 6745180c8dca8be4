// sse_load's view of the servers under test from /proc: their processes
// (a server's workers are its descendants), their RSS and CPU, and the
// driver's own CPU. Read on the run's one thread.
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "sse_load.hpp"

namespace sse {

std::vector<int> with_descendants(const std::vector<int>& roots) {
    std::vector<std::pair<int, int>> parent;  // pid, ppid
    if (DIR* d = opendir("/proc")) {
        while (dirent* e = readdir(d)) {
            int pid = std::atoi(e->d_name);
            if (pid <= 0) continue;
            std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
            std::string line;
            if (!std::getline(f, line)) continue;
            size_t close = line.rfind(')');
            if (close == std::string::npos) continue;
            std::istringstream rest(line.substr(close + 2));
            char state;
            int ppid = 0;
            rest >> state >> ppid;
            parent.emplace_back(pid, ppid);
        }
        closedir(d);
    }
    std::vector<int> all = roots;
    for (size_t i = 0; i < all.size(); ++i)
        for (auto [pid, ppid] : parent)
            if (ppid == all[i] && std::find(all.begin(), all.end(), pid) == all.end())
                all.push_back(pid);
    return all;
}

namespace {
// The sum over pids of /proc/PID/status fields (kB) named in `fields`, in bytes.
int64_t status_bytes(const std::vector<int>& pids, std::initializer_list<std::string_view> fields) {
    int64_t sum = 0;
    for (int pid : pids) {
        std::ifstream f("/proc/" + std::to_string(pid) + "/status");
        for (std::string line; std::getline(f, line);)
            for (std::string_view field : fields)
                if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
                    line[field.size()] == ':')
                    sum += std::atoll(line.c_str() + field.size() + 1) * 1024;
    }
    return sum;
}
}  // namespace

int64_t rss_bytes(const std::vector<int>& pids) { return status_bytes(pids, {"VmRSS"}); }

int64_t owned_rss_bytes(const std::vector<int>& pids) {
    return status_bytes(pids, {"RssAnon", "RssShmem"});
}

double cpu_seconds(const std::vector<int>& pids) {
    double sum = 0;
    const double tick = double(sysconf(_SC_CLK_TCK));
    for (int pid : pids) {
        std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
        std::string line;
        if (!std::getline(f, line)) continue;
        std::istringstream rest(line.substr(line.rfind(')') + 2));
        std::string field;
        for (int i = 3; i <= 15 && rest >> field; ++i)
            if (i == 14 || i == 15) sum += std::atof(field.c_str()) / tick;  // utime, stime
    }
    return sum;
}

// This process's own CPU seconds (user and system): what reading the
// deliveries costs the driver, on the same cores as the server.
double own_cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace sse
