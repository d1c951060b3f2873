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
#include "tools/migrate/migrate.h"

namespace {

using spanhouse::Status;
using spanhouse::server::Config;

int ConfigError(const Status& st) {
  std::cerr << "spanhouse: " << st.message() << "\n";
  return 2;
}

// `spanhouse serve`'s command line.
struct ServeFlags {
  std::string config_file;
  std::string data_dir;
  std::string otlp_http_listen;
  std::string otlp_grpc_listen;
  std::string zipkin_listen;
  std::string query_listen;
  std::string log_level;
  std::string clickhouse_url;
  bool print_config = false;
};

void AddServeCommand(CLI::App& app, ServeFlags* f) {
  auto* serve = app.add_subcommand("serve",
                                   "Receive spans over OTLP (HTTP, gRPC) and Zipkin, store them in "
                                   "embedded ClickHouse (or a ClickHouse server or cluster), "
                                   "serve queries");
  serve->add_option("-c,--config", f->config_file, "YAML configuration file");
  serve->add_option("--data-dir", f->data_dir,
                    "Data directory (default ./data; env SPANHOUSE_DATA_DIR)");
  serve->add_option("--otlp-http-listen", f->otlp_http_listen,
                    "OTLP/HTTP address (default 127.0.0.1:4318; env SPANHOUSE_OTLP_HTTP_LISTEN)");
  serve->add_option("--otlp-grpc-listen", f->otlp_grpc_listen,
                    "OTLP/gRPC address (default 127.0.0.1:4317; env SPANHOUSE_OTLP_GRPC_LISTEN)");
  serve->add_option("--zipkin-listen", f->zipkin_listen,
                    "Zipkin v2 address (default 127.0.0.1:9411; env SPANHOUSE_ZIPKIN_LISTEN)");
  serve->add_option("--query-listen", f->query_listen,
                    "Query API address (default 127.0.0.1:16686; env SPANHOUSE_QUERY_LISTEN)");
  serve->add_option("--clickhouse-url", f->clickhouse_url,
                    "Store in this ClickHouse server (http://host:8123) instead of the embedded "
                    "engine: storage.engine clickhouse, one shard of one replica");
  serve->add_option("--log-level", f->log_level,
                    "trace, debug, info, warn, error or off (env SPANHOUSE_LOG_LEVEL)");
  serve->add_flag("--print-config", f->print_config, "Print the effective configuration and exit");
}

// Defaults < YAML file < environment < flags, then validated.
Status LoadConfig(const ServeFlags& f, Config* cfg) {
  if (!f.config_file.empty()) {
    std::ifstream in(f.config_file);
    if (!in) return Status::Invalid("cannot read config file " + f.config_file);
    std::stringstream ss;
    ss << in.rdbuf();
    SH_RETURN_IF_ERROR(spanhouse::server::ApplyYaml(ss.str(), cfg));
  }
  for (const auto& [env, key] : spanhouse::server::ConfigEnvVars()) {
    if (const char* v = std::getenv(env.c_str()); v != nullptr && *v != '\0') {
      if (Status st = spanhouse::server::ApplySetting(key, v, cfg); !st.ok()) {
        return Status::Invalid(env + ": " + st.message());
      }
    }
  }
  const std::pair<const std::string*, const char*> flags[] = {
      {&f.data_dir, "data_dir"},
      {&f.otlp_http_listen, "otlp_http.listen"},
      {&f.otlp_grpc_listen, "otlp_grpc.listen"},
      {&f.zipkin_listen, "zipkin.listen"},
      {&f.query_listen, "query.listen"},
      {&f.log_level, "log_level"}};
  for (const auto& [value, key] : flags) {
    if (!value->empty()) SH_RETURN_IF_ERROR(spanhouse::server::ApplySetting(key, *value, cfg));
  }
  if (!f.clickhouse_url.empty()) {
    SH_RETURN_IF_ERROR(spanhouse::server::ApplySetting("storage.engine", "clickhouse", cfg));
    SH_RETURN_IF_ERROR(spanhouse::server::ApplySetting("clickhouse.shards", f.clickhouse_url, cfg));
  }
  return spanhouse::server::Validate(*cfg);
}

// `spanhouse schema`: the DDL as `serve` creates it with the default configuration.
int PrintSchema(const std::string& server_version) {
  auto caps = spanhouse::storage::Capabilities::FromVersion(server_version);
  const Config defaults;
  spanhouse::storage::SchemaOptions opts;
  opts.metrics_retention_days = static_cast<uint32_t>(defaults.metrics.retention_days);
  opts.tiered = true;
  opts.move_after_s = defaults.storage.move_after_s;
  opts.retention_s = defaults.storage.retention_s;
  for (const auto& sql : spanhouse::storage::SchemaDdl(caps, opts)) std::cout << sql << ";\n\n";
  return 0;
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

  ServeFlags flags;
  AddServeCommand(app, &flags);

  auto* schema = app.add_subcommand("schema", "Print the ClickHouse DDL spanhouse creates");
  std::string server_version = "26.5";
  schema->add_option("--server-version", server_version,
                     "ClickHouse version to generate DDL for (e.g. 18.16, 26.5)");

  std::function<int()> run_loadgen;
  std::function<int()> run_bench;
  std::function<int()> run_migrate;
  spanhouse::loadgen::AddLoadgenCommand(app, &run_loadgen);
  spanhouse::bench::AddBenchCommand(app, &run_bench);
  spanhouse::migrate::AddMigrateCommands(app, &run_migrate);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a bad command line is a usage error (2).
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (run_loadgen) return run_loadgen();
  if (run_bench) return run_bench();
  if (run_migrate) return run_migrate();

  if (*schema) return PrintSchema(server_version);
  Config cfg;
  if (Status st = LoadConfig(flags, &cfg); !st.ok()) return ConfigError(st);
  if (flags.print_config) {
    std::cout << spanhouse::server::ToYaml(cfg);
    return 0;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));
  return spanhouse::server::Serve(cfg,
                                  [&flags](Config* fresh) { return LoadConfig(flags, fresh); });
}
