// net::HttpServer over TLS (an OpenSSL client, a certificate made at test
// time) and with an authorizer refusing requests from their heads; the
// fixture (http_server_fixture.h) and the plain server's tests are
// http_server_test.cc's.
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

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace spanhouse::net {
namespace {

using namespace std::chrono_literals;

// --- Authorizer: requests refused from their heads ---

class AuthorizerTest : public HttpServerTest {
 protected:
  void StartGuarded() {
    HttpServerOptions o = Options();
    o.threads = 1;  // seen_ in the order requests arrive, from one thread
    o.authorize = [this](const HttpRequest& head, const AuthorizationHeader& authorization,
                         HttpResponse& resp) {
      seen_.push_back(head.method + " " + head.target + " [" + std::string(authorization.value) +
                      "] x" + std::to_string(authorization.count));
      if (authorization.value == "Bearer good" || head.path() == "/open") return true;
      resp.status = 401;
      resp.headers.emplace_back("WWW-Authenticate", "Bearer");
      resp.body = "no\n";
      return false;
    };
    StartServer(o);
  }
  std::vector<std::string> seen_;  // touched by the server's one I/O thread
};

TEST_F(AuthorizerTest, RefusedWithoutABodyIsAnsweredThenClosed) {
  StartGuarded();
  Client c(port());
  // A refused request, then pipelined guesses: the first answer is the only
  // one, readable in full, and the connection ends after it.
  ASSERT_TRUE(c.Send(Get("/hello") + Get("/hello", "Authorization: Bearer guess1\r\n") +
                     Get("/hello", "Authorization: Bearer good\r\n")));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.header("www-authenticate"), "Bearer");
  EXPECT_EQ(r.body, "no\n");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.ReadsEof());
  EXPECT_EQ(requests_.load(), 0);  // the handler never saw any of them

  // A new connection with the token (header names are case-blind; the
  // authorizer hears of every Authorization header and sees the first).
  Client d(port());
  ASSERT_TRUE(d.Send(Get("/hello", "authorization: Bearer good\r\nAuthorization: Bearer bad\r\n")));
  ASSERT_TRUE(d.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello\n");
  ASSERT_TRUE(d.Send(Get("/open")));
  ASSERT_TRUE(d.ReadResponse(&r));
  EXPECT_EQ(r.status, 404);  // let through to the handler, which knows no /open
  EXPECT_EQ(requests_.load(), 2);
  ASSERT_EQ(seen_.size(), 3u);
  EXPECT_EQ(seen_[0], "GET /hello [] x0");
  EXPECT_EQ(seen_[1], "GET /hello [Bearer good] x2");
  EXPECT_EQ(seen_[2], "GET /open [] x0");
}

// The client sends its whole body before reading, as most do: the 401 must
// still reach it (a close with unread input would reset the connection),
// and the body is never given to a handler.
TEST_F(AuthorizerTest, RefusedWithABodyIsAnsweredThenClosed) {
  StartGuarded();
  Client c(port());
  const std::string body = Pattern(2u << 20);
  ASSERT_TRUE(c.Send(Post("/echo", body, "Authorization: Bearer bad\r\n")));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_EQ(r.body, "no\n");
  EXPECT_TRUE(c.ReadsEof());
  EXPECT_EQ(requests_.load(), 0);

  // Chunked, and with Expect: 100-continue: the 401 comes instead of the 100.
  Client d(port());
  ASSERT_TRUE(d.Send("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"));
  ASSERT_TRUE(d.ReadResponse(&r));
  EXPECT_EQ(r.status, 401);
  ASSERT_TRUE(d.Send("0\r\n\r\n"));
  EXPECT_TRUE(d.ReadsEof());
  Client e(port());
  ASSERT_TRUE(e.Send("POST /echo HTTP/1.1\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n"));
  ASSERT_TRUE(e.ReadResponse(&r));
  EXPECT_EQ(r.status, 401);
  EXPECT_TRUE(e.ReadsEof());
  EXPECT_EQ(requests_.load(), 0);

  // With the token the body goes through.
  Client f(port());
  ASSERT_TRUE(f.Send(Post("/echo", body, "Authorization: Bearer good\r\n")));
  ASSERT_TRUE(f.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body == body);
}

// --- TLS ---

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

bool WritePem(const std::filesystem::path& path, const std::function<int(FILE*)>& write) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = write(f) == 1;
  return std::fclose(f) == 0 && ok;
}

// A fresh P-256 key and a self-signed certificate for CN=127.0.0.1, as PEM.
bool MakeSelfSigned(const std::filesystem::path& cert, const std::filesystem::path& key) {
  std::unique_ptr<EVP_PKEY, PkeyFree> pkey(EVP_EC_gen("P-256"));
  std::unique_ptr<X509, X509Free> x(X509_new());
  if (!pkey || !x) return false;
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 3600);
  X509_set_pubkey(x.get(), pkey.get());
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(x.get(), name);
  if (X509_sign(x.get(), pkey.get(), EVP_sha256()) == 0) return false;
  return WritePem(cert, [&](FILE* f) { return PEM_write_X509(f, x.get()); }) &&
         WritePem(key, [&](FILE* f) {
           return PEM_write_PrivateKey(f, pkey.get(), nullptr, nullptr, 0, nullptr, nullptr);
         });
}

class TlsServerTest : public HttpServerTest {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("tls-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    cert_ = dir_ / "cert.pem";
    key_ = dir_ / "key.pem";
    ASSERT_TRUE(MakeSelfSigned(cert_, key_));
    Status st = TlsContext::Load(cert_, key_, &tls_);
    ASSERT_TRUE(st.ok()) << st.message();
    client_ctx_.reset(SSL_CTX_new(TLS_client_method()));
    ASSERT_EQ(SSL_CTX_load_verify_locations(client_ctx_.get(), cert_.c_str(), nullptr), 1);
    SSL_CTX_set_verify(client_ctx_.get(), SSL_VERIFY_PEER, nullptr);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void StartTlsServer() {
    HttpServerOptions o = Options();
    o.tls = tls_;
    StartServer(o);
  }

  std::filesystem::path dir_, cert_, key_;
  std::shared_ptr<const TlsContext> tls_;
  std::unique_ptr<SSL_CTX, CtxFree> client_ctx_;
};

TEST_F(TlsServerTest, RequestsAndResponsesOverTls) {
  StartTlsServer();
  Client c(port());
  ASSERT_TRUE(c.StartTls(client_ctx_.get()));
  ASSERT_TRUE(c.Send(Get("/hello")));
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello\n");

  // A body of many TLS records sent in uneven pieces, echoed back whole.
  const std::string body = Pattern(3u << 20, 5);
  ASSERT_TRUE(c.SendInPieces(Post("/echo", body), 100000));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body == body) << r.body.size();

  // A big response, and pipelined requests in one write (the second sits
  // decrypted in OpenSSL's buffer, not in the socket, while the first is
  // answered).
  ASSERT_TRUE(c.Send(Get("/big") + Post("/echo", "second") + Get("/hello")));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_TRUE(r.body == Pattern(kBigResponse));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "second");
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "hello\n");
  EXPECT_EQ(requests_.load(), 5);
  EXPECT_EQ(tls_->handshake_failures(), 0u);
}

TEST_F(TlsServerTest, PlainHttpAndBadHandshakesCloseOnlyTheirConnection) {
  StartTlsServer();
  Client tls_client(port());  // connected before, served after
  ASSERT_TRUE(tls_client.StartTls(client_ctx_.get()));

  Client plain(port());
  ASSERT_TRUE(plain.Send(Get("/hello")));
  const std::string answer = plain.ReadToEof();
  EXPECT_EQ(answer.find("HTTP/1.1"), std::string::npos) << answer;

  Client garbage(port());
  ASSERT_TRUE(garbage.Send(std::string("\x16\x03\x01\x00\x05hello", 10) + Pattern(5000)));
  garbage.ReadToEof();

  // A client that does not trust the certificate gives up mid-handshake.
  std::unique_ptr<SSL_CTX, CtxFree> distrust(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_verify(distrust.get(), SSL_VERIFY_PEER, nullptr);
  Client doubter(port());
  EXPECT_FALSE(doubter.StartTls(distrust.get()));

  {
    Client silent(port());  // connects and leaves without a byte: not a failure
    EXPECT_TRUE(silent.connected());
  }

  // Counted once each connection is closed, which a new request waits for.
  for (int i = 0; i < 1000 && tls_->handshake_failures() < 3; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(tls_->handshake_failures(), 3u);

  ASSERT_TRUE(tls_client.Send(Get("/hello")));
  Response r;
  ASSERT_TRUE(tls_client.ReadResponse(&r));
  EXPECT_EQ(r.body, "hello\n");
  EXPECT_EQ(requests_.load(), 1);

  // The server stops cleanly with TLS connections open.
  server_->Stop(100ms);
  EXPECT_TRUE(tls_client.ReadsEof());
}

// A client that keeps asking for TLS 1.3 key updates (each needs one back)
// and never reads: once the socket takes no more of the server's answers,
// SSL_read wants to write while the client's bytes sit unread. The server
// must then wait for the socket to drain, not be woken by that input again
// and again. Counted in epoll events handled, not in time.
TEST_F(TlsServerTest, KeyUpdateFloodFromANonReaderDoesNotSpin) {
  HttpServerOptions o = Options();
  o.tls = tls_;
  o.threads = 1;
  o.idle_timeout = 0ms;  // no sweep to end it: the connection just waits
  o.max_body_bytes = 64u << 20;
  o.send_buffer_bytes = 4096;  // its answers fill the socket after a few hundred
  StartServer(o);

  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  SSL* ssl = SSL_new(client_ctx_.get());
  SSL_set_fd(ssl, fd);
  ASSERT_EQ(SSL_connect(ssl), 1);
  ASSERT_EQ(SSL_version(ssl), TLS1_3_VERSION);
  // A body being received: the server reads on (kBody) and the app data
  // between key updates keeps OpenSSL's limit on consecutive ones away.
  const std::string head = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 33554432\r\n\r\n";
  ASSERT_EQ(SSL_write(ssl, head.data(), static_cast<int>(head.size())),
            static_cast<int>(head.size()));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  // Until the server stops reading: the client's socket takes nothing more,
  // and has not for a while (a busy server only falls behind for a moment).
  bool stuck = false;
  for (int i = 0; i < 5000000 && !stuck; ++i) {
    ASSERT_EQ(SSL_key_update(ssl, SSL_KEY_UPDATE_REQUESTED), 1);
    int n = SSL_write(ssl, "0123456789abcdef", 16);
    while (n <= 0 && !stuck) {
      ASSERT_EQ(SSL_get_error(ssl, n), SSL_ERROR_WANT_WRITE);
      pollfd p{fd, POLLOUT, 0};
      stuck = poll(&p, 1, 1000) == 0;
      if (!stuck) n = SSL_write(ssl, "0123456789abcdef", 16);  // the same write, retried
    }
  }
  ASSERT_TRUE(stuck) << "the server read everything: no back-pressure";

  // The client misbehaves on (it neither reads nor closes): a waiting server
  // handles a few events at most; a spinning one, thousands.
  const uint64_t before = server_->stats().connection_events.load();
  std::this_thread::sleep_for(300ms);
  const uint64_t during = server_->stats().connection_events.load() - before;
  EXPECT_LT(during, 50u) << "the I/O thread spins on a connection it cannot serve";

  SSL_free(ssl);
  close(fd);
}

// A client that resets the connection mid-handshake has left; it did not
// fail a handshake (nothing about the certificate or the protocol).
TEST_F(TlsServerTest, ResetMidHandshakeIsNotAHandshakeFailure) {
  HttpServerOptions o = Options();
  o.tls = tls_;
  o.threads = 1;  // one loop: the reset is handled before the later connection
  StartServer(o);
  {
    Client c(port());
    ASSERT_TRUE(c.connected());
    // The ClientHello made into memory and sent by hand: the client never
    // reads the server's answer, so the handshake cannot finish (on the
    // socket, SSL_connect could, when the server's flight came in time).
    SSL* ssl = SSL_new(client_ctx_.get());
    SSL_set_bio(ssl, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
    SSL_set_connect_state(ssl);
    const int r = SSL_do_handshake(ssl);
    ASSERT_EQ(SSL_get_error(ssl, r), SSL_ERROR_WANT_READ);
    char* hello = nullptr;
    const long n = BIO_get_mem_data(SSL_get_wbio(ssl), &hello);
    ASSERT_GT(n, 0);
    ASSERT_TRUE(c.Send(std::string(hello, static_cast<size_t>(n))));
    const int fd = c.fd();
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1);  // the server's flight is here: it waits for ours
    const linger reset{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    SSL_free(ssl);
  }  // closed with SO_LINGER 0: a reset
  // A real failure after it, to know when the server is past the reset.
  Client garbage(port());
  ASSERT_TRUE(garbage.Send(std::string("\x16\x03\x01\x00\x05hello", 10)));
  garbage.ReadToEof();
  for (int i = 0; i < 1000 && tls_->handshake_failures() < 1; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(tls_->handshake_failures(), 1u);
}

TEST_F(TlsServerTest, DeferredAnswersOverTls) {
  HttpServerOptions o = Options();
  o.tls = tls_;
  StartDeferringServer(o);
  Client c(port());
  ASSERT_TRUE(c.StartTls(client_ctx_.get()));
  ASSERT_TRUE(c.Send(Get("/later?1") + Get("/2")));
  auto first = NextHeld();
  AnswerFromAnotherThread(std::move(first.first), "1");
  Response r;
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "1");
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_EQ(r.body, "now /2");
  // An answer of many TLS records.
  ASSERT_TRUE(c.Send(Get("/later?big")));
  auto big = NextHeld();
  AnswerFromAnotherThread(std::move(big.first), Pattern(kBigResponse));
  ASSERT_TRUE(c.ReadResponse(&r));
  EXPECT_TRUE(r.body == Pattern(kBigResponse)) << r.body.size();
}

TEST_F(TlsServerTest, RenegotiationIsOff) {
  EXPECT_NE(SSL_CTX_get_options(tls_->ctx()) & SSL_OP_NO_RENEGOTIATION, 0u);
}

TEST_F(TlsServerTest, LoadNamesTheBadFile) {
  std::shared_ptr<const TlsContext> ctx;
  Status st = TlsContext::Load((dir_ / "missing.pem").string(), key_, &ctx);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("missing.pem"), std::string::npos) << st.message();

  st = TlsContext::Load(cert_, cert_, &ctx);  // a certificate is not a key
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("TLS key"), std::string::npos) << st.message();

  const auto other_cert = dir_ / "other-cert.pem";
  const auto other_key = dir_ / "other-key.pem";
  ASSERT_TRUE(MakeSelfSigned(other_cert, other_key));
  st = TlsContext::Load(cert_, other_key, &ctx);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("does not match"), std::string::npos) << st.message();
  EXPECT_EQ(ctx, nullptr);

  EXPECT_TRUE(TlsContext::Load(other_cert, other_key, &ctx).ok());
  EXPECT_NE(ctx, nullptr);
}

}  // namespace
}  // namespace spanhouse::net