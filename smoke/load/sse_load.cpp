// sse_load: a load driver for SSE servers (m0serve, nchan, Pushpin), one
// process, one libevent loop.
//
// DESIGN
// It opens --holds GET streams on --url (its `{ch}` replaced by one of
// --channels names, round robin), from several 127.0.0.x source addresses
// when one address's ephemeral ports would run out, at most --connecting at a
// time. Once all are open (or --open-timeout passes) it reads the servers'
// RSS (and the part of it they own, without the file-backed pages: the first
// hold of a kind runs code never run before, whose pages then count in the
// RSS though no hold owns them), then publishes through --publish-url: one POST per event, one at a
// time on a keep-alive connection (opened again when an answer says
// `Connection: close`, as Pushpin's control port does), at --rate events/s
// for --seconds, or --burst events back to back. Each event's data is
// `seq=N t=NS` (t: the driver's CLOCK_MONOTONIC when the POST was sent), so
// every delivery gives its publish-to-receive latency. At a steady rate
// the figures count from when each event was due by the rate (the first
// event's send plus (N-1)/rate): an event sent late because the answer to
// the one before it was slow counts its wait, as wrk2 corrects coordinated
// omission; the latency from the send is reported beside it. Responses and streams
// are read with http-parser (chunked or not); event lines are found in the
// decoded body. A stream answered other than 200 counts as failed at once,
// whether or not the server then closes it.
// It stops when every hold has every event of its channel, or when nothing
// arrived for --drain-timeout, and prints one JSON line of figures.
// --storm K is a reconnect storm instead: one stream opens alone, K events
// are published to it (one channel) back to back, and once it has them all
// the --holds streams open at once, each with `Last-Event-ID:` the id of the
// first event, as clients reconnecting after a restart of their proxy would:
// each must be replayed the other K-1 from the server's history. Its figures
// are the server's RSS growth per stream and CPU per million replayed
// deliveries, and each stream's catch-up time (its connect to its last
// event) as p50/p99/max.
// Over TLS (an https:// --url: OpenSSL through libevent's OpenSSL
// bufferevents, the server's certificate verified against --cafile, ALPN
// http/1.1) and over HTTP/2 (--streams N: N streams a connection, as a
// page's EventSources share one; libnghttp2's client session, h2 by ALPN over
// TLS, h2c with prior knowledge over plain TCP; sse_h2.cpp) the streams are
// read alike: each transport reports a stream's status, its decoded body and
// its end (stream_head, stream_data, stream_gone). The publisher speaks
// HTTP/1.1. A ws:// --url holds WebSockets (sse_ws.cpp), each text message
// one event. --handshakes N measures full TLS handshakes a second instead
// (sse_tls.cpp).
// Everything runs on the one thread.
#include "sse_load.hpp"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sse {

constexpr const char* kUsage = R"(usage: sse_load --url URL --publish-url URL [options]
  --url URL              the stream, http(s)://127.0.0.1:PORT/PATH; {ch} is a channel name;
                         ws(s)://: a WebSocket, each text message an event
  --cafile PEM           https://: the CA the server's certificate is verified against
  --streams N            HTTP/2, N streams a connection (h2 by ALPN over https://,
                         h2c with prior knowledge over http://; default 0: HTTP/1.1)
  --handshakes N         instead: N connections, --connecting at a time, each a full
                         TLS handshake and one GET of --url (Connection: close)
  --holds N              streams to open (default 1000)
  --channels K           channel names bench0..bench(K-1), round robin (default 1)
  --connecting N         connections opening at once (default 500)
  --sources K            source addresses 127.0.0.1..127.0.0.K (default: enough
                         for 25000 connections each)
  --source-first F       the first source address is 127.0.0.(1+F) (default 0): several
                         drivers against one server port each take their own addresses
  --go-file PATH         once every stream is open, say so on stderr ('sse_load: open N')
                         and publish only when PATH exists (within --open-timeout): several
                         drivers' holds all open before any publishes
  --publish-url URL      POST target of each event; {ch} is its channel
  --publish-body T       the POST body; {ch} the channel, {data} the event's data
                         (default {data})
  --publish-header H     a request header, 'Name: value' (repeatable)
  --rate R --seconds S   R events/s for S seconds (default 20/s for 10 s)
  --burst E              instead: E events, each sent once the last is answered
  --storm K              instead: K events to one channel first, then every stream
                         opens with Last-Event-ID the first's id (see DESIGN)
  --pad B                B bytes of padding in each event's data (default 0)
  --server-pid PID       a server process (repeatable; its descendants count too):
                         RSS per hold and CPU per delivery are read from /proc
  --open-timeout S       time allowed to open every stream (default 60)
  --drain-timeout S      stop when nothing arrived this long (default 5)
  --label TEXT           a label for the JSON line
)";

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "sse_load: %s\n", why.c_str());
    std::exit(2);
}

int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Url parse_url(const std::string& flag, const std::string& s) {
    http_parser_url u;
    http_parser_url_init(&u);
    if (http_parser_parse_url(s.data(), s.size(), 0, &u) != 0 || !(u.field_set & (1 << UF_HOST)))
        die(flag + " wants http(s)://HOST:PORT/PATH, got '" + s + "'");
    Url out;
    const std::string scheme =
        (u.field_set & (1 << UF_SCHEMA))
            ? s.substr(u.field_data[UF_SCHEMA].off, u.field_data[UF_SCHEMA].len)
            : "http";
    if (scheme != "http" && scheme != "https" && scheme != "ws" && scheme != "wss")
        die(flag + " wants http(s):// or ws(s)://, got '" + s + "'");
    out.tls = scheme == "https" || scheme == "wss";
    out.ws = scheme == "ws" || scheme == "wss";
    out.host = s.substr(u.field_data[UF_HOST].off, u.field_data[UF_HOST].len);
    out.port = (u.field_set & (1 << UF_PORT)) ? u.port : (out.tls ? 443 : 80);
    size_t from = (u.field_set & (1 << UF_PATH)) ? u.field_data[UF_PATH].off : s.size();
    out.path = from < s.size() ? s.substr(from) : "/";
    return out;
}

std::string replace_all(std::string s, std::string_view what, std::string_view with) {
    for (size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += with.size())
        s.replace(at, what.size(), with);
    return s;
}

// ---- the run -----------------------------------------------------------

constexpr int kProbe = -2;  // Conn::index of the --storm probe; -1: the publisher

// --burst and --storm publish each event once the last is answered.
bool chained(const Run& r) { return r.o.burst > 0 || r.o.storm > 0; }

// At a steady rate: when event `seq` is due (the first's send plus (seq-1)/rate).
int64_t due_of(const Run& r, int seq) {
    return r.first_publish + int64_t(double(seq - 1) / r.o.rate * 1e9);
}

// At a steady rate: whether the next event is due now.
bool next_due(const Run& r) {
    return !chained(r) && r.published < r.total_events &&
           (!r.first_publish || now_ns() >= due_of(r, r.published + 1));
}

void open_more(Run& r);
void on_body_line(Conn& c, std::string_view line);
void start_storm(Run& r);

void publish_next(Run& r);
void arm_due_timer(Run& r);

void stream_head(Conn& c, int status) {
    if (c.index == kProbe) {
        if (status != 200) die("--storm: the first stream was answered " + std::to_string(status));
        c.open = true;
        publish_next(*c.run);
        return;
    }
    if (c.index < 0 || c.open || c.failed) return;
    if (status == 200) {
        c.open = true;
        c.run->opened++;
    } else {
        // Refused: counted now, as a server may keep the connection
        // open after its error answer (Pushpin's 502 does).
        c.failed = true;
        c.run->failed++;
    }
    c.run->connecting--;
}

void stream_data(Conn& c, std::string_view chunk) {
    if (c.index == -1) return;
    while (!chunk.empty()) {
        size_t lf = chunk.find('\n');
        if (lf == std::string_view::npos) {
            c.line.append(chunk);
            break;
        }
        c.line.append(chunk.substr(0, lf));
        on_body_line(c, c.line);
        c.line.clear();
        chunk.remove_prefix(lf + 1);
    }
}

int on_headers_complete(http_parser* p) {
    stream_head(*static_cast<Conn*>(p->data), int(p->status_code));
    return 0;
}

int on_body(http_parser* p, const char* at, size_t n) {
    stream_data(*static_cast<Conn*>(p->data), std::string_view(at, n));
    return 0;
}

int on_message_complete(http_parser* p) {
    auto* c = static_cast<Conn*>(p->data);
    if (c->index >= 0) return 0;
    Run& r = *c->run;
    r.answered++;
    if (p->status_code / 100 != 2) r.publish_errors++;
    r.publish_pending = false;
    // A server that closes after its answer: on_read opens a new connection
    // once the parser is done with this one, and publishes from there.
    if (!http_should_keep_alive(p)) {
        r.publisher_closing = true;
        return 0;
    }
    // Steady: an event that came due while this answer was awaited goes now.
    if (chained(r) || next_due(r)) publish_next(r);
    return 0;
}

const http_parser_settings kSettings = [] {
    http_parser_settings s{};
    s.on_headers_complete = on_headers_complete;
    s.on_body = on_body;
    s.on_message_complete = on_message_complete;
    return s;
}();

// A data line: `data: seq=N t=NS` (or with the publisher's own framing).
void on_body_line(Conn& c, std::string_view line) {
    if (line.rfind("id:", 0) == 0) {
        line.remove_prefix(3);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        c.block_id = line;
        return;
    }
    if (line.rfind("data:", 0) == 0) stream_event(c, line);
}

// An event's data: an SSE data line, or a WebSocket message (JSON or not).
void stream_event(Conn& c, std::string_view line) {
    Run& r = *c.run;
    size_t at = line.find("seq=");
    if (at == std::string_view::npos) return;
    uint64_t seq = 0;
    int64_t t = 0;
    const char* end = line.data() + line.size();
    auto [p, ec] = std::from_chars(line.data() + at + 4, end, seq);
    size_t tat = line.find(" t=", at);
    if (ec != std::errc() || tat == std::string_view::npos ||
        std::from_chars(line.data() + tat + 3, end, t).ec != std::errc() || seq == 0 ||
        seq > uint64_t(r.total_events)) {
        r.foreign++;
        return;
    }
    const int64_t now = now_ns();
    if (c.index == kProbe) {
        r.last_progress = now;
        if (seq == 1) r.first_id = c.block_id;
        if (++c.got == r.o.storm) start_storm(r);
        return;
    }
    if (c.seen.empty()) c.seen.resize(size_t(r.total_events) + 1);
    if (c.seen[seq] || (r.o.storm > 0 && seq == 1)) {
        r.duplicates++;  // in a storm the first event is at the cursor: muted
        return;
    }
    c.seen[seq] = true;
    if (seq < c.last_seq) r.out_of_order++;
    c.last_seq = std::max(c.last_seq, seq);
    r.delivered++;
    r.last_delivery = r.last_progress = now;
    if (r.o.storm == 0) {
        const int64_t due = seq < r.due_ns.size() && r.due_ns[seq] ? r.due_ns[seq] : t;
        r.latency_us.push_back(uint32_t(std::min<int64_t>((now - due) / 1000, UINT32_MAX)));
        r.sent_latency_us.push_back(uint32_t(std::min<int64_t>((now - t) / 1000, UINT32_MAX)));
    } else if (++c.got == r.o.storm - 1)  // caught up: from its connect to its last event
        r.latency_us.push_back(
            uint32_t(std::min<int64_t>((now - c.connect_ns) / 1000, UINT32_MAX)));
}

bufferevent* connect_to(Run& r, const Url& u, int source, Conn* c);

// The publisher's connection, opened (again) with a fresh parser.
void connect_publisher(Run& r) {
    Conn& c = *r.publisher;
    if (c.bev) bufferevent_free(c.bev);
    http_parser_init(&c.parser, HTTP_RESPONSE);
    c.parser.data = &c;
    c.bev = connect_to(r, r.publish, 0, &c);
}

void on_read(bufferevent* bev, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    evbuffer* in = bufferevent_get_input(bev);
    while (evbuffer_get_length(in) > 0) {
        size_t n = evbuffer_get_contiguous_space(in);
        const char* data = reinterpret_cast<const char*>(evbuffer_pullup(in, ssize_t(n)));
        size_t used = http_parser_execute(&c->parser, &kSettings, data, n);
        evbuffer_drain(in, n);
        if (c->parser.http_errno != HPE_OK || used != n) {
            if (c->index >= 0 && !c->open && !c->failed) {
                c->run->connecting--;
                c->run->failed++;
            }
            c->failed = true;
            break;
        }
    }
    Run& r = *c->run;
    if (c->index == -1 && r.publisher_closing) {
        r.publisher_closing = false;
        connect_publisher(r);  // frees bev: nothing below may use it
        if (chained(r)) publish_next(r);
    }
}

void stream_gone(Conn& c) {
    Run& r = *c.run;
    if (c.index >= 0) {
        // A stream that closes after its head is dropped: it still counts in
        // what was expected, so the run reports what it missed.
        if (c.open) {
            r.dropped++;
        } else if (!c.failed) {
            r.connecting--;
            r.failed++;
        }
        c.failed = true;
        open_more(r);
    } else {
        std::fprintf(stderr, "sse_load: the %s's connection closed\n",
                     c.index == kProbe ? "first stream" : "publisher");
        event_base_loopbreak(r.base);
    }
}

void on_event(bufferevent*, short what, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    if (what & BEV_EVENT_CONNECTED) return;
    if (c->index >= 0) {
        bufferevent_free(c->bev);
        c->bev = nullptr;
    }
    stream_gone(*c);
}

bufferevent* dial(Run& r, const Url& u, int source, SSL_CTX* ctx) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die(std::string("socket: ") + std::strerror(errno));
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + uint32_t(r.o.source_first + source));
    // The port is chosen at connect(), by the whole address pair: a bind()
    // that picks it fails once an earlier run's streams hold the address's
    // ephemeral ports in TIME_WAIT, though those went to another server port.
    int one = 1;
    ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0)
        die(std::string("bind a source address: ") + std::strerror(errno));
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(u.port);
    if (inet_pton(AF_INET, u.host.c_str(), &dst.sin_addr) != 1)
        die("the host must be an IPv4 address, got '" + u.host + "'");
    if (u.tls) {
        // OpenSSL's first write waits for the connect (EAGAIN until it is done).
        if (::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0 &&
            errno != EINPROGRESS)
            die(std::string("connect: ") + std::strerror(errno));
        return tls_bufferevent(r.base, fd, ctx, u.host);
    }
    bufferevent* bev = bufferevent_socket_new(r.base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (bufferevent_socket_connect(bev, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0)
        die(std::string("connect: ") + std::strerror(errno));
    return bev;
}

// An HTTP/1.1 connection for c (a stream, the probe or the publisher).
bufferevent* connect_to(Run& r, const Url& u, int source, Conn* c) {
    bufferevent* bev = dial(r, u, source, r.tls_h1);
    bufferevent_setcb(bev, on_read, nullptr, on_event, c);
    bufferevent_enable(bev, EV_READ);
    return bev;
}

std::string channel_name(int i) { return "bench" + std::to_string(i); }

std::string stream_path(const Run& r, int channel) {
    return replace_all(r.stream.path, "{ch}", channel_name(channel));
}

// The GET that opens a stream on `channel`; with `last_id`, resuming after it.
std::string stream_request(const Run& r, int channel, const std::string& last_id = {}) {
    std::string req = "GET " + stream_path(r, channel) + " HTTP/1.1\r\nHost: " + r.stream.host +
                      "\r\nAccept: text/event-stream\r\n";
    if (!last_id.empty()) req += "Last-Event-ID: " + last_id + "\r\n";
    return req + "\r\n";
}

void open_more(Run& r) {
    if (r.o.storm > 0 && !r.storm_start) return;  // the probe first
    while (r.connecting < r.o.connecting && r.next_to_open < r.o.holds) {
        // HTTP/2: the next --streams holds share one connection.
        const int k = r.o.streams > 0 ? std::min(r.o.streams, r.o.holds - r.next_to_open) : 1;
        std::vector<Conn*> batch;
        for (int j = 0; j < k; ++j) {
            auto c = std::make_unique<Conn>();
            c->run = &r;
            c->index = r.next_to_open++;
            c->channel = c->index % r.o.channels;
            c->connect_ns = now_ns();
            batch.push_back(c.get());
            r.holds.push_back(std::move(c));
        }
        r.connecting += k;
        if (r.o.streams > 0) {
            h2_open(r, batch, (batch[0]->index / r.o.streams) % r.o.sources);
            continue;
        }
        Conn& c = *batch[0];
        if (r.stream.ws) {
            ws_open(r, c, c.index % r.o.sources);
            continue;
        }
        http_parser_init(&c.parser, HTTP_RESPONSE);
        c.parser.data = &c;
        c.bev = connect_to(r, r.stream, c.index % r.o.sources, &c);
        const std::string req = stream_request(r, c.channel, r.first_id);
        bufferevent_write(c.bev, req.data(), req.size());
    }
}

void publish_next(Run& r) {
    if (r.publish_pending || r.published >= r.total_events) return;
    int seq = ++r.published;
    int ch = (seq - 1) % r.o.channels;
    r.per_channel[size_t(ch)]++;
    const int64_t sent = now_ns();
    std::string data = "seq=" + std::to_string(seq) + " t=" + std::to_string(sent);
    // Due: by the rate's schedule from the first send; a burst's at its send.
    const int64_t due = !chained(r) && r.first_publish ? due_of(r, seq) : sent;
    r.due_ns[size_t(seq)] = due;
    r.publish_lag_max = std::max(r.publish_lag_max, sent - due);
    if (r.o.pad > 0) data += " " + std::string(size_t(r.o.pad), 'x');
    std::string body =
        replace_all(replace_all(r.o.publish_body, "{ch}", channel_name(ch)), "{data}", data);
    std::string path = replace_all(r.publish.path, "{ch}", channel_name(ch));
    std::string req = "POST " + path + " HTTP/1.1\r\nHost: " + r.publish.host +
                      "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& h : r.o.publish_headers) req += h + "\r\n";
    req += "\r\n" + body;
    r.publish_pending = true;
    bufferevent_write(r.publisher->bev, req.data(), req.size());
    if (!r.first_publish) r.first_publish = sent;
    arm_due_timer(r);
}

// Steady: a timer for the next event's due time (the tick would send it up
// to a tick late, and the latency counts from when it was due). libevent
// counts a timeout from the loop turn's cached time, so the timer may fire a
// little early: then it is armed again for what is left.
void arm_due_timer(Run& r) {
    if (chained(r) || r.published >= r.total_events) return;
    const int64_t wait = std::max<int64_t>(0, due_of(r, r.published + 1) - now_ns());
    timeval tv{time_t(wait / 1000000000), suseconds_t(wait % 1000000000 / 1000)};
    event_add(r.due_timer, &tv);
}

uint64_t expected(const Run& r) {
    uint64_t sum = 0;
    for (const auto& c : r.holds)
        if (c->open)
            sum += r.o.storm > 0 ? uint64_t(r.o.storm - 1)
                                 : uint64_t(r.per_channel[size_t(c->channel)]);
    return sum;
}

double percentile(std::vector<uint32_t>& v, double p) {
    if (v.empty()) return 0;
    size_t k = std::min(v.size() - 1, size_t(p * double(v.size())));
    std::nth_element(v.begin(), v.begin() + ptrdiff_t(k), v.end());
    return v[k] / 1000.0;
}

enum class Phase { opening, publishing, draining };
Phase phase = Phase::opening;
unsigned storm_ticks = 0;

void start_publishing(Run& r) {
    r.rss_holds = rss_bytes(r.pids);
    r.owned_holds = owned_rss_bytes(r.pids);
    r.pids = with_descendants(r.o.server_pids);
    r.cpu_before = cpu_seconds(r.pids);
    r.own_cpu_before = own_cpu_seconds();
    r.total_events = r.o.burst > 0 ? r.o.burst : int(r.o.rate * r.o.seconds);
    r.per_channel.assign(size_t(r.o.channels), 0);
    r.latency_us.reserve(size_t(r.total_events) * size_t(r.opened) + 16);
    r.sent_latency_us.reserve(r.latency_us.capacity());
    r.due_ns.assign(size_t(r.total_events) + 1, 0);
    r.publisher = std::make_unique<Conn>();
    r.publisher->run = &r;
    connect_publisher(r);
    phase = Phase::publishing;
    r.last_progress = now_ns();
    if (r.o.burst > 0) publish_next(r);
}

// --storm: the publisher and the probe; the events go out once it is open.
void start_probe(Run& r) {
    r.total_events = r.o.storm;
    r.per_channel.assign(1, 0);
    r.publisher = std::make_unique<Conn>();
    r.publisher->run = &r;
    connect_publisher(r);
    r.probe = std::make_unique<Conn>();
    Conn& c = *r.probe;
    c.run = &r;
    c.index = kProbe;
    http_parser_init(&c.parser, HTTP_RESPONSE);
    c.parser.data = &c;
    c.bev = connect_to(r, r.stream, 0, &c);
    const std::string req = stream_request(r, 0);
    bufferevent_write(c.bev, req.data(), req.size());
    phase = Phase::publishing;
    r.last_progress = now_ns();
}

// --storm: the probe has every event: the streams open, all at once.
void start_storm(Run& r) {
    if (r.first_id.empty()) die("--storm: the first event came without an id: line");
    r.pids = with_descendants(r.o.server_pids);
    r.rss_before = r.rss_peak = rss_bytes(r.pids);
    r.cpu_before = cpu_seconds(r.pids);
    r.own_cpu_before = own_cpu_seconds();
    r.latency_us.reserve(size_t(r.o.holds));
    r.storm_start = r.last_progress = now_ns();
    open_more(r);
}

void on_tick(evutil_socket_t, short, void* arg) {
    Run& r = *static_cast<Run*>(arg);
    const int64_t now = now_ns();
    if (phase == Phase::opening) {
        const bool all = r.opened + r.failed >= r.o.holds;
        if (!all && now <= r.open_deadline) return;
        if (!r.o.go_file.empty()) {
            // Said once; then the file, or the deadline, starts the events.
            if (!r.said_open) {
                std::fprintf(stderr, "sse_load: open %d\n", r.opened);
                r.said_open = true;
            }
            if (::access(r.o.go_file.c_str(), F_OK) != 0 && now <= r.go_deadline) return;
        }
        start_publishing(r);
        return;
    }
    if (r.storm_start && ++storm_ticks % 4 == 0)
        r.rss_peak = std::max(r.rss_peak, rss_bytes(r.pids));
    if (phase == Phase::publishing && r.o.burst == 0 && r.o.storm == 0) {
        // Steady rate: the events due by now, one at a time.
        int due = int(double(now - r.first_publish) / 1e9 * r.o.rate) + 1;
        if (!r.first_publish) due = 1;
        if (r.published < std::min(due, r.total_events)) publish_next(r);
    }
    if (r.answered >= r.total_events) phase = Phase::draining;
    // A storm is over once every stream has opened (or failed) and caught up.
    const bool all_in = r.o.storm == 0 || (r.storm_start && r.opened + r.failed >= r.o.holds);
    if (phase == Phase::draining && ((all_in && r.delivered >= expected(r)) ||
                                     now - r.last_progress > int64_t(r.o.drain_timeout * 1e9)))
        event_base_loopbreak(r.base);
}

int parse_int(const std::string& flag, const char* v, int lo, int hi) {
    int n = 0;
    std::string_view s(v);
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || p != s.data() + s.size() || n < lo || n > hi)
        die(flag + " wants a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
            ", got '" + std::string(s) + "'");
    return n;
}

double parse_double(const std::string& flag, const char* v) {
    char* end = nullptr;
    double d = std::strtod(v, &end);
    if (!end || *end || !(d > 0)) die(flag + " wants a positive number, got '" + v + "'");
    return d;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (i + 1 >= argc) die(a + " wants a value (see --help)");
        const char* v = argv[++i];
        if (a == "--url")
            o.url = v;
        else if (a == "--holds")
            o.holds = parse_int(a, v, 1, 1000000);
        else if (a == "--channels")
            o.channels = parse_int(a, v, 1, 100000);
        else if (a == "--connecting")
            o.connecting = parse_int(a, v, 1, 100000);
        else if (a == "--sources")
            o.sources = parse_int(a, v, 1, 250);
        else if (a == "--source-first")
            o.source_first = parse_int(a, v, 0, 249);
        else if (a == "--go-file")
            o.go_file = v;
        else if (a == "--publish-url")
            o.publish_url = v;
        else if (a == "--publish-body")
            o.publish_body = v;
        else if (a == "--publish-header")
            o.publish_headers.emplace_back(v);
        else if (a == "--rate")
            o.rate = parse_double(a, v);
        else if (a == "--seconds")
            o.seconds = parse_double(a, v);
        else if (a == "--burst")
            o.burst = parse_int(a, v, 1, 10000000);
        else if (a == "--storm")
            o.storm = parse_int(a, v, 2, 100000);
        else if (a == "--pad")
            o.pad = parse_int(a, v, 0, 1 << 20);
        else if (a == "--server-pid")
            o.server_pids.push_back(parse_int(a, v, 1, 1 << 30));
        else if (a == "--open-timeout")
            o.open_timeout = parse_double(a, v);
        else if (a == "--drain-timeout")
            o.drain_timeout = parse_double(a, v);
        else if (a == "--label")
            o.label = v;
        else if (a == "--cafile")
            o.cafile = v;
        else if (a == "--streams")
            o.streams = parse_int(a, v, 1, 10000);
        else if (a == "--handshakes")
            o.handshakes = parse_int(a, v, 1, 10000000);
        else
            die("unknown option '" + a + "' (see --help)");
    }
    if (o.url.empty() || (o.publish_url.empty() && o.handshakes == 0))
        die("--url and --publish-url are required");
    if ((o.storm > 0 || o.streams > 0) && o.url.rfind("ws", 0) == 0)
        die("a ws:// --url takes neither --storm nor --streams");
    if (o.storm > 0 && (o.burst > 0 || o.channels != 1))
        die("--storm is one channel, and not with --burst");
    if (o.sources == 0) o.sources = (o.holds + 24999) / 25000;
    if (o.source_first + o.sources > 250) die("--source-first plus --sources is past 127.0.0.250");
    if (!o.go_file.empty() && (o.storm > 0 || o.handshakes > 0))
        die("--go-file is for steady and burst runs");
    return o;
}

void raise_fd_limit() {
    rlimit l{};
    if (getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur < l.rlim_max) {
        l.rlim_cur = l.rlim_max;
        setrlimit(RLIMIT_NOFILE, &l);
    }
}

std::string json_escape(const std::string& s) {
    std::string out;
    for (char ch : s) {
        if (ch == '"' || ch == '\\') out += '\\';
        if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
    }
    return out;
}

}  // namespace sse

using namespace sse;

int main(int argc, char** argv) {
    static Run r;
    r.o = parse(argc, argv);
    r.stream = parse_url("--url", r.o.url);
    if (r.o.handshakes == 0) r.publish = parse_url("--publish-url", r.o.publish_url);
    if (r.stream.tls || r.publish.tls) {
        if (r.o.cafile.empty()) die("an https:// URL wants --cafile (the server's CA)");
        r.tls_h1 = tls_client_ctx(r.o.cafile, "http/1.1");
        r.tls_h2 = tls_client_ctx(r.o.cafile, "h2");
    } else if (r.o.handshakes > 0) {
        die("--handshakes wants an https:// --url");
    }
    raise_fd_limit();
    // Timers to the microsecond (timerfd): the steady events go when due.
    event_config* cfg = event_config_new();
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    r.base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    r.pids = with_descendants(r.o.server_pids);
    if (r.o.handshakes > 0) return run_handshakes(r);
    r.rss_before = rss_bytes(r.pids);
    r.owned_before = owned_rss_bytes(r.pids);
    r.open_deadline = now_ns() + int64_t(r.o.open_timeout * 1e9);
    r.go_deadline = r.open_deadline + int64_t(r.o.open_timeout * 1e9);
    r.holds.reserve(size_t(r.o.holds));
    const int64_t t_open = now_ns();
    if (r.o.storm > 0)
        start_probe(r);
    else
        open_more(r);
    r.tick = event_new(r.base, -1, EV_PERSIST, on_tick, &r);
    r.due_timer = event_new(
        r.base, -1, 0,
        [](evutil_socket_t, short, void* arg) {
            Run& run = *static_cast<Run*>(arg);
            if (next_due(run))
                publish_next(run);
            else if (!run.publish_pending)
                arm_due_timer(run);
        },
        &r);
    // The tick looks for the end, the opened streams and a storm's peak
    // every 5 ms (the steady events have their own timer: a tick of 1 ms
    // cost the driver 1000 wake-ups a second, counted in its floor).
    timeval every{0, 5000};
    event_add(r.tick, &every);
    // Connections finishing their heads let more start.
    event* refill = event_new(
        r.base, -1, EV_PERSIST,
        [](evutil_socket_t, short, void* arg) { open_more(*static_cast<Run*>(arg)); }, &r);
    timeval ten_ms{0, 10000};
    event_add(refill, &ten_ms);
    event_base_dispatch(r.base);
    const double open_s = double(r.first_publish ? r.first_publish - t_open : 0) / 1e9;
    const double cpu = cpu_seconds(r.pids) - r.cpu_before;
    const double own_cpu = r.first_publish ? own_cpu_seconds() - r.own_cpu_before : 0.0;
    const uint64_t want = expected(r);
    const double span =
        double(r.last_delivery - (r.o.storm > 0 ? r.storm_start : r.first_publish)) / 1e9;
    // A storm's RSS: the most the server grew by while it replayed.
    if (r.o.storm > 0) r.rss_holds = std::max(r.rss_peak, rss_bytes(r.pids));
    std::vector<uint32_t> lat = r.latency_us, sent_lat = r.sent_latency_us;
    std::printf(
        "{\"label\": \"%s\", \"holds\": %d, \"holds_open\": %d, \"failed\": %d, \"dropped\": %d, "
        "\"open_s\": %.3f, "
        "\"rss_per_hold_bytes\": %.0f, \"owned_rss_per_hold_bytes\": %.0f, "
        "\"events\": %d, \"publish_errors\": %d, "
        "\"delivered\": %llu, \"expected\": %llu, \"duplicates\": %llu, \"out_of_order\": %llu, "
        "\"foreign\": %llu, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, "
        "\"deliveries_per_s\": %.0f, \"cpu_s\": %.3f, \"cpu_s_per_1m\": %.3f, "
        "\"driver_cpu_s\": %.3f, \"driver_cpu_s_per_1m\": %.3f, \"first_publish_s\": %.6f, "
        "\"last_delivery_s\": %.6f, \"p50_sent_ms\": %.3f, \"p99_sent_ms\": %.3f, "
        "\"publish_lag_max_ms\": %.3f}\n",
        json_escape(r.o.label).c_str(), r.o.holds, r.opened, r.failed, r.dropped, open_s,
        r.opened ? double(r.rss_holds - r.rss_before) / r.opened : 0.0,
        r.opened && r.o.storm == 0 ? double(r.owned_holds - r.owned_before) / r.opened : 0.0,
        r.published, r.publish_errors, static_cast<unsigned long long>(r.delivered),
        static_cast<unsigned long long>(want), static_cast<unsigned long long>(r.duplicates),
        static_cast<unsigned long long>(r.out_of_order), static_cast<unsigned long long>(r.foreign),
        percentile(lat, 0.5), percentile(lat, 0.99),
        lat.empty() ? 0.0 : *std::max_element(lat.begin(), lat.end()) / 1000.0,
        span > 0 ? double(r.delivered) / span : 0.0, cpu,
        r.delivered ? cpu / double(r.delivered) * 1e6 : 0.0, own_cpu,
        r.delivered ? own_cpu / double(r.delivered) * 1e6 : 0.0, double(r.first_publish) / 1e9,
        double(r.last_delivery) / 1e9, percentile(sent_lat, 0.5), percentile(sent_lat, 0.99),
        double(r.publish_lag_max) / 1e6);
    // 0 only for a clean run: every stream open and kept, every event
    // delivered to each once and in order.
    const bool clean = r.opened == r.o.holds && r.dropped == 0 && want > 0 && r.delivered == want &&
                       r.duplicates == 0 && r.out_of_order == 0 && r.publish_errors == 0;
    return clean ? 0 : 1;
}
