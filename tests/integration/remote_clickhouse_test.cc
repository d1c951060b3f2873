// RemoteConnection against a real ClickHouse server (Debian's clickhouse-server,
// 18.16 on these machines): statements and results, the server's errors with
// their codes (a bad statement, a wrong password, a missing database, an
// exception after the answer began, nothing listening), and spans encoded for
// the server's own capabilities inserted as Native into the schema generated
// for it, the views filled.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "integration/clickhouse_server.h"
#include "integration/sampled_corpus.h"
#include "integration/writer_harness.h"
#include "sink/span_queue.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/insert_errors.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"
#include "storage/clickhouse/tsv.h"
#include "testdata/sample_batch.h"

namespace spanhouse::storage {
namespace {

class RemoteClickHouse : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = std::make_unique<ClickHouseServer>(
        (std::filesystem::temp_directory_path() / ("spanhouse-ch-" + std::to_string(::getpid())))
            .string());
  }
  static void TearDownTestSuite() {
    const std::string dir = server_->dir();
    server_.reset();
    std::filesystem::remove_all(dir);
  }
  void SetUp() override { ASSERT_TRUE(server_->running()); }

  static std::string Q(RemoteConnection& c, const std::string& sql) {
    QueryResult r;
    const Status st = c.Query(sql, "TSV", &r);
    EXPECT_TRUE(st.ok()) << sql << ": " << st.message();
    return r.data;
  }

  static inline std::unique_ptr<ClickHouseServer> server_;
};

TEST_F(RemoteClickHouse, RunsStatementsAndReturnsTheirResults) {
  auto c = server_->Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->version().empty());
  EXPECT_EQ(Q(*c, "SELECT version()"), c->version() + "\n");
  ASSERT_TRUE(c->Query("CREATE DATABASE IF NOT EXISTS rc_basic", "").ok());
  ASSERT_TRUE(c->Query("CREATE TABLE IF NOT EXISTS rc_basic.t (k UInt32, v String) "
                       "ENGINE = MergeTree ORDER BY k",
                       "")
                  .ok());
  // Rows as the request's body; a value with a tab, a newline and a quote.
  ASSERT_TRUE(c->Insert("INSERT INTO rc_basic.t FORMAT TSV", "1\tone\n2\ttwo\\t2\\n'\n").ok());
  EXPECT_EQ(Q(*c, "SELECT k, v = 'two\\t2\\n\\'' FROM rc_basic.t ORDER BY k"), "1\t0\n2\t1\n");
  // Statements in the connection's database, by name.
  auto in_db = server_->Connect("rc_basic");
  ASSERT_NE(in_db, nullptr);
  EXPECT_EQ(Q(*in_db, "SELECT count() FROM t"), "2\n");
  // Keep-alive: many statements on one connection.
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(Q(*c, fmt::format("SELECT {}", i)), fmt::format("{}\n", i));
}

TEST_F(RemoteClickHouse, TheServersErrorsKeepTheirCodes) {
  auto c = server_->Connect();
  ASSERT_NE(c, nullptr);
  // A statement the server refuses: its code, for the insert classifier.
  Status st = c->Query("SELEC 1", "TSV");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(ClickHouseErrorCode(st.message()), 62) << st.message();  // SYNTAX_ERROR
  st = c->Insert("INSERT INTO nowhere.t FORMAT TSV", "1\n");
  ASSERT_FALSE(st.ok());
  EXPECT_GT(ClickHouseErrorCode(st.message()), 0) << st.message();
  // The connection goes on after an error.
  EXPECT_EQ(Q(*c, "SELECT 7"), "7\n");
  // An exception once the answer had begun (200, rows, then the text).
  QueryResult r;
  st = c->Query(
      "SELECT number, throwIf(number = 300000) FROM system.numbers LIMIT 1000000 "
      "SETTINGS max_block_size = 1000",
      "TSV", &r);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(ClickHouseErrorCode(st.message()), 395)
      << st.message();  // FUNCTION_THROW_IF_VALUE_IS_NON_ZERO
  EXPECT_EQ(ClassifyInsertError(st), InsertError::kUnknown);
}

TEST_F(RemoteClickHouse, OpeningSaysWhatIsWrong) {
  RemoteOptions o;
  o.url = server_->url();
  std::unique_ptr<RemoteConnection> c;
  // A wrong password.
  o.user = "writer";
  o.password = "not-" + server_->password();
  Status st = RemoteConnection::Open(o, &c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(server_->url()), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("password"), std::string::npos) << st.message();
  // The right one.
  o.password = server_->password();
  ASSERT_TRUE(RemoteConnection::Open(o, &c).ok());
  // A database that is not there.
  o.database = "no_such_database";
  st = RemoteConnection::Open(o, &c);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(ClickHouseErrorCode(st.message()), 81) << st.message();  // UNKNOWN_DATABASE
  // Nothing listening: unavailable (a retry may find it up).
  o.url = "http://127.0.0.1:1";
  o.database.clear();
  st = RemoteConnection::Open(o, &c);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
  EXPECT_NE(st.message().find("127.0.0.1:1"), std::string::npos) << st.message();
  // Not a URL.
  o.url = "clickhouse:8123";
  EXPECT_EQ(RemoteConnection::Open(o, &c).code(), StatusCode::kInvalidArgument);
}

TEST_F(RemoteClickHouse, SpansEncodedForTheServerInsertAsNativeAndFeedTheViews) {
  auto c = server_->Connect();
  ASSERT_NE(c, nullptr);
  const Capabilities caps = Capabilities::FromVersion(c->version());
  SchemaOptions opts;
  opts.database = "rc_spans";
  for (const std::string& sql : SchemaDdl(caps, opts)) {
    const Status st = c->Query(sql, "");
    ASSERT_TRUE(st.ok()) << sql << "\n" << st.message();
  }
  const SpanBatch b = testdata::SampleBatch(3);
  const std::vector<uint64_t> ids = ResourceIds(b);
  std::vector<SpanRow> rows;
  for (uint32_t i = 0; i < b.span_count(); ++i) rows.push_back({&b, i, ids[b.spans.resource[i]]});
  SortByTableKey(&rows);
  EncodedBlock block;
  EncodeSpanRows(rows, caps, &block, UserFields::Default(),
                 caps.json_type ? UserFieldValues::kMarked : UserFieldValues::kInArrays);
  std::string data;
  block.AppendTo(&data);
  Status st = c->Insert("INSERT INTO rc_spans.spans FORMAT Native", std::move(data));
  ASSERT_TRUE(st.ok()) << st.message();
  const std::string n = std::to_string(b.span_count()) + "\n";
  EXPECT_EQ(Q(*c, "SELECT count() FROM rc_spans.spans"), n);
  EXPECT_EQ(Q(*c, "SELECT uniqExact(span_id) FROM rc_spans.spans"), n);
  EXPECT_EQ(Q(*c, "SELECT sum(c) FROM (SELECT sumMerge(calls) AS c FROM rc_spans.red_1m)"), n);
  EXPECT_EQ(Q(*c, "SELECT sum(c) FROM (SELECT sumMerge(calls) AS c FROM rc_spans.red_service_1m)"),
            n);
  EXPECT_EQ(Q(*c,
              "SELECT count() FROM (SELECT trace_id8 FROM rc_spans.trace_index GROUP BY "
              "trace_id8)"),
            "3\n");
  // The resources block too.
  std::string resources;
  std::vector<uint32_t> all;
  for (uint32_t r = 0; r < b.resources.attrs.size(); ++r) all.push_back(r);
  EncodeResourceBlock(b, all, ids, 1700000000, caps, &resources);
  st = c->Insert("INSERT INTO rc_spans.resources FORMAT Native", std::move(resources));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(Q(*c, "SELECT count() FROM rc_spans.resources"),
            std::to_string(b.resources.attrs.size()) + "\n");
}

TEST_F(RemoteClickHouse, EnsureSchemaCreatesAndThenFindsTheSchema) {
  auto c = server_->Connect();
  ASSERT_NE(c, nullptr);
  SchemaOptions opts;
  opts.database = "rc_ensure";
  Capabilities caps;
  Status st = EnsureSchema(*c, &caps, opts);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(caps.major, Capabilities::FromVersion(c->version()).major);
  // Read from the server's settings too: 18.16 has neither.
  EXPECT_EQ(caps.dedup_token, caps.major >= 23);
  EXPECT_EQ(caps.jit_settings, caps.major >= 23);
  EXPECT_EQ(Q(*c, "SELECT max(version) FROM rc_ensure.schema_version"),
            std::to_string(kSchemaVersion) + "\n");
  // A second start finds it current and changes nothing.
  const std::string tables =
      Q(*c, "SELECT name FROM system.tables WHERE database = 'rc_ensure' ORDER BY name");
  st = EnsureSchema(*c, &caps, opts);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(Q(*c, "SELECT name FROM system.tables WHERE database = 'rc_ensure' ORDER BY name"),
            tables);
}

// An older schema on the remote server is upgraded: schema 8's sort key by a
// copy, every row kept, the views' sums unchanged. Schema 7's rare columns
// need formatRowNoNewline (20.7): before, the upgrade says so and changes
// nothing.
TEST_F(RemoteClickHouse, AnOlderSchemaIsUpgradedKeepingEveryRow) {
  for (const auto& [db, layout] :
       {std::pair{"rc_upgrade8", Schema8Layout()}, std::pair{"rc_upgrade7", Schema7Layout()}}) {
    SCOPED_TRACE(db);
    auto c = server_->Connect();
    ASSERT_NE(c, nullptr);
    SchemaOptions older;
    older.database = db;
    older.layout = layout;
    Capabilities caps;
    ASSERT_TRUE(EnsureSchema(*c, &caps, older).ok());
    SpanBatch b = testdata::SampleBatch(40);
    const std::vector<uint64_t> ids = ResourceIds(b);
    std::vector<SpanRow> rows;
    for (uint32_t i = 0; i < b.span_count(); ++i) rows.push_back({&b, i, ids[b.spans.resource[i]]});
    EncodedBlock block;
    EncodeSpanRows(rows, caps, &block, UserFields::Default(), UserFieldValues::kInArrays,
                   layout.extras_column, layout.span_ids_column, layout.attr_columns);
    std::string data;
    block.AppendTo(&data);
    Status st = c->Insert(fmt::format("INSERT INTO {}.spans FORMAT Native", db), std::move(data));
    ASSERT_TRUE(st.ok()) << st.message();
    const std::string fingerprint = fmt::format(
        "SELECT count(), uniqExact(trace_id, span_id), sum(cityHash64(trace_id, span_id, "
        "parent_span_id, name, duration_ns, service_name)), (SELECT sumMerge(calls) FROM "
        "{0}.red_1m) FROM {0}.spans",
        db);
    const std::string before = Q(*c, fingerprint);
    ASSERT_EQ(before.substr(0, before.find('\t')), std::to_string(b.span_count()));
    const std::string version = fmt::format("SELECT max(version) FROM {}.schema_version", db);
    const std::string old_version = Q(*c, version);
    SchemaOptions current;
    current.database = db;
    st = EnsureSchema(*c, &caps, current);
    EXPECT_EQ(Q(*c, fingerprint), before);
    if (!layout.extras_column && !caps.format_row) {
      ASSERT_FALSE(st.ok());
      EXPECT_NE(st.message().find("formatRowNoNewline"), std::string::npos) << st.message();
      EXPECT_EQ(Q(*c, version), old_version);
      continue;
    }
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(Q(*c, version), std::to_string(kSchemaVersion) + "\n");
    EXPECT_EQ(Q(*c, fmt::format("SELECT sorting_key FROM system.tables WHERE database = '{}' AND "
                                "name = 'spans'",
                                db)),
              std::string(kSpansOrderBy.substr(1, kSpansOrderBy.size() - 2)) + "\n");
  }
}

// A store of schema 10's two id columns: where copies are off (the servers
// of a cluster) it keeps them at schema 11 and takes the old layout's
// inserts; one server's start then copies it to span_ids, every id kept.
TEST_F(RemoteClickHouse, TwoIdColumnsStayWhereCopiesAreOffAndBecomeSpanIdsByACopy) {
  auto c = server_->Connect();
  ASSERT_NE(c, nullptr);
  const std::string db = "rc_ids10";
  SchemaOptions older;
  older.database = db;
  older.layout = Schema10Layout();
  Capabilities caps;
  ASSERT_TRUE(EnsureSchema(*c, &caps, older).ok());
  auto insert = [&](uint32_t traces, uint64_t start_ns, bool span_ids) {
    SpanBatch b = testdata::SampleBatch(traces, start_ns);
    const std::vector<uint64_t> ids = ResourceIds(b);
    std::vector<SpanRow> rows;
    for (uint32_t i = 0; i < b.span_count(); ++i) rows.push_back({&b, i, ids[b.spans.resource[i]]});
    EncodedBlock block;
    EncodeSpanRows(rows, caps, &block, UserFields::Default(), UserFieldValues::kInArrays, true,
                   span_ids);
    std::string data;
    block.AppendTo(&data);
    const Status st =
        c->Insert(fmt::format("INSERT INTO {}.spans FORMAT Native", db), std::move(data));
    EXPECT_TRUE(st.ok()) << st.message();
  };
  insert(20, 1700000000000000000ull, false);
  SchemaOptions cluster;
  cluster.database = db;
  cluster.copy_spans = false;
  Status st = EnsureSchema(*c, &caps, cluster);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(Q(*c, fmt::format("SELECT max(version) FROM {}.schema_version", db)),
            std::to_string(kSchemaVersion) + "\n");
  bool has = true;
  ASSERT_TRUE(SpansHaveSpanIds(*c, db, &has).ok());
  EXPECT_FALSE(has);
  insert(20, 1700000100000000000ull, false);  // the writer's layout there
  const std::string fingerprint = fmt::format(
      "SELECT count(), countIf(parent_span_id != toFixedString(unhex('0000000000000000'), 8)), "
      "sum(cityHash64(trace_id, span_id, parent_span_id, name)) FROM {}.spans",
      db);
  const std::string before = Q(*c, fingerprint);
  EXPECT_EQ(before.substr(0, before.find('\t')), "120");
  SchemaOptions one_server;
  one_server.database = db;
  st = EnsureSchema(*c, &caps, one_server);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(SpansHaveSpanIds(*c, db, &has).ok());
  EXPECT_TRUE(has);
  EXPECT_EQ(Q(*c, fingerprint), before);  // the aliases read what the columns held
  insert(20, 1700000200000000000ull, true);
  EXPECT_EQ(Q(*c, fmt::format("SELECT count(), countIf(span_ids = concat(span_id, "
                              "parent_span_id)) FROM {}.spans",
                              db)),
            "180\t180\n");
}

// Spans sampled out (metrics_only) written by the writer to a server (18.16
// here: aggregate states, views that do not cascade, no tokens): stored as
// sampled_spans rows only, and counted in red_1m, red_service_1m, the
// catalog and the dependency edges as the same spans all kept are in
// another database; the job's drop of computed days works there too.
TEST_F(RemoteClickHouse, SpansSampledOutCountInTheMetricsAsIfKept) {
  auto c = server_->Connect();
  ASSERT_NE(c, nullptr);
  const std::string on = "rc_sampled_on";
  const std::string off = "rc_sampled_off";
  Capabilities caps;
  for (const std::string& db : {on, off}) {
    ASSERT_TRUE(c->Query(fmt::format("DROP DATABASE IF EXISTS {}", db), "").ok());
    SchemaOptions o;
    o.database = db;
    const Status st = EnsureSchema(*c, &caps, o);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  const uint64_t base_s = 1700000000ull / 60 * 60;
  const testdata::SampledCorpus corpus = testdata::MakeSampledCorpus(200, base_s * 1000000000ull);
  ASSERT_GT(corpus.kept_parent_sampled_child, 10u);
  ASSERT_GT(corpus.sampled_parent_kept_child, 10u);
  auto write = [&](const std::string& db, const SpanBatch& b) {
    WriterOptions o;
    o.spool_dir = server_->dir() + "/spool";
    o.database = db;
    WriteOneBatch(c.get(), caps, o, b);
  };
  write(on, corpus.first);
  write(on, corpus.second);
  write(off, corpus.kept_first);
  write(off, corpus.kept_second);
  EXPECT_EQ(Q(*c, fmt::format("SELECT count() FROM {}.spans", on)),
            fmt::format("{}\n", corpus.kept));
  EXPECT_EQ(Q(*c, fmt::format("SELECT count() FROM {}.sampled_spans", on)),
            fmt::format("{}\n", corpus.sampled));
  const auto red = [&](const std::string& db, const std::string& table, const std::string& key) {
    return Q(*c, fmt::format("SELECT {2}, sumMerge(calls), sumMerge(errors), "
                             "sumMerge(duration_sum_ns) FROM {0}.{1} GROUP BY {2} ORDER BY {2}",
                             db, table, key));
  };
  for (const auto& [table, key] :
       {std::pair<std::string, std::string>{"red_1m", "minute, service_name, name, kind"},
        {"red_service_1m", "minute, service_name, kind"}}) {
    const std::string want = red(off, table, key);
    EXPECT_GT(std::count(want.begin(), want.end(), '\n'), 20) << table;
    EXPECT_EQ(red(on, table, key), want) << table;
  }
  EXPECT_EQ(
      Q(*c, fmt::format("SELECT sum(c) FROM (SELECT sumMerge(calls) AS c FROM {}.red_1m)", on)),
      fmt::format("{}\n", corpus.kept + corpus.sampled));
  // Durations: the merged t-digests within 1% of the all-kept store's.
  const auto quantiles = [&](const std::string& db) {
    std::map<std::string, std::vector<double>> out;
    const std::string tsv =
        Q(*c, fmt::format("SELECT service_name, arrayJoin(quantilesTDigestMerge({})("
                          "duration_quantiles)) FROM {}.red_service_1m GROUP BY service_name",
                          kRedQuantiles, db));
    for (const auto& row : TsvRows(tsv)) {
      if (row.size() == 2) out[row[0]].push_back(std::stod(row[1]));
    }
    return out;
  };
  const auto want_q = quantiles(off);
  const auto got_q = quantiles(on);
  ASSERT_EQ(got_q.size(), want_q.size());
  for (const auto& [service, qs] : want_q) {
    ASSERT_EQ(got_q.at(service).size(), qs.size()) << service;
    for (size_t i = 0; i < qs.size(); ++i) {
      EXPECT_NEAR(got_q.at(service)[i], qs[i], 0.01 * qs[i]) << service << " q" << i;
    }
  }
  const std::string ops =
      "SELECT service_name, name, kind FROM {}.operations GROUP BY service_name, name, kind "
      "ORDER BY service_name, name, kind";  // (18.16 reads ORDER BY 1 as a constant)
  EXPECT_EQ(Q(*c, fmt::format(fmt::runtime(ops), on)), Q(*c, fmt::format(fmt::runtime(ops), off)));
  EXPECT_NE(Q(*c, fmt::format(fmt::runtime(ops), on)).find("ghost-db\tSELECT souls"),
            std::string::npos);
  // The edges, read from both tables (UNION ALL, parameters inlined).
  for (const std::string& db : {on, off}) {
    const Status st =
        ComputeDependencies(*c, static_cast<uint32_t>(base_s), static_cast<uint32_t>(base_s + 120),
                            kParentsBeforeS, kParentsAfterS, db);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  const std::string edges =
      "SELECT toUInt32(minute), parent, child, calls, errors FROM {}.dependencies_1m FINAL ORDER "
      "BY minute, parent, child";
  const std::string want_edges = Q(*c, fmt::format(fmt::runtime(edges), off));
  EXPECT_GT(std::count(want_edges.begin(), want_edges.end(), '\n'), 10);
  EXPECT_EQ(Q(*c, fmt::format(fmt::runtime(edges), on)), want_edges);
  EXPECT_NE(want_edges.find("ghost\tghost-db\t1\t1"), std::string::npos) << want_edges;
  // Computed ten days later: the day's sampled spans go, the metrics stay.
  size_t dropped = 0;
  const Status st = DropComputedSampledSpans(*c, static_cast<uint32_t>(base_s + 10 * 86400), on,
                                             kSampledSpansKeepDays, &dropped);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(dropped, 1u);
  EXPECT_EQ(Q(*c, fmt::format("SELECT count() FROM {}.sampled_spans", on)), "0\n");
  EXPECT_EQ(red(on, "red_1m", "minute, service_name, name, kind"),
            red(off, "red_1m", "minute, service_name, name, kind"));
}

// HTTPS: the server's certificate checked against the CA file given, and its
// name against the URL's host; either wrong, the connection is refused.
TEST_F(RemoteClickHouse, HttpsVerifiesTheServersCertificate) {
  RemoteOptions o;
  o.url = server_->https_url();
  o.tls_ca_file = server_->ca_file();
  std::unique_ptr<RemoteConnection> c;
  Status st = RemoteConnection::Open(o, &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(Q(*c, "SELECT 40 + 2"), "42\n");
  // Rows as the body over TLS too, and keep-alive.
  ASSERT_TRUE(c->Query("CREATE DATABASE IF NOT EXISTS rc_tls", "").ok());
  ASSERT_TRUE(
      c->Query("CREATE TABLE IF NOT EXISTS rc_tls.t (k UInt32) ENGINE = MergeTree ORDER BY k", "")
          .ok());
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(c->Insert("INSERT INTO rc_tls.t FORMAT TSV", "1\n2\n").ok());
  EXPECT_EQ(Q(*c, "SELECT count() FROM rc_tls.t"), "10\n");
  // Another name the certificate holds.
  o.url = server_->https_url("localhost");
  EXPECT_TRUE(RemoteConnection::Open(o, &c).ok());
  // Without the CA (the system's only): the self-signed certificate is refused.
  o.url = server_->https_url();
  o.tls_ca_file.clear();
  st = RemoteConnection::Open(o, &c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("certificate"), std::string::npos) << st.message();
  // A CA file that is not there.
  o.tls_ca_file = server_->dir() + "/no-such-ca.pem";
  st = RemoteConnection::Open(o, &c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no-such-ca.pem"), std::string::npos) << st.message();
}

// A user without the right to create: the schema step says what the server
// said, and nothing is made.
TEST_F(RemoteClickHouse, AUserWithoutRightsGetsTheServersReason) {
  RemoteOptions o;
  o.url = server_->url();
  o.user = "reader";
  o.password = server_->password();
  std::unique_ptr<RemoteConnection> c;
  ASSERT_TRUE(RemoteConnection::Open(o, &c).ok());
  SchemaOptions opts;
  opts.database = "rc_readonly";
  Capabilities caps;
  const Status st = EnsureSchema(*c, &caps, opts);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("readonly"), std::string::npos) << st.message();
  EXPECT_EQ(Q(*c, "SELECT count() FROM system.databases WHERE name = 'rc_readonly'"), "0\n");
}

// Insert bodies compressed with gzip: the server takes them as they were.
TEST_F(RemoteClickHouse, GzipInsertBodiesArriveWhole) {
  RemoteOptions o;
  o.url = server_->url();
  o.compression = "gzip";
  std::unique_ptr<RemoteConnection> c;
  ASSERT_TRUE(RemoteConnection::Open(o, &c).ok());
  ASSERT_TRUE(c->Query("CREATE DATABASE IF NOT EXISTS rc_gzip", "").ok());
  ASSERT_TRUE(c->Query("CREATE TABLE IF NOT EXISTS rc_gzip.t (k UInt32, v String) ENGINE = "
                       "MergeTree ORDER BY k",
                       "")
                  .ok());
  std::string rows;
  for (int i = 0; i < 20000; ++i) rows += fmt::format("{}\tvalue {}\n", i, i * 7);
  ASSERT_TRUE(c->Insert("INSERT INTO rc_gzip.t FORMAT TSV", rows).ok());
  ASSERT_TRUE(c->Insert("INSERT INTO rc_gzip.t FORMAT TSV", rows).ok());
  EXPECT_EQ(Q(*c,
              "SELECT count(), sum(k), countIf(v = concat('value ', toString(k * 7))) FROM "
              "rc_gzip.t"),
            "40000\t399980000\t40000\n");
  o.compression = "brotli";
  EXPECT_EQ(RemoteConnection::Open(o, &c).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spanhouse::storage
