// The peer sink over TLS: the peer's certificate checked against the CA file
// given, so a sink with the right CA delivers and one trusting another
// certificate does not (and says so in its failures).
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "peers/peer_sink.h"
#include "testdata/sample_batch.h"

namespace spanhouse::peers {
namespace {

using namespace std::chrono_literals;

// Counts acknowledgements (one record only).
class Issuer final : public sink::TicketIssuer {
 public:
  sink::Ticket Issue() { return Make(this, 1, 1, 0, false); }
  std::atomic<int> acks{0};

 private:
  sink::Ticket Reclaim(uint64_t segment, uint64_t lsn, uint64_t offset, bool keep) override {
    --acks;
    return Make(this, segment, lsn, offset, keep);
  }
  void Release(uint64_t, bool) override { ++acks; }
};

// Answers every Export OK, counting them.
class OkPeer final : public grpc::CallbackGenericService {
 public:
  std::atomic<int> calls{0};
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new Reactor(this);
  }

 private:
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    explicit Reactor(OkPeer* peer) : peer_(peer) { StartRead(&req_); }
    void OnReadDone(bool ok) override {
      if (!ok) return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no message"));
      peer_->calls++;
      grpc::Slice empty("");
      resp_ = grpc::ByteBuffer(&empty, 1);
      StartWriteAndFinish(&resp_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    OkPeer* peer_;
    grpc::ByteBuffer req_;
    grpc::ByteBuffer resp_;
  };
};

// A fresh P-256 key and a self-signed certificate for CN=`host`, as PEM.
bool SelfSigned(const std::string& host, std::string* cert_pem, std::string* key_pem) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> x(X509_new(), X509_free);
  if (!key || !x) return false;
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), 7);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 3600);
  X509_set_pubkey(x.get(), key.get());
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(host.c_str()), -1, -1, 0);
  X509_set_issuer_name(x.get(), name);
  if (X509_sign(x.get(), key.get(), EVP_sha256()) == 0) return false;
  auto pem = [](const std::function<int(BIO*)>& write, std::string* out) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    if (!bio || write(bio.get()) != 1) return false;
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    out->assign(data, static_cast<size_t>(n));
    return true;
  };
  return pem([&](BIO* b) { return PEM_write_bio_X509(b, x.get()); }, cert_pem) &&
         pem(
             [&](BIO* b) {
               return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
             },
             key_pem);
}

template <typename F>
bool WaitUntil(F&& pred) {
  for (int i = 0; i < 3000 && !pred(); ++i) std::this_thread::sleep_for(10ms);  // ~30 s at most
  return pred();
}

class PeerTls : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("peer-tls-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::string key;
    ASSERT_TRUE(SelfSigned("peer.test", &cert_, &key));
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert_});
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &port_);
    b.RegisterCallbackGenericService(&peer_);
    server_ = b.BuildAndStart();
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    std::filesystem::remove_all(dir_);
  }
  std::string WriteCa(const std::string& name, const std::string& pem) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << pem;
    return path;
  }
  PeerSinkOptions Options(const std::string& ca_file) {
    PeerSinkOptions o;
    o.name = "peer:node-b";
    o.self = "node-a";
    o.peer = "node-b";
    o.address = "127.0.0.1:" + std::to_string(port_);
    o.tls = true;
    o.tls_ca_file = ca_file;
    o.tls_server_name = "peer.test";
    o.max_reconnect_backoff = 100ms;
    o.retry.backoff_min = 5ms;
    o.retry.backoff_max = 50ms;
    o.retry.drain_timeout = 300ms;
    return o;
  }

  std::filesystem::path dir_;
  std::string cert_;
  OkPeer peer_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(PeerTls, DeliversToAPeerWhoseCertificateTheCaFileVouchesFor) {
  std::unique_ptr<sink::RuntimeSink> s;
  ASSERT_TRUE(MakePeerSink(Options(WriteCa("ca.pem", cert_)), &s).ok());
  ASSERT_TRUE(s->Start().ok());
  Issuer issuer;
  sink::QueuedBatch q;
  q.batch = std::make_unique<SpanBatch>(testdata::SampleBatch(1));
  q.ticket = issuer.Issue();
  ASSERT_TRUE(s->Push(q).ok());
  EXPECT_TRUE(WaitUntil([&] { return issuer.acks.load() == 1; }));
  EXPECT_EQ(peer_.calls.load(), 1);
  s->Drain();
}

TEST_F(PeerTls, RefusesAPeerWhoseCertificateItDoesNotTrust) {
  std::string other, unused;
  ASSERT_TRUE(SelfSigned("peer.test", &other, &unused));
  std::unique_ptr<sink::RuntimeSink> s;
  ASSERT_TRUE(MakePeerSink(Options(WriteCa("other.pem", other)), &s).ok());
  ASSERT_TRUE(s->Start().ok());
  auto& plugin = static_cast<PeerPlugin&>(s->plugin());
  Issuer issuer;
  sink::QueuedBatch q;
  q.batch = std::make_unique<SpanBatch>(testdata::SampleBatch(1));
  q.ticket = issuer.Issue();
  ASSERT_TRUE(s->Push(q).ok());
  EXPECT_TRUE(WaitUntil([&] { return plugin.peer_stats().failures_retryable.load() >= 2; }));
  s->Drain();
  EXPECT_EQ(peer_.calls.load(), 0);
  EXPECT_EQ(issuer.acks.load(), 0);
}

}  // namespace
}  // namespace spanhouse::peers
