// spanhouse: one binary, one subcommand per job.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "server/config.h"
#include "server/serve.h"
#include "storage/clickhouse/schema.h"
#include "tools/bench/bench.h"
#include "tools/loadgen/loadgen.h"

namespace {

using spanhouse::Status;
using spanhouse::server::Config;

int ConfigError(const Status& st) {
  std::cerr << "spanhouse: " << st.message() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so every thread inherits the mask and the
  // serve loop alone receives SIGINT/SIGTERM.
  spanhouse::server::BlockShutdownSignals();
  // Logs go to stderr; stdout is for what a command prints as its result.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("spanhouse"));

  CLI::App app{"spanhouse: an APM trace backend on ClickHouse"};
  app.set_version_flag("--version", "spanhouse 0.1.0");
  app.require_subcommand(1);

  auto* serve = app.add_subcommand("serve",
                                   "Receive spans over OTLP (HTTP, gRPC) and Zipkin, store them in "
                                   "embedded ClickHouse, serve queries");
  std::string config_file;
  std::string data_dir;
  std::string otlp_http_listen;
  std::string otlp_grpc_listen;
  std::string zipkin_listen;
  std::string query_listen;
  std::string log_level;
  bool print_config = false;
  serve->add_option("-c,--config", config_file, "YAML configuration file");
  serve->add_option("--data-dir", data_dir,
                    "Data directory (default ./data; env SPANHOUSE_DATA_DIR)");
  serve->add_option("--otlp-http-listen", otlp_http_listen,
                    "OTLP/HTTP address (default 127.0.0.1:4318; env SPANHOUSE_OTLP_HTTP_LISTEN)");
  serve->add_option("--otlp-grpc-listen", otlp_grpc_listen,
                    "OTLP/gRPC address (default 127.0.0.1:4317; env SPANHOUSE_OTLP_GRPC_LISTEN)");
  serve->add_option("--zipkin-listen", zipkin_listen,
                    "Zipkin v2 address (default 127.0.0.1:9411; env SPANHOUSE_ZIPKIN_LISTEN)");
  serve->add_option("--query-listen", query_listen,
                    "Query API address (default 127.0.0.1:16686; env SPANHOUSE_QUERY_LISTEN)");
  serve->add_option("--log-level", log_level,
                    "trace, debug, info, warn, error or off (env SPANHOUSE_LOG_LEVEL)");
  serve->add_flag("--print-config", print_config, "Print the effective configuration and exit");

  auto* schema = app.add_subcommand("schema", "Print the ClickHouse DDL spanhouse creates");
  std::string server_version = "26.5";
  schema->add_option("--server-version", server_version,
                     "ClickHouse version to generate DDL for (e.g. 18.16, 26.5)");

  std::function<int()> run_loadgen;
  std::function<int()> run_bench;
  spanhouse::loadgen::AddLoadgenCommand(app, &run_loadgen);
  spanhouse::bench::AddBenchCommand(app, &run_bench);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a bad command line is a usage error (2).
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (run_loadgen) return run_loadgen();
  if (run_bench) return run_bench();

  if (*schema) {
    auto caps = spanhouse::storage::Capabilities::FromVersion(server_version);
    // As `serve` creates it with the default configuration.
    const Config defaults;
    spanhouse::storage::SchemaOptions opts;
    opts.metrics_retention_days = static_cast<uint32_t>(defaults.metrics.retention_days);
    opts.tiered = true;
    opts.move_after_s = defaults.storage.move_after_s;
    opts.retention_s = defaults.storage.retention_s;
    for (const auto& sql : spanhouse::storage::SchemaDdl(caps, opts)) std::cout << sql << ";\n\n";
    return 0;
  }

  Config cfg;
  if (!config_file.empty()) {
    std::ifstream in(config_file);
    if (!in) return ConfigError(Status::Invalid("cannot read config file " + config_file));
    std::stringstream ss;
    ss << in.rdbuf();
    if (Status st = spanhouse::server::ApplyYaml(ss.str(), &cfg); !st.ok()) return ConfigError(st);
  }
  for (const auto& [env, key] : spanhouse::server::ConfigEnvVars()) {
    if (const char* v = std::getenv(env.c_str()); v != nullptr && *v != '\0') {
      if (Status st = spanhouse::server::ApplySetting(key, v, &cfg); !st.ok()) {
        return ConfigError(Status::Invalid(env + ": " + st.message()));
      }
    }
  }
  const std::pair<const std::string*, const char*> flags[] = {
      {&data_dir, "data_dir"},
      {&otlp_http_listen, "otlp_http.listen"},
      {&otlp_grpc_listen, "otlp_grpc.listen"},
      {&zipkin_listen, "zipkin.listen"},
      {&query_listen, "query.listen"},
      {&log_level, "log_level"}};
  for (const auto& [value, key] : flags) {
    if (value->empty()) continue;
    if (Status st = spanhouse::server::ApplySetting(key, *value, &cfg); !st.ok())
      return ConfigError(st);
  }
  if (Status st = spanhouse::server::Validate(cfg); !st.ok()) return ConfigError(st);
  if (print_config) {
    std::cout << spanhouse::server::ToYaml(cfg);
    return 0;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));
  return spanhouse::server::Serve(cfg);
}
