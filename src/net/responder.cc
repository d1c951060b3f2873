// Answers: the handler's call, deferred answers coming back through the
// thread's mailbox, and writing responses out (http_server.cc has the
// overview).
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include <spdlog/spdlog.h>

#include "net/io_thread.h"

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
