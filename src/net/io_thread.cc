// The I/O thread: its epoll loop, accepting and spreading connections,
// the idle sweep, and reading requests off the sockets into the parser
// (http_server.cc has the overview).
#include "net/io_thread.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>

#include <spdlog/spdlog.h>

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
