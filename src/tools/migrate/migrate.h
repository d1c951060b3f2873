// `spanhouse reconcile` and `spanhouse backfill`: the migration off
// Elasticsearch/OpenSearch, run against a serving spanhouse (its query
// listener's /api/admin endpoints, which read and write both stores; the
// embedded engine cannot be opened by a second process). backfill reads the
// history from OpenSearch itself.
#pragma once

#include <functional>

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's namespace
class App;
}

namespace spanhouse::migrate {

// Adds both subcommands to `app`; after parsing, if one was chosen, `*run`
// runs it and returns the exit code.
void AddMigrateCommands(CLI::App& app, std::function<int()>* run);

}  // namespace spanhouse::migrate
