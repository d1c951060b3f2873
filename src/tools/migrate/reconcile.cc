// `spanhouse reconcile --from opensearch --to clickhouse`: are the two stores
// of a dual-write the same? Asked of a serving spanhouse, which reads both.
//
// 1. Counts: spans per (time bucket, service, span kind) in each store;
//    a cell differs when |from - to| > tolerance x max(from, to). For each
//    differing cell (at most --max-cells), the span ids of that cell in both
//    stores name the spans one store lacks.
// 2. Samples: --samples spans drawn at random (weighted by the counts) from
//    the `from` store, each compared field by field with the same span in
//    the `to` store, both as Jaeger documents: every tag with its type,
//    process tags, logs, references, times, names.
// The report is a table (stdout) and, with --json, JSON; progress goes to
// stderr. Exit code 0 only when every cell is within the tolerance and every
// sample is equal; 1 otherwise; 2 when it could not run.
#include <simdjson.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "codec/json_writer.h"
#include "codec/value_text.h"
#include "tools/migrate/admin_client.h"
#include "tools/migrate/migrate.h"

namespace spanhouse::migrate {

struct ReconcileFlags {
  std::string from = "opensearch";
  std::string to = "clickhouse";
  std::string server = "http://127.0.0.1:16686";
  std::string token;
  std::string ca_file;
  std::string start;
  std::string end;
  std::string bucket = "1h";
  uint64_t samples = 100;
  double tolerance = 0;
  uint64_t max_cells = 50;
  uint64_t seed = 0;
  std::string json;
  bool quiet = false;
};

namespace {

struct Cell {
  uint64_t bucket = 0;
  std::string service;
  std::string kind;
  bool operator<(const Cell& o) const {
    return std::tie(bucket, service, kind) < std::tie(o.bucket, o.service, o.kind);
  }
};

struct CellDiff {
  Cell cell;
  uint64_t from = 0, to = 0;
  std::vector<std::string> only_from, only_to;  // "trace/span"
  bool listed = false;
};

struct FieldDiff {
  std::string trace, span, field, from, to;
};

Status Counts(AdminClient& c, const std::string& source, uint64_t start, uint64_t end,
              uint64_t bucket_s, std::map<Cell, uint64_t>* out) {
  std::string body;
  SH_RETURN_IF_ERROR(c.Get("/api/admin/span-counts?source=" + source +
                               "&start=" + std::to_string(start) + "&end=" + std::to_string(end) +
                               "&bucket_s=" + std::to_string(bucket_s),
                           &body));
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  simdjson::dom::array rows;
  if (p.parse(body).get(doc) != simdjson::SUCCESS || doc["rows"].get_array().get(rows)) {
    return Status::Internal("span-counts: not the expected answer");
  }
  for (simdjson::dom::element r : rows) {
    Cell cell;
    std::string_view service, kind;
    uint64_t spans = 0;
    if (r["bucket"].get_uint64().get(cell.bucket) || r["service"].get_string().get(service) ||
        r["kind"].get_string().get(kind) || r["spans"].get_uint64().get(spans)) {
      return Status::Internal("span-counts: a row without its fields");
    }
    cell.service = std::string(service);
    cell.kind = std::string(kind);
    (*out)[cell] += spans;
  }
  return Status::Ok();
}

Status SpanIds(AdminClient& c, const std::string& source, const Cell& cell, uint64_t bucket_s,
               std::vector<std::string>* out) {
  std::string target =
      "/api/admin/span-ids?source=" + source + "&service=" + UrlEncode(cell.service) +
      "&start=" + std::to_string(cell.bucket * 1000000ull) +
      "&end=" + std::to_string((cell.bucket + bucket_s) * 1000000ull) + "&limit=1000000";
  // A cell of spans without a kind lists those only ("unspecified").
  target += "&kind=" + (cell.kind.empty() ? std::string("unspecified") : UrlEncode(cell.kind));
  std::string body;
  SH_RETURN_IF_ERROR(c.Get(target, &body));
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  simdjson::dom::array spans;
  if (p.parse(body).get(doc) || doc["spans"].get_array().get(spans)) {
    return Status::Internal("span-ids: not the expected answer");
  }
  for (simdjson::dom::element pair : spans) {
    std::string_view t, s;
    if (pair.at(0).get_string().get(t) || pair.at(1).get_string().get(s)) continue;
    out->push_back(std::string(t) + "/" + std::string(s));
  }
  return Status::Ok();
}

// Documents of a trace in a store, by span id (minified JSON of each).
Status Documents(AdminClient& c, const std::string& source, const std::string& trace,
                 std::map<std::string, std::string>* out) {
  std::string body;
  SH_RETURN_IF_ERROR(c.Get("/api/admin/documents?source=" + source + "&trace=" + trace, &body));
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  simdjson::dom::array docs;
  if (p.parse(body).get(doc) || doc["documents"].get_array().get(docs)) {
    return Status::Internal("documents: not the expected answer");
  }
  for (simdjson::dom::element d : docs) {
    std::string_view span;
    if (d["spanID"].get_string().get(span)) continue;
    (*out)[std::string(span)] = simdjson::minify(d);
  }
  return Status::Ok();
}

// A document's key-values (tags, process tags, log fields) by key, each
// "type:value"; a key twice keeps both, in order.
std::map<std::string, std::vector<std::string>> KeyValues(simdjson::dom::element arr) {
  std::map<std::string, std::vector<std::string>> out;
  simdjson::dom::array a;
  if (arr.get_array().get(a)) return out;
  for (simdjson::dom::element kv : a) {
    std::string_view key, type;
    simdjson::dom::element value;
    if (kv["key"].get_string().get(key) || kv["value"].get(value)) continue;
    if (kv["type"].get_string().get(type)) type = "string";
    out[std::string(key)].push_back(std::string(type) + ":" + simdjson::minify(value));
  }
  return out;
}

void CompareKeyValues(const std::string& prefix, simdjson::dom::element a, simdjson::dom::element b,
                      const FieldDiff& base, std::vector<FieldDiff>* out) {
  auto ka = KeyValues(a), kb = KeyValues(b);
  std::set<std::string> keys;
  for (const auto& [k, v] : ka) keys.insert(k);
  for (const auto& [k, v] : kb) keys.insert(k);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? std::string("(absent)") : s;
  };
  for (const auto& k : keys) {
    const auto& va = ka[k];
    const auto& vb = kb[k];
    if (va != vb) {
      FieldDiff d = base;
      d.field = prefix + "[" + k + "]";
      d.from = join(va);
      d.to = join(vb);
      out->push_back(std::move(d));
    }
  }
}

// Field-by-field differences of one span's two documents.
void CompareDocuments(const std::string& a_text, const std::string& b_text, const FieldDiff& base,
                      std::vector<FieldDiff>* out) {
  simdjson::dom::parser pa, pb;
  simdjson::dom::element a, b;
  if (pa.parse(a_text).get(a) || pb.parse(b_text).get(b)) return;
  std::set<std::string> fields;
  simdjson::dom::object oa, ob;
  if (a.get_object().get(oa) || b.get_object().get(ob)) return;
  for (auto f : oa) fields.insert(std::string(f.key));
  for (auto f : ob) fields.insert(std::string(f.key));
  for (const auto& field : fields) {
    simdjson::dom::element va, vb;
    const bool ha = oa[field].get(va) == simdjson::SUCCESS;
    const bool hb = ob[field].get(vb) == simdjson::SUCCESS;
    if (field == "tags" && ha && hb) {
      CompareKeyValues("tags", va, vb, base, out);
      continue;
    }
    if (field == "process" && ha && hb) {
      simdjson::dom::element ta, tb, sa, sb;
      if (va["serviceName"].get(sa) == simdjson::SUCCESS &&
          vb["serviceName"].get(sb) == simdjson::SUCCESS &&
          simdjson::minify(sa) != simdjson::minify(sb)) {
        FieldDiff d = base;
        d.field = "process.serviceName";
        d.from = simdjson::minify(sa);
        d.to = simdjson::minify(sb);
        out->push_back(std::move(d));
      }
      if (va["tags"].get(ta) == simdjson::SUCCESS && vb["tags"].get(tb) == simdjson::SUCCESS) {
        CompareKeyValues("process.tags", ta, tb, base, out);
      }
      simdjson::dom::element fa, fb;
      const std::string fa_text =
          va["tag"].get(fa) == simdjson::SUCCESS ? simdjson::minify(fa) : "";
      const std::string fb_text =
          vb["tag"].get(fb) == simdjson::SUCCESS ? simdjson::minify(fb) : "";
      if (fa_text != fb_text) {
        FieldDiff d = base;
        d.field = "process.tag";
        d.from = fa_text.empty() ? "(absent)" : fa_text;
        d.to = fb_text.empty() ? "(absent)" : fb_text;
        out->push_back(std::move(d));
      }
      continue;
    }
    if (field == "logs" && ha && hb && va.is_array() && vb.is_array()) {
      simdjson::dom::array la = va.get_array().value_unsafe(), lb = vb.get_array().value_unsafe();
      if (la.size() == lb.size()) {
        size_t i = 0;
        for (auto ia = la.begin(), ib = lb.begin(); ia != la.end(); ++ia, ++ib, ++i) {
          const std::string p = "logs[" + std::to_string(i) + "]";
          simdjson::dom::element ta, tb;
          if ((*ia)["timestamp"].get(ta) == simdjson::SUCCESS &&
              (*ib)["timestamp"].get(tb) == simdjson::SUCCESS &&
              simdjson::minify(ta) != simdjson::minify(tb)) {
            FieldDiff d = base;
            d.field = p + ".timestamp";
            d.from = simdjson::minify(ta);
            d.to = simdjson::minify(tb);
            out->push_back(std::move(d));
          }
          simdjson::dom::element fa, fb;
          if ((*ia)["fields"].get(fa) == simdjson::SUCCESS &&
              (*ib)["fields"].get(fb) == simdjson::SUCCESS) {
            CompareKeyValues(p + ".fields", fa, fb, base, out);
          }
        }
        continue;
      }
    }
    const std::string ta = ha ? simdjson::minify(va) : "(absent)";
    const std::string tb = hb ? simdjson::minify(vb) : "(absent)";
    // null and [] are the same empty list (writers differ).
    auto empty = [](const std::string& s) { return s == "null" || s == "[]" || s == "(absent)"; };
    if (ta != tb && !(empty(ta) && empty(tb))) {
      FieldDiff d = base;
      d.field = field;
      d.from = ta;
      d.to = tb;
      out->push_back(std::move(d));
    }
  }
}

int Reconcile(const ReconcileFlags& f) {
  auto fail = [](const std::string& m, int code = 2) {
    std::cerr << "reconcile: " << m << "\n";
    return code;
  };
  // The search store by either name (the server reads the one it has).
  auto search = [](const std::string& s) { return s == "opensearch" || s == "elasticsearch"; };
  if (!((search(f.from) && f.to == "clickhouse") || (f.from == "clickhouse" && search(f.to)))) {
    return fail(
        "--from and --to: clickhouse and the search store (elasticsearch or opensearch), "
        "one each");
  }
  uint64_t start = 0, end = 0, bucket_s = 0;
  if (!ParseTime(f.start, &start)) return fail("--start: a time like 2026-12-01T00:00:00Z");
  if (!ParseTime(f.end, &end)) return fail("--end: a time like 2026-12-02T00:00:00Z");
  if (end <= start) return fail("--end must be after --start");
  if (!ParseDuration(f.bucket, &bucket_s) || bucket_s < 60) {
    return fail("--bucket: a duration of at least 60s, e.g. 1h");
  }
  if (f.tolerance < 0 || f.tolerance >= 1) return fail("--tolerance: a fraction in [0, 1)");
  std::unique_ptr<AdminClient> c;
  if (Status st = AdminClient::Open(f.server, f.token, f.ca_file, &c); !st.ok()) {
    return fail(st.message());
  }
  auto progress = [&](const std::string& m) {
    if (!f.quiet) std::cerr << "reconcile: " << m << "\n";
  };

  progress("counting spans per " + f.bucket + " x service x kind in " + f.from);
  std::map<Cell, uint64_t> from_counts, to_counts;
  if (Status st = Counts(*c, f.from, start, end, bucket_s, &from_counts); !st.ok()) {
    return fail(f.from + ": " + st.message());
  }
  progress("counting in " + f.to);
  if (Status st = Counts(*c, f.to, start, end, bucket_s, &to_counts); !st.ok()) {
    return fail(f.to + ": " + st.message());
  }
  std::set<Cell> cells;
  uint64_t total_from = 0, total_to = 0;
  for (const auto& [k, v] : from_counts) cells.insert(k), total_from += v;
  for (const auto& [k, v] : to_counts) cells.insert(k), total_to += v;
  std::vector<CellDiff> diffs;
  for (const Cell& cell : cells) {
    const uint64_t a = from_counts.count(cell) ? from_counts[cell] : 0;
    const uint64_t b = to_counts.count(cell) ? to_counts[cell] : 0;
    const uint64_t diff = a > b ? a - b : b - a;
    if (static_cast<double>(diff) > f.tolerance * static_cast<double>(std::max(a, b))) {
      diffs.push_back({cell, a, b, {}, {}, false});
    }
  }
  // The spans that make a cell differ, named.
  for (size_t i = 0; i < diffs.size() && i < f.max_cells; ++i) {
    CellDiff& d = diffs[i];
    progress("listing the spans of " + d.cell.service + " " + d.cell.kind + " at " +
             FormatTime(d.cell.bucket * 1000000ull) + " (" + std::to_string(i + 1) + "/" +
             std::to_string(std::min<size_t>(diffs.size(), f.max_cells)) + ")");
    std::vector<std::string> a, b;
    if (Status st = SpanIds(*c, f.from, d.cell, bucket_s, &a); !st.ok()) return fail(st.message());
    if (Status st = SpanIds(*c, f.to, d.cell, bucket_s, &b); !st.ok()) return fail(st.message());
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(d.only_from));
    std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(d.only_to));
    d.listed = true;
  }

  // Samples, drawn from the `from` store weighted by its counts.
  std::mt19937_64 rng(f.seed != 0 ? f.seed : std::random_device{}());
  std::vector<Cell> sample_cells;
  std::vector<double> weights;
  for (const auto& [cell, n] : from_counts) {
    sample_cells.push_back(cell);
    weights.push_back(static_cast<double>(n));
  }
  std::vector<FieldDiff> field_diffs;
  std::vector<std::string> missing;  // sampled spans absent from `to`
  uint64_t sampled = 0;
  std::map<Cell, std::vector<std::string>> cell_spans;
  if (!sample_cells.empty() && f.samples > 0) {
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    std::set<std::string> chosen;
    for (uint64_t i = 0; i < f.samples * 4 && chosen.size() < f.samples; ++i) {
      const Cell& cell = sample_cells[pick(rng)];
      auto it = cell_spans.find(cell);
      if (it == cell_spans.end()) {
        std::vector<std::string> ids;
        if (Status st = SpanIds(*c, f.from, cell, bucket_s, &ids); !st.ok()) {
          return fail(st.message());
        }
        it = cell_spans.emplace(cell, std::move(ids)).first;
      }
      if (it->second.empty()) continue;
      std::uniform_int_distribution<size_t> any(0, it->second.size() - 1);
      chosen.insert(it->second[any(rng)]);
    }
    std::map<std::string, std::vector<std::string>> by_trace;
    for (const auto& key : chosen) {
      by_trace[key.substr(0, key.find('/'))].push_back(key.substr(key.find('/') + 1));
    }
    for (const auto& [trace, spans] : by_trace) {
      std::map<std::string, std::string> a, b;
      if (Status st = Documents(*c, f.from, trace, &a); !st.ok()) return fail(st.message());
      if (Status st = Documents(*c, f.to, trace, &b); !st.ok()) return fail(st.message());
      for (const auto& span : spans) {
        ++sampled;
        if (sampled % 20 == 0) {
          progress("compared " + std::to_string(sampled) + "/" + std::to_string(chosen.size()) +
                   " sampled spans");
        }
        if (a.count(span) == 0) continue;  // gone meanwhile
        if (b.count(span) == 0) {
          missing.push_back(trace + "/" + span);
          continue;
        }
        CompareDocuments(a[span], b[span], FieldDiff{trace, span, "", "", ""}, &field_diffs);
      }
    }
  }

  // The report.
  const bool ok = diffs.empty() && field_diffs.empty() && missing.empty();
  std::printf("reconcile %s -> %s, %s to %s, buckets of %s\n", f.from.c_str(), f.to.c_str(),
              FormatTime(start).c_str(), FormatTime(end).c_str(), f.bucket.c_str());
  std::printf(
      "  spans: %llu in %s, %llu in %s; %zu of %zu cells (bucket x service x kind) differ "
      "beyond a tolerance of %g\n",
      static_cast<unsigned long long>(total_from), f.from.c_str(),
      static_cast<unsigned long long>(total_to), f.to.c_str(), diffs.size(), cells.size(),
      f.tolerance);
  if (!diffs.empty()) {
    std::printf("  %-20s  %-24s  %-10s  %10s  %10s\n", "bucket", "service", "kind", f.from.c_str(),
                f.to.c_str());
    for (const auto& d : diffs) {
      std::printf("  %-20s  %-24s  %-10s  %10llu  %10llu\n",
                  FormatTime(d.cell.bucket * 1000000ull).c_str(), d.cell.service.c_str(),
                  d.cell.kind.empty() ? "-" : d.cell.kind.c_str(),
                  static_cast<unsigned long long>(d.from), static_cast<unsigned long long>(d.to));
      for (size_t i = 0; i < d.only_from.size() && i < 20; ++i) {
        std::printf("      only in %s: %s\n", f.from.c_str(), d.only_from[i].c_str());
      }
      for (size_t i = 0; i < d.only_to.size() && i < 20; ++i) {
        std::printf("      only in %s: %s\n", f.to.c_str(), d.only_to[i].c_str());
      }
      if (d.only_from.size() + d.only_to.size() > 40) std::printf("      ... (all in --json)\n");
    }
  }
  std::printf(
      "  samples: %llu spans compared field by field: %zu missing in %s, %zu fields "
      "differ\n",
      static_cast<unsigned long long>(sampled), missing.size(), f.to.c_str(), field_diffs.size());
  for (const auto& m : missing) std::printf("      missing in %s: %s\n", f.to.c_str(), m.c_str());
  for (const auto& d : field_diffs) {
    std::printf("      %s/%s %s: %s=%s %s=%s\n", d.trace.c_str(), d.span.c_str(), d.field.c_str(),
                f.from.c_str(), d.from.c_str(), f.to.c_str(), d.to.c_str());
  }
  std::printf("  result: %s\n", ok ? "the stores agree" : "the stores DIFFER");

  if (!f.json.empty()) {
    std::string j;
    codec::JsonWriter w(j);
    w.BeginObject().Key("from").String(f.from).Key("to").String(f.to);
    w.Key("start").String(FormatTime(start)).Key("end").String(FormatTime(end));
    w.Key("bucket_s").Uint(bucket_s).Key("tolerance").Double(f.tolerance);
    w.Key("spans").BeginObject().Key("from").Uint(total_from).Key("to").Uint(total_to).EndObject();
    w.Key("cells").Uint(cells.size()).Key("differing_cells").BeginArray();
    const auto strings = [&w](std::string_view key, const std::vector<std::string>& list) {
      w.Key(key).BeginArray();
      for (const std::string& v : list) w.String(v);
      w.EndArray();
    };
    for (const auto& d : diffs) {
      w.BeginObject().Key("bucket").String(FormatTime(d.cell.bucket * 1000000ull));
      w.Key("service").String(d.cell.service).Key("kind").String(d.cell.kind);
      w.Key("from").Uint(d.from).Key("to").Uint(d.to).Key("listed").Bool(d.listed);
      strings("only_in_from", d.only_from);
      strings("only_in_to", d.only_to);
      w.EndObject();
    }
    w.EndArray().Key("samples").Uint(sampled);
    strings("missing_samples", missing);
    w.Key("field_differences").BeginArray();
    for (const auto& d : field_diffs) {
      w.BeginObject().Key("trace").String(d.trace).Key("span").String(d.span);
      w.Key("field").String(d.field).Key("from").String(d.from).Key("to").String(d.to);
      w.EndObject();
    }
    w.EndArray().Key("agree").Bool(ok).EndObject();
    j += '\n';
    if (f.json == "-") {
      std::cout << j;
    } else {
      std::ofstream out(f.json);
      out << j;
      if (!out) return fail("cannot write " + f.json);
    }
  }
  return ok ? 0 : 1;
}

}  // namespace

void AddBackfillCommand(CLI::App& app, std::function<int()>* run);

void AddMigrateCommands(CLI::App& app, std::function<int()>* run) {
  auto flags = std::make_shared<ReconcileFlags>();
  CLI::App* cmd = app.add_subcommand(
      "reconcile",
      "Compare the two stores of a dual-write (OpenSearch and ClickHouse) through a serving "
      "spanhouse: counts per bucket x service x kind, and sampled spans field by field");
  cmd->add_option("--from", flags->from,
                  "The store to check against: elasticsearch (or opensearch) or clickhouse")
      ->required();
  cmd->add_option("--to", flags->to, "The other store")->required();
  cmd->add_option("--start", flags->start, "From this time (2026-12-01T00:00:00Z or unix seconds)")
      ->required();
  cmd->add_option("--end", flags->end, "Up to this time, excluded")->required();
  cmd->add_option("--server", flags->server, "The serving spanhouse's query listener")
      ->capture_default_str();
  cmd->add_option("--token", flags->token, "A bearer token of its auth.query_tokens")
      ->envname("SPANHOUSE_QUERY_TOKEN");
  cmd->add_option("--ca-file", flags->ca_file, "CA certificates (PEM) for an https --server");
  cmd->add_option("--bucket", flags->bucket, "Time bucket of the counts (90s, 15m, 1h, 1d)")
      ->capture_default_str();
  cmd->add_option("--samples", flags->samples, "Spans compared field by field")
      ->capture_default_str();
  cmd->add_option("--tolerance", flags->tolerance,
                  "A cell's count may differ by this fraction of it (0: exactly equal)")
      ->capture_default_str();
  cmd->add_option("--max-cells", flags->max_cells, "Differing cells whose spans are listed by id")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the sampling (0: random)");
  cmd->add_option("--json", flags->json,
                  "Also write the report as JSON to this file ('-': stdout)");
  cmd->add_flag("--quiet", flags->quiet, "No progress lines");
  cmd->callback([flags, run] { *run = [flags] { return Reconcile(*flags); }; });
  AddBackfillCommand(app, run);
}

}  // namespace spanhouse::migrate
