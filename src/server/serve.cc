#include "server/serve.h"

#include <malloc.h>
#include <signal.h>

#include <cstring>
#include <memory>

#include <spdlog/spdlog.h>

#include "server/server.h"

namespace spanhouse::server {

namespace {

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  // SIGHUP (reload) is taken by the serve loop too, never by a default handler.
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int Serve(const Config& cfg, const std::function<Status(Config*)>& reload) {
  // Request bodies and batch columns are large, short-lived allocations.
  // glibc would map and unmap each (>128 KiB) and fault its pages in anew
  // every request (page faults were ~6% of the pipeline's CPU); keep them on
  // the heap for reuse instead.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  std::unique_ptr<Server> server;
  Status st = Server::Create(cfg, &server);
  if (st.ok()) st = server->Start();
  if (!st.ok()) {
    spdlog::error("{}", st.message());
    return 1;  // `server`'s destructor closes what was opened
  }
  sigset_t set = ShutdownSignals();
  int sig = 0;
  while (true) {
    sigwait(&set, &sig);
    if (sig != SIGHUP) break;
    if (!reload) {
      spdlog::info("SIGHUP: nothing to reload (no configuration file)");
      continue;
    }
    Config fresh;
    if (Status rs = reload(&fresh); !rs.ok()) {
      spdlog::error("SIGHUP: the configuration did not load, nothing changed: {}", rs.message());
      continue;
    }
    server->Reload(fresh);
  }
  spdlog::info("{} received: stopping intake, flushing queued spans", strsignal(sig));
  const int code = server->Stop();
  server.reset();
  spdlog::info("stopped");
  return code;
}

}  // namespace spanhouse::server
