#include "tools/bench/bench.h"

#include <CLI/CLI.hpp>

namespace spanhouse::bench {

void AddBenchCommand(CLI::App& app, std::function<int()>* run) {
  CLI::App* bench = app.add_subcommand("bench", "Measurements printed side by side");
  bench->require_subcommand(1);
  AddFormatsCommand(*bench, run);
  AddPipelineCommand(*bench, run);
  AddStorageCommand(*bench, run);
}

}  // namespace spanhouse::bench
