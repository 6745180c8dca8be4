// TLS session ticket keys that rotate (--tls-ticket-rotation), the same in
// every --workers process.
//
// DESIGN
// A ticket (RFC 5077; TLS 1.3's NewSessionTicket) is the session's secrets
// sealed with the server's ticket key: whoever has that key can open every
// ticket sealed with it, and with a TLS 1.2 ticket decrypt the recorded
// connection. A key kept for the life of the process (OpenSSL's default,
// and m0serve's before) puts every session of that life at stake; so the
// key changes every period, and a key once dropped cannot be made again.
//
// The wall clock is cut into periods of --tls-ticket-rotation seconds
// (period n: n * P <= now < (n + 1) * P). The key of period n is derived
// (HMAC-SHA256 with three labels: the key's name, its HMAC key, its AES key)
// from a 32-byte secret s_n, and s_{n+1} = HMAC-SHA256(s_n, a label): a
// one-way ratchet. Stepping from n to n + 1 keeps the key of n (to open
// tickets sealed late in period n; they are then renewed) and overwrites
// s_n; the key of n - 1 is gone. A ticket opens for between one and two
// periods, and the lifetime hint a client gets is one period.
//
// One ratchet for every process: its state lives in a page mapped shared
// (MAP_SHARED | MAP_ANONYMOUS) before --workers forks, behind a
// process-shared robust mutex; whichever process first needs a later
// period steps it, and a worker a roll forks later starts from where it
// is. No process keeps a copy (the parent never reads it), so nothing
// older than the previous period's key survives anywhere. s_0 is random
// at start (RAND_bytes): a restart or a binary upgrade begins a new chain.
//
// Threads: any thread of any process (loop threads seal and open tickets as
// they handshake, loop 0's timer steps it); the mutex guards the page.
#pragma once
#include <array>
#include <cstdint>
#include <memory>

namespace m0::server {

class TicketKeyring {
  public:
    static constexpr int64_t kDefaultPeriod = 3600;
    // One key: its name (sent with each ticket, to find the key again), the
    // HMAC-SHA256 key and the AES-256-CBC key (OpenSSL's ticket format).
    struct Key {
        std::array<unsigned char, 16> name;
        std::array<unsigned char, 32> hmac;
        std::array<unsigned char, 32> aes;
    };
    // Which key opens a ticket: none (a full handshake), the current period's,
    // or the previous one's (the ticket is then renewed).
    enum class Found { none, current, previous };

    // A ring rotating every `period` seconds, its first secret random, in a
    // page shared with the processes forked after. Throws (one line) when
    // there are no random bytes or no page. Main thread, before any fork.
    static std::shared_ptr<TicketKeyring> make(int64_t period);
    ~TicketKeyring();
    TicketKeyring(const TicketKeyring&) = delete;
    TicketKeyring& operator=(const TicketKeyring&) = delete;

    // The key that seals a ticket at `now` (seconds since the epoch); steps
    // the ratchet to now's period first. Any thread.
    Key sealing(int64_t now);
    // The key named `name` at `now`, into `out`. Any thread.
    Found opening(const unsigned char* name, int64_t now, Key& out);
    // Steps to now's period (so an idle server drops its old secrets on
    // time too). Any thread.
    void step(int64_t now);
    int64_t period() const { return period_; }
    // The period the ring is at (tests). Any thread.
    int64_t at();

    // The clock sealing and opening read when TLS asks (seconds since the
    // epoch); tests set their own. Set before any handshake.
    int64_t (*clock)() = wall_seconds;
    static int64_t wall_seconds();

  private:
    struct Shared;
    struct Held;  // the page's mutex for a scope
    TicketKeyring(Shared* s, int64_t period) : s_(s), period_(period) {}
    void lock();
    void unlock();
    void step_locked(int64_t now);
    Shared* s_;  // the shared page, mapped before the fork
    const int64_t period_;
};

}  // namespace m0::server
