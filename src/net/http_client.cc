#include "net/http_client.h"

#include <openssl/ssl.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <charconv>
#include <optional>
#include <utility>

namespace spanhouse::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string UrlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3 / 2);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '-' ||
        u == '_' || u == '.' || u == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

bool ParseHttpUrl(std::string_view s, HttpUrl* out, std::string* error, bool allow_https) {
  const bool tls = s.starts_with("https://");
  if (tls && !allow_https) {
    *error = "https is not supported: " + std::string(s);
    return false;
  }
  if (!tls && !s.starts_with("http://")) {
    *error = "not an http:// URL: " + std::string(s);
    return false;
  }
  std::string_view rest = s.substr(tls ? 8 : 7);
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  HttpUrl u;
  u.tls = tls;
  u.port = tls ? 443 : 80;
  u.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  u.host_header = std::string(authority);
  std::string_view host = authority;
  std::string_view port;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      *error = "bad IPv6 host in " + std::string(s);
      return false;
    }
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') {
        *error = "bad host in " + std::string(s);
        return false;
      }
      port = authority.substr(close + 2);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) {
    *error = "no host in " + std::string(s);
    return false;
  }
  u.host = std::string(host);
  if (!port.empty()) {
    unsigned p = 0;
    const auto res = std::from_chars(port.data(), port.data() + port.size(), p);
    if (res.ec != std::errc() || res.ptr != port.data() + port.size() || p == 0 || p > 65535) {
      *error = "bad port in " + std::string(s);
      return false;
    }
    u.port = static_cast<uint16_t>(p);
  }
  *out = std::move(u);
  return true;
}

std::string_view HttpResult::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return v;
    }
  }
  return {};
}

struct HttpClient::Impl {
  HttpUrl url;
  HttpClientOptions opts;
  asio::io_context ioc;
  std::optional<beast::tcp_stream> stream;  // plain http
  // https: the TLS context (made at the first connection) and stream.
  std::optional<asio::ssl::context> tls_ctx;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  std::optional<tcp::resolver::results_type> endpoints;

  // Runs the io_context until the started operations are done.
  void Run() {
    ioc.restart();
    ioc.run();
  }

  bool Connect(HttpResult* r) {
    beast::error_code ec;
    if (!endpoints) {
      tcp::resolver resolver(ioc);
      auto results = resolver.resolve(url.host, std::to_string(url.port), ec);
      if (ec) {
        r->error = "resolve " + url.host + ": " + ec.message();
        return false;
      }
      endpoints = std::move(results);
    }
    if (url.tls) return ConnectTls(r);
    stream.emplace(ioc);
    stream->expires_after(opts.timeout);
    stream->async_connect(*endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
    Run();
    if (ec) {
      r->error = "connect " + url.host_header + ": " + ec.message();
      stream.reset();
      return false;
    }
    stream->socket().set_option(tcp::no_delay(true), ec);
    buffer.clear();
    return true;
  }

  bool ConnectTls(HttpResult* r) {
    beast::error_code ec;
    if (!tls_ctx) {
      tls_ctx.emplace(asio::ssl::context::tls_client);
      tls_ctx->set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                           asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
      tls_ctx->set_verify_mode(asio::ssl::verify_peer);
      if (opts.tls_ca_file.empty()) {
        tls_ctx->set_default_verify_paths(ec);
      } else {
        tls_ctx->load_verify_file(opts.tls_ca_file, ec);
      }
      if (ec) {
        r->error = "TLS CA certificates " + opts.tls_ca_file + ": " + ec.message();
        tls_ctx.reset();
        return false;
      }
      if (!opts.tls_cert_file.empty()) {
        tls_ctx->use_certificate_chain_file(opts.tls_cert_file, ec);
        if (!ec) tls_ctx->use_private_key_file(opts.tls_key_file, asio::ssl::context::pem, ec);
        if (ec) {
          r->error = "TLS client certificate " + opts.tls_cert_file + " / key " +
                     opts.tls_key_file + ": " + ec.message();
          tls_ctx.reset();
          return false;
        }
      }
    }
    tls.emplace(ioc, *tls_ctx);
    // The name in the URL: sent as SNI and checked against the certificate.
    SSL_set_tlsext_host_name(tls->native_handle(), url.host.c_str());
    tls->set_verify_callback(asio::ssl::host_name_verification(url.host));
    auto& tcp_layer = beast::get_lowest_layer(*tls);
    tcp_layer.expires_after(opts.timeout);
    tcp_layer.async_connect(*endpoints, [&](beast::error_code e, const tcp::endpoint&) {
      ec = e;
      if (!e)
        tls->async_handshake(asio::ssl::stream_base::client, [&](beast::error_code h) { ec = h; });
    });
    Run();
    if (ec) {
      r->error = "connect " + url.host_header + " (TLS): " + ec.message();
      tls.reset();
      return false;
    }
    tcp_layer.socket().set_option(tcp::no_delay(true), ec);
    buffer.clear();
    return true;
  }

  bool connected() const { return stream.has_value() || tls.has_value(); }

  void Close() {
    beast::error_code ec;
    if (tls) {
      // No close_notify exchange: the connection is dropped either way.
      beast::get_lowest_layer(*tls).socket().shutdown(tcp::socket::shutdown_both, ec);
      beast::get_lowest_layer(*tls).socket().close(ec);
      tls.reset();
    }
    if (!stream) return;
    stream->socket().shutdown(tcp::socket::shutdown_both, ec);
    stream->socket().close(ec);
    stream.reset();
  }

  // Sends `req` and reads the answer into `r`. A kept-alive connection the
  // server has closed meanwhile fails at once; that is retried once on a
  // fresh connection before it counts as an error.
  bool RoundTrip(HttpResult* r) {
    const bool reused = connected();
    if (Exchange(r)) return true;
    if (!reused || r->error == "timed out") return false;
    return Exchange(r);
  }

  bool Exchange(HttpResult* r) {
    r->status = 0;
    r->retry_after_s = -1;
    r->body.clear();
    r->error.clear();
    r->headers.clear();
    if (!connected() && !Connect(r)) return false;
    beast::error_code ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(opts.max_body_bytes);
    auto exchange = [&](auto& s) {
      beast::get_lowest_layer(s).expires_after(opts.timeout);
      http::async_write(s, req, [&](beast::error_code e, size_t) {
        if (e) {
          ec = e;
          return;
        }
        http::async_read(s, buffer, parser, [&](beast::error_code e2, size_t) { ec = e2; });
      });
    };
    if (tls) {
      exchange(*tls);
    } else {
      exchange(*stream);
    }
    Run();
    if (ec) {
      r->error = ec == beast::error::timeout ? "timed out" : ec.message();
      Close();
      return false;
    }
    auto& res = parser.get();
    r->status = static_cast<int>(res.result_int());
    if (auto it = res.find(http::field::retry_after); it != res.end()) {
      const std::string_view v = it->value();
      double secs = 0;
      const auto parsed = std::from_chars(v.data(), v.data() + v.size(), secs);
      if (parsed.ec == std::errc() && secs >= 0) r->retry_after_s = secs;
    }
    if (opts.keep_headers) {
      for (const auto& field : res) {
        r->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
      }
    }
    r->body = std::move(res.body());
    if (!res.keep_alive()) Close();
    return true;
  }
};

HttpClient::HttpClient(HttpUrl url, HttpClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(url);
  impl_->opts = std::move(options);
  impl_->req.version(11);
  impl_->req.set(http::field::host, impl_->url.host_header);
  impl_->req.set(http::field::user_agent, impl_->opts.user_agent);
  impl_->req.keep_alive(true);
  for (const auto& [k, v] : impl_->opts.extra_headers) impl_->req.set(k, v);
}

HttpClient::~HttpClient() {
  impl_->Close();
}

bool HttpClient::Post(std::string* body, std::string_view content_type,
                      std::string_view content_encoding, HttpResult* result) {
  http::request<http::string_body>& req = impl_->req;
  req.method(http::verb::post);
  req.target(impl_->url.target);
  req.set(http::field::content_type, content_type);
  if (content_encoding.empty()) {
    req.erase(http::field::content_encoding);
  } else {
    req.set(http::field::content_encoding, content_encoding);
  }
  std::swap(req.body(), *body);
  req.prepare_payload();
  const bool ok = impl_->RoundTrip(result);
  std::swap(req.body(), *body);
  return ok;
}

bool HttpClient::PostTo(std::string_view target, std::string* body, const HttpHeaders& headers,
                        HttpResult* result) {
  return SendTo("POST", target, body, headers, result);
}

bool HttpClient::SendTo(std::string_view method, std::string_view target, std::string* body,
                        const HttpHeaders& headers, HttpResult* result) {
  // A request of its own: the loadgen's reused one keeps its fields.
  http::request<http::string_body> req;
  req.version(11);
  req.method_string(method);
  req.target(target);
  req.set(http::field::host, impl_->url.host_header);
  req.set(http::field::user_agent, impl_->opts.user_agent);
  req.keep_alive(true);
  for (const auto& [k, v] : impl_->opts.extra_headers) req.set(k, v);
  for (const auto& [k, v] : headers) req.set(k, v);
  std::swap(req.body(), *body);
  req.prepare_payload();
  std::swap(impl_->req, req);
  const bool ok = impl_->RoundTrip(result);
  std::swap(impl_->req, req);
  std::swap(req.body(), *body);
  return ok;
}

bool HttpClient::Get(std::string_view target, HttpResult* result) {
  http::request<http::string_body>& req = impl_->req;
  req.method(http::verb::get);
  req.target(target);
  req.erase(http::field::content_type);
  req.erase(http::field::content_encoding);
  req.body().clear();
  req.prepare_payload();
  return impl_->RoundTrip(result);
}

void HttpClient::Close() {
  impl_->Close();
}

}  // namespace spanhouse::net
