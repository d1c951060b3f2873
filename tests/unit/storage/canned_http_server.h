// An HTTP/1.1 server on a loopback port answering each request with what a
// handler returns: what the OpenSearch tests talk to instead of a cluster.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace spanhouse::storage::opensearch {

// An HTTP/1.1 server on a loopback port that answers each request with
// what `handler` returns, after its delay.
class CannedServer {
 public:
  struct Answer {
    int status = 200;
    std::string body;
    std::chrono::milliseconds delay{0};
  };
  struct Request {
    std::string target;
    std::string body;
  };
  using Handler = std::function<Answer(const Request&)>;

  explicit CannedServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_ = std::thread([this] { AcceptLoop(); });
  }
  ~CannedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    accept_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (int c : conns_) ::shutdown(c, SHUT_RDWR);
    for (auto& t : workers_) t.join();
    for (int c : conns_) ::close(c);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void AcceptLoop() {
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::lock_guard<std::mutex> lock(mu_);
      conns_.push_back(c);
      workers_.emplace_back([this, c] { Serve(c); });
    }
  }
  void Serve(int c) {
    std::string buf;
    char chunk[65536];
    for (;;) {
      size_t head_end;
      while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = ::read(c, chunk, sizeof(chunk));
        if (n <= 0) return;
        buf.append(chunk, static_cast<size_t>(n));
      }
      const std::string head = buf.substr(0, head_end);
      size_t length = 0;
      for (std::string_view name : {"Content-Length: ", "content-length: "}) {
        const size_t at = head.find(name);
        if (at != std::string::npos) length = std::stoul(head.substr(at + name.size()));
      }
      while (buf.size() < head_end + 4 + length) {
        const ssize_t n = ::read(c, chunk, sizeof(chunk));
        if (n <= 0) return;
        buf.append(chunk, static_cast<size_t>(n));
      }
      Request req;
      const size_t sp1 = head.find(' ');
      req.target = head.substr(sp1 + 1, head.find(' ', sp1 + 1) - sp1 - 1);
      req.body = buf.substr(head_end + 4, length);
      buf.erase(0, head_end + 4 + length);
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(req);
      }
      const Answer a = handler_(req);
      std::this_thread::sleep_for(a.delay);
      const std::string out = "HTTP/1.1 " + std::to_string(a.status) +
                              " X\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(a.body.size()) + "\r\n\r\n" + a.body;
      // MSG_NOSIGNAL: a client that gave up (its time limit) is no SIGPIPE.
      if (::send(c, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
        return;
      }
    }
  }

  Handler handler_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accept_;
  std::mutex mu_;
  std::vector<int> conns_;
  std::vector<std::thread> workers_;
  std::vector<Request> requests_;
};

}  // namespace spanhouse::storage::opensearch
