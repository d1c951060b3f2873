// `spanhouse bench storage --compare opensearch`: the same spans as Jaeger
// documents in OpenSearch, as the OpenSearch sink writes them, then a
// refresh, a count, a force-merge to one segment per shard and the
// primaries' store size (bench_storage.cc describes the whole command).
#include <netdb.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "codec/value_text.h"
#include "model/service_name.h"
#include "model/span_batch.h"
#include "net/http_client.h"
#include "storage/opensearch/bulk_action.h"
#include "storage/opensearch/index_templates.h"
#include "storage/opensearch/jaeger_document.h"
#include "storage/opensearch/opensearch_client.h"
#include "tools/bench/bench.h"
#include "tools/bench/bench_storage.h"

namespace spanhouse::bench::storage_bench {

namespace os = storage::opensearch;

namespace {

// DELETE over plain HTTP: OpenSearchClient only posts and gets, and a
// template is deleted by DELETE alone. Connection: close, one call.
Status HttpDelete(const std::string& url, const std::string& target, int* status) {
  net::HttpUrl u;
  std::string error;
  if (!net::ParseHttpUrl(url, &u, &error, /*allow_https=*/true)) return Status::Invalid(error);
  if (u.tls) return Status::Unsupported("DELETE over https is not done here");
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(u.host.c_str(), std::to_string(u.port).c_str(), &hints, &found);
      rc != 0) {
    return Status::Unavailable(fmt::format("{}: {}", u.host, ::gai_strerror(rc)));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return Status::Unavailable(fmt::format("{}: cannot connect", u.host_header));
  timeval tv{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const std::string request = fmt::format(
      "DELETE {} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", target,
      u.host_header);
  size_t off = 0;
  while (off < request.size()) {
    const ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[4096];
  for (ssize_t n; off == request.size() && (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
    answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  // "HTTP/1.1 200 OK"
  if (answer.size() < 12 || !answer.starts_with("HTTP/")) {
    return Status::Unavailable(fmt::format("{}: no answer to DELETE {}", u.host_header, target));
  }
  *status = std::atoi(answer.c_str() + answer.find(' ') + 1);
  return Status::Ok();
}

// The first failure of a _bulk answer that is not worth a retry ("" when
// every item was created, or exists: 409), and whether one asks for a retry.
std::string BulkFailure(const std::string& answer, bool* retry) {
  *retry = false;
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  bool errors = true;
  if (parser.parse(answer).get(doc) != simdjson::SUCCESS ||
      doc["errors"].get_bool().get(errors) != simdjson::SUCCESS) {
    return "unreadable _bulk answer: " + answer.substr(0, 300);
  }
  if (!errors) return "";
  simdjson::dom::array items;
  if (doc["items"].get_array().get(items) != simdjson::SUCCESS) return "_bulk answer without items";
  std::string failure;
  for (simdjson::dom::element item : items) {
    simdjson::dom::object o;
    if (item.get_object().get(o) != simdjson::SUCCESS || o.size() != 1) continue;
    const simdjson::dom::element inner = (*o.begin()).value;
    int64_t status = 0;
    if (inner["status"].get_int64().get(status) != simdjson::SUCCESS) continue;
    if ((status >= 200 && status < 300) || status == 409) continue;
    if (status == 429 || status >= 500) {
      *retry = true;
      continue;
    }
    if (failure.empty()) {
      simdjson::dom::element err;
      failure = fmt::format("item refused with HTTP {}", status);
      if (inner["error"].get(err) == simdjson::SUCCESS) {
        failure += ": " + os::ErrorReason(std::string("{\"error\":") + simdjson::minify(err) + "}");
      }
    }
  }
  return failure;
}

// Writes the corpus as the OpenSearch sink does: each span a `create` of its
// document in the daily span index of its start, each (day, service,
// operation) once an `index` of its service document.
Status BulkLoad(const Corpus& c, const StorageOptions& o, os::OpenSearchClient& client,
                OpenSearchResult* r) {
  // Pages: whole requests, at least bulk_spans spans each (the last fewer).
  std::vector<std::pair<size_t, size_t>> pages;
  for (size_t first = 0, spans = 0, k = 0; k < c.requests.size(); ++k) {
    spans += c.requests[k]->span_count();
    if (spans >= o.opensearch_bulk_spans || k + 1 == c.requests.size()) {
      pages.emplace_back(first, k + 1);
      first = k + 1;
      spans = 0;
    }
  }
  r->pages = pages.size();
  const std::string span_base = os::SpanIndexBase(r->prefix);
  const std::string service_base = os::ServiceIndexBase(r->prefix);
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<size_t> service_docs{0};
  std::atomic<int> retried{0};
  std::mutex mu;
  std::set<std::string> services;  // "<index>/<id>" written; guarded by mu
  Status failed;                   // the first failure; guarded by mu
  auto worker = [&] {
    std::string body;
    for (size_t p; (p = next.fetch_add(1)) < pages.size();) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.ok()) return;
      }
      body.clear();
      for (size_t k = pages[p].first; k < pages[p].second; ++k) {
        const SpanBatch& b = *c.requests[k];
        os::DocumentWriter writer(b);
        for (uint32_t s = 0; s < b.span_count(); ++s) {
          const uint64_t start = b.spans.start_ns[s];
          os::AppendBulkAction(body, "create", os::DailyIndex(span_base, start),
                               os::SpanDocumentId(b, s));
          body += '\n';
          writer.AppendSpan(body, s);
          body += '\n';
          const std::string_view service = JaegerServiceName(b, b.spans.resource[s]);
          const std::string_view op = b.Str(b.spans.name[s]);
          const std::string index = os::DailyIndex(service_base, start);
          const std::string id = os::ServiceDocumentId(service, op);
          {
            std::lock_guard<std::mutex> lock(mu);
            if (!services.insert(index + "/" + id).second) continue;
          }
          service_docs += 1;
          os::AppendBulkAction(body, "index", index, id);
          body += '\n';
          os::DocumentWriter::AppendService(body, service, op);
          body += '\n';
        }
      }
      Status st;
      for (int attempt = 0;; ++attempt) {
        net::HttpResult res;
        bytes += body.size();
        st = client.Post("/_bulk?filter_path=errors,items.*.status,items.*.error", body, &res,
                         "application/x-ndjson");
        bool retry = !st.ok() || res.status == 429 || res.status >= 500;
        if (st.ok() && res.status >= 200 && res.status < 300) {
          if (const std::string why = BulkFailure(res.body, &retry); !why.empty()) {
            st = Status::Internal(why);
            retry = false;
          }
        } else if (st.ok()) {
          st = Status::Internal(
              fmt::format("_bulk: HTTP {}: {}", res.status, os::ErrorReason(res.body)));
        }
        if (!retry) break;
        if (attempt == 20) {
          if (st.ok()) st = Status::Unavailable("_bulk: items still refused after 20 retries");
          break;
        }
        retried += 1;
        std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(attempt, 5)));
      }
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (failed.ok()) failed = st;
        return;
      }
    }
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < std::max(1, o.opensearch_workers); ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  r->bulk_wall = Seconds(t0);
  r->body_bytes = bytes.load();
  r->service_docs = service_docs.load();
  r->retried_pages = retried.load();
  return failed;
}

Status GetJson(os::OpenSearchClient& client, const std::string& target, std::string* answer) {
  net::HttpResult res;
  if (Status st = client.Get(target, &res); !st.ok()) return st;
  if (res.status != 200) {
    return Status::Internal(
        fmt::format("GET {}: HTTP {}: {}", target, res.status, os::ErrorReason(res.body)));
  }
  *answer = std::move(res.body);
  return Status::Ok();
}

// The primaries' store, segments and indexing time of the bench's indices.
Status ReadStats(os::OpenSearchClient& client, const std::string& pattern, OpenSearchResult* r,
                 std::vector<std::string>* indices) {
  std::string answer;
  if (Status st =
          GetJson(client,
                  fmt::format("/{}/_stats/store,segments,indexing?include_segment_file_sizes=true",
                              pattern),
                  &answer);
      !st.ok()) {
    return st;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::element all;
  simdjson::dom::object by_index;
  if (parser.parse(answer).get(doc) != simdjson::SUCCESS ||
      doc["_all"]["primaries"].get(all) != simdjson::SUCCESS ||
      doc["indices"].get_object().get(by_index) != simdjson::SUCCESS) {
    return Status::Internal("_stats: unexpected answer: " + answer.substr(0, 300));
  }
  auto num = [](simdjson::dom::element e, const char* a, const char* b) {
    uint64_t v = 0;
    return e[a][b].get_uint64().get(v) == simdjson::SUCCESS ? static_cast<double>(v) : 0.0;
  };
  r->store = num(all, "store", "size_in_bytes");
  r->segments = num(all, "segments", "count");
  r->index_time_s = num(all, "indexing", "index_time_in_millis") / 1000;
  r->files.clear();
  simdjson::dom::object files;
  if (all["segments"]["file_sizes"].get_object().get(files) == simdjson::SUCCESS) {
    for (auto [ext, f] : files) {
      uint64_t b = 0;
      if (f["size_in_bytes"].get_uint64().get(b) == simdjson::SUCCESS)
        r->files.emplace_back(std::string(ext), static_cast<double>(b));
    }
    std::sort(r->files.begin(), r->files.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
  }
  r->span_store = r->service_store = 0;
  indices->clear();
  for (auto [name, stats] : by_index) {
    indices->emplace_back(name);
    const double b = num(stats["primaries"], "store", "size_in_bytes");
    (name.find("-jaeger-span-") != std::string_view::npos ? r->span_store : r->service_store) += b;
  }
  r->indices = indices->size();
  return Status::Ok();
}

}  // namespace

Status MeasureOpenSearch(const Corpus& c, const StorageOptions& o, bool keep, OpenSearchResult* r) {
  os::OpenSearchOptions co;
  co.urls = {o.opensearch_url};
  co.timeout = std::chrono::milliseconds(3600 * 1000);  // a force-merge answers when done
  std::unique_ptr<os::OpenSearchClient> client;
  if (Status st = os::OpenSearchClient::Create(co, &client); !st.ok()) return st;
  if (Status st = client->Version(&r->version, &r->distribution); !st.ok()) return st;
  r->prefix = fmt::format("bench-{}", ::getpid());
  const std::string pattern = r->prefix + "-jaeger-*";
  os::TemplateOptions t;
  t.index_prefix = r->prefix;
  t.shards = 1;
  t.replicas = 0;

  std::vector<std::string> indices;
  auto cleanup = [&] {
    if (keep) {
      r->kept = true;
      return;
    }
    // Every index of the prefix: those the stats named, and any made before a failure.
    std::string cat;
    if (GetJson(*client, fmt::format("/_cat/indices/{}?h=index&expand_wildcards=all", pattern),
                &cat)
            .ok()) {
      indices = Split(cat, '\n');
    }
    std::string actions;
    for (const std::string& i : indices) {
      if (i.empty()) continue;
      if (!actions.empty()) actions += ',';
      codec::AppendJsonString(actions, i);
    }
    std::vector<std::string> left;
    // remove_index (the _aliases API): an index deleted by a POST.
    if (!actions.empty() &&
        !client
             ->PostJson("/_aliases",
                        fmt::format("{{\"actions\":[{{\"remove_index\":{{\"indices\":[{}]}}}}]}}",
                                    actions),
                        nullptr)
             .ok()) {
      left.push_back("indices " + pattern);
    }
    for (const std::string& name : {os::SpanTemplateName(t), os::ServiceTemplateName(t)}) {
      int status = 0;
      if (!HttpDelete(o.opensearch_url, "/_template/" + name, &status).ok() ||
          (status != 200 && status != 404)) {
        left.push_back("template " + name);
      }
    }
    if (!left.empty()) r->cleanup_note = "not deleted: " + fmt::format("{}", fmt::join(left, ", "));
  };
  Status st = [&]() -> Status {
    SH_RETURN_IF_ERROR(
        client->PostJson("/_template/" + os::SpanTemplateName(t), os::SpanTemplate(t), nullptr));
    SH_RETURN_IF_ERROR(client->PostJson("/_template/" + os::ServiceTemplateName(t),
                                        os::ServiceTemplate(t), nullptr));
    fmt::print(stderr, "opensearch: writing {} spans to {} ({})...\n", c.spans, pattern,
               o.opensearch_url);
    SH_RETURN_IF_ERROR(BulkLoad(c, o, *client, r));
    auto t0 = Clock::now();
    SH_RETURN_IF_ERROR(client->PostJson(fmt::format("/{}/_refresh", pattern), "", nullptr));
    r->refresh_wall = Seconds(t0);
    std::string answer;
    SH_RETURN_IF_ERROR(
        client->PostJson(fmt::format("/{}-jaeger-span-*/_count", r->prefix), "{}", &answer));
    simdjson::dom::parser parser;
    uint64_t count = 0;
    if (parser.parse(answer)["count"].get_uint64().get(count) != simdjson::SUCCESS) {
      return Status::Internal("_count: unexpected answer: " + answer.substr(0, 300));
    }
    r->span_docs = count;
    if (count != c.spans) {
      return Status::Internal(
          fmt::format("{} span documents found, {} spans written", count, c.spans));
    }
    // To one segment per shard: force-merge (it answers when done), refresh
    // (the merged segment replaces the old ones for readers, whose files
    // then go), until the stats count one segment per index.
    fmt::print(stderr, "opensearch: force-merging {} spans' indices...\n", c.spans);
    t0 = Clock::now();
    for (int attempt = 0;; ++attempt) {
      SH_RETURN_IF_ERROR(client->PostJson(
          fmt::format("/{}/_forcemerge?max_num_segments=1", pattern), "", nullptr));
      SH_RETURN_IF_ERROR(client->PostJson(fmt::format("/{}/_refresh", pattern), "", nullptr));
      SH_RETURN_IF_ERROR(ReadStats(*client, pattern, r, &indices));
      if (r->segments <= static_cast<double>(r->indices)) break;
      if (attempt == 10) {
        return Status::Internal(
            fmt::format("{} segments in {} indices after force-merge", r->segments, r->indices));
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    r->merge_wall = Seconds(t0);
    return Status::Ok();
  }();
  cleanup();
  return st;
}

}  // namespace spanhouse::bench::storage_bench
