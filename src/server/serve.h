// `spanhouse serve`: builds the server (server.h) from the configuration and
// runs it until SIGTERM or SIGINT, then stops accepting, flushes every queued
// span and closes the store.
#pragma once

#include "server/config.h"

namespace spanhouse::server {

// Blocks SIGINT/SIGTERM in the calling thread (and so in every thread it
// starts later); call first thing in main, before any thread exists.
void BlockShutdownSignals();

// Returns the process exit code.
int Serve(const Config& cfg);

}  // namespace spanhouse::server
