// Older schemas and the way from them: the layouts of schemas 4-8 (for the
// upgrade tests and `bench storage`), and EnsureSchema, which creates what
// is missing and brings an older data directory's tables to this schema
// (columns added, codecs and TTL changed in place, tables of another sort
// key or granule size copied anew).
#include "storage/clickhouse/schema.h"

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema_ddl.h"

namespace spanhouse::storage {
namespace {

using ddl::CodecOf;
using ddl::ColumnDef;
using ddl::ColumnsOf;
using ddl::kAllowLowCardinalityNumbers;
using ddl::kSized;
using ddl::kSpansDdlIndex;
using ddl::kTables;
using ddl::kZstd3;
using ddl::SmallBlocks;
using ddl::SpansDdl;
using ddl::TableColumn;
using ddl::TtlTable;
using ddl::TtlTables;

// The columns of schema version 1 that version 2 moved to `resources`.
constexpr const char* kV1ResourceColumns[] = {
    "resource_attr_keys", "resource_attr_types", "resource_attr_values",
    "resource_dropped_attributes_count", "resource_schema_url"};

// Schema 5's codec for a column, given schema 4's where they differ.
std::string Schema5Codec(const CodecQuery& q) {
  if (q.table == "spans") {
    if (q.column == "parent_span_id" || q.column == "resource_id") return kSized;
    if (q.column == "attr_keys" || q.column == "attr_types") return kZstd3;
  }
  return std::string(q.chosen);
}

}  // namespace

StorageLayout Schema12Layout() {
  StorageLayout l;
  l.user_fields_map = false;
  return l;
}

StorageLayout Schema10Layout() {
  StorageLayout l = Schema12Layout();
  l.span_ids_column = false;
  l.attr_columns = false;
  return l;
}

StorageLayout Schema8Layout() {
  StorageLayout l = Schema10Layout();
  l.spans_order_by = std::string(kSchema8SpansOrderBy);
  return l;
}

StorageLayout Schema7Layout() {
  StorageLayout l = Schema8Layout();
  l.extras_column = false;
  return l;
}

StorageLayout Schema5Layout() {
  StorageLayout l = Schema7Layout();
  l.index_granularity = 32768;
  l.low_cardinality_resource_id = false;
  l.codec = Schema5Codec;
  return l;
}

StorageLayout Schema4Layout() {
  StorageLayout l = Schema5Layout();
  l.spans_order_by = "(toStartOfHour(timestamp), trace_id)";
  l.index_granularity = 0;
  l.trace_index_seconds = false;
  l.trace_index_short_id = false;
  l.codec = [](const CodecQuery& q) {
    if (q.table == "spans" && (q.column == "user_fields" || q.column == "attr_values")) {
      return std::string(kSized);
    }
    return Schema5Codec(q);
  };
  return l;
}

namespace {

// Schema 1 -> 2: each distinct resource of the old rows goes to `resources`
// (its id a hash computed here by ClickHouse: any stable function will do,
// ids only have to agree between a span and its resource row), the rows get
// that id, and the per-row resource columns are dropped. Every step is
// synchronous, so a crash part-way leaves either the old columns (and this
// runs again) or a finished upgrade.
Status MoveResourcesOutOfSpans(SqlConnection& conn, std::string_view db) {
  const std::string id =
      "cityHash64(resource_attr_keys, resource_attr_types, resource_attr_values, "
      "resource_schema_url, resource_dropped_attributes_count)";
  std::vector<std::string> steps = {
      fmt::format("INSERT INTO {0}.resources SELECT {1} AS rid, any(service_name), "
                  "any(resource_attr_keys), any(resource_attr_types), any(resource_attr_values), "
                  "any(resource_dropped_attributes_count), any(resource_schema_url), "
                  "max(timestamp) FROM {0}.spans WHERE resource_id = 0 GROUP BY rid",
                  db, id),
      fmt::format("ALTER TABLE {}.spans UPDATE resource_id = {} WHERE resource_id = 0 "
                  "SETTINGS mutations_sync = 2",
                  db, id),
  };
  std::string drop;
  for (const char* c : kV1ResourceColumns) {
    drop += drop.empty() ? "" : ", ";
    drop += fmt::format("DROP COLUMN {}", c);
  }
  steps.push_back(fmt::format("ALTER TABLE {}.spans {} SETTINGS mutations_sync = 2", db, drop));
  for (const auto& sql : steps) {
    if (Status st = conn.Query(sql, ""); !st.ok()) return st;
  }
  return Status::Ok();
}

// The lines of a one-column TSV result.
std::set<std::string> LineSet(const std::string& tsv) {
  std::set<std::string> out;
  for (size_t pos = 0; pos < tsv.size();) {
    size_t nl = tsv.find('\n', pos);
    if (nl == std::string::npos) nl = tsv.size();
    out.insert(tsv.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// Upgrade in place: adds any column an older spans table lacks, and moves
// schema 1's per-span resource columns to the resources table.
Status AddMissingColumns(SqlConnection& conn, std::string_view db, const Capabilities& caps,
                         const StorageLayout& layout) {
  QueryResult r;
  if (Status st = conn.Query(
          fmt::format("SELECT name FROM system.columns WHERE database = '{}' AND table = 'spans'",
                      db),
          "TSV", &r);
      !st.ok()) {
    return st;
  }
  const std::set<std::string> have = LineSet(r.data);
  // A table with the rare columns (schema 7 and older) computes extras from
  // them, for its rows and for any insert that leaves extras out; the
  // upgrade's copy then reads the value (RebuildSpansIfChanged).
  const bool rare_columns = have.count(RareColumns().front().name) != 0;
  for (TableColumn col : ColumnsOf("spans", caps, layout)) {
    if (have.count(col.name) != 0) continue;
    // A table of schema 10's two id columns: the copy makes span_ids
    // (RebuildSpansIfChanged), an ALTER would leave old rows without it.
    if (col.name == "span_ids" && have.count("span_id") != 0) continue;
    if (col.name == "extras" && rare_columns) {
      if (!caps.format_row) {
        // Remote stores start at schema 9: this is a schema 7 store moved
        // to a server older than the function the upgrade needs.
        return Status::Internal(fmt::format(
            "{}.spans has schema 7's rare columns; making them the extras column needs "
            "formatRowNoNewline (ClickHouse 20.7 and later), which this server ({}.{}) lacks: "
            "upgrade the store on a newer server",
            db, caps.major, caps.minor));
      }
      col.type += fmt::format(" DEFAULT {}", ExtrasFromRareColumns());
    }
    std::string sql = fmt::format("ALTER TABLE {}.spans ADD COLUMN {}", db,
                                  ColumnDef("spans", col, caps, layout));
    if (col.type.find("LowCardinality(UInt64)") != std::string::npos) {
      sql += fmt::format(" SETTINGS {}", kAllowLowCardinalityNumbers);
    }
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema upgrade: " + st.message());
    }
  }
  if (have.count(kV1ResourceColumns[0]) != 0) {
    if (Status st = MoveResourcesOutOfSpans(conn, db); !st.ok()) {
      return Status::Internal("schema upgrade (resources table): " + st.message());
    }
  }
  return Status::Ok();
}

// Tables made before a codec was chosen take it: a codec-only MODIFY COLUMN
// changes metadata alone (measured: no mutation, parts untouched), new
// parts and merges write the new codec. Types are left as they are (a
// changed type would rewrite every part), and a column whose codec went
// back to the server's default keeps the one it has.
Status SyncCodecs(SqlConnection& conn, std::string_view db, const Capabilities& caps,
                  const StorageLayout& layout) {
  if (!caps.codecs) return Status::Ok();
  for (const char* table : kTables) {
    QueryResult r;
    if (Status st = conn.Query(fmt::format("SELECT name, compression_codec FROM system.columns "
                                           "WHERE database = '{}' AND table = '{}'",
                                           db, table),
                               "TSV", &r);
        !st.ok()) {
      return st;
    }
    std::map<std::string, std::string, std::less<>> have;
    for (auto& f : TsvRows(r.data)) {
      if (f.size() == 2) have[std::move(f[0])] = std::move(f[1]);
    }
    std::string alter;
    for (const auto& c : ColumnsOf(table, caps, layout)) {
      const std::string codec = CodecOf(table, c, caps, layout);
      auto it = have.find(c.name);
      if (codec.empty() || it == have.end() || it->second == fmt::format("CODEC({})", codec)) {
        continue;
      }
      alter +=
          fmt::format("{}MODIFY COLUMN {} CODEC({})", alter.empty() ? "" : ", ", c.name, codec);
    }
    if (alter.empty()) continue;
    const std::string sql = fmt::format("ALTER TABLE {}.{} {}", db, table, alter);
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema: " + st.message() + "\nin: " + sql);
    }
  }
  return Status::Ok();
}

// Columns `fields` of db.table's row in system.tables, as TSVRaw without
// its last newline ("" when there is no such table).
Status TableRow(SqlConnection& conn, std::string_view db, std::string_view table,
                std::string_view fields, std::string* out) {
  QueryResult r;
  SH_RETURN_IF_ERROR(conn.Query(fmt::format("SELECT {} FROM system.tables WHERE database = '{}' "
                                            "AND name = '{}'",
                                            fields, db, table),
                                "TSVRaw", &r));
  *out = std::move(r.data);
  while (!out->empty() && (out->back() == '\n' || out->back() == '\r')) out->pop_back();
  return Status::Ok();
}

// A spans table made before takes the column settings of
// StorageLayout::small_block_columns: metadata only, as a codec; new parts
// and merges write the smaller blocks.
Status SyncColumnSettings(SqlConnection& conn, std::string_view db, const Capabilities& caps,
                          const StorageLayout& layout) {
  if (!caps.column_settings) return Status::Ok();
  std::string create;
  SH_RETURN_IF_ERROR(TableRow(conn, db, "spans", "create_table_query", &create));
  for (const auto& c : ColumnsOf("spans", caps, layout)) {
    if (!SmallBlocks("spans", c, caps, layout)) continue;
    // The column's definition: from its quoted name to the next one's.
    const size_t at = create.find(fmt::format("`{}` ", c.name));
    if (at == std::string::npos) continue;
    const size_t end = create.find(", `", at);
    const std::string_view def =
        std::string_view(create).substr(at, end == std::string::npos ? end : end - at);
    if (def.find(kSmallBlockSetting) != std::string_view::npos) continue;
    // One column a statement: MODIFY SETTING reads a comma as its list's.
    const std::string sql = fmt::format("ALTER TABLE {}.spans MODIFY COLUMN {} MODIFY SETTING {}",
                                        db, c.name, kSmallBlockSetting);
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema: " + st.message() + "\nin: " + sql);
    }
  }
  return Status::Ok();
}

// Runs the SELECT of view `<table>_mv` over every stored row of its source
// into `table`.
Status BackfillView(SqlConnection& conn, std::string_view db, std::string_view table) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT as_select FROM system.tables WHERE database = "
                                         "'{}' AND name = '{}_mv'",
                                         db, table),
                             "TSVRaw", &r);
      !st.ok()) {
    return st;
  }
  std::string select = r.data;
  while (!select.empty() && (select.back() == '\n' || select.back() == '\r')) select.pop_back();
  if (select.empty()) return Status::Internal(fmt::format("no view {}_mv", table));
  return conn.Query(fmt::format("INSERT INTO {}.{} {}", db, table, select), "");
}

// Brings a table made with other settings (an older spanhouse, another
// configuration) to those of `t`: the storage policy first (the TTL's TO
// VOLUME needs it), then the other settings, then the TTL. Each only when
// it differs, so a start with an unchanged configuration changes nothing.
// The engine allows the switch from the default policy because the tiered
// policy's hot volume is named "default" and holds the default disk.
Status ApplyTtlTable(SqlConnection& conn, std::string_view db, const Capabilities& caps,
                     const TtlTable& t) {
  std::string engine;
  SH_RETURN_IF_ERROR(TableRow(conn, db, t.name, "engine_full", &engine));
  // "k = v" as a whole item of the SETTINGS list.
  auto has_setting = [&](const std::string& kv) {
    for (size_t at = engine.find(kv); at != std::string::npos; at = engine.find(kv, at + 1)) {
      const size_t end = at + kv.size();
      if (at > 0 && engine[at - 1] == ' ' && (end == engine.size() || engine[end] == ',')) {
        return true;
      }
    }
    return false;
  };
  auto run = [&](const std::string& sql) -> Status {
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema: " + st.message() + "\nin: " + sql);
    }
    return Status::Ok();
  };
  std::vector<std::string> changed;
  for (const auto& kv : t.settings) {
    if (has_setting(kv)) continue;
    if (kv.rfind("storage_policy", 0) == 0) {
      if (Status st = run(fmt::format("ALTER TABLE {}.{} MODIFY SETTING {}", db, t.name, kv));
          !st.ok()) {
        return st;
      }
    } else {
      changed.push_back(kv);
    }
  }
  if (!changed.empty()) {
    std::string list;
    for (const auto& kv : changed) list += (list.empty() ? "" : ", ") + kv;
    if (Status st = run(fmt::format("ALTER TABLE {}.{} MODIFY SETTING {}", db, t.name, list));
        !st.ok()) {
      return st;
    }
  }
  const size_t ttl_at = engine.find(" TTL ");
  if (t.ttl.empty()) {
    if (ttl_at == std::string::npos) return Status::Ok();
    return run(fmt::format("ALTER TABLE {}.{} REMOVE TTL", db, t.name));
  }
  const std::string want = " TTL " + t.ttl;
  if (ttl_at != std::string::npos && engine.compare(ttl_at, want.size(), want) == 0 &&
      (ttl_at + want.size() == engine.size() ||
       engine.compare(ttl_at + want.size(), 10, " SETTINGS ") == 0)) {
    return Status::Ok();
  }
  // Where the engine can recompute only the TTL of stored parts
  // (materialize_ttl_recalculate_only, set above), it does so now, in the
  // background: stored parts then move and go by the new TTL. Elsewhere the
  // new TTL reaches old parts as they merge.
  return run(fmt::format("ALTER TABLE {}.{} MODIFY TTL {}{}", db, t.name, t.ttl,
                         caps.ttl_moves ? "" : " SETTINGS materialize_ttl_after_modify = 0"));
}

// Schema 4 -> 5 (and any later change of the spans table's sort key or
// granule size, or of trace_index's columns): neither changes in place, so
// the table is renamed to "<table>_before_upgrade", made anew, filled from
// it and the old one dropped. While the old one exists the upgrade is not
// done; the next start copies again into an emptied new table (the writer
// starts only after EnsureSchema). The views reading the spans table are
// dropped first (a copy must not feed them again: their tables keep what
// they hold) and made again by the DDL that follows. The old table is
// dropped without SYNC (in chDB a SYNC drop of a table the connection had
// just read waited for ever); the engine deletes its parts soon after.
constexpr std::string_view kBeforeUpgrade = "_before_upgrade";

// Where an upgrade keeps `table` while it copies.
std::string BeforeUpgrade(std::string_view table) {
  return fmt::format("{}{}", table, kBeforeUpgrade);
}

Status Run(SqlConnection& conn, const std::string& sql) {
  if (Status st = conn.Query(sql, ""); !st.ok()) {
    return Status::Internal("schema upgrade: " + st.message() + "\nin: " + sql);
  }
  return Status::Ok();
}

Status TableExists(SqlConnection& conn, std::string_view db, std::string_view table, bool* exists) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT count() FROM system.tables WHERE database = '{}' "
                                         "AND name = '{}'",
                                         db, table),
                             "TSV", &r);
      !st.ok()) {
    return st;
  }
  *exists = r.data == "1\n";
  return Status::Ok();
}

// The names of `table`'s columns.
Status ColumnNames(SqlConnection& conn, std::string_view db, std::string_view table,
                   std::set<std::string>* out) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT name FROM system.columns WHERE database = '{}' "
                                         "AND table = '{}'",
                                         db, table),
                             "TSVRaw", &r);
      !st.ok()) {
    return st;
  }
  *out = LineSet(r.data);
  out->erase("");
  return Status::Ok();
}

// Whether the spans table's sort key and granule size are `options`'.
Status SpansLayoutIs(SqlConnection& conn, std::string_view db, const Capabilities& caps,
                     const StorageLayout& layout, bool* same) {
  std::string row;
  SH_RETURN_IF_ERROR(TableRow(conn, db, "spans", "sorting_key, engine_full", &row));
  const size_t tab = row.find('\t');
  if (tab == std::string::npos) return Status::Internal("schema upgrade: no spans table");
  const std::string key = "(" + row.substr(0, tab) + ")";
  const std::string want_key =
      layout.spans_order_by.empty() ? std::string(kSpansOrderBy) : layout.spans_order_by;
  // "index_granularity = N" among the settings (the engine prints it always).
  uint32_t granules = 8192;
  const std::string setting = " index_granularity = ";
  if (const size_t at = row.find(setting, tab); at != std::string::npos) {
    const char* p = row.data() + at + setting.size();
    std::from_chars(p, row.data() + row.size(), granules);
  }
  const uint32_t want_granules = layout.index_granularity == 0 ? 8192 : layout.index_granularity;
  // And its columns: the rare ones of schema 7 beside extras go by a copy.
  std::set<std::string> have;
  SH_RETURN_IF_ERROR(ColumnNames(conn, db, "spans", &have));
  std::set<std::string> want;
  for (const auto& c : ColumnsOf("spans", caps, layout)) want.insert(c.name);
  *same = key == want_key && granules == want_granules && have == want;
  return Status::Ok();
}

Status DropSpansViews(SqlConnection& conn, std::string_view db) {
  for (const char* view : {"trace_index_mv", "red_1m_mv", "operations_mv"}) {
    SH_RETURN_IF_ERROR(Run(conn, fmt::format("DROP TABLE IF EXISTS {}.{}", db, view)));
  }
  return Status::Ok();
}

// Rows per partition id of `table`'s active parts.
Status PartitionRows(SqlConnection& conn, std::string_view db, std::string_view table,
                     std::map<std::string, uint64_t>* out) {
  QueryResult r;
  if (Status st = conn.Query(fmt::format("SELECT partition_id, sum(rows) FROM system.parts WHERE "
                                         "database = '{}' AND table = '{}' AND active GROUP BY "
                                         "partition_id ORDER BY partition_id",
                                         db, table),
                             "TSV", &r);
      !st.ok()) {
    return st;
  }
  out->clear();
  for (const auto& f : TsvRows(r.data)) {
    if (f.size() == 2) (*out)[f[0]] = std::strtoull(f[1].c_str(), nullptr, 10);
  }
  return Status::Ok();
}

// The new spans table's columns (`cols`) and what fills them from the old
// one (`select`): extras computed from the rare columns where the old one
// lacks it (a copy an older spanhouse began, before extras was added to the
// table it renamed).
Status CopiedColumns(SqlConnection& conn, std::string_view db, const std::string& old,
                     const Capabilities& caps, const StorageLayout& layout, std::string* cols,
                     std::string* select) {
  std::set<std::string> old_cols;
  SH_RETURN_IF_ERROR(ColumnNames(conn, db, old, &old_cols));
  for (const auto& c :
       SpanColumns(layout.extras_column, layout.span_ids_column, AttrColumnsStored(caps, layout))) {
    std::string expr = c.name;
    if (old_cols.count(c.name) == 0) {
      if (c.id == Col::kSpanIds) {
        expr = "toFixedString(concat(span_id, parent_span_id), 16)";
      } else if (c.id == Col::kExtras && old_cols.count(RareColumns().front().name) != 0) {
        expr = ExtrasFromRareColumns();
      } else {
        continue;
      }
    }
    *cols += fmt::format("{}{}", cols->empty() ? "" : ", ", c.name);
    *select += fmt::format("{}{}", select->empty() ? "" : ", ", expr);
  }
  return Status::Ok();
}

// After the spans table's CREATE (`create`, which made no table where one
// was) and its missing columns: made anew if its layout differs. The copy
// goes one partition (day) at a time, in order, each logged with the rows
// copied so far; a start that finds a copy stopped part-way keeps the
// partitions that are complete, empties a partial one and copies the rest.
Status RebuildSpansIfChanged(SqlConnection& conn, std::string_view db, const Capabilities& caps,
                             const StorageLayout& layout, const std::string& create,
                             const std::function<Status()>& before_copy) {
  const std::string old = BeforeUpgrade("spans");
  bool resume = false;
  SH_RETURN_IF_ERROR(TableExists(conn, db, old, &resume));
  std::map<std::string, uint64_t> have;  // what a stopped copy left
  if (resume) {
    SH_RETURN_IF_ERROR(DropSpansViews(conn, db));
    SH_RETURN_IF_ERROR(PartitionRows(conn, db, "spans", &have));
  } else {
    bool same = true;
    SH_RETURN_IF_ERROR(SpansLayoutIs(conn, db, caps, layout, &same));
    if (same) return Status::Ok();
    SH_RETURN_IF_ERROR(before_copy());
    SH_RETURN_IF_ERROR(DropSpansViews(conn, db));
    SH_RETURN_IF_ERROR(Run(conn, fmt::format("RENAME TABLE {0}.spans TO {0}.{1}", db, old)));
    SH_RETURN_IF_ERROR(Run(conn, create));
  }
  std::map<std::string, uint64_t> parts;
  SH_RETURN_IF_ERROR(PartitionRows(conn, db, old, &parts));
  uint64_t total = 0;
  for (const auto& [id, rows] : parts) total += rows;
  spdlog::info("schema upgrade: copying {} spans in {} partition(s) into the new spans table",
               total, parts.size());
  std::string cols;
  std::string select;
  SH_RETURN_IF_ERROR(CopiedColumns(conn, db, old, caps, layout, &cols, &select));
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t copied = 0;
  for (const auto& [id, rows] : parts) {
    const auto it = have.find(id);
    if (it != have.end() && it->second == rows) {
      copied += rows;
      spdlog::info("schema upgrade: spans partition {} already copied ({} rows)", id, rows);
      continue;
    }
    if (it != have.end()) {
      SH_RETURN_IF_ERROR(
          Run(conn, fmt::format("ALTER TABLE {}.spans DROP PARTITION ID '{}'", db, id)));
    }
    SH_RETURN_IF_ERROR(Run(conn, fmt::format("INSERT INTO {0}.spans ({1}) SELECT {4} FROM {0}.{2} "
                                             "WHERE _partition_id = '{3}'",
                                             db, cols, old, id, select)));
    // The copy leaves a day in parts of ~400k rows (the insert's blocks),
    // stored as new parts are (LZ4); merged now. The table is made without
    // its TTL and storage policy for the copy (EnsureSchema gives them
    // after): an insert whose rows are past the TTL's move goes straight to
    // the cold volume, where nothing merges, not even OPTIMIZE (measured on
    // the 49.4M-span store: 117 parts, 56 bytes/span, where the merged
    // store had 48).
    SH_RETURN_IF_ERROR(
        Run(conn, fmt::format("OPTIMIZE TABLE {}.spans PARTITION ID '{}' FINAL", db, id)));
    copied += rows;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info(
        "schema upgrade: spans partition {} copied ({} rows): {} of {} rows ({:.0f}%), "
        "{:.1f} s",
        id, rows, copied, total, total > 0 ? 100.0 * copied / total : 100.0, s);
  }
  return Run(conn, fmt::format("DROP TABLE {}.{}", db, old));
}

// Before trace_index's CREATE: an existing one with other columns is
// renamed (and its view dropped), for FinishTraceIndexRebuild to copy.
Status PrepareTraceIndexRebuild(SqlConnection& conn, std::string_view db, const Capabilities& caps,
                                const StorageLayout& layout,
                                const std::function<Status()>& before_copy) {
  const std::string old = BeforeUpgrade("trace_index");
  bool exists = false;
  SH_RETURN_IF_ERROR(TableExists(conn, db, old, &exists));
  if (exists) return Status::Ok();  // stopped part-way: copied again after the CREATE
  SH_RETURN_IF_ERROR(TableExists(conn, db, "trace_index", &exists));
  if (!exists) return Status::Ok();
  std::set<std::string> have;
  SH_RETURN_IF_ERROR(ColumnNames(conn, db, "trace_index", &have));
  std::set<std::string> want;
  for (const auto& c : ColumnsOf("trace_index", caps, layout)) want.insert(c.name);
  if (have == want) return Status::Ok();
  SH_RETURN_IF_ERROR(before_copy());
  SH_RETURN_IF_ERROR(Run(conn, fmt::format("DROP TABLE IF EXISTS {}.trace_index_mv", db)));
  return Run(conn, fmt::format("RENAME TABLE {0}.trace_index TO {0}.{1}", db, old));
}

// After the new trace_index's CREATE: fills it from the renamed one, ids
// and times converted, and drops that.
Status FinishTraceIndexRebuild(SqlConnection& conn, std::string_view db, const Capabilities& caps,
                               const StorageLayout& layout) {
  const std::string old = BeforeUpgrade("trace_index");
  bool exists = false;
  SH_RETURN_IF_ERROR(TableExists(conn, db, old, &exists));
  if (!exists) return Status::Ok();
  if (!caps.simple_aggregate) {
    return Status::Internal("schema upgrade: trace_index's states cannot be converted before 19.8");
  }
  std::set<std::string> have;
  SH_RETURN_IF_ERROR(ColumnNames(conn, db, old, &have));
  std::string id;
  if (layout.trace_index_short_id) {
    id = have.count("trace_id8") != 0 ? "trace_id8" : "toFixedString(substring(trace_id, 1, 8), 8)";
  } else if (have.count("trace_id") != 0) {
    id = "trace_id";
  } else {
    return Status::Internal("schema upgrade: trace_index by 8 bytes cannot go back to 16");
  }
  std::string times;
  if (layout.trace_index_seconds) {
    times = have.count("start_s") != 0 ? "start_s, end_s"
                                       : "toUInt32(intDiv(start_ns, 1000000000)), "
                                         "toUInt32(intDiv(end_ns + 999999999, 1000000000))";
  } else {
    times = have.count("start_ns") != 0
                ? "start_ns, end_ns"
                : "toUInt64(start_s) * 1000000000, toUInt64(end_s) * 1000000000";
  }
  std::string cols;
  for (const auto& c : ColumnsOf("trace_index", caps, layout)) {
    cols += fmt::format("{}{}", cols.empty() ? "" : ", ", c.name);
  }
  SH_RETURN_IF_ERROR(Run(conn, fmt::format("TRUNCATE TABLE {}.trace_index", db)));
  SH_RETURN_IF_ERROR(
      Run(conn, fmt::format("INSERT INTO {0}.trace_index ({1}) SELECT day, {2}, {3} FROM "
                            "{0}.{4} SETTINGS max_partitions_per_insert_block = 0",
                            db, cols, id, times, old)));
  return Run(conn, fmt::format("DROP TABLE {}.{}", db, old));
}

// A name the statements can hold unquoted: letters, digits and '_', not a
// digit first.
bool PlainIdentifier(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (const char c : name) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!letter && !(c >= '0' && c <= '9') && c != '_') return false;
  }
  return true;
}

// The engine's capabilities, from its version, and from its settings where
// a feature is a setting the writer or reader passes: a server built
// without one (or a version guessed wrong) is never sent it.
Status ReadCapabilities(SqlConnection& conn, Capabilities* caps) {
  QueryResult r;
  if (Status st = conn.Query("SELECT version()", "TSV", &r); !st.ok()) return st;
  std::string version = r.data;
  while (!version.empty() && (version.back() == '\n' || version.back() == '\r')) version.pop_back();
  *caps = Capabilities::FromVersion(version);
  r = {};
  if (Status st = conn.Query(
          "SELECT name FROM system.settings WHERE name IN ('insert_deduplication_token', "
          "'compile_aggregate_expressions', 'compile_sort_description')",
          "TSV", &r);
      !st.ok()) {
    return st;
  }
  const std::set<std::string> settings = LineSet(r.data);
  caps->dedup_token = caps->dedup_token && settings.count("insert_deduplication_token") != 0;
  caps->jit_settings = caps->jit_settings && settings.count("compile_aggregate_expressions") != 0 &&
                       settings.count("compile_sort_description") != 0;
  return Status::Ok();
}

// The DDL in order: the tables up to the spans table first, then the columns
// an older spans table lacks and the copies of a changed layout, then what
// reads the spans table (views need its columns).
Status CreateTables(SqlConnection& conn, const Capabilities& caps, const SchemaOptions& options) {
  const std::string& db = options.database;
  const std::vector<std::string> ddl = SchemaDdl(caps, options);
  const size_t spans_at = kSpansDdlIndex;
  if (ddl.size() <= spans_at || ddl[spans_at].find(".spans (") == std::string::npos) {
    return Status::Internal("schema: the spans table is not where EnsureSchema expects it");
  }
  // The hook runs once, before the first copy (the spans table's or
  // trace_index's), if there is one.
  bool before_copy_ran = false;
  const std::function<Status()> before_copy = [&]() -> Status {
    if (before_copy_ran || !options.before_copy) return Status::Ok();
    before_copy_ran = true;
    return options.before_copy(caps);
  };
  for (size_t i = 0; i < ddl.size(); ++i) {
    if (Status st = conn.Query(ddl[i], ""); !st.ok()) {
      return Status::Internal("schema: " + st.message() + "\nin: " + ddl[i]);
    }
    if (i == spans_at) {
      if (Status st = AddMissingColumns(conn, db, caps, options.layout); !st.ok()) return st;
      // Made for a copy without TTL and storage policy (see the copy).
      SchemaOptions for_copy = options;
      for_copy.tiered = false;
      for_copy.retention_s = 0;
      for_copy.move_after_s = 0;
      if (Status st = RebuildSpansIfChanged(conn, db, caps, options.layout,
                                            SpansDdl(caps, for_copy), before_copy);
          !st.ok()) {
        return st;
      }
      if (Status st = PrepareTraceIndexRebuild(conn, db, caps, options.layout, before_copy);
          !st.ok()) {
        return st;
      }
    }
  }
  return Status::Ok();
}

// The retention `options` give, on tables made with another.
Status ApplyRetention(SqlConnection& conn, const Capabilities& caps, const SchemaOptions& options) {
  if (!caps.ttl) return Status::Ok();
  const std::string& db = options.database;
  // The spans table's storage policy and TTL, the retention of trace_index
  // and resources.
  for (const TtlTable& t : TtlTables(caps, options)) {
    if (Status st = ApplyTtlTable(conn, db, caps, t); !st.ok()) return st;
  }
  // Tables made with another retention take this one (metadata only: the
  // TTL applies as parts merge, rather than rewriting every part now).
  for (const char* table : {"red_1m", "red_service_1m", "dependencies_1m"}) {
    const std::string sql = fmt::format(
        "ALTER TABLE {}.{} MODIFY TTL minute + INTERVAL {} DAY SETTINGS "
        "materialize_ttl_after_modify = 0",
        db, table, options.metrics_retention_days);
    if (Status st = conn.Query(sql, ""); !st.ok()) {
      return Status::Internal("schema: " + st.message() + "\nin: " + sql);
    }
  }
  return Status::Ok();
}

// A view created now sees only new inserts: give it the stored rows once,
// in order (red_1m's fill cascades into red_service_1m, which is filled
// from red_1m only where red_1m was there before). `existed`: the tables
// before this start.
Status BackfillNewViews(SqlConnection& conn, std::string_view db,
                        const std::set<std::string>& existed) {
  const std::pair<const char*, const char*> filled_from[] = {
      {"red_1m", "spans"}, {"operations", "spans"}, {"red_service_1m", "red_1m"}};
  for (const auto& [view, source] : filled_from) {
    if (existed.count(source) == 0 || existed.count(view) != 0) continue;
    if (Status st = BackfillView(conn, db, view); !st.ok()) {
      return Status::Internal(fmt::format("schema upgrade (filling {}): {}", view, st.message()));
    }
  }
  return Status::Ok();
}

}  // namespace

Status SpansHaveSpanIds(SqlConnection& conn, std::string_view database, bool* has) {
  QueryResult r;
  SH_RETURN_IF_ERROR(conn.Query(fmt::format("SELECT count() FROM system.columns WHERE database = "
                                            "'{}' AND table = 'spans' AND name = 'span_ids'",
                                            database),
                                "TSV", &r));
  *has = r.data == "1\n";
  return Status::Ok();
}

Status SpansUserFieldsMap(SqlConnection& conn, std::string_view database, bool* map) {
  QueryResult r;
  // The table an upgrade's copy reads from too: a start stopped after the
  // rename makes the new table as the old one was.
  SH_RETURN_IF_ERROR(conn.Query(
      fmt::format("SELECT countIf(type = 'JSON') FROM system.columns WHERE database = '{}' AND "
                  "table IN ('spans', 'spans_before_upgrade') AND name = 'user_fields'",
                  database),
      "TSV", &r));
  *map = r.data == "0\n";
  return Status::Ok();
}

Status EnsureSchema(SqlConnection& conn, Capabilities* caps_out, const SchemaOptions& given) {
  const std::string& db = given.database;
  if (!PlainIdentifier(db)) {
    return Status::Invalid(fmt::format("schema: database name '{}' is not a plain identifier", db));
  }
  Capabilities caps;
  SH_RETURN_IF_ERROR(ReadCapabilities(conn, &caps));
  SchemaOptions options = given;
  if (!options.copy_spans && options.layout.span_ids_column) {
    // A spans table made before schema 11 keeps its two id columns.
    bool exists = false;
    SH_RETURN_IF_ERROR(TableExists(conn, db, "spans", &exists));
    bool has = true;
    if (exists) SH_RETURN_IF_ERROR(SpansHaveSpanIds(conn, db, &has));
    options.layout.span_ids_column = has;
  }
  if (options.layout.user_fields_map && caps.json_type) {
    // A spans table made before schema 13 keeps its JSON column.
    SH_RETURN_IF_ERROR(SpansUserFieldsMap(conn, db, &options.layout.user_fields_map));
  }
  // Which tables were there before, to fill views added since from old rows.
  QueryResult r;
  if (Status st = conn.Query(
          fmt::format("SELECT name FROM system.tables WHERE database = '{}'", db), "TSV", &r);
      !st.ok()) {
    return st;
  }
  const std::set<std::string> existed = LineSet(r.data);
  SH_RETURN_IF_ERROR(CreateTables(conn, caps, options));
  if (Status st = FinishTraceIndexRebuild(conn, db, caps, options.layout); !st.ok()) return st;
  if (Status st = SyncCodecs(conn, db, caps, options.layout); !st.ok()) return st;
  SH_RETURN_IF_ERROR(SyncColumnSettings(conn, db, caps, options.layout));
  SH_RETURN_IF_ERROR(ApplyRetention(conn, caps, options));
  SH_RETURN_IF_ERROR(BackfillNewViews(conn, db, existed));
  if (Status st =
          conn.Query(fmt::format("INSERT INTO {0}.schema_version SELECT {1}, now() WHERE (SELECT "
                                 "count() FROM {0}.schema_version WHERE version = {1}) = 0",
                                 db, kSchemaVersion),
                     "");
      !st.ok()) {
    return st;
  }
  if (caps_out != nullptr) *caps_out = caps;
  return Status::Ok();
}

}  // namespace spanhouse::storage
