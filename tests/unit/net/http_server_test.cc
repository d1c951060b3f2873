// net::HttpServer over real sockets on 127.0.0.1, driven by a plain POSIX
// client: framing (Content-Length, chunked, pipelining, keep-alive), limits,
// protocol errors, handler failures, slow readers, timeouts and Stop(), and
// deferred answers. The same server over TLS and with an authorizer:
// http_server_tls_test.cc; the fixture: http_server_fixture.h.
#include "net/http_server.h"

#include "unit/net/http_client.h"
#include "unit/net/http_server_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace spanhouse::net {
namespace {

using namespace std::chrono_literals;

TEST_F(HttpServerTest, GetAndPostWithContentLength) {
  StartServer();
  Client c(port());
  ASSERT_TRUE(c.connected());

  ASSERT_TRUE(c.Send(Get("/echo?limit=5&q=a%20b")));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("server"), "spanhouse");
  EXPECT_EQ(r.header("content-type"), "text/plain");
  EXPECT_EQ(r.header("content-length"), "0");
  EXPECT_EQ(r.header("connection"), "<none>");
  EXPECT_EQ(r.header("x-method"), "GET");
  EXPECT_EQ(r.header("x-target"), "/echo?limit=5&q=a%20b");
  EXPECT_EQ(r.body, "");

  // Header names in any case, values trimmed.
  ASSERT_TRUE(c.Send(Post("/echo", "hello, world",
                          "content-TYPE: \t application/x-protobuf  \r\n"
                          "Content-Encoding:gzip\r\n"
                          "if-none-match:  \"a1\", W/\"b2\" \r\n"
                          "If-None-Match: \"ignored\"\r\n")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/x-protobuf");
  EXPECT_EQ(r.header("x-content-encoding"), "gzip");
  EXPECT_EQ(r.header("x-if-none-match"), "\"a1\", W/\"b2\"");  // the first one, trimmed
  EXPECT_EQ(r.header("x-method"), "POST");
  EXPECT_EQ(r.header("content-length"), "12");
  EXPECT_EQ(r.body, "hello, world");

  ASSERT_TRUE(c.Send(Get("/nowhere")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "not found\n");
}

TEST_F(HttpServerTest, HeadRequestGetsNoBody) {
  StartServer();
  Client c(port());
  ASSERT_TRUE(c.Send("HEAD /hello HTTP/1.1\r\n\r\n"));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r, /*head_request=*/true));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-length"), "6");
  // Had a body been sent, it would come before this response.
  ASSERT_TRUE(c.Send(Get("/hello")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "hello\n");
}

TEST_F(HttpServerTest, LargeBodyInManySmallWrites) {
  StartServer();
  Client c(port());
  const std::string body = Pattern(5u << 20, 3);
  ASSERT_TRUE(c.SendInPieces(Post("/echo", body), 9000));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(r.body.size(), body.size());
  EXPECT_TRUE(r.body == body);
}

TEST_F(HttpServerTest, ChunkedBody) {
  StartServer();
  Client c(port());
  const std::string big = Pattern(100000, 5);
  char size_line[32];
  snprintf(size_line, sizeof(size_line), "%zx\r\n", big.size());
  const std::string req =
      "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: text/x-test\r\n\r\n"
      "5;name=value;flag\r\nhello\r\n"
      "1A \r\nABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n" +
      std::string(size_line) + big +
      "\r\n"
      "0\r\nX-Trailer: yes\r\nX-Other: 1\r\n\r\n";
  // In small pieces, so chunk framing is split across reads.
  ASSERT_TRUE(c.SendInPieces(req, 7));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/x-test");
  EXPECT_TRUE(r.body == "helloABCDEFGHIJKLMNOPQRSTUVWXYZ" + big);

  // The connection is at a request boundary after the trailers.
  ASSERT_TRUE(c.Send(Get("/hello")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "hello\n");

  // An empty chunked body.
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\n0\r\n\r\n"));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
}

TEST_F(HttpServerTest, ExpectContinue) {
  StartServer();
  Client c(port());
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  std::string interim;
  ASSERT_TRUE(c.ReadExactly(25, &interim));
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.Send("hello"));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");

  // Chunked too.
  ASSERT_TRUE(
      c.Send("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-Continue\r\n\r\n"));
  ASSERT_TRUE(c.ReadExactly(25, &interim));
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.Send("3\r\nabc\r\n0\r\n\r\n"));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "abc");
}

TEST_F(HttpServerTest, ExpectContinueForTooLargeBodyGets413) {
  HttpServerOptions o = Options();
  o.max_body_bytes = 1000;
  StartServer(o);
  Client c(port());
  ASSERT_TRUE(
      c.Send("POST /echo HTTP/1.1\r\nContent-Length: 1001\r\nExpect: 100-continue\r\n\r\n"));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));  // not a 100 first
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, "request body exceeds 1000 bytes\n");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.ReadsEof());
}

TEST_F(HttpServerTest, PipelinedRequestsInOneWrite) {
  StartServer();
  Client c(port());
  ASSERT_TRUE(c.Send(Post("/echo", "first body") + Get("/echo?second") +
                     "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "6\r\nthird!\r\n0\r\n\r\n" +
                     Post("/echo", "fourth")));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "first body");
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.header("x-target"), "/echo?second");
  EXPECT_EQ(r.body, "");
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "third!");
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "fourth");
  EXPECT_EQ(requests_.load(), 4);
}

TEST_F(HttpServerTest, KeepAliveAcrossRequests) {
  StartServer();
  Client c(port());
  for (int i = 0; i < 20; ++i) {
    const std::string body = Pattern(1000 + i * 5000, i);
    ASSERT_TRUE(c.Send(Post("/echo", body)));
    Response r;
    ASSERT_TRUE(c.ReadResponse(&r)) << i;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("connection"), "<none>");
    EXPECT_TRUE(r.body == body) << i;
  }
  EXPECT_EQ(requests_.load(), 20);
}

TEST_F(HttpServerTest, ConnectionCloseAndHttp10) {
  StartServer();
  Response r;
  {  // HTTP/1.0 closes by default.
    Client c(port());
    ASSERT_TRUE(c.Send("GET /hello HTTP/1.0\r\n\r\n"));
    ASSERT_TRUE(c.ReadResponse(&r));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "hello\n");
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(c.ReadsEof());
  }
  {  // ... unless asked to keep alive.
    Client c(port());
    ASSERT_TRUE(c.Send("GET /hello HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
    ASSERT_TRUE(c.ReadResponse(&r));
    EXPECT_EQ(r.header("connection"), "keep-alive");
    ASSERT_TRUE(c.Send("GET /hello HTTP/1.0\r\n\r\n"));
    ASSERT_TRUE(c.ReadResponse(&r));
    EXPECT_EQ(r.body, "hello\n");
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(c.ReadsEof());
  }
  {  // HTTP/1.1 with Connection: close.
    Client c(port());
    ASSERT_TRUE(c.Send(Get("/hello", "Connection: foo, close\r\n")));
    ASSERT_TRUE(c.ReadResponse(&r));
    EXPECT_EQ(r.body, "hello\n");
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(c.ReadsEof());
  }
}

TEST_F(HttpServerTest, BodyOverLimitWithContentLengthIs413) {
  HttpServerOptions o = Options();
  o.max_body_bytes = 1u << 20;
  StartServer(o);
  Client c(port());
  // Only the head: the server must answer without waiting for the body.
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n"));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.header("content-type"), "text/plain");
  EXPECT_EQ(r.body, "request body exceeds 1048576 bytes\n");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.ReadsEof());
  EXPECT_EQ(requests_.load(), 0);

  // Exactly at the limit is fine.
  Client ok(port());
  const std::string body = Pattern(1u << 20);
  ASSERT_TRUE(ok.Send(Post("/echo", body)));
  ASSERT_TRUE(ok.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body == body);
}

TEST_F(HttpServerTest, BodyOverLimitWhileDechunkingIs413) {
  HttpServerOptions o = Options();
  o.max_body_bytes = 1u << 20;
  StartServer(o);
  Client c(port());
  // 576 KiB fits; another 576 KiB does not.
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n90000\r\n" +
                     Pattern(0x90000) + "\r\n90000\r\n"));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, "request body exceeds 1048576 bytes\n");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.ReadsEof());
  EXPECT_EQ(requests_.load(), 0);
}

TEST_F(HttpServerTest, MalformedRequestsAre400AndClose) {
  StartServer();
  const std::pair<std::string, std::string> cases[] = {
      {"GARBAGE\r\n\r\n", "bad request line"},
      {"GET /\r\n\r\n", "bad request line"},
      {"GET / HTTP/2.0\r\n\r\n", "unsupported HTTP version"},
      {"GET / HTTP/1.1 extra\r\n\r\n", "unsupported HTTP version"},
      {"GET  / HTTP/1.1\r\n\r\n", "bad request target"},
      {"G(T / HTTP/1.1\r\n\r\n", "bad method"},
      {"GET / HTTP/1.1\r\nNo colon here\r\n\r\n", "header line without a colon"},
      {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", "bad header name"},
      {"GET / HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n", "obsolete header line folding"},
      {"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
       "both Content-Length and Transfer-Encoding"},
      {"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
       "bad or conflicting Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n", "bad or conflicting Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "bad or conflicting Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
       "bad or conflicting Content-Length"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       "unsupported Transfer-Encoding"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
       "chunk data longer than its size"},
  };
  for (const auto& [request, what] : cases) {
    Client c(port());
    ASSERT_TRUE(c.Send(request));
    Response r;
    ASSERT_TRUE(c.ReadResponse(&r)) << request;
    EXPECT_EQ(r.status, 400) << request;
    EXPECT_EQ(r.body, "malformed HTTP request: " + what + "\n") << request;
    EXPECT_EQ(r.header("connection"), "close") << request;
    EXPECT_TRUE(c.ReadsEof()) << request;
  }
  EXPECT_EQ(requests_.load(), 0);

  // Identical repeated Content-Length values are allowed, as are empty
  // lines before the request line.
  Client c(port());
  ASSERT_TRUE(
      c.Send("\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 3, 3\r\n"
             "Content-Length: 3\r\n\r\nabc"));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "abc");
}

TEST_F(HttpServerTest, OversizeHeadIs431) {
  StartServer();
  Client c(port());
  // 64 KiB of head with no end in sight.
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nX-Big: " + std::string(64 * 1024, 'a')));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 431);
  EXPECT_EQ(r.body, "request head exceeds 65536 bytes\n");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.ReadsEof());

  // A large head that fits is fine.
  Client ok(port());
  ASSERT_TRUE(ok.Send(Get("/hello", "X-Big: " + std::string(60 * 1024, 'b') + "\r\n")));
  ASSERT_TRUE(ok.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
}

TEST_F(HttpServerTest, HandlerThrowsIs500AndServingGoesOn) {
  StartServer();
  Client c(port());
  ASSERT_TRUE(c.Send(Post("/throw", "x")));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "internal error\n");
  // Same connection, and a new one.
  ASSERT_TRUE(c.Send(Get("/hello")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello\n");
  Client other(port());
  ASSERT_TRUE(other.Send(Get("/hello")));
  ASSERT_TRUE(other.ReadResponse(&r));
  EXPECT_EQ(r.body, "hello\n");
}

TEST_F(HttpServerTest, LargeResponseToSlowReader) {
  StartServer();
  Client c(port(), /*rcvbuf=*/16 * 1024);
  ASSERT_TRUE(c.Send(Get("/big")));
  Response r;
  // Read the head, then the body slowly at first, in small pieces, so the
  // server's writes are partial and it must wait for EPOLLOUT.
  std::string first;
  ASSERT_TRUE(c.ReadExactly(512, &first, 512));
  const size_t head_end = first.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_EQ(first.substr(0, 17), "HTTP/1.1 200 OK\r\n");
  EXPECT_NE(first.find("Content-Length: " + std::to_string(kBigResponse) + "\r\n"),
            std::string::npos);
  std::string body = first.substr(head_end + 4);
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(2ms);
    std::string piece;
    ASSERT_TRUE(c.ReadExactly(4096, &piece, 4096));
    body += piece;
  }
  std::string rest;
  ASSERT_TRUE(c.ReadExactly(kBigResponse - body.size(), &rest));
  body += rest;
  ASSERT_EQ(body.size(), kBigResponse);
  EXPECT_TRUE(body == Pattern(kBigResponse));

  // And the connection goes on.
  ASSERT_TRUE(c.Send(Get("/hello")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "hello\n");
}

TEST_F(HttpServerTest, IdleTimeoutClosesSilentAndStuckConnections) {
  HttpServerOptions o = Options();
  o.idle_timeout = 300ms;
  StartServer(o);
  Client silent(port());
  Client stuck_head(port());
  Client stuck_body(port());
  ASSERT_TRUE(stuck_head.Send("POST /echo HTTP/1.1\r\nContent-Le"));
  ASSERT_TRUE(stuck_body.Send("POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"));
  const auto start = std::chrono::steady_clock::now();
  // Each recv() gives up after 10 s.
  EXPECT_TRUE(silent.ReadsEof());
  EXPECT_TRUE(stuck_head.ReadsEof());
  EXPECT_TRUE(stuck_body.ReadsEof());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 9s);
  EXPECT_EQ(requests_.load(), 0);

  // New connections are still served.
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/hello")));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "hello\n");
}

TEST_F(HttpServerTest, StopClosesConnectionsAndJoins) {
  StartServer();
  const uint16_t p = port();
  Client idle(p);
  Client partial(p);
  Client served(p);
  ASSERT_TRUE(partial.Send("POST /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc"));
  ASSERT_TRUE(served.Send(Get("/hello")));
  Response r;
  ASSERT_TRUE(served.ReadResponse(&r));

  server_->Stop(100ms);
  EXPECT_TRUE(idle.ReadsEof());
  EXPECT_TRUE(partial.ReadsEof());
  EXPECT_TRUE(served.ReadsEof());
  server_->Stop();  // idempotent
  Client late(p);
  EXPECT_FALSE(late.connected());
}

TEST_F(HttpServerTest, StopWaitsForHandlersInFlight) {
  StartServer();
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/slow")));
  while (!slow_started_.load()) std::this_thread::sleep_for(1ms);
  server_->Stop(5s);
  // The handler finished and its answer went out, telling the client the
  // connection closes.
  ExpectLastAnswer(c, "slow\n");
}

TEST_F(HttpServerTest, HandlerMayMoveTheBodyOut) {
  StartServer();
  Client c(port());
  ASSERT_TRUE(c.Send(Post("/move", "abcdefgh")));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "8:abcde");
  EXPECT_TRUE(moved_out_.load());
  // The next request on the connection gets a body of its own.
  ASSERT_TRUE(c.Send(Post("/move", "xyz")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "3:xyz");
}

TEST_F(HttpServerTest, ManyConnectionsAtOnce) {
  StartServer();
  std::vector<std::unique_ptr<Client>> clients;
  clients.reserve(50);
  for (int i = 0; i < 50; ++i) clients.push_back(std::make_unique<Client>(port()));
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < clients.size(); ++i) {
      ASSERT_TRUE(clients[i]->Send(Post("/echo", "client " + std::to_string(i))));
    }
    for (size_t i = 0; i < clients.size(); ++i) {
      Response r;
      ASSERT_TRUE(clients[i]->ReadResponse(&r));
      EXPECT_EQ(r.body, "client " + std::to_string(i));
    }
  }
  EXPECT_EQ(requests_.load(), 150);
}

// Connections opened one after another spread over the I/O threads rather
// than all going to the thread that happens to be woken first.
TEST_F(HttpServerTest, ConnectionsSpreadOverThreads) {
  HttpServerOptions o = Options();
  o.threads = 2;
  StartServer(o);
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::string> thread_of;  // per client
  std::map<std::string, int> per_thread;
  for (int i = 0; i < 6; ++i) {
    clients.push_back(std::make_unique<Client>(port()));
    ASSERT_TRUE(clients.back()->Send(Get("/thread")));
    Response r;
    ASSERT_TRUE(clients.back()->ReadResponse(&r));
    thread_of.push_back(r.body);
    per_thread[r.body]++;
  }
  ASSERT_EQ(per_thread.size(), 2u);
  for (const auto& [id, n] : per_thread) EXPECT_EQ(n, 3) << id;
  // And each connection stays with the thread that accepted it.
  for (size_t i = 0; i < clients.size(); ++i) {
    ASSERT_TRUE(clients[i]->Send(Get("/thread")));
    Response r;
    ASSERT_TRUE(clients[i]->ReadResponse(&r));
    EXPECT_EQ(r.body, thread_of[i]) << i;
  }
}

TEST(HttpServerStartTest, AddressesAndErrors) {
  auto handler = [](const HttpRequest&, HttpResponse& resp) { resp.body = "ok"; };
  {
    HttpServer s({"t", "nonsense", 1024, 1}, handler);
    Status st = s.Start();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  }
  {
    HttpServer s({"t", "example.com:80", 1024, 1}, handler);
    Status st = s.Start();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  }
  {
    HttpServer a({"t", "localhost:0", 1024, 1}, handler);
    ASSERT_TRUE(a.Start().ok());
    Client c(a.port());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.Send(Get("/")));
    Response r;
    ASSERT_TRUE(c.ReadResponse(&r));
    EXPECT_EQ(r.body, "ok");
    // The same port again cannot be bound.
    HttpServer b({"t", "127.0.0.1:" + std::to_string(a.port()), 1024, 1}, handler);
    Status st = b.Start();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
  }
  {
    HttpServer s({"t", "[::1]:0", 1024, 1}, handler);
    Status st = s.Start();
    if (st.ok()) {
      EXPECT_NE(s.port(), 0);
    } else {
      // No IPv6 loopback here; what matters is that it was not refused as an address.
      EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
    }
  }
}

TEST(SplitHostPortTest, Forms) {
  std::string host;
  uint16_t port = 0;
  EXPECT_TRUE(SplitHostPort("127.0.0.1:4318", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 4318);
  EXPECT_TRUE(SplitHostPort("[::1]:0", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 0);
  EXPECT_FALSE(SplitHostPort("4318", &host, &port));
  EXPECT_FALSE(SplitHostPort(":4318", &host, &port));
  EXPECT_FALSE(SplitHostPort("h:65536", &host, &port));
  EXPECT_FALSE(SplitHostPort("h:", &host, &port));
}

TEST(IsLoopbackAddressTest, Forms) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:4318"));
  EXPECT_TRUE(IsLoopbackAddress("127.1.2.3:0"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:4318"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:16686"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:4318"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:4318"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.7:4318"));
  EXPECT_FALSE(IsLoopbackAddress("128.0.0.1:4318"));
  EXPECT_FALSE(IsLoopbackAddress("example.com:4318"));
  EXPECT_FALSE(IsLoopbackAddress("nonsense"));
}

// --- Deferred answers (HttpDeferral) ---

TEST(HttpResponderTest, AnswersOnceAndAnAbandonedOneAnswers503) {
  std::vector<HttpResponse> got;
  const auto deliver = [&got](HttpResponse&& r) { got.push_back(std::move(r)); };
  HttpResponder a(deliver);
  EXPECT_TRUE(a.valid());
  a.Respond(HttpResponse{201, "text/plain", "first", {}});
  EXPECT_FALSE(a.valid());
  a.Respond(HttpResponse{202, "text/plain", "second", {}});  // empty: nothing
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 201);

  { HttpResponder dropped(deliver); }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].status, 503);
  ASSERT_EQ(got[1].headers.size(), 1u);
  EXPECT_EQ(got[1].headers[0].first, "Retry-After");

  // Moved: the handle goes along; assigned over: the old one is abandoned.
  HttpResponder b(deliver);
  HttpResponder c(std::move(b));
  EXPECT_FALSE(b.valid());  // moved-from: empty
  HttpResponder d(deliver);
  d = std::move(c);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].status, 503);
  d.Respond(HttpResponse{200, "text/plain", "d", {}});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[3].body, "d");
}

TEST_F(HttpServerTest, DeferredAnswerGivenFromAnotherThread) {
  StartDeferringServer();
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/later?1")));
  auto [responder, target] = NextHeld();
  EXPECT_EQ(target, "/later?1");
  AnswerFromAnotherThread(std::move(responder), "later 1");
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "later 1");
  EXPECT_EQ(r.header("connection"), "<none>");
  // The connection goes on as after any answer.
  ASSERT_TRUE(c.Send(Get("/next")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "now /next");
}

// Requests pipelined behind a deferred one are not handled until it is
// answered, so the answers go out in request order.
TEST_F(HttpServerTest, PipelinedRequestsWaitForADeferredAnswer) {
  StartDeferringServer(OneThread());
  Client c(port());
  ASSERT_TRUE(
      c.Send(Get("/later?first") + Get("/second") + Post("/later?third", "abc") + Get("/fourth")));
  auto first = NextHeld();
  EXPECT_EQ(first.second, "/later?first");
  // The thread has finished with `c` (its bytes came in one write): a server
  // that read on would have run /second's handler and answered it by now.
  RoundTrip();
  EXPECT_EQ(requests_.load(), 2);  // /later?first and the round trip
  EXPECT_TRUE(c.NothingYet());

  AnswerFromAnotherThread(std::move(first.first), "first");
  auto third = NextHeld();
  EXPECT_EQ(third.second, "/later?third");
  AnswerFromAnotherThread(std::move(third.first), "third");
  Response r;
  for (const char* want : {"first", "now /second", "third", "now /fourth"}) {
    ASSERT_TRUE(c.ReadResponse(&r)) << want;
    EXPECT_EQ(r.body, want);
  }
}

// A connection gone while its answer is deferred: answering later is safe,
// the answer is dropped, and the request no longer counts as in flight.
TEST_F(HttpServerTest, PeerGoneWhileTheAnswerIsDeferred) {
  StartDeferringServer(OneThread());
  auto fin = std::make_unique<Client>(port());
  ASSERT_TRUE(fin->Send(Get("/later?fin")));
  auto a = NextHeld();
  auto rst = std::make_unique<Client>(port());
  ASSERT_TRUE(rst->Send(Get("/later?rst")));
  auto b = NextHeld();
  fin.reset();  // a FIN: the server finds out when it writes the answer
  const linger reset{1, 0};
  ASSERT_EQ(setsockopt(rst->fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
  rst.reset();  // a reset: epoll reports it, and the connection goes at once
  RoundTrip();
  AnswerFromAnotherThread(std::move(a.first), "to a half-closed connection");
  AnswerFromAnotherThread(std::move(b.first), "to nobody");
  RoundTrip();
  // Stop waits for requests in flight: none are left.
  const auto start = std::chrono::steady_clock::now();
  server_->Stop(30s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
}

TEST_F(HttpServerTest, IdleTimeoutClosesAConnectionWaitingForItsAnswer) {
  HttpServerOptions o = Options();
  o.idle_timeout = 300ms;
  StartDeferringServer(o);
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/later")));
  auto held = NextHeld();
  EXPECT_TRUE(c.ReadsEof());
  AnswerFromAnotherThread(std::move(held.first), "too late");
  RoundTrip();
}

TEST_F(HttpServerTest, StopWaitsForADeferredAnswer) {
  StartDeferringServer();
  const uint16_t p = port();
  Client c(p);
  ASSERT_TRUE(c.Send(Get("/later")));
  auto held = NextHeld();
  std::jthread stopper([this] { server_->Stop(30s); });  // joined on any way out
  // Stop has begun once connects are refused.
  for (int i = 0; i < 1000 && Client(p).connected(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(Client(p).connected());
  AnswerFromAnotherThread(std::move(held.first), "given during Stop");
  ExpectLastAnswer(c, "given during Stop");
}

TEST_F(HttpServerTest, StopDropsDeferredAnswersNotGivenInTime) {
  StartDeferringServer();
  Client c1(port());
  Client c2(port());
  ASSERT_TRUE(c1.Send(Get("/later?1")));
  auto one = NextHeld();
  ASSERT_TRUE(c2.Send(Get("/later?2")));
  auto two = NextHeld();
  server_->Stop(100ms);
  EXPECT_TRUE(c1.ReadsEof());
  EXPECT_TRUE(c2.ReadsEof());
  AnswerFromAnotherThread(std::move(one.first), "after Stop");
  server_.reset();
  AnswerFromAnotherThread(std::move(two.first), "after the server");
}

TEST_F(HttpServerTest, AnAbandonedDeferredAnswerIs503) {
  StartDeferringServer();
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/drop")));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.header("retry-after"), "1");
  ASSERT_TRUE(c.Send(Get("/next")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "now /next");
}

TEST_F(HttpServerTest, AHandlerThatDefersThenThrowsAnswersThroughItsResponder) {
  StartDeferringServer();
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/defer-throw")));
  auto held = NextHeld();
  AnswerFromAnotherThread(std::move(held.first), "kept");
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "kept");
}
}  // namespace
}  // namespace spanhouse::net
