// `spanhouse serve`: wires receivers -> queue -> writer -> embedded
// ClickHouse, and the query API over the same store; runs until SIGTERM or
// SIGINT, then stops accepting, flushes every queued span and closes chDB.
#pragma once

#include "server/config.h"

namespace spanhouse::server {

// Blocks SIGINT/SIGTERM in the calling thread (and so in every thread it
// starts later); call first thing in main, before any thread exists.
void BlockShutdownSignals();

// Returns the process exit code.
int Serve(const Config& cfg);

}  // namespace spanhouse::server
