#include "storage/clickhouse/remote_connection.h"

#include <utility>

#include <fmt/format.h>

#include "storage/clickhouse/inline_params.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/tsv.h"

namespace spanhouse::storage {

namespace {

// Whether `s` starts with the server's "Code: N".
bool StartsWithCode(std::string_view s) {
  if (s.substr(0, 6) != "Code: ") return false;
  return s.size() > 6 && s[6] >= '0' && s[6] <= '9';
}

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

}  // namespace

std::string TrailingException(std::string_view body) {
  // The server writes its exception after what it had already sent, on a
  // line of its own: "Code: N, e.displayText() = DB::Exception: ..." (18.x)
  // or "Code: N. DB::Exception: ..." (newer).
  const std::string_view tail = body.substr(body.size() > 65536 ? body.size() - 65536 : 0);
  for (size_t at = tail.rfind("Code: "); at != std::string_view::npos;
       at = at == 0 ? std::string_view::npos : tail.rfind("Code: ", at - 1)) {
    if (at != 0 && tail[at - 1] != '\n') continue;
    const std::string_view rest = tail.substr(at);
    if (StartsWithCode(rest) && rest.find("DB::Exception") != std::string_view::npos) {
      return Trim(rest);
    }
  }
  return "";
}

RemoteConnection::RemoteConnection(RemoteOptions options) : opts_(std::move(options)) {}

Status RemoteConnection::Open(const RemoteOptions& options,
                              std::unique_ptr<RemoteConnection>* out) {
  std::unique_ptr<RemoteConnection> c(new RemoteConnection(options));
  std::string error;
  if (!net::ParseHttpUrl(options.url, &c->url_, &error, /*allow_https=*/true)) {
    return Status::Invalid("clickhouse: " + error);
  }
  if (options.compression != "none" && options.compression != "gzip") {
    return Status::Invalid("clickhouse: compression is none or gzip, not " + options.compression);
  }
  if (options.compression != "none") {
    c->compressor_ = std::make_unique<codec::Compressor>(options.compression);
  }
  net::HttpClientOptions http;
  http.timeout = options.timeout;
  http.max_body_bytes = options.max_result_bytes;
  http.keep_headers = true;
  http.tls_ca_file = options.tls_ca_file;
  c->client_ = std::make_unique<net::HttpClient>(c->url_, std::move(http));
  QueryResult r;
  if (Status st = c->Query("SELECT version()", "TSV", &r); !st.ok()) {
    // Errors of the connection itself already name the server.
    if (st.message().starts_with("clickhouse at ")) return st;
    return {st.code(), fmt::format("clickhouse at {}: {}", options.url, st.message())};
  }
  c->version_ = Trim(r.data);
  c->query_params_ = Capabilities::FromVersion(c->version_).query_params;
  *out = std::move(c);
  return Status::Ok();
}

Status RemoteConnection::Run(std::string_view sql, std::string_view format, QueryResult* result,
                             const std::vector<QueryParam>& params) {
  std::string body;
  if (!params.empty() && !query_params_) {
    // A server without query parameters reads the values as literals.
    SH_RETURN_IF_ERROR(InlineParams(sql, params, &body));
  } else {
    body = sql;
  }
  if (!format.empty()) body += fmt::format(" FORMAT {}", format);
  return Post("", std::move(body), query_params_ ? params : std::vector<QueryParam>{}, {}, result);
}

Status RemoteConnection::Insert(std::string_view insert, std::string data,
                                const std::vector<QueryParam>& settings) {
  return Post(insert, std::move(data), {}, settings, nullptr, /*compress=*/true);
}

void RemoteConnection::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (client_ != nullptr) client_->Close();
  client_.reset();
}

Status RemoteConnection::Post(std::string_view query, std::string body,
                              const std::vector<QueryParam>& params,
                              const std::vector<QueryParam>& settings, QueryResult* result,
                              bool compress) {
  std::string target = url_.target.empty() ? "/" : url_.target;
  char sep = target.find('?') == std::string::npos ? '?' : '&';
  auto arg = [&](std::string_view name, std::string_view value) {
    target += sep;
    target += name;
    target += '=';
    target += UrlEncode(value);
    sep = '&';
  };
  if (!opts_.database.empty()) arg("database", opts_.database);
  if (!query.empty()) arg("query", query);
  // The server reads a bound value as a TSV field.
  for (const auto& [name, value] : params) arg("param_" + name, EscapeTsv(value));
  for (const auto& [name, value] : settings) arg(name, value);
  net::HttpHeaders headers = {{"X-ClickHouse-User", opts_.user},
                              {"X-ClickHouse-Key", opts_.password},
                              {"Content-Type", "text/plain; charset=utf-8"}};
  net::HttpResult r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (client_ == nullptr) return Status::Unavailable("clickhouse: connection closed");
    if (compress && compressor_ != nullptr) {
      std::string packed;
      if (!compressor_->Compress(body, &packed)) {
        return Status::Internal("clickhouse: compressing an insert failed");
      }
      body = std::move(packed);
      headers.emplace_back("Content-Encoding", std::string(compressor_->Encoding()));
    }
    if (compress) bytes_sent_ += body.size();
    if (!client_->PostTo(target, &body, headers, &r)) {
      return Status::Unavailable(fmt::format("clickhouse at {}: {}", opts_.url, r.error));
    }
  }
  if (r.status != 200) return ErrorOf(r);
  if (std::string exception = TrailingException(r.body); !exception.empty()) {
    return Status::Internal(std::move(exception));
  }
  if (result != nullptr) {
    result->data = std::move(r.body);
    result->rows_read = 0;
  }
  return Status::Ok();
}

Status RemoteConnection::ErrorOf(const net::HttpResult& r) const {
  std::string message = Trim(r.body);
  const std::string_view code = r.Header("X-ClickHouse-Exception-Code");
  if (!code.empty() && message.find("Code: ") == std::string::npos) {
    message = fmt::format("Code: {}. {}", code, message);
  }
  // Not the server's own exception (a proxy, a server going down): retry.
  if (message.find("Code: ") == std::string::npos) {
    return Status::Unavailable(
        fmt::format("clickhouse at {}: HTTP {}: {}", opts_.url, r.status, message.substr(0, 1000)));
  }
  return Status::Internal(message);
}

}  // namespace spanhouse::storage
