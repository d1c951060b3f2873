#include "tools/bench/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include <CLI/CLI.hpp>

namespace spanhouse::bench {

void AddBenchCommand(CLI::App& app, std::function<int()>* run) {
  CLI::App* bench = app.add_subcommand("bench", "Measurements printed side by side");
  bench->require_subcommand(1);
  AddFormatsCommand(*bench, run);
  AddPipelineCommand(*bench, run);
  AddStorageCommand(*bench, run);
  AddQueryFillCommand(*bench, run);
  AddDedupCommand(*bench, run);
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return tv(ru.ru_utime) + tv(ru.ru_stime);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Status WriteFile(const std::string& path, const std::string& data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::Internal("cannot write " + path);
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  if (std::fclose(f) != 0 || !ok) return Status::Internal("short write to " + path);
  return Status::Ok();
}

}  // namespace spanhouse::bench
