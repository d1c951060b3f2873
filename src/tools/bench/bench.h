// `spanhouse bench ...`: measurements that print ratios measured side by side.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's namespace
class App;
}

namespace spanhouse::bench {

// Adds the `bench` subcommand (with its own subcommands) to `app`; after
// parsing, if one was chosen, `*run` runs it and returns the exit code.
void AddBenchCommand(CLI::App& app, std::function<int()>* run);

// `bench formats`: the insert formats of embedded ClickHouse side by side
// (bench_formats.cc). Added to `bench` by AddBenchCommand.
void AddFormatsCommand(CLI::App& bench, std::function<int()>* run);

// `bench pipeline`: CPU per span of each pipeline stage in one process
// (bench_pipeline.cc). Added to `bench` by AddBenchCommand.
void AddPipelineCommand(CLI::App& bench, std::function<int()>* run);

// `bench storage`: bytes per span by column and table for the schema and
// the storage layouts it was chosen against (bench_storage*.cc).
void AddStorageCommand(CLI::App& bench, std::function<int()>* run);

// `bench query-fill`: a data directory of generated traces spread over days,
// for the query API's benchmark (bench_query.cc, bench/query_api.py).
void AddQueryFillCommand(CLI::App& bench, std::function<int()>* run);

// `bench dedup`: the dedup index at a rate and window on a simulated clock
// (bench_dedup.cc).
void AddDedupCommand(CLI::App& bench, std::function<int()>* run);

// Helpers the bench subcommands share.
using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since);  // wall seconds since `since`
// User + system CPU of the whole process: the engine's threads included.
double CpuSeconds();
double Median(std::vector<double> v);
Status WriteFile(const std::string& path, const std::string& data);

}  // namespace spanhouse::bench
