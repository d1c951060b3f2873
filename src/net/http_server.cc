#include "net/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <charconv>
#include <chrono>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

namespace spanhouse::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

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

class Session;

struct HttpServer::Impl {
  HttpServerOptions opts;
  HttpHandler handler;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  std::atomic<int> in_flight{0};
  std::mutex mu;
  std::set<std::shared_ptr<Session>> sessions;  // guarded by mu
  bool stopped = false;

  void Accept();
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& srv) : stream_(std::move(socket)), srv_(srv) {}

  void Start() { Read(); }
  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(srv_.opts.max_body_bytes);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(std::chrono::seconds(60));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
        ec == beast::error::timeout || ec == asio::error::eof) {
      return Finish();
    }
    HttpResponse resp;
    bool keep_alive = false;
    if (ec == http::error::body_limit) {
      resp.status = 413;
      resp.body = "request body exceeds " + std::to_string(srv_.opts.max_body_bytes) + " bytes\n";
    } else if (ec) {
      resp.status = 400;
      resp.body = "malformed HTTP request: " + ec.message() + "\n";
    } else {
      auto& req = parser_->get();
      keep_alive = req.keep_alive();
      HttpRequest r;
      r.method = std::string(req.method_string());
      r.target = std::string(req.target());
      r.content_type = std::string(req[http::field::content_type]);
      r.content_encoding = std::string(req[http::field::content_encoding]);
      r.body = std::move(req.body());
      srv_.in_flight++;
      try {
        srv_.handler(r, resp);
      } catch (const std::exception& e) {
        // A handler must not throw; if one does, the client gets a 500 and
        // the server keeps serving.
        spdlog::error("{}: handler threw: {}", srv_.opts.name, e.what());
        resp = HttpResponse{500, "text/plain", "internal error\n", {}};
      }
      srv_.in_flight--;
    }
    Write(std::move(resp), keep_alive);
  }

  void Write(HttpResponse resp, bool keep_alive) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(11);
    res->result(static_cast<http::status>(resp.status));
    res->set(http::field::server, "spanhouse");
    res->set(http::field::content_type, resp.content_type);
    for (auto& [k, v] : resp.headers) res->set(k, v);
    res->keep_alive(keep_alive);
    res->body() = std::move(resp.body);
    res->prepare_payload();
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
                        if (ec || !keep_alive) return self->Finish();
                        self->Read();
                      });
  }

  void Finish() {
    Close();
    std::lock_guard<std::mutex> lock(srv_.mu);
    srv_.sessions.erase(shared_from_this());
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl& srv_;
};

void HttpServer::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      spdlog::warn("{}: accept failed: {}", opts.name, ec.message());
    } else {
      auto s = std::make_shared<Session>(std::move(socket), *this);
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopped) return;
        sessions.insert(s);
      }
      s->Start();
    }
    Accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(options);
  impl_->handler = std::move(handler);
}

HttpServer::~HttpServer() {
  Stop(std::chrono::milliseconds(0));
}

Status HttpServer::Start() {
  std::string host;
  uint16_t port;
  if (!SplitHostPort(impl_->opts.address, &host, &port)) {
    return Status::Invalid("bad listen address '" + impl_->opts.address + "' (want host:port)");
  }
  beast::error_code ec;
  auto addr = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return Status::Invalid("bad listen host '" + host + "': " + ec.message());
  tcp::endpoint ep(addr, port);
  auto& acc = impl_->acceptor;
  acc.open(ep.protocol(), ec);
  if (!ec) acc.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(ep, ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("cannot listen on " + impl_->opts.address + ": " + ec.message());
  }
  port_ = acc.local_endpoint().port();
  impl_->Accept();
  for (int i = 0; i < std::max(1, impl_->opts.threads); ++i) {
    impl_->threads.emplace_back([this] { impl_->ioc.run(); });
  }
  return Status::Ok();
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  if (impl_->threads.empty()) return;
  asio::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopped = true;
  }
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (impl_->in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  asio::post(impl_->ioc, [this] {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& s : impl_->sessions) s->Close();
  });
  // Give the posted closes a moment, then stop the loop.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->sessions.clear();
}

}  // namespace spanhouse::net
