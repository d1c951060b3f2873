// `spanhouse backfill --from opensearch`: the history a cluster holds from
// before the dual-write began (written by Jaeger itself, or by anything that
// writes Jaeger's format), copied into ClickHouse through a serving
// spanhouse.
//
// Pages of span documents are read from OpenSearch in (startTime, traceID,
// spanID) order with search_after, and each page goes to the server's
// POST /api/admin/import, which stores in ClickHouse only the spans it does
// not hold yet and answers once they are written. After each answered page
// the position is saved (the checkpoint file: written to a temporary file,
// synced, renamed), so a killed backfill resumes where it stopped; and since
// the server skips what is stored, a page sent twice, or a whole second run,
// adds nothing.
#include <fcntl.h>
#include <simdjson.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "codec/json_writer.h"
#include "codec/value_text.h"
#include "storage/opensearch/jaeger_document.h"
#include "storage/opensearch/opensearch_client.h"
#include "tools/migrate/admin_client.h"
#include "tools/migrate/migrate.h"

namespace spanhouse::migrate {

struct BackfillFlags {
  std::string from = "opensearch";
  std::string server = "http://127.0.0.1:16686";
  std::string token;
  std::string ca_file;
  std::string opensearch;
  std::string index_prefix;
  std::string opensearch_user;
  std::string opensearch_password;
  std::string start;
  std::string end;
  std::string checkpoint = "backfill.checkpoint";
  uint64_t page_spans = 5000;
  bool quiet = false;
};

namespace {

using Clock = std::chrono::steady_clock;

struct Checkpoint {
  std::string index;
  uint64_t start_us = 0;
  uint64_t end_us = 0;
  std::string after;  // the last document's sort values (JSON array), "" at the start
  uint64_t pages = 0, read = 0, imported = 0, already_stored = 0, invalid = 0;
  bool done = false;
};

std::string ToJson(const Checkpoint& c) {
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("from").String("opensearch").Key("index").String(c.index);
  w.Key("start_us").Uint(c.start_us).Key("end_us").Uint(c.end_us).Key("after");
  if (c.after.empty()) {
    w.Null();
  } else {
    w.Raw(c.after);  // the sort values as OpenSearch gave them
  }
  w.Key("pages").Uint(c.pages).Key("read").Uint(c.read).Key("imported").Uint(c.imported);
  w.Key("already_stored").Uint(c.already_stored).Key("invalid").Uint(c.invalid);
  w.Key("done").Bool(c.done).EndObject();
  out += '\n';
  return out;
}

Status Save(const std::string& path, const Checkpoint& c) {
  const std::string tmp = path + ".tmp";
  const std::string text = ToJson(c);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot write the checkpoint " + tmp);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::Internal("cannot write the checkpoint " + path);
  }
  return Status::Ok();
}

// false: no checkpoint there. A checkpoint of another range is an error.
Status Load(const std::string& path, Checkpoint* c, bool* found) {
  std::ifstream in(path);
  *found = false;
  if (!in) return Status::Ok();
  std::stringstream ss;
  ss << in.rdbuf();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string text = ss.str();
  if (parser.parse(text).get(doc) != simdjson::SUCCESS) {
    return Status::Invalid("checkpoint " + path + " is not JSON: remove it to start over");
  }
  std::string_view index;
  uint64_t start = 0, end = 0;
  if (doc["index"].get_string().get(index) != simdjson::SUCCESS ||
      doc["start_us"].get_uint64().get(start) != simdjson::SUCCESS ||
      doc["end_us"].get_uint64().get(end) != simdjson::SUCCESS) {
    return Status::Invalid("checkpoint " + path + " is not a backfill checkpoint");
  }
  if (index != c->index || start != c->start_us || end != c->end_us) {
    return Status::Invalid("checkpoint " + path + " is of another backfill (" + std::string(index) +
                           ", " + FormatTime(start) + " to " + FormatTime(end) +
                           "): give another --checkpoint or remove it");
  }
  simdjson::dom::element after;
  if (doc["after"].get(after) == simdjson::SUCCESS && after.is_array()) {
    c->after = simdjson::minify(after);
  }
  auto num = [&](const char* key, uint64_t* v) {
    if (doc[key].get_uint64().get(*v) != simdjson::SUCCESS) *v = 0;
  };
  num("pages", &c->pages);
  num("read", &c->read);
  num("imported", &c->imported);
  num("already_stored", &c->already_stored);
  num("invalid", &c->invalid);
  bool done = false;
  if (doc["done"].get_bool().get(done) != simdjson::SUCCESS) done = false;
  c->done = done;
  *found = true;
  return Status::Ok();
}

int Backfill(const BackfillFlags& f) {
  auto fail = [](const std::string& m, int code = 1) {
    std::cerr << "backfill: " << m << "\n";
    return code;
  };
  if (f.from != "opensearch") return fail("--from: only opensearch", 2);
  uint64_t start_us = 0, end_us = 0;
  if (!ParseTime(f.start, &start_us)) return fail("--start: a time like 2026-12-01T00:00:00Z", 2);
  if (!ParseTime(f.end, &end_us)) return fail("--end: a time like 2026-12-02T00:00:00Z", 2);
  if (end_us <= start_us) return fail("--end must be after --start", 2);
  if (f.opensearch.empty())
    return fail("--opensearch: the cluster's URL, e.g. http://localhost:9200", 2);

  storage::opensearch::OpenSearchOptions oo;
  for (size_t p = 0; p <= f.opensearch.size();) {
    const size_t e = std::min(f.opensearch.find(',', p), f.opensearch.size());
    if (e > p) oo.urls.push_back(f.opensearch.substr(p, e - p));
    p = e + 1;
  }
  oo.user = f.opensearch_user;
  oo.password = f.opensearch_password;
  oo.tls_ca_file = f.ca_file;
  std::unique_ptr<storage::opensearch::OpenSearchClient> os;
  if (Status st = storage::opensearch::OpenSearchClient::Create(oo, &os); !st.ok()) {
    return fail(st.message(), 2);
  }
  std::unique_ptr<AdminClient> server;
  if (Status st = AdminClient::Open(f.server, f.token, f.ca_file, &server); !st.ok()) {
    return fail(st.message(), 2);
  }

  Checkpoint cp;
  // Daily span indices only (not Jaeger's -archive or rollover aliases).
  cp.index = storage::opensearch::SpanIndexBase(f.index_prefix) + "*-*-*";
  cp.start_us = start_us;
  cp.end_us = end_us;
  bool resumed = false;
  if (Status st = Load(f.checkpoint, &cp, &resumed); !st.ok()) return fail(st.message(), 2);
  if (resumed && cp.done) {
    std::cout << "backfill: already complete (" << f.checkpoint << "): " << cp.read
              << " spans read, " << cp.imported << " imported\n";
    return 0;
  }
  if (resumed && !f.quiet) {
    std::cerr << "backfill: resuming from " << f.checkpoint << " after " << cp.read << " spans\n";
  }

  const auto t0 = Clock::now();
  const uint64_t read_before = cp.read;
  uint64_t total = 0;
  simdjson::dom::parser parser;
  while (true) {
    std::string q = "{\"size\":" + std::to_string(f.page_spans) +
                    ",\"track_total_hits\":" + (total == 0 ? "true" : "false") +
                    ",\"query\":{\"range\":{\"startTime\":{\"gte\":" + std::to_string(start_us) +
                    ",\"lt\":" + std::to_string(end_us) +
                    "}}},\"sort\":[{\"startTime\":\"asc\"},{\"traceID\":\"asc\"},{\"spanID\":"
                    "\"asc\"}]";
    if (!cp.after.empty()) q += ",\"search_after\":" + cp.after;
    q += "}";
    std::string answer;
    Status st = os->PostJson(
        "/" + cp.index + "/_search?ignore_unavailable=true&allow_no_indices=true", q, &answer);
    if (!st.ok()) return fail("reading OpenSearch: " + st.message());
    simdjson::dom::element doc;
    simdjson::dom::array hits;
    if (parser.parse(answer).get(doc) != simdjson::SUCCESS ||
        doc["hits"]["hits"].get_array().get(hits) != simdjson::SUCCESS) {
      return fail("OpenSearch answered a search with something else");
    }
    if (total == 0) {
      uint64_t t = 0;
      if (doc["hits"]["total"]["value"].get_uint64().get(t) == simdjson::SUCCESS) total = t;
    }
    if (hits.size() == 0) break;
    std::string ndjson;
    std::string last_sort;
    uint64_t last_start = start_us;
    for (simdjson::dom::element hit : hits) {
      simdjson::dom::element source;
      if (hit["_source"].get(source) == simdjson::SUCCESS) {
        ndjson += simdjson::minify(source);
        ndjson += '\n';
        uint64_t s = 0;
        if (source["startTime"].get_uint64().get(s) == simdjson::SUCCESS) last_start = s;
      }
      simdjson::dom::element sort;
      if (hit["sort"].get(sort) == simdjson::SUCCESS) last_sort = simdjson::minify(sort);
    }
    if (last_sort.empty()) return fail("OpenSearch's hits carry no sort values");
    std::string result;
    st = server->PostNdjson("/api/admin/import", std::move(ndjson), &result);
    if (!st.ok()) return fail("importing into spanhouse: " + st.message());
    simdjson::dom::element r;
    uint64_t received = 0, imported = 0, stored = 0, invalid = 0;
    if (parser.parse(result).get(r) != simdjson::SUCCESS ||
        r["received"].get_uint64().get(received) != simdjson::SUCCESS ||
        r["imported"].get_uint64().get(imported) != simdjson::SUCCESS ||
        r["already_stored"].get_uint64().get(stored) != simdjson::SUCCESS ||
        r["invalid"].get_uint64().get(invalid) != simdjson::SUCCESS) {
      return fail("spanhouse answered the import with something else: " + result.substr(0, 200));
    }
    cp.after = last_sort;
    cp.pages += 1;
    cp.read += received;
    cp.imported += imported;
    cp.already_stored += stored;
    cp.invalid += invalid;
    if (Status s = Save(f.checkpoint, cp); !s.ok()) return fail(s.message());
    if (!f.quiet) {
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      const double pct = 100.0 * static_cast<double>(last_start - std::min(last_start, start_us)) /
                         static_cast<double>(end_us - start_us);
      std::fprintf(stderr,
                   "backfill: %llu spans read (%.1f%% of the range, up to %s), %llu imported, "
                   "%llu already stored, %llu invalid, %.0f spans/s\n",
                   static_cast<unsigned long long>(cp.read), pct, FormatTime(last_start).c_str(),
                   static_cast<unsigned long long>(cp.imported),
                   static_cast<unsigned long long>(cp.already_stored),
                   static_cast<unsigned long long>(cp.invalid),
                   secs > 0 ? static_cast<double>(cp.read - read_before) / secs : 0.0);
    }
  }
  cp.done = true;
  if (Status s = Save(f.checkpoint, cp); !s.ok()) return fail(s.message());
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cout << "backfill: done: " << cp.read << " spans read from " << cp.index << " ("
            << FormatTime(start_us) << " to " << FormatTime(end_us) << "), " << cp.imported
            << " imported, " << cp.already_stored << " already stored, " << cp.invalid
            << " invalid; " << (cp.read - read_before) << " this run in " << secs << " s\n";
  return cp.invalid == 0 ? 0 : 1;
}

}  // namespace

void AddBackfillCommand(CLI::App& app, std::function<int()>* run) {
  auto flags = std::make_shared<BackfillFlags>();
  CLI::App* cmd = app.add_subcommand(
      "backfill",
      "Copy spans from OpenSearch/Elasticsearch (Jaeger's indices) into ClickHouse through a "
      "serving spanhouse; resumable (--checkpoint) and idempotent");
  cmd->add_option("--from", flags->from, "Where the history is: opensearch")->required();
  cmd->add_option("--start", flags->start, "From this time (2026-12-01T00:00:00Z or unix seconds)")
      ->required();
  cmd->add_option("--end", flags->end, "Up to this time, excluded")->required();
  cmd->add_option("--opensearch", flags->opensearch,
                  "The cluster's node URLs, comma-separated (http://localhost:9200)")
      ->required();
  cmd->add_option("--index-prefix", flags->index_prefix, "Jaeger's index prefix, if any");
  cmd->add_option("--opensearch-user", flags->opensearch_user, "Basic-auth user");
  cmd->add_option("--opensearch-password", flags->opensearch_password, "Basic-auth password")
      ->envname("SPANHOUSE_OPENSEARCH_PASSWORD");
  cmd->add_option("--server", flags->server,
                  "The serving spanhouse's query listener (it writes into ClickHouse)")
      ->capture_default_str();
  cmd->add_option("--token", flags->token, "A bearer token of its auth.query_tokens")
      ->envname("SPANHOUSE_QUERY_TOKEN");
  cmd->add_option("--ca-file", flags->ca_file, "CA certificates (PEM) for https URLs");
  cmd->add_option("--checkpoint", flags->checkpoint,
                  "Where the position is kept; a second run with it resumes, or does nothing "
                  "once done")
      ->capture_default_str();
  cmd->add_option("--page-spans", flags->page_spans, "Spans per page")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_flag("--quiet", flags->quiet, "No progress lines");
  cmd->callback([flags, run] { *run = [flags] { return Backfill(*flags); }; });
}

}  // namespace spanhouse::migrate
