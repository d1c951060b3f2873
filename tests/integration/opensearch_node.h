// A real OpenSearch 2.19 node for the integration tests: tests/opensearch's
// launcher (scripts/setup.sh --tests builds it), started as
// tests/e2e/opensearch_server.py starts it, on free loopback ports in a
// directory of its own, and stopped with the test binary.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net/http_client.h"
#include "storage/opensearch/opensearch_client.h"

namespace spanhouse::storage::opensearch {

inline std::vector<uint16_t> FreePorts(size_t n) {
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ports.push_back(ntohs(a.sin_port));
    fds.push_back(fd);
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

// The repository's root: the first directory up from the working directory
// or from this binary that holds tests/opensearch.
inline std::filesystem::path RepoRoot() {
  std::vector<std::filesystem::path> starts = {std::filesystem::current_path()};
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  for (std::filesystem::path p : starts) {
    for (; !p.empty(); p = p.parent_path()) {
      if (std::filesystem::is_directory(p / "tests" / "opensearch")) return p;
      if (p == p.parent_path()) break;
    }
  }
  return {};
}

inline std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  std::string_view rest = path;
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::filesystem::path candidate = std::filesystem::path(rest.substr(0, colon)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return {};
}

class OpenSearchNode {
 public:
  // Why a node cannot be started here ("" when it can).
  static std::string Missing(std::filesystem::path* launcher_dir, std::string* java) {
    std::vector<std::string> missing;
    *java = FindOnPath("java");
    if (java->empty()) missing.emplace_back("java");
    const std::filesystem::path root = RepoRoot();
    *launcher_dir = root / "tests" / "opensearch" / "target";
    if (root.empty() ||
        !std::filesystem::is_regular_file(*launcher_dir / "opensearch-launcher.jar")) {
      missing.emplace_back("tests/opensearch/target/opensearch-launcher.jar");
    }
    bool has_lib = false;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(*launcher_dir / "lib", ec)) {
      if (e.path().filename().string().starts_with("opensearch-")) has_lib = true;
    }
    if (!has_lib) missing.emplace_back("tests/opensearch/target/lib/opensearch-*.jar");
    if (missing.empty()) return {};
    std::string why = "OpenSearch is not available: ";
    for (size_t i = 0; i < missing.size(); ++i) why += (i > 0 ? ", " : "") + missing[i];
    return why + " missing (scripts/setup.sh --tests builds tests/opensearch with Maven)";
  }

  OpenSearchNode(const std::filesystem::path& launcher_dir, const std::string& java,
                 const std::filesystem::path& dir)
      : dir_(dir) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "tmp");
    for (int attempt = 0; attempt < 3 && pid_ <= 0; ++attempt) {
      const std::vector<uint16_t> ports = FreePorts(2);
      http_port_ = ports[0];
      Start(launcher_dir, java, ports[1]);
      if (!WaitReady() && pid_ > 0) Stop();
    }
  }
  ~OpenSearchNode() { Stop(); }
  OpenSearchNode(const OpenSearchNode&) = delete;
  OpenSearchNode& operator=(const OpenSearchNode&) = delete;

  bool running() const { return pid_ > 0; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }
  std::string log() const {
    std::ifstream in(dir_ / "opensearch.log");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 600 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }

 private:
  void Start(const std::filesystem::path& launcher_dir, const std::string& java,
             uint16_t transport_port) {
    const std::string classpath = (launcher_dir / "opensearch-launcher.jar").string() + ":" +
                                  (launcher_dir / "lib").string() + "/*";
    std::vector<std::string> args = {java,
                                     "-Xms256m",
                                     "-Xmx768m",
                                     "-XX:+UseSerialGC",
                                     "-XX:-OmitStackTraceInFastThrow",
                                     "-Djava.locale.providers=SPI,COMPAT",
                                     "-Djava.net.preferIPv4Stack=true",
                                     "-Dfile.encoding=UTF-8",
                                     "-Dlog4j2.disable.jmx=true",
                                     "-Djava.io.tmpdir=" + (dir_ / "tmp").string(),
                                     "-cp",
                                     classpath,
                                     "dev.spanhouse.test.OpenSearchLauncher",
                                     "--dir",
                                     dir_.string(),
                                     "--http-port",
                                     std::to_string(http_port_),
                                     "--transport-port",
                                     std::to_string(transport_port),
                                     "--cluster-name",
                                     "spanhouse-test",
                                     "--node-name",
                                     "opensearch"};
    // The node's JVM options are the ones above alone.
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view kv = *e;
      const std::string_view name = kv.substr(0, kv.find('='));
      if (name == "JAVA_TOOL_OPTIONS" || name == "_JAVA_OPTIONS" || name == "JDK_JAVA_OPTIONS" ||
          name == "CLASSPATH") {
        continue;
      }
      env.emplace_back(kv);
    }
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string log = (dir_ / "opensearch.log").string();
    const std::string cwd = dir_.string();
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // The node goes with this test binary, however it ends.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      const int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) ::dup2(null, 0);
      if (::chdir(cwd.c_str()) != 0) ::_exit(1);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    pid_ = pid;
  }

  // Waits until the cluster is yellow or green; false when the node exited
  // or did not get there in 120 s.
  bool WaitReady() {
    OpenSearchOptions o;
    o.urls = {url()};
    o.timeout = std::chrono::milliseconds(5000);
    std::unique_ptr<OpenSearchClient> client;
    if (!OpenSearchClient::Create(o, &client).ok()) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      net::HttpResult r;
      if (client->Get("/_cluster/health?wait_for_status=yellow&timeout=2s", &r).ok() &&
          r.status == 200 &&
          (r.body.find("\"status\":\"yellow\"") != std::string::npos ||
           r.body.find("\"status\":\"green\"") != std::string::npos)) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }

  const std::filesystem::path dir_;
  uint16_t http_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace spanhouse::storage::opensearch
