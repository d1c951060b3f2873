// The fixture of net::HttpServer's tests (http_server_test.cc,
// http_server_tls_test.cc): a server on 127.0.0.1 with a handler of test
// paths (/echo, /big, /slow, ...) or a deferring one, and what they saw.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "net/http_server.h"
#include "unit/net/http_client.h"

namespace spanhouse::net {

inline constexpr size_t kBigResponse = 20u << 20;

// Deterministic filler, so a misplaced or lost byte shows.
inline std::string Pattern(size_t n, size_t seed = 0) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4093 + seed) % 26);
  return s;
}

class HttpServerTest : public ::testing::Test {
 protected:
  static HttpServerOptions Options() {
    HttpServerOptions o;
    o.name = "test";
    o.address = "127.0.0.1:0";
    o.max_body_bytes = 8u << 20;
    o.threads = 2;
    return o;
  }

  void StartServer(HttpServerOptions opts = Options()) {
    server_ = std::make_unique<HttpServer>(
        std::move(opts), [this](HttpRequest& req, HttpResponse& resp) { Handle(req, resp); });
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->port(), 0);
  }
  // A deferring handler: /later and /defer-throw keep their responder for
  // the test to answer (NextHeld), /defer-throw then throws, /drop lets it
  // go unanswered; anything else is answered at once with its target.
  void StartDeferringServer(HttpServerOptions opts = Options()) {
    server_ = std::make_unique<HttpServer>(
        std::move(opts), [this](HttpRequest& req, HttpResponse& resp, HttpDeferral& later) {
          requests_++;
          const std::string_view path = req.path();
          if (path == "/later" || path == "/defer-throw") {
            std::lock_guard<std::mutex> lock(held_mu_);
            held_.emplace_back(later.Defer(), req.target);
            held_cv_.notify_all();
            if (path == "/defer-throw") throw std::runtime_error("thrown after deferring");
          } else if (path == "/drop") {
            const HttpResponder dropped = later.Defer();
          } else {
            resp.body = "now " + req.target;
          }
        });
    ASSERT_TRUE(server_->Start().ok());
  }
  uint16_t port() const { return server_->port(); }

  // The next deferred request's responder and target, in arrival order.
  std::pair<HttpResponder, std::string> NextHeld() {
    using namespace std::chrono_literals;
    std::unique_lock<std::mutex> lock(held_mu_);
    EXPECT_TRUE(held_cv_.wait_for(lock, 10s, [&] { return !held_.empty(); }));
    if (held_.empty()) return {};
    auto next = std::move(held_.front());
    held_.pop_front();
    return next;
  }

  // Answers on a thread of its own, as the durable queue's sync thread does.
  static void AnswerFromAnotherThread(HttpResponder r, std::string body) {
    std::thread([&r, &body] {
      r.Respond(HttpResponse{200, "text/plain", std::move(body), {}});
    }).join();
  }

  // An answer with `body` that says the connection closes, then the close.
  static void ExpectLastAnswer(Client& c, const std::string& body) {
    Response r;
    ASSERT_TRUE(c.ReadResponse(&r));
    EXPECT_EQ(r.body, body);
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(c.ReadsEof());
  }

  // For tests that need to know what the I/O thread has done (RoundTrip).
  static HttpServerOptions OneThread() {
    HttpServerOptions o = Options();
    o.threads = 1;
    return o;
  }
  // One request on a new connection. With one I/O thread: once it is
  // answered, the thread is done with whatever was handed to it before.
  void RoundTrip() {
    Client c(port());
    ASSERT_TRUE(c.Send(Get("/round-trip")));
    Response r;
    ASSERT_TRUE(c.ReadResponse(&r));
    EXPECT_EQ(r.body, "now /round-trip");
  }

  void Handle(HttpRequest& req, HttpResponse& resp) {
    using namespace std::chrono_literals;
    requests_++;
    const std::string_view path = req.path();
    if (path == "/echo") {
      // The request, reflected.
      if (!req.content_type.empty()) resp.content_type = req.content_type;
      resp.headers.emplace_back("X-Method", req.method);
      resp.headers.emplace_back("X-Target", req.target);
      resp.headers.emplace_back("X-Content-Encoding", req.content_encoding);
      resp.headers.emplace_back("X-If-None-Match", req.if_none_match);
      resp.body = std::move(req.body);
    } else if (path == "/hello") {
      resp.body = "hello\n";
    } else if (path == "/throw") {
      throw std::runtime_error("handler failed on purpose");
    } else if (path == "/big") {
      resp.content_type = "application/octet-stream";
      resp.body = Pattern(kBigResponse);
    } else if (path == "/move") {
      const std::string body = std::move(req.body);
      moved_out_ = req.body.empty();
      resp.body = std::to_string(body.size()) + ":" + body.substr(0, 5);
    } else if (path == "/thread") {
      std::ostringstream id;
      id << std::this_thread::get_id();
      resp.body = id.str();
    } else if (path == "/slow") {
      slow_started_ = true;
      std::this_thread::sleep_for(300ms);
      resp.body = "slow\n";
    } else {
      resp.status = 404;
      resp.body = "not found\n";
    }
  }

  std::atomic<int> requests_{0};
  std::atomic<bool> moved_out_{false};
  std::atomic<bool> slow_started_{false};
  std::mutex held_mu_;
  std::condition_variable held_cv_;
  std::deque<std::pair<HttpResponder, std::string>> held_;  // guarded by held_mu_
  std::unique_ptr<HttpServer> server_;  // last: goes first, while the handler's state lives
};

}  // namespace spanhouse::net
