// `spanhouse serve`: builds the server (server.h) from the configuration and
// runs it until SIGTERM or SIGINT, then stops accepting, flushes every queued
// span and closes the store.
#pragma once

#include <functional>

#include "common/status.h"
#include "server/config.h"

namespace spanhouse::server {

// Blocks SIGINT/SIGTERM in the calling thread (and so in every thread it
// starts later); call first thing in main, before any thread exists.
void BlockShutdownSignals();

// Returns the process exit code. On SIGHUP, `reload` (when set) reads the
// configuration again and the server applies what may change while it runs
// (Server::Reload); a configuration that does not load is logged and ignored.
int Serve(const Config& cfg, const std::function<Status(Config*)>& reload = {});

}  // namespace spanhouse::server
