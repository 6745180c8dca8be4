#include "server/tls_tickets.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

namespace m0::server {

// The page every process shares; under `mu`.
struct TicketKeyring::Shared {
    pthread_mutex_t mu;
    int64_t n = 0;                         // the period the ring is at
    std::array<unsigned char, 32> secret;  // s_n
    Key current;                           // derived from s_n
    Key previous;                          // from s_{n-1}, when has_previous
    bool has_previous = false;
};

namespace {

using Secret = std::array<unsigned char, 32>;

std::string openssl_error() {
    char buf[256] = "";
    ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
    return buf;
}

// HMAC-SHA256(secret, label) into `out` (32 bytes).
void derive(const Secret& secret, std::string_view label, unsigned char* out) {
    size_t len = 0;
    if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret.data(), secret.size(),
                   reinterpret_cast<const unsigned char*>(label.data()), label.size(), out, 32,
                   &len) ||
        len != 32)
        // Only out of memory: HMAC-SHA256 is in every OpenSSL 3 default provider.
        throw std::runtime_error("TLS: cannot derive a session ticket key: " + openssl_error());
}

TicketKeyring::Key key_of(const Secret& secret) {
    TicketKeyring::Key k;
    unsigned char name[32];
    derive(secret, "m0serve ticket key name", name);
    std::memcpy(k.name.data(), name, k.name.size());
    derive(secret, "m0serve ticket hmac key", k.hmac.data());
    derive(secret, "m0serve ticket aes key", k.aes.data());
    OPENSSL_cleanse(name, sizeof name);
    return k;
}

// s_{n+1} from s_n, which is overwritten.
void ratchet(Secret& secret) {
    Secret next;
    derive(secret, "m0serve ticket ratchet", next.data());
    secret = next;
    OPENSSL_cleanse(next.data(), next.size());
}

int64_t period_of(int64_t now, int64_t period) { return now < 0 ? 0 : now / period; }

}  // namespace

int64_t TicketKeyring::wall_seconds() { return static_cast<int64_t>(std::time(nullptr)); }

std::shared_ptr<TicketKeyring> TicketKeyring::make(int64_t period) {
    if (period < 1) throw std::invalid_argument("TLS: a ticket key period under a second");
    void* page =
        ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        throw std::runtime_error(std::string("TLS: no shared page for the session ticket keys: ") +
                                 std::strerror(errno));
    auto* s = new (page) Shared;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    // A worker that dies holding it (killed mid-handshake) leaves it to the next.
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    std::shared_ptr<TicketKeyring> ring(new TicketKeyring(s, period));
    if (RAND_bytes(s->secret.data(), static_cast<int>(s->secret.size())) != 1)
        throw std::runtime_error("TLS: no random bytes for the session ticket keys: " +
                                 openssl_error());
    s->n = period_of(ring->clock(), period);
    s->current = key_of(s->secret);
    return ring;
}

TicketKeyring::~TicketKeyring() {
    OPENSSL_cleanse(&s_->secret, sizeof s_->secret);
    OPENSSL_cleanse(&s_->current, sizeof s_->current);
    OPENSSL_cleanse(&s_->previous, sizeof s_->previous);
    pthread_mutex_destroy(&s_->mu);
    ::munmap(s_, sizeof(Shared));
}

void TicketKeyring::lock() {
    if (pthread_mutex_lock(&s_->mu) == EOWNERDEAD) pthread_mutex_consistent(&s_->mu);
}

void TicketKeyring::unlock() { pthread_mutex_unlock(&s_->mu); }

// Held for a scope, also when a derivation throws (out of memory).
struct TicketKeyring::Held {
    TicketKeyring& ring;
    explicit Held(TicketKeyring& r) : ring(r) { ring.lock(); }
    ~Held() { ring.unlock(); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
};

void TicketKeyring::step_locked(int64_t now) {
    const int64_t target = period_of(now, period_);
    if (target <= s_->n) return;  // a clock set back keeps the keys it has
    if (target == s_->n + 1) {
        s_->previous = s_->current;
        s_->has_previous = true;
    } else {
        // Periods passed with nothing stepping: no ticket of the one before
        // now's was sealed with this ring, and none older may open.
        for (int64_t n = s_->n; n < target - 1; ++n) ratchet(s_->secret);
        OPENSSL_cleanse(&s_->previous, sizeof s_->previous);
        s_->has_previous = false;
    }
    ratchet(s_->secret);
    s_->current = key_of(s_->secret);
    s_->n = target;
}

void TicketKeyring::step(int64_t now) {
    Held held(*this);
    step_locked(now);
}

int64_t TicketKeyring::at() {
    Held held(*this);
    return s_->n;
}

// Sealing and opening step and read under one hold of the mutex: a
// handshake takes it once.
TicketKeyring::Key TicketKeyring::sealing(int64_t now) {
    Held held(*this);
    step_locked(now);
    return s_->current;
}

TicketKeyring::Found TicketKeyring::opening(const unsigned char* name, int64_t now, Key& out) {
    Held held(*this);
    step_locked(now);
    if (CRYPTO_memcmp(name, s_->current.name.data(), s_->current.name.size()) == 0) {
        out = s_->current;
        return Found::current;
    }
    if (s_->has_previous &&
        CRYPTO_memcmp(name, s_->previous.name.data(), s_->previous.name.size()) == 0) {
        out = s_->previous;
        return Found::previous;
    }
    return Found::none;
}

}  // namespace m0::server
