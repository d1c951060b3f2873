// A real ClickHouse server for the C++ tests: Debian's clickhouse-server
// (scripts/setup.sh --tests installs it), started on free loopback ports in a
// directory of its own with a config written here, stopped at the end. The
// same server as tests/e2e/clickhouse_server.py starts for the Python tests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "storage/clickhouse/remote_connection.h"

extern char** environ;

namespace spanhouse::storage {

class ClickHouseServer {
 public:
  static constexpr const char* kBinary = "/usr/sbin/clickhouse-server";

  // Starts a server under `dir` (made anew). Users "writer" and "reader"
  // (read-only) with password `password` besides "default" (no password).
  explicit ClickHouseServer(const std::string& dir, const std::string& password = "s3cret")
      : dir_(dir), password_(password) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const std::vector<uint16_t> ports = FreePorts(4);
    http_port_ = ports[0];
    https_port_ = ports[3];
    // A self-signed certificate for 127.0.0.1 and localhost, for the HTTPS port.
    const std::string openssl = fmt::format(
        "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext "
        "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout {0}/server.key -out {0}/server.crt "
        ">{0}/openssl.log 2>&1",
        dir_);
    if (std::system(openssl.c_str()) != 0) ADD_FAILURE() << "openssl: see " << dir_;
    WriteConfig(ports);
    const std::string config = "--config-file=" + dir_ + "/config.xml";
    const std::string log = dir_ + "/stdout.log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    char* argv[] = {const_cast<char*>(kBinary), const_cast<char*>(config.c_str()), nullptr};
    const int rc = posix_spawn(&pid_, kBinary, &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      ADD_FAILURE() << "cannot start " << kBinary << " (run scripts/setup.sh --tests)";
      return;
    }
    WaitReady();
  }
  ~ClickHouseServer() { Stop(); }
  ClickHouseServer(const ClickHouseServer&) = delete;
  ClickHouseServer& operator=(const ClickHouseServer&) = delete;

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 300 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }

  bool running() const { return pid_ > 0; }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", http_port_); }
  // The HTTPS interface; its certificate is ca_file().
  std::string https_url(const std::string& host = "127.0.0.1") const {
    return fmt::format("https://{}:{}", host, https_port_);
  }
  std::string ca_file() const { return dir_ + "/server.crt"; }
  const std::string& password() const { return password_; }
  const std::string& dir() const { return dir_; }

  // A connection as the default user.
  std::unique_ptr<RemoteConnection> Connect(const std::string& database = "") const {
    RemoteOptions o;
    o.url = url();
    o.database = database;
    std::unique_ptr<RemoteConnection> c;
    const Status st = RemoteConnection::Open(o, &c);
    EXPECT_TRUE(st.ok()) << st.message();
    return c;
  }

 private:
  static std::vector<uint16_t> FreePorts(size_t n) {
    std::vector<int> fds;
    std::vector<uint16_t> ports;
    for (size_t i = 0; i < n; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof(a);
      ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
      ports.push_back(ntohs(a.sin_port));
      fds.push_back(fd);
    }
    for (int fd : fds) ::close(fd);
    return ports;
  }

  void WriteConfig(const std::vector<uint16_t>& ports) const {
    std::ofstream(dir_ + "/config.xml") << fmt::format(
        R"(<?xml version="1.0"?>
<yandex>
  <logger><level>information</level><log>{0}/server.log</log>
    <errorlog>{0}/error.log</errorlog><console>0</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{1}</http_port>
  <tcp_port>{2}</tcp_port>
  <interserver_http_port>{3}</interserver_http_port>
  <https_port>{4}</https_port>
  <openSSL><server>
    <certificateFile>{0}/server.crt</certificateFile><privateKeyFile>{0}/server.key</privateKeyFile>
    <verificationMode>none</verificationMode><loadDefaultCAFile>false</loadDefaultCAFile>
    <cacheSessions>true</cacheSessions><disableProtocols>sslv2,sslv3</disableProtocols>
    <preferServerCiphers>true</preferServerCiphers>
  </server></openSSL>
  <path>{0}/data/</path>
  <tmp_path>{0}/tmp/</tmp_path>
  <user_files_path>{0}/user_files/</user_files_path>
  <format_schema_path>{0}/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
)",
        dir_, ports[0], ports[1], ports[2], ports[3]);
    std::ofstream(dir_ + "/users.xml") << fmt::format(
        R"(<?xml version="1.0"?>
<yandex>
  <profiles><default></default><readonly><readonly>1</readonly></readonly></profiles>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile><quota>default</quota></default>
    <writer><password>{0}</password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile><quota>default</quota></writer>
    <reader><password>{0}</password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>readonly</profile><quota>default</quota></reader>
  </users>
  <quotas><default></default></quotas>
</yandex>
)",
        password_);
  }

  void WaitReady() {
    RemoteOptions o;
    o.url = url();
    o.timeout = std::chrono::milliseconds(2000);
    for (int i = 0; i < 300; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "clickhouse-server exited; see " << dir_ << "/stdout.log";
        return;
      }
      std::unique_ptr<RemoteConnection> c;
      if (RemoteConnection::Open(o, &c).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "clickhouse-server not ready in 60 s; see " << dir_;
  }

  const std::string dir_;
  const std::string password_;
  uint16_t http_port_ = 0;
  uint16_t https_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace spanhouse::storage
