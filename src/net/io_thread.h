// The HTTP server's insides, shared by its sources and used by nothing
// outside src/net/: a connection, an I/O thread (its epoll loop, reading
// and parsing in io_thread.cc; handlers, deferred answers and writing in
// responder.cc; OpenSSL reads and writes in tls_io.cc) and the server's
// state the threads share (HttpServer::Impl). http_server.cc says how it
// all fits together.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <openssl/ssl.h>

#include "net/http_parser.h"
#include "net/http_server.h"

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
  // The loop and the connections (io_thread.cc).
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

  // Answers (responder.cc).
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

  // OpenSSL on the connection's socket (tls_io.cc).
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
