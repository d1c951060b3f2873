// A blocking HTTP/1.1 test client over a real socket, plain or TLS (the
// caller's OpenSSL context), and request builders: for the tests of
// net::HttpServer and of the listeners built on it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace spanhouse::net {

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "<none>" : it->second;
  }
};

// A blocking client socket. Receives time out after 10 s, so a server that
// never answers fails the test instead of hanging it.
class Client {
 public:
  // rcvbuf > 0: a small receive buffer (set before connecting), for slow-reader tests.
  explicit Client(uint16_t port, int rcvbuf = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Client() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  // Speaks TLS from here on: a handshake trusting what `ctx` trusts. False
  // if the handshake fails.
  bool StartTls(SSL_CTX* ctx) {
    ssl_ = SSL_new(ctx);
    SSL_set_fd(ssl_, fd_);
    return SSL_connect(ssl_) == 1;
  }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ssl_ != nullptr
                            ? SSL_write(ssl_, data.data(), static_cast<int>(data.size()))
                            : send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(n);
    }
    return true;
  }

  // Sends `data` in writes of 1 to max_piece bytes.
  bool SendInPieces(std::string_view data, size_t max_piece) {
    size_t i = 0;
    while (!data.empty()) {
      const size_t n = std::min(data.size(), 1 + (i++ * 7919) % max_piece);
      if (!Send(data.substr(0, n))) return false;
      data.remove_prefix(n);
    }
    return true;
  }

  // Reads exactly n bytes.
  bool ReadExactly(size_t n, std::string* out, size_t chunk = 64 * 1024) {
    while (buf_.size() < n) {
      if (!Fill(chunk)) return false;
    }
    *out = buf_.substr(0, n);
    buf_.erase(0, n);
    return true;
  }

  // Reads one response with a Content-Length body.
  bool ReadResponse(Response* r, bool head_request = false) {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(64 * 1024)) return false;
    }
    const std::string head = buf_.substr(0, end + 2);
    buf_.erase(0, end + 4);
    // HTTP/1.1 200 OK
    if (head.compare(0, 9, "HTTP/1.1 ") != 0) return false;
    r->status = std::stoi(head.substr(9, 3));
    r->headers.clear();
    size_t pos = head.find("\r\n") + 2;
    while (pos < head.size()) {
      const size_t eol = head.find("\r\n", pos);
      const std::string line = head.substr(pos, eol - pos);
      pos = eol + 2;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) return false;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      if (r->headers.count(name) != 0) return false;  // the server never repeats one
      r->headers[name] = value;
    }
    if (r->headers.count("content-length") == 0) return false;
    const size_t length = std::stoull(r->headers["content-length"]);
    r->body.clear();
    return head_request || ReadExactly(length, &r->body);
  }

  // True once the server has closed the connection and nothing more is to
  // be read (false on a timeout or unexpected bytes).
  bool ReadsEof() {
    if (!buf_.empty()) return false;
    char c;
    if (ssl_ != nullptr) {
      const int n = SSL_read(ssl_, &c, 1);
      const int err = SSL_get_error(ssl_, n);
      return n <= 0 && (err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL);
    }
    const ssize_t n = recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

  // Everything the server sends until it closes (or a read times out).
  std::string ReadToEof() {
    while (Fill(64 * 1024)) {
    }
    return std::exchange(buf_, std::string());
  }

  // Plain HTTP only (a TLS socket may hold session tickets): true if no byte
  // of an answer has arrived yet.
  bool NothingYet() const {
    pollfd p{fd_, POLLIN, 0};
    return buf_.empty() && poll(&p, 1, 0) == 0;
  }

  // Bytes received but not consumed yet.
  const std::string& buffered() const { return buf_; }

 private:
  bool Fill(size_t chunk) {
    std::string tmp(chunk, '\0');
    ssize_t n;
    do {
      n = ssl_ != nullptr ? SSL_read(ssl_, tmp.data(), static_cast<int>(tmp.size()))
                          : recv(fd_, tmp.data(), tmp.size(), 0);
    } while (n < 0 && errno == EINTR && ssl_ == nullptr);
    if (n <= 0) return false;
    buf_.append(tmp.data(), n);
    return true;
  }

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  bool connected_ = false;
  std::string buf_;
};

inline std::string Post(std::string_view target, std::string_view body,
                        std::string_view extra = "") {
  return "POST " + std::string(target) +
         " HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         std::string(extra) + "\r\n" + std::string(body);
}

inline std::string Get(std::string_view target, std::string_view extra = "") {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra) + "\r\n";
}

}  // namespace spanhouse::net
