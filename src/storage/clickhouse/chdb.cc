#include "storage/clickhouse/chdb.h"

#include <dlfcn.h>

#include <cstdlib>

namespace spanhouse::storage {

// The subset of chdb.h (chDB 26.5) used here, declared by hand since the npm
// package ships only the library.
extern "C" {
struct chdb_result_ {  // NOLINT(readability-identifier-naming): chDB's name
  void* internal_data;
};
using chdb_result = chdb_result_;
struct chdb_connection_ {  // NOLINT(readability-identifier-naming): chDB's name
  void* internal_data;
};
using chdb_connection = chdb_connection_*;
}

struct ChdbLibrary::Api {
  chdb_connection* (*connect)(int, char**);
  void (*close_conn)(chdb_connection*);
  chdb_result* (*query_n)(chdb_connection, const char*, size_t, const char*, size_t);
  chdb_result* (*query_with_params_n)(chdb_connection, const char*, size_t, const char*, size_t,
                                      const char* const*, const size_t*, const char* const*,
                                      const size_t*, size_t);
  void (*destroy_result)(chdb_result*);
  char* (*result_buffer)(chdb_result*);
  size_t (*result_length)(chdb_result*);
  const char* (*result_error)(chdb_result*);
  uint64_t (*result_rows_read)(chdb_result*);
};

#ifndef SPANHOUSE_CHDB_DEFAULT_LIB
#define SPANHOUSE_CHDB_DEFAULT_LIB ""
#endif

Status ChdbLibrary::Load(std::shared_ptr<ChdbLibrary>* out) {
  static std::mutex mu;
  static std::weak_ptr<ChdbLibrary> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto lib = loaded.lock()) {
    *out = lib;
    return Status::Ok();
  }
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("SPANHOUSE_CHDB_LIB"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  } else {
    if (*SPANHOUSE_CHDB_DEFAULT_LIB != '\0') candidates.emplace_back(SPANHOUSE_CHDB_DEFAULT_LIB);
    candidates.emplace_back("libchdb.so");
  }
  std::string errors;
  void* handle = nullptr;
  for (const auto& path : candidates) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    errors += "\n  ";
    errors += dlerror();
  }
  if (handle == nullptr) {
    return Status::Unavailable(
        "cannot load libchdb.so (run scripts/fetch_chdb.sh, or set SPANHOUSE_CHDB_LIB):" + errors);
  }
  std::shared_ptr<ChdbLibrary> lib(new ChdbLibrary());
  lib->handle_ = handle;
  lib->api_ = std::make_unique<Api>();
  Api& a = *lib->api_;
  std::string missing;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr) missing += std::string(" ") + name;
  };
  sym(a.connect, "chdb_connect");
  sym(a.close_conn, "chdb_close_conn");
  sym(a.query_n, "chdb_query_n");
  sym(a.query_with_params_n, "chdb_query_with_params_n");
  sym(a.destroy_result, "chdb_destroy_query_result");
  sym(a.result_buffer, "chdb_result_buffer");
  sym(a.result_length, "chdb_result_length");
  sym(a.result_error, "chdb_result_error");
  sym(a.result_rows_read, "chdb_result_rows_read");
  if (!missing.empty()) return Status::Unavailable("libchdb.so lacks symbols:" + missing);
  loaded = lib;
  *out = std::move(lib);
  return Status::Ok();
}

ChdbLibrary::~ChdbLibrary() {
  // The engine's threads may outlive the last connection for a moment;
  // unloading the code under them would crash, so the library stays mapped.
}

Status ChdbConnection::Open(std::shared_ptr<ChdbLibrary> lib, const std::string& data_path,
                            const std::vector<std::string>& extra_args,
                            std::unique_ptr<ChdbConnection>* out) {
  std::vector<std::string> args = {"spanhouse", "--path=" + data_path};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (auto& a : args) argv.push_back(a.data());
  chdb_connection* conn = lib->api().connect(static_cast<int>(argv.size()), argv.data());
  if (conn == nullptr || *conn == nullptr) {
    return Status::Unavailable("chdb_connect failed for data path " + data_path);
  }
  std::unique_ptr<ChdbConnection> c(new ChdbConnection());
  c->lib_ = std::move(lib);
  c->conn_ = conn;
  *out = std::move(c);
  return Status::Ok();
}

ChdbConnection::~ChdbConnection() {
  Close();
}

void ChdbConnection::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn_ == nullptr) return;
  lib_->api().close_conn(static_cast<chdb_connection*>(conn_));
  conn_ = nullptr;
}

Status ChdbConnection::Query(std::string_view sql, std::string_view format, QueryResult* result,
                             const std::vector<QueryParam>& params) {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn_ == nullptr) return Status::Unavailable("chdb connection is closed");
  const auto& api = lib_->api();
  chdb_connection c = *static_cast<chdb_connection*>(conn_);
  chdb_result* res;
  if (params.empty()) {
    res = api.query_n(c, sql.data(), sql.size(), format.data(), format.size());
  } else {
    std::vector<const char*> names;
    std::vector<size_t> name_lens;
    std::vector<std::string> escaped;
    std::vector<const char*> values;
    std::vector<size_t> value_lens;
    escaped.reserve(params.size());
    for (const auto& [n, v] : params) {
      names.push_back(n.data());
      name_lens.push_back(n.size());
      // The engine reads a bound value as a TSV field: escape it as one.
      escaped.push_back(EscapeTsv(v));
      values.push_back(escaped.back().data());
      value_lens.push_back(escaped.back().size());
    }
    res = api.query_with_params_n(c, sql.data(), sql.size(), format.data(), format.size(),
                                  names.data(), name_lens.data(), values.data(), value_lens.data(),
                                  params.size());
  }
  if (res == nullptr) return Status::Internal("chdb returned no result");
  Status st;
  if (const char* err = api.result_error(res); err != nullptr && *err != '\0') {
    st = Status::Internal(err);
  } else if (result != nullptr) {
    const char* buf = api.result_buffer(res);
    size_t len = api.result_length(res);
    result->data.assign(buf == nullptr ? "" : buf, buf == nullptr ? 0 : len);
    result->rows_read = api.result_rows_read(res);
  }
  api.destroy_result(res);
  return st;
}

}  // namespace spanhouse::storage
