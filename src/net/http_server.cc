// net::HttpServer: a small HTTP/1.1 server written by hand against Linux epoll.
//
// Why not Boost.Beast/Asio (what this was before): every OTLP/HTTP request
// passes through here, typically ~400 KB of protobuf, and under load Beast's
// per-operation machinery — type-erased executor copies, a timerfd re-armed
// for every read, 64 KB read_some calls, then a copy from its flat_buffer
// into the string body — cost about a fifth of the server's CPU. Here a body
// with a Content-Length is received straight into the std::string the
// handler gets (sized once, then filled by as few recv() calls as the kernel
// allows), and timeouts are a sweep about once a second instead of a timer
// per operation.
//
// Threads: each I/O thread has its own epoll instance. The listening socket
// is in all of them with EPOLLEXCLUSIVE, so a new connection wakes one idle
// thread, and the thread that accepts a connection owns it until it closes:
// nothing on the data path is shared or locked. Handlers run synchronously on
// that thread. A thread leaves new connections to another that owns fewer
// (IoThread::Accept), so that a few busy connections do not share one core.
//
// Deferred answers (HttpDeferral): a handler that would otherwise block the
// thread (the OTLP receiver waiting for an fsync) returns at once with a
// responder, and the connection waits in kDeferred, reading nothing, while
// the thread serves its other connections. The responder may be completed
// on any thread: it posts the answer, tagged with the connection's id, to
// the thread's mailbox and wakes the thread through its eventfd, and the
// thread writes it. An id, not a pointer: a connection closed meanwhile (by
// its peer, the idle timeout or Stop) is simply not found, and its answer
// is dropped.
//
// A connection is a small state machine: a request being read (its head,
// then a body by length or by chunks: HttpRequestParser, http_parser.h, fed
// from the connection's input buffer or receiving the body in place), then
// the response being given and written. Connections are
// level-triggered in epoll, so a read may stop early (a short recv() means
// the socket is drained; a busy connection yields after a few reads) and
// epoll reports what is left. While a response is being written the
// connection does not read: pipelined requests wait in its input buffer or in
// the socket, and are parsed once the response is out.
//
// Limits: 64 KiB of request head (431), max_body_bytes of body, declared or
// de-chunked (413), and idle_timeout for a silent connection, for a request
// to arrive once begun and for a response write to make progress. A request
// that breaks the protocol gets a 400 and the connection is closed, since
// where the next request would begin is no longer known.
//
// TLS (HttpServerOptions::tls): the same state machine over OpenSSL on the
// same non-blocking socket. SSL_read does the handshake on the first read;
// SSL_read and SSL_write may each need the socket readable or writable
// (WANT_READ / WANT_WRITE, e.g. a handshake message or a TLS 1.3 key update),
// which the connection remembers for each direction apart: epoll then
// watches for what the blocked call needs *instead of* what its direction
// normally waits for (a read that must write stops watching for input, which
// would otherwise keep firing while the client's bytes sit unread, and spin
// the thread). SSL_read
// returns one record at a time, so a short read does not mean the socket is
// drained: a TLS connection reads until OpenSSL wants more from the socket.
// A handshake that fails (plain HTTP sent to the port, a client that rejects
// the certificate) closes that connection and is counted on the context.

#include "net/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <span>
#include <unordered_map>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "net/http_parser.h"

namespace spanhouse::net {

namespace detail {

using Clock = std::chrono::steady_clock;

// Per-connection input buffer, allocated on the first read and kept for the
// connection's life. It holds request heads, chunk framing and pipelined
// bytes, never a Content-Length body; its size is also the limit on a
// request head.
constexpr size_t kInBufferBytes = 64 * 1024;
constexpr int kMaxEvents = 64;  // per epoll_wait
// Reads per readiness event before the connection yields to the thread's
// others; level-triggered epoll reports it again if more is waiting.
constexpr int kMaxReadsPerEvent = 16;

enum class State {
  kRead,      // reading a request: its head, or its body (the parser knows which)
  kDeferred,  // waiting for the handler's deferred answer; not reading
  kWrite,     // writing the response; not reading
  kLinger,    // answered and closing: reading and dropping what the client still sends
};

// What a TLS call that could not go on waits for on the socket.
enum class TlsNeed : uint8_t { kNone, kIn, kOut };

struct Conn {
  explicit Conn(const HttpParserLimits& limits) : parser(limits) {}

  int fd = -1;
  uint64_t id = 0;     // unique on its thread: what a deferred answer is addressed to
  SSL* ssl = nullptr;  // HTTPS: the connection's TLS session; null for plain HTTP
  // What the last SSL_read (read_needs) and the last SSL_write (write_needs)
  // wait for, each apart: a read may wait for the socket to take output
  // (WANT_WRITE) while a 100 Continue waits to be written, and the other way
  // round. kNone: what the direction normally waits for (input for reads,
  // room for writes).
  TlsNeed read_needs = TlsNeed::kNone;
  TlsNeed write_needs = TlsNeed::kNone;
  bool tls_broken = false;  // a fatal TLS error: no close_notify may be sent
  size_t index = 0;         // in IoThread::conns_
  uint32_t events = 0;      // what epoll watches for now
  State state = State::kRead;
  // Depending on the state: since when the connection is idle (reading, no
  // bytes of a request yet), since when the request has been arriving
  // (reading), since when it waits for a deferred answer (kDeferred), or
  // since the response last made progress (kWrite). The sweep closes the
  // connection once it is older than the idle timeout.
  Clock::time_point since;
  bool mid_request = false;  // reading a head: some of the next request is here

  // Input: bytes [in_begin, in_end) of `in` are read but not yet parsed.
  std::unique_ptr<char[]> in;
  size_t in_begin = 0;
  size_t in_end = 0;

  // The request being read, and after it its framing for the answer.
  HttpRequestParser parser;

  // Output: out_head then out_body, of which out_sent bytes are gone. Two
  // pieces so that a big body is written from the handler's string itself.
  std::string out_head;
  std::string out_body;
  size_t out_sent = 0;
  bool close_after_write = false;
  // After the answer, read and drop what the client still sends before
  // closing (a refused request's body): closing a socket with unread input
  // sends a reset, which can destroy the answer before the client reads it.
  bool linger = false;
  size_t lingered = 0;  // bytes dropped so far

  size_t buffered() const { return in_end - in_begin; }
  const char* data() const { return in.get() + in_begin; }
  void Consume(size_t n) {
    in_begin += n;
    if (in_begin == in_end) in_begin = in_end = 0;
  }
  bool out_pending() const { return out_sent < out_head.size() + out_body.size(); }
};

// What the connection needs next.
enum class Step {
  kNeedInput,  // more bytes from the socket
  kWait,       // the response to be given or written first (kDeferred, kWrite)
  kClose,      // the connection is done
  kContinue,   // nothing; keep parsing (internal to Advance)
};

enum class Flushed { kDone, kPending, kError };

// Answers given to one I/O thread's deferred requests, from any thread.
// Shared by the thread and the responders, which may outlive it.
struct Mailbox {
  std::mutex mu;
  std::vector<std::pair<uint64_t, HttpResponse>> answers;  // guarded by mu; by connection id
  int wake_fd = -1;  // guarded by mu: the thread's eventfd; -1 once it is gone

  void Post(uint64_t conn, HttpResponse&& resp);
};

// The deferral a handler gets: its responder posts to the connection's
// thread.
class ConnDeferral final : public HttpDeferral {
 public:
  ConnDeferral(const std::shared_ptr<Mailbox>& mailbox, uint64_t conn)
      : mailbox_(mailbox), conn_(conn) {}
  HttpResponder Defer() override;
  bool deferred() const { return deferred_; }

 private:
  const std::shared_ptr<Mailbox>& mailbox_;  // the thread's; copied only by Defer
  uint64_t conn_;
  bool deferred_ = false;
};

class IoThread;

}  // namespace detail

struct HttpServer::Impl {
  HttpServerOptions opts;
  DeferringHttpHandler handler;
  int listen_fd = -1;
  std::atomic<bool> accepting{false};
  std::atomic<bool> stopping{false};
  // Requests whose answer is not given yet: handlers running now and
  // deferred answers still awaited.
  std::atomic<int> in_flight{0};
  HttpServerStats stats;
  std::vector<std::unique_ptr<detail::IoThread>> threads;
  std::mutex stop_mu;  // Stop() against itself (the destructor calls it too)
};

namespace detail {

// One I/O thread: an epoll instance, the connections it accepted, and the
// loop that serves them. Everything here but Wake() runs on the thread.
class IoThread {
 public:
  explicit IoThread(HttpServer::Impl& srv);
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // Creates the epoll instance with the wake-up eventfd and the listening
  // socket in it; errno is set on failure.
  bool Init();
  void Start(int index);
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  // Makes the thread look at the server's accepting/stopping flags (and its
  // mailbox) now.
  void Wake();
  // Asks the thread to accept what is waiting (see Accept).
  void Kick() {
    accept_kick_ = true;
    Wake();
  }

 private:
  // The loop and the connections.
  void Run();
  void Accept();
  IoThread* FewerConnections();
  bool Listen();
  void StopListening();
  void Sweep();
  void Remove(Conn& c);
  void Close(Conn& c);
  void OnEvent(Conn& c, uint32_t events);
  bool Read(Conn& c);
  ssize_t Receive(Conn& c, char* dst, size_t want);
  Step Advance(Conn& c);
  Step OnHead(Conn& c);
  void UpdateInterest(Conn& c);

  // Answers.
  bool SendContinue(Conn& c);
  Step Respond(Conn& c);
  Step Await(Conn& c);
  void TakeAnswers();
  bool Answer(Conn& c, HttpResponse&& resp);
  Step Fail(Conn& c, int status, std::string message);
  Step Refuse(Conn& c, HttpResponse resp);
  void Queue(Conn& c, HttpResponse resp, bool head_only);
  Step Send(Conn& c);
  Step AfterResponse(Conn& c);
  Step StartLinger(Conn& c);
  bool Drain(Conn& c);
  Flushed Flush(Conn& c);
  ssize_t Transmit(Conn& c);

  // OpenSSL on the connection's socket.
  ssize_t ReceiveTls(Conn& c, char* dst, size_t want);
  ssize_t TransmitTls(Conn& c);
  ssize_t TlsRetry(Conn& c, int n, const char* op, TlsNeed* need);
  void TlsFailed(Conn& c, const char* op, int ret, int err, int sys_errno);
  bool StartTls(Conn& c);
  void EndTls(Conn& c, bool notify);

  HttpServer::Impl& srv_;
  const HttpParserLimits limits_;
  int epfd_ = -1;
  int wake_fd_ = -1;
  bool listening_ = false;  // the listening socket is in epfd_
  std::vector<std::unique_ptr<Conn>> conns_;
  uint64_t next_conn_id_ = 0;
  const std::shared_ptr<Mailbox> mailbox_;
  std::unordered_map<uint64_t, Conn*> awaiting_;            // connections in kDeferred, by id
  std::vector<std::pair<uint64_t, HttpResponse>> answers_;  // taken from the mailbox
  std::atomic<int> conn_count_{0};  // conns_.size(), for the other threads to read
  std::atomic<bool> accept_kick_{false};
  Clock::time_point now_;  // refreshed after epoll_wait and after each handler
  std::thread thread_;
  // Their addresses tell epoll events for these two fds from connections'.
  char listen_key_ = 0;
  char wake_key_ = 0;
};

}  // namespace detail

}  // namespace spanhouse::net

namespace spanhouse::net {

bool SplitHostPort(const std::string& s, std::string* host, uint16_t* port) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string h = s.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  unsigned p = 0;
  const char* b = s.data() + colon + 1;
  const char* e = s.data() + s.size();
  auto res = std::from_chars(b, e, p);
  if (res.ec != std::errc() || res.ptr != e || b == e || p > 65535) return false;
  *host = h;
  *port = static_cast<uint16_t>(p);
  return true;
}

bool IsLoopbackAddress(const std::string& host_port) {
  std::string host;
  uint16_t port;
  if (!SplitHostPort(host_port, &host, &port)) return false;
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  return inet_pton(AF_INET6, host.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : HttpServer(std::move(options),
                 [handler = std::move(handler)](HttpRequest& req, HttpResponse& resp,
                                                HttpDeferral&) { handler(req, resp); }) {}

HttpServer::HttpServer(HttpServerOptions options, DeferringHttpHandler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(options);
  impl_->handler = std::move(handler);
}

const HttpServerStats& HttpServer::stats() const {
  return impl_->stats;
}

HttpServer::~HttpServer() {
  Stop(std::chrono::milliseconds(0));
}

Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.listen_fd >= 0 || !s.threads.empty()) return Status::Internal("server already started");
  std::string host;
  uint16_t port;
  if (!SplitHostPort(s.opts.address, &host, &port)) {
    return Status::Invalid("bad listen address '" + s.opts.address + "' (want host:port)");
  }
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_storage addr{};
  socklen_t addr_len;
  if (host.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) != 1) {
      return Status::Invalid("bad listen host '" + host + "': not an IPv6 address");
    }
    addr_len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1) {
      return Status::Invalid("bad listen host '" + host + "': not an IP address");
    }
    addr_len = sizeof(sockaddr_in);
  }

  auto fail = [&](const std::string& what) {
    const std::string message =
        "cannot listen on " + s.opts.address + ": " + what + ": " + std::strerror(errno);
    s.threads.clear();
    if (s.listen_fd >= 0) close(s.listen_fd);
    s.listen_fd = -1;
    return Status::Unavailable(message);
  };
  s.listen_fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.listen_fd < 0) return fail("socket");
  const int one = 1;
  if (setsockopt(s.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return fail("SO_REUSEADDR");
  }
  if (bind(s.listen_fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) != 0) {
    return fail("bind");
  }
  if (listen(s.listen_fd, SOMAXCONN) != 0) return fail("listen");
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return fail("getsockname");
  }
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  for (int i = 0; i < std::max(1, s.opts.threads); ++i) {
    s.threads.push_back(std::make_unique<detail::IoThread>(s));
    if (!s.threads.back()->Init()) return fail("epoll");
  }
  s.accepting = true;
  s.stopping = false;
  for (size_t i = 0; i < s.threads.size(); ++i) s.threads[i]->Start(static_cast<int>(i));
  return Status::Ok();
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.stop_mu);
  if (s.threads.empty()) return;
  // Stop accepting: connects are refused from now on, and each thread takes
  // the listening socket out of its epoll when it wakes to the flag.
  s.accepting = false;
  shutdown(s.listen_fd, SHUT_RDWR);
  for (auto& t : s.threads) t->Wake();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (s.in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Each thread closes its connections on the way out.
  s.stopping = true;
  for (auto& t : s.threads) t->Wake();
  for (auto& t : s.threads) t->Join();
  s.threads.clear();
  close(s.listen_fd);
  s.listen_fd = -1;
}

}  // namespace spanhouse::net

namespace spanhouse::net {

HttpResponder& HttpResponder::operator=(HttpResponder&& o) noexcept {
  if (this != &o) {
    Abandon();
    deliver_ = std::exchange(o.deliver_, nullptr);
  }
  return *this;
}

HttpResponder::~HttpResponder() {
  Abandon();
}

void HttpResponder::Abandon() {
  if (deliver_ == nullptr) return;
  HttpResponse abandoned{503, "text/plain", "the server abandoned this request; retry\n", {}};
  abandoned.headers.emplace_back("Retry-After", "1");
  Respond(std::move(abandoned));
}

void HttpResponder::Respond(HttpResponse resp) {
  if (deliver_ == nullptr) return;
  std::exchange(deliver_, nullptr)(std::move(resp));
}

namespace detail {

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

std::string_view Reason(int status) {
  static constexpr std::pair<int, std::string_view> kReasons[] = {
      {100, "Continue"},
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {204, "No Content"},
      {206, "Partial Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {304, "Not Modified"},
      {307, "Temporary Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {406, "Not Acceptable"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {410, "Gone"},
      {411, "Length Required"},
      {413, "Payload Too Large"},
      {414, "URI Too Long"},
      {415, "Unsupported Media Type"},
      {416, "Range Not Satisfiable"},
      {422, "Unprocessable Content"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
      {505, "HTTP Version Not Supported"},
  };
  for (const auto& [code, reason] : kReasons) {
    if (code == status) return reason;
  }
  return "";  // the reason phrase may be empty
}

}  // namespace

void Mailbox::Post(uint64_t conn, HttpResponse&& resp) {
  std::lock_guard<std::mutex> lock(mu);
  if (wake_fd < 0) return;  // the server has stopped: nobody to answer
  answers.emplace_back(conn, std::move(resp));
  if (answers.size() == 1) {  // else the thread is woken already
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fd, &one, sizeof(one));
  }
}

HttpResponder ConnDeferral::Defer() {
  if (deferred_) return HttpResponder();
  deferred_ = true;
  return HttpResponder([mailbox = mailbox_, conn = conn_](HttpResponse&& resp) {
    mailbox->Post(conn, std::move(resp));
  });
}

// An HTTP/1.1 client that asked with Expect: 100-continue waits for this
// before it sends the body (HttpRequestParser::ExpectsContinue says when it
// is due). False: the connection is broken.
bool IoThread::SendContinue(Conn& c) {
  c.out_head.append(kContinue);
  return Flush(c) != Flushed::kError;  // kPending: UpdateInterest adds EPOLLOUT
}

// Runs the handler on the complete request and starts writing its answer,
// or waits for it if the handler deferred it.
Step IoThread::Respond(Conn& c) {
  HttpResponse resp;
  ConnDeferral later(mailbox_, c.id);
  srv_.in_flight.fetch_add(1);
  try {
    srv_.handler(c.parser.request(), resp, later);
  } catch (const std::exception& e) {
    // A handler must not throw; if one does, the client gets a 500 and the
    // server keeps serving.
    spdlog::error("{}: handler threw: {}", srv_.opts.name, e.what());
    resp = HttpResponse{500, "text/plain", "internal error\n", {}};
  } catch (...) {
    spdlog::error("{}: handler threw a non-exception", srv_.opts.name);
    resp = HttpResponse{500, "text/plain", "internal error\n", {}};
  }
  now_ = Clock::now();
  c.parser.request() = HttpRequest{};  // frees the body unless the handler took it
  // A handler that deferred and then threw answers through its responder
  // all the same (a 503 if the throw destroyed it).
  if (later.deferred()) return Await(c);
  srv_.in_flight.fetch_sub(1);
  // Once Stop() has begun, answers close their connections so clients go
  // elsewhere instead of sending more.
  c.close_after_write = !c.parser.head().keep_alive() || !srv_.accepting.load();
  Queue(c, std::move(resp), c.parser.head().head_method);
  return Send(c);
}

// The handler answers later: the request stays in flight, and the
// connection reads nothing until the answer comes, so that answers to
// pipelined requests go out in order.
Step IoThread::Await(Conn& c) {
  c.state = State::kDeferred;
  c.since = now_;
  awaiting_.emplace(c.id, &c);
  return Step::kWait;
}

// Writes the deferred answers posted to this thread, each to its connection
// if that is still open.
void IoThread::TakeAnswers() {
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    answers_.swap(mailbox_->answers);
  }
  for (auto& [id, resp] : answers_) {
    const auto it = awaiting_.find(id);
    if (it == awaiting_.end()) continue;  // closed meanwhile: nobody to tell
    Conn& c = *it->second;
    awaiting_.erase(it);
    srv_.in_flight.fetch_sub(1);
    bool keep = false;
    try {
      keep = Answer(c, std::move(resp));
    } catch (const std::exception& e) {
      spdlog::error("{}: closing a connection: {}", srv_.opts.name, e.what());
    }
    if (keep) {
      UpdateInterest(c);
    } else {
      Remove(c);
    }
  }
  answers_.clear();
}

// Starts writing a deferred answer, then goes on with the connection as
// after any response. False: close it.
bool IoThread::Answer(Conn& c, HttpResponse&& resp) {
  c.close_after_write = !c.parser.head().keep_alive() || !srv_.accepting.load();
  Queue(c, std::move(resp), c.parser.head().head_method);
  const Step step = Send(c);
  // kContinue: written at once; on to a pipelined request, if any.
  return step != Step::kClose && (step != Step::kContinue || Read(c));
}

// Answers a request that cannot be served and closes the connection after.
Step IoThread::Fail(Conn& c, int status, std::string message) {
  (status == 413 ? srv_.stats.refused_too_large : srv_.stats.refused_malformed)++;
  c.close_after_write = true;
  Queue(c, HttpResponse{status, "text/plain", std::move(message), {}}, false);
  return Send(c);
}

// Answers a request its authorizer refused, then closes the connection: a
// client gets one try per connection (no guessing token after token down one
// keep-alive connection, pipelined or not). Its body, and whatever it sent
// after, is never read: the connection lingers to drop it, so the close does
// not reset the connection before the client has read the answer.
Step IoThread::Refuse(Conn& c, HttpResponse resp) {
  c.linger = true;
  c.close_after_write = true;
  Queue(c, std::move(resp), c.parser.head().head_method);
  c.parser.request() = HttpRequest{};
  return Send(c);
}

// Puts the response's head into out_head and takes its body as out_body.
void IoThread::Queue(Conn& c, HttpResponse resp, bool head_only) {
  std::string& h = c.out_head;
  if (c.out_sent > 0) {  // what is left of a 100 Continue goes first
    h.erase(0, c.out_sent);
    c.out_sent = 0;
  }
  const int status = resp.status >= 100 && resp.status <= 999 ? resp.status : 500;
  h += "HTTP/1.1 ";
  h += std::to_string(status);
  h += ' ';
  h += Reason(status);
  h += "\r\nServer: spanhouse\r\nContent-Type: ";
  h += resp.content_type;
  h += "\r\nContent-Length: ";
  h += std::to_string(resp.body.size());
  h += "\r\n";
  for (const auto& [name, value] : resp.headers) {
    h += name;
    h += ": ";
    h += value;
    h += "\r\n";
  }
  if (c.close_after_write) {
    h += "Connection: close\r\n";
  } else if (c.parser.head().http10) {
    h += "Connection: keep-alive\r\n";
  }
  h += "\r\n";
  // A HEAD answer has the GET answer's Content-Length but no body.
  if (head_only) return;
  if (c.ssl != nullptr && resp.body.size() <= 16 * 1024) {
    h += resp.body;  // one TLS record, one write, instead of two of each
  } else {
    c.out_body = std::move(resp.body);
  }
}

Step IoThread::Send(Conn& c) {
  c.state = State::kWrite;
  c.since = now_;
  switch (Flush(c)) {
    case Flushed::kError:
      return Step::kClose;
    case Flushed::kPending:
      return Step::kWait;
    case Flushed::kDone:
      break;
  }
  return AfterResponse(c);
}

// The response is written: close, or get ready for the next request.
Step IoThread::AfterResponse(Conn& c) {
  if (c.close_after_write) return c.linger ? StartLinger(c) : Step::kClose;
  c.state = State::kRead;
  c.parser.Next();
  c.mid_request = c.buffered() > 0;  // pipelined
  c.since = now_;
  return Step::kContinue;
}

// Says "no more from here" (close_notify for TLS, then a FIN) and reads on,
// dropping what comes, until the client closes, or has sent more than a
// body could be, or the idle timeout closes the connection. Gives a client
// that sends a whole body before reading the answer the chance to read it.
Step IoThread::StartLinger(Conn& c) {
  if (c.ssl != nullptr) {
    // The close_notify goes now or never: the session is not used again
    // (the linger reads raw bytes), so it is freed at once.
    EndTls(c, !c.tls_broken);
  }
  if (shutdown(c.fd, SHUT_WR) != 0) return Step::kClose;
  c.state = State::kLinger;
  c.lingered = 0;
  c.since = now_;
  return Drain(c) ? Step::kWait : Step::kClose;
}

// kLinger: drops what the socket holds, up to the same number of reads per
// event as Read, so that one fast sender cannot hold the thread (epoll,
// level-triggered, comes back for the rest). False: close now.
bool IoThread::Drain(Conn& c) {
  if (!c.in) c.in = std::make_unique_for_overwrite<char[]>(kInBufferBytes);
  for (int reads = 0; reads < kMaxReadsPerEvent;) {
    // Raw bytes, TLS records included: nothing of them is used.
    const ssize_t n = recv(c.fd, c.in.get(), kInBufferBytes, 0);
    if (n > 0) {
      ++reads;
      c.lingered += n;
      if (c.lingered > srv_.opts.max_body_bytes + kInBufferBytes) return false;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;  // the budget is spent: more on the next event
}

// Writes as much of out_head + out_body as the socket takes.
Flushed IoThread::Flush(Conn& c) {
  const size_t total = c.out_head.size() + c.out_body.size();
  while (c.out_sent < total) {
    const ssize_t n = Transmit(c);
    if (n == -1) return Flushed::kPending;
    if (n < 0) return Flushed::kError;
    c.out_sent += n;
    if (c.state == State::kWrite) c.since = now_;
  }
  c.out_head.clear();          // its capacity is kept for the next response
  c.out_body = std::string();  // a response body may be big: let it go
  c.out_sent = 0;
  return Flushed::kDone;
}

// One write of what is left of out_head + out_body: the bytes written, -1
// when the socket takes nothing now, -2 when the connection is broken.
ssize_t IoThread::Transmit(Conn& c) {
  if (c.ssl != nullptr) return TransmitTls(c);
  for (;;) {
    iovec iov[2];
    int n_iov = 0;
    if (c.out_sent < c.out_head.size()) {
      iov[n_iov++] = {c.out_head.data() + c.out_sent, c.out_head.size() - c.out_sent};
    }
    if (!c.out_body.empty()) {
      const size_t off = c.out_sent > c.out_head.size() ? c.out_sent - c.out_head.size() : 0;
      iov[n_iov++] = {c.out_body.data() + off, c.out_body.size() - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n_iov;
    const ssize_t n = sendmsg(c.fd, &msg, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
  }
}

}  // namespace detail

}  // namespace spanhouse::net

namespace spanhouse::net::detail {

IoThread::IoThread(HttpServer::Impl& srv)
    : srv_(srv),
      limits_{.max_head_bytes = kInBufferBytes, .max_body_bytes = srv.opts.max_body_bytes},
      mailbox_(std::make_shared<Mailbox>()) {}

IoThread::~IoThread() {
  {
    // Responders still out answer into the void from now on.
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    mailbox_->wake_fd = -1;
    mailbox_->answers.clear();
  }
  if (epfd_ >= 0) close(epfd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool IoThread::Init() {
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) return false;
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return false;
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    mailbox_->wake_fd = wake_fd_;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &wake_key_;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) return false;
  return Listen();
}

void IoThread::Start(int index) {
  thread_ = std::thread([this] { Run(); });
  // "otlp-http-0": what top -H and perf show (15 characters at most).
  const std::string name = srv_.opts.name.substr(0, 11) + "-" + std::to_string(index % 100);
  pthread_setname_np(thread_.native_handle(), name.c_str());
}

void IoThread::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
}

bool IoThread::Listen() {
  epoll_event ev{};
  // Edge-triggered: a thread that leaves a new connection to another one
  // (see Accept) must not be told about it again and again.
  ev.events = EPOLLIN | EPOLLEXCLUSIVE | EPOLLET;
  ev.data.ptr = &listen_key_;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, srv_.listen_fd, &ev) != 0) return false;
  listening_ = true;
  return true;
}

void IoThread::StopListening() {
  if (!listening_) return;
  epoll_ctl(epfd_, EPOLL_CTL_DEL, srv_.listen_fd, nullptr);
  listening_ = false;
}

void IoThread::Run() {
  // OpenSSL writes to its socket with write(), not send(MSG_NOSIGNAL): a
  // peer gone mid-answer would raise SIGPIPE and end the process. Blocked on
  // this thread, the signal stays pending and the write fails with EPIPE.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  const auto timeout = srv_.opts.idle_timeout;
  const bool timeouts = timeout.count() > 0;
  // Sweep about once a second, more often for a short timeout (tests).
  const std::chrono::milliseconds sweep_every =
      timeouts
          ? std::clamp(timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000))
          : std::chrono::milliseconds(1000);
  Clock::time_point next_sweep = Clock::now() + sweep_every;
  epoll_event events[kMaxEvents];
  while (!srv_.stopping.load()) {
    const int n = epoll_wait(epfd_, events, kMaxEvents, static_cast<int>(sweep_every.count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{}: epoll_wait: {}", srv_.opts.name, std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    now_ = Clock::now();
    for (int i = 0; i < n; ++i) {
      void* key = events[i].data.ptr;
      if (key == &listen_key_) {
        Accept();
      } else if (key == &wake_key_) {
        uint64_t v;
        [[maybe_unused]] const ssize_t r = read(wake_fd_, &v, sizeof(v));
        if (!srv_.accepting.load()) StopListening();
        if (accept_kick_.exchange(false)) Accept();
        TakeAnswers();
      } else {
        OnEvent(*static_cast<Conn*>(key), events[i].events);
      }
    }
    if (now_ >= next_sweep) {
      Sweep();
      next_sweep = now_ + sweep_every;
    }
  }
  while (!conns_.empty()) Remove(*conns_.back());
}

// Accepts waiting connections until there are none, or until another thread
// owns fewer connections than this one; that one is then asked to go on.
//
// Why: EPOLLEXCLUSIVE wakes the first idle thread, which tends to be the same
// one, so left alone a few long-lived connections (collectors, loadgen) would
// all land on one thread, and with handlers running on it, ingest would get
// one core. Counting connections is a rough measure of load, but a cheap one,
// and the thread that accepts a connection still owns it.
void IoThread::Accept() {
  while (srv_.accepting.load()) {
    if (IoThread* other = FewerConnections()) return other->Kick();
    const int fd = accept4(srv_.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      switch (errno) {
        case EINTR:
        case ECONNABORTED:
        case EPROTO:
          continue;
        case EAGAIN:  // all taken (by this thread or another)
        case EINVAL:  // Stop() has shut the socket down
          return;
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM:
          // The connection stays queued; rest this thread's accepting until
          // the next sweep, which adds the socket back (and so reports it).
          spdlog::warn("{}: accept: {}; pausing accepts for a moment", srv_.opts.name,
                       std::strerror(errno));
          return StopListening();
        default:
          spdlog::warn("{}: accept: {}", srv_.opts.name, std::strerror(errno));
          return;
      }
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (const int sndbuf = srv_.opts.send_buffer_bytes; sndbuf > 0) {
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    }
    auto c = std::make_unique<Conn>(limits_);
    c->fd = fd;
    c->id = next_conn_id_++;
    if (srv_.opts.tls && !StartTls(*c)) {
      close(fd);
      continue;
    }
    c->index = conns_.size();
    c->events = EPOLLIN;
    c->since = now_;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c.get();
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      spdlog::warn("{}: epoll_ctl: {}", srv_.opts.name, std::strerror(errno));
      Close(*c);
      continue;
    }
    conns_.push_back(std::move(c));
    conn_count_.store(static_cast<int>(conns_.size()));
  }
  StopListening();
}

// The thread with the fewest connections if that is fewer than this one's.
IoThread* IoThread::FewerConnections() {
  IoThread* best = nullptr;
  int fewest = conn_count_.load();
  for (const auto& t : srv_.threads) {
    const int n = t->conn_count_.load();
    if (n < fewest) {
      best = t.get();
      fewest = n;
    }
  }
  return best;
}

void IoThread::Sweep() {
  if (!listening_ && srv_.accepting.load()) Listen();  // after an accept failure
  const auto timeout = srv_.opts.idle_timeout;
  if (timeout.count() <= 0) return;
  for (size_t i = conns_.size(); i-- > 0;) {
    Conn& c = *conns_[i];
    if (now_ - c.since > timeout) {
      spdlog::debug("{}: closing a connection after {} ms without progress", srv_.opts.name,
                    timeout.count());
      Remove(c);
    }
  }
}

// Closes the connection and frees it; `c` is gone afterwards, and so is a
// deferred answer it still awaited.
void IoThread::Remove(Conn& c) {
  if (c.state == State::kDeferred && awaiting_.erase(c.id) != 0) srv_.in_flight.fetch_sub(1);
  Close(c);
  const size_t i = c.index;
  if (i + 1 != conns_.size()) {
    std::swap(conns_[i], conns_.back());
    conns_[i]->index = i;
  }
  conns_.pop_back();
  conn_count_.store(static_cast<int>(conns_.size()));
}

// Ends the TLS session (a close_notify if the socket takes it now; no
// waiting for the client's) and closes the socket.
void IoThread::Close(Conn& c) {
  if (c.ssl != nullptr) {
    EndTls(c, !c.tls_broken && c.state != State::kLinger && SSL_is_init_finished(c.ssl));
  }
  close(c.fd);  // also takes it out of epfd_
}

void IoThread::OnEvent(Conn& c, uint32_t events) {
  srv_.stats.connection_events.fetch_add(1, std::memory_order_relaxed);
  bool keep = true;
  try {
    const bool error = (events & (EPOLLERR | EPOLLHUP)) != 0;
    // Whether the socket is ready for what each direction waits for.
    const bool write_ready = (events & (c.write_needs == TlsNeed::kIn ? EPOLLIN : EPOLLOUT)) != 0;
    const bool read_ready = (events & (c.read_needs == TlsNeed::kOut ? EPOLLOUT : EPOLLIN)) != 0;
    if (c.state == State::kLinger) {
      keep = Drain(c);
    } else if (c.state == State::kDeferred) {
      // epoll reports errors unasked: a reset connection has no one to
      // answer. Otherwise only what is left of a 100 Continue is written.
      if (error) {
        keep = false;
      } else if (c.out_pending() && write_ready) {
        keep = Flush(c) != Flushed::kError;
      }
    } else if (c.state == State::kWrite) {
      if (write_ready || error) {
        switch (Flush(c)) {
          case Flushed::kError:
            keep = false;
            break;
          case Flushed::kPending:
            keep = !error;
            break;
          case Flushed::kDone:
            // The response is out: on to the next request, which may be
            // buffered already.
            keep = AfterResponse(c) != Step::kClose && Read(c);
            break;
        }
      }
    } else {
      // A 100 Continue that did not fit in the socket at once.
      if (c.out_pending() && write_ready && Flush(c) == Flushed::kError) keep = false;
      if (keep && (read_ready || error)) keep = Read(c);
    }
  } catch (const std::exception& e) {
    // Only allocation can throw here (handlers' exceptions are caught in
    // Respond); drop this connection rather than the thread.
    spdlog::error("{}: closing a connection: {}", srv_.opts.name, e.what());
    keep = false;
  }
  if (keep) {
    UpdateInterest(c);
  } else {
    Remove(c);
  }
}

// Reads and parses until the socket is drained, the read budget is spent, a
// response is waiting to be written, or the connection is done. False: close
// it.
bool IoThread::Read(Conn& c) {
  bool drained = false;
  int reads = 0;
  for (;;) {
    const Step step = Advance(c);
    if (step == Step::kClose) return false;
    if (step == Step::kWait) return true;
    // A TLS session may hold decrypted bytes the socket no longer shows:
    // epoll would not report them, so they are read now.
    if (drained || (reads >= kMaxReadsPerEvent && (c.ssl == nullptr || !SSL_has_pending(c.ssl)))) {
      return true;
    }

    char* dst;
    size_t want;
    const std::span<char> body = c.parser.BodyRoom();
    if (!body.empty()) {
      // Straight into the body, all that is missing at once.
      dst = body.data();
      want = body.size();
    } else {
      if (!c.in) c.in = std::make_unique_for_overwrite<char[]>(kInBufferBytes);
      if (c.in_begin > 0) {
        std::memmove(c.in.get(), c.data(), c.buffered());
        c.in_end -= c.in_begin;
        c.in_begin = 0;
      }
      dst = c.in.get() + c.in_end;
      want = kInBufferBytes - c.in_end;  // never 0: Advance fails a full buffer
    }
    const ssize_t n = Receive(c, dst, want);
    if (n > 0) {
      ++reads;
      // For TCP a short read means the socket had no more; level-triggered
      // epoll says when it has, which saves a recv() that would fail. Not
      // so for TLS, which returns a record at a time.
      drained = c.ssl == nullptr && static_cast<size_t>(n) < want;
      if (!body.empty()) {
        c.parser.BodyFilled(n);
      } else {
        c.in_end += n;
        if (c.parser.reading_head() && !c.mid_request) {
          c.mid_request = true;
          c.since = now_;
        }
      }
      continue;
    }
    return n < 0;  // 0: the peer is done (a partial request dies with it), or broken
  }
}

// Reads up to `want` bytes: > 0 read; 0 the connection is finished (closed
// by the peer, or broken); -1 nothing more for now.
ssize_t IoThread::Receive(Conn& c, char* dst, size_t want) {
  if (c.ssl != nullptr) return ReceiveTls(c, dst, want);
  for (;;) {
    const ssize_t n = recv(c.fd, dst, want, 0);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : 0;
  }
}

// Parses what is buffered as far as it goes, answering complete requests.
Step IoThread::Advance(Conn& c) {
  for (;;) {
    if (c.state != State::kRead) return Step::kWait;
    size_t used = 0;
    const HttpRequestParser::Event event = c.parser.Feed({c.data(), c.buffered()}, &used);
    c.Consume(used);
    Step step = Step::kContinue;
    switch (event) {
      case HttpRequestParser::Event::kNeedInput:
        return Step::kNeedInput;
      case HttpRequestParser::Event::kHead:
        step = OnHead(c);
        break;
      case HttpRequestParser::Event::kRequest:
        step = Respond(c);
        break;
      case HttpRequestParser::Event::kError:
        return Fail(c, c.parser.error_status(), c.parser.error_message());
    }
    if (step != Step::kContinue) return step;
  }
}

// A request's head is in: the authorizer sees it before a 100 Continue and
// before the body, so a refused client is answered from its head alone.
// (The Authorization value it gets is still valid: nothing has been read
// into the input buffer since the head.)
Step IoThread::OnHead(Conn& c) {
  if (srv_.opts.authorize) {
    HttpResponse refusal;
    const AuthorizationHeader authorization = c.parser.TakeAuthorization();
    if (!srv_.opts.authorize(c.parser.request(), authorization, refusal)) {
      return Refuse(c, std::move(refusal));
    }
  }
  if (c.parser.ExpectsContinue(c.buffered()) && !SendContinue(c)) return Step::kClose;
  return Step::kContinue;
}

// Watch for reads while a request is being read, for writes while anything
// is waiting to be written, and never for reads while a response is. A TLS
// call blocked on the other event replaces its direction's usual one: a
// read that waits for room to write must not be woken by input it cannot
// take (level-triggered, that would fire until the client reads), nor a
// write that waits for input by room it cannot use.
void IoThread::UpdateInterest(Conn& c) {
  uint32_t want = 0;
  if (c.state == State::kLinger) {
    want = EPOLLIN;  // raw reads, no TLS
  } else {
    if (c.state != State::kWrite && c.state != State::kDeferred) {
      want |= c.read_needs == TlsNeed::kOut ? EPOLLOUT : EPOLLIN;
    }
    if (c.state == State::kWrite || c.out_pending()) {
      want |= c.write_needs == TlsNeed::kIn ? EPOLLIN : EPOLLOUT;
    }
  }
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.ptr = &c;
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev) == 0) c.events = want;
}

}  // namespace spanhouse::net::detail

namespace spanhouse::net::detail {

// A new connection's session; the first SSL_read does the handshake. False:
// it could not be made (logged; the caller closes the socket).
bool IoThread::StartTls(Conn& c) {
  c.ssl = SSL_new(srv_.opts.tls->ctx());
  if (c.ssl == nullptr || SSL_set_fd(c.ssl, c.fd) != 1) {
    spdlog::warn("{}: cannot start a TLS session", srv_.opts.name);
    ERR_clear_error();
    SSL_free(c.ssl);
    c.ssl = nullptr;
    return false;
  }
  SSL_set_accept_state(c.ssl);
  return true;
}

// Ends the session, with a close_notify if `notify` and the socket takes it
// now (no waiting for the client's), and frees it.
void IoThread::EndTls(Conn& c, bool notify) {
  ERR_clear_error();
  if (notify) SSL_shutdown(c.ssl);
  ERR_clear_error();
  SSL_free(c.ssl);
  c.ssl = nullptr;
}

ssize_t IoThread::ReceiveTls(Conn& c, char* dst, size_t want) {
  ERR_clear_error();  // SSL_get_error looks at this thread's error queue
  c.read_needs = TlsNeed::kNone;
  const int n = SSL_read(c.ssl, dst, static_cast<int>(std::min<size_t>(want, 1u << 30)));
  if (n > 0) return n;
  const ssize_t r = TlsRetry(c, n, "read", &c.read_needs);
  return r == -1 ? -1 : 0;
}

// After an SSL_read or SSL_write that returned n <= 0: -1 when it is to be
// retried once the socket is readable or writable (noted in *need for
// UpdateInterest), 0 when the client ended the session (close_notify), -2
// when the connection is broken.
ssize_t IoThread::TlsRetry(Conn& c, int n, const char* op, TlsNeed* need) {
  const int sys_errno = errno;  // what the failed recv/send said, for SSL_ERROR_SYSCALL
  const int err = SSL_get_error(c.ssl, n);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      *need = TlsNeed::kIn;
      return -1;
    case SSL_ERROR_WANT_WRITE:
      *need = TlsNeed::kOut;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    default:
      TlsFailed(c, op, n, err, sys_errno);
      return -2;
  }
}

// A fatal TLS error on one connection, which is then closed. A failed
// handshake is counted: it is what plain HTTP on an HTTPS port, a scanner
// or a client that distrusts the certificate looks like.
// A client that connects and leaves (a TCP health check, a port scan, one
// that resets the connection mid-handshake) is just gone, not a failure.
void IoThread::TlsFailed(Conn& c, const char* op, int ret, int err, int sys_errno) {
  c.tls_broken = true;
  const unsigned long code = ERR_peek_error();
  char reason[256] = "connection closed";
  if (code != 0) ERR_error_string_n(code, reason, sizeof(reason));
  ERR_clear_error();
  // A reset shows in errno, or (OpenSSL 3) as a system error on the queue.
  const auto is_reset = [](int e) { return e == ECONNRESET || e == EPIPE; };
  const bool reset =
      err == SSL_ERROR_SYSCALL &&
      (is_reset(sys_errno) || (ERR_GET_LIB(code) == ERR_LIB_SYS && is_reset(ERR_GET_REASON(code))));
  const bool gone = (err == SSL_ERROR_SYSCALL && ret == 0) || reset ||
                    (ERR_GET_LIB(code) == ERR_LIB_SSL &&
                     ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING);
  if (gone) return;
  if (!SSL_is_init_finished(c.ssl)) {
    srv_.opts.tls->CountHandshakeFailure();
    spdlog::debug("{}: TLS handshake failed: {}", srv_.opts.name, reason);
  } else {
    spdlog::debug("{}: TLS {} failed: {}", srv_.opts.name, op, reason);
  }
}

// A write goes from one string at a time (SSL_write has no iovec); after
// WANT_WRITE it is retried from the same offset, as OpenSSL requires.
ssize_t IoThread::TransmitTls(Conn& c) {
  const char* data;
  size_t len;
  if (c.out_sent < c.out_head.size()) {
    data = c.out_head.data() + c.out_sent;
    len = c.out_head.size() - c.out_sent;
  } else {
    const size_t off = c.out_sent - c.out_head.size();
    data = c.out_body.data() + off;
    len = c.out_body.size() - off;
  }
  ERR_clear_error();
  c.write_needs = TlsNeed::kNone;
  const int n = SSL_write(c.ssl, data, static_cast<int>(std::min<size_t>(len, 1u << 30)));
  if (n > 0) return n;
  const ssize_t r = TlsRetry(c, n, "write", &c.write_needs);
  return r == -1 ? -1 : -2;
}

}  // namespace spanhouse::net::detail
