#include "storage/clickhouse/trace_copy.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "model/span_batch.h"
#include "storage/clickhouse/tsv.h"

namespace spanhouse::storage {
namespace {

constexpr std::string_view kLowCardinality = "LowCardinality(";

// The column names the copy's rows carry, in SpanReadQuery's order.
std::vector<std::string> CopyColumns(const Capabilities& caps) {
  const StorageLayout layout;
  std::vector<std::string> names;
  for (const ColumnSpec& c : SpanReadColumns(caps, layout)) {
    names.emplace_back(layout.span_ids_column && c.id == Col::kSpanId ? "span_ids" : c.name);
  }
  return names;
}

}  // namespace

std::string WithoutLowCardinality(std::string_view type) {
  std::string out;
  size_t i = 0;
  std::vector<bool> dropped;  // per open parenthesis: its close is dropped
  while (i < type.size()) {
    if (type.substr(i).starts_with(kLowCardinality)) {
      dropped.push_back(true);
      i += kLowCardinality.size();
      continue;
    }
    const char c = type[i++];
    if (c == '(') {
      dropped.push_back(false);
    } else if (c == ')' && !dropped.empty()) {
      const bool drop = dropped.back();
      dropped.pop_back();
      if (drop) continue;
    }
    out += c;
  }
  return out;
}

Status EnsureTraceCopy(SqlConnection& conn, const Capabilities& caps, std::string_view database,
                       uint64_t keep_s, uint64_t* since_s) {
  if (since_s != nullptr) *since_s = 0;
  // The view first: no insert into spans writes a copy once it is gone.
  SH_RETURN_IF_ERROR(
      conn.Run(fmt::format("DROP VIEW IF EXISTS {}.trace_copy_mv", database), "", nullptr, {}));
  if (keep_s == 0) {
    return conn.Run(fmt::format("DROP TABLE IF EXISTS {}.trace_copy", database), "", nullptr, {});
  }
  QueryResult r;
  SH_RETURN_IF_ERROR(conn.Run(
      "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = 'spans'",
      "TSV", &r, {{"db", std::string(database)}}));
  std::unordered_map<std::string, std::string> types;
  for (const auto& row : TsvRows(r.data)) {
    if (row.size() == 2) types.emplace(row[0], row[1]);
  }
  const std::vector<std::string> columns = CopyColumns(caps);
  for (const std::string& c : columns) {
    if (!types.contains(c)) {
      return Status::Invalid(fmt::format(
          "storage.trace_copy_s: the spans table of {} has no column {} (a layout older than this "
          "version's); set storage.trace_copy_s: 0",
          database, c));
    }
  }
  if (!types.at("user_fields").starts_with("Map(")) {
    return Status::Invalid(fmt::format(
        "storage.trace_copy_s: the spans table of {} keeps user_fields as {} (made before schema "
        "13); set storage.trace_copy_s: 0",
        database, types.at("user_fields")));
  }
  // Granules of 256 rows: a lookup decompresses ~200 KB of one column, not
  // a granule of 8192 rows of every column. The day's rows go keep_s after
  // the day's last second.
  const std::string ttl = fmt::format("toDateTime(day) + toIntervalSecond({})", keep_s + 86400);
  // In its comment, made once: the newest second of the spans stored before
  // it (0: none), which it lacks (no insert runs while serve starts).
  SH_RETURN_IF_ERROR(
      conn.Run(fmt::format("SELECT toUInt32(max(timestamp)) FROM {}.spans WHERE NOT EXISTS "
                           "(SELECT 1 FROM system.tables WHERE database = {{db:String}} AND "
                           "name = 'trace_copy')",
                           database),
               "TSV", &r, {{"db", std::string(database)}}));
  uint64_t newest_s = 0;
  std::from_chars(r.data.data(), r.data.data() + r.data.size(), newest_s);
  SH_RETURN_IF_ERROR(conn.Run(
      fmt::format("CREATE TABLE IF NOT EXISTS {0}.trace_copy (day Date, trace_id8 FixedString(8), "
                  "row String) ENGINE = MergeTree PARTITION BY day ORDER BY "
                  "trace_id8 TTL {1} SETTINGS index_granularity = 256, merge_selector_base = 10 "
                  "COMMENT 'since {2}'",
                  database, ttl, newest_s),
      "", nullptr, {}));
  SH_RETURN_IF_ERROR(conn.Run(
      "SELECT comment FROM system.tables WHERE database = {db:String} AND name = 'trace_copy'",
      "TSV", &r, {{"db", std::string(database)}}));
  uint64_t since = newest_s;
  if (std::string_view c = r.data; c.starts_with("since ")) {
    c.remove_prefix(6);
    std::from_chars(c.data(), c.data() + c.size(), since);
  }
  if (since_s != nullptr) *since_s = since;
  // A changed keep_s: the rule only (the parts already written keep theirs
  // until merged, or their day is dropped).
  SH_RETURN_IF_ERROR(conn.Run(fmt::format("ALTER TABLE {}.trace_copy MODIFY TTL {} SETTINGS "
                                          "materialize_ttl_after_modify = 0",
                                          database, ttl),
                              "", nullptr, {}));
  std::string list;
  for (const std::string& c : columns) list += ", " + c;
  return conn.Run(
      fmt::format("CREATE MATERIALIZED VIEW {0}.trace_copy_mv TO {0}.trace_copy AS SELECT "
                  "toDate(timestamp) AS day, toFixedString(substring(trace_id, 1, 8), 8) AS "
                  "trace_id8, formatRow('RowBinary'{1}) AS row FROM {0}.spans",
                  database, list),
      "", nullptr, {});
}

std::vector<std::pair<std::string, std::string>> TraceCopyColumns(
    const Capabilities& caps, const std::unordered_map<std::string, std::string>& stored_types) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& c : CopyColumns(caps)) {
    const auto it = stored_types.find(c);
    if (it == stored_types.end()) return {};
    out.emplace_back(c, WithoutLowCardinality(it->second));
  }
  return out;
}

std::string TraceCopyRowsQuery(std::string_view database, bool one_id) {
  return fmt::format(
      "SELECT row FROM {}.trace_copy WHERE {}", database,
      one_id
          ? "trace_id8 = toFixedString(substring(unhex({id:String}), 1, 8), 8)"
          : "trace_id8 IN (SELECT toFixedString(substring(unhex(arrayJoin({ids:Array(String)})), "
            "1, 8), 8))");
}

namespace {

// A column's type as RowBinary and Native lay it out.
struct Type {
  enum Kind : uint8_t { kFixed, kString, kFixedString, kArray, kMap, kNullable, kTuple };
  Kind kind = kFixed;
  size_t size = 0;  // kFixed, kFixedString: bytes per value
  std::vector<Type> children;
};

// The arguments of "Name(a, b(c, d))" at its top level.
std::vector<std::string_view> TypeArgs(std::string_view inner) {
  std::vector<std::string_view> args;
  int depth = 0;
  size_t from = 0;
  for (size_t i = 0; i <= inner.size(); ++i) {
    if (i == inner.size() || (inner[i] == ',' && depth == 0)) {
      std::string_view a = inner.substr(from, i - from);
      while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
      while (!a.empty() && a.back() == ' ') a.remove_suffix(1);
      args.push_back(a);
      from = i + 1;
    } else if (inner[i] == '(') {
      ++depth;
    } else if (inner[i] == ')') {
      --depth;
    }
  }
  return args;
}

bool ParseType(std::string_view t, Type* out, int depth = 0) {
  static constexpr std::pair<std::string_view, size_t> kFixed[] = {
      {"UInt8", 1},  {"Int8", 1},    {"Bool", 1},     {"UInt16", 2},   {"Int16", 2},  {"Date", 2},
      {"UInt32", 4}, {"Int32", 4},   {"Float32", 4},  {"DateTime", 4}, {"Date32", 4}, {"UInt64", 8},
      {"Int64", 8},  {"Float64", 8}, {"UInt128", 16}, {"Int128", 16},  {"UUID", 16},
  };
  if (depth > 8) return false;
  for (const auto& [name, size] : kFixed) {
    if (t == name) {
      *out = {Type::kFixed, size, {}};
      return true;
    }
  }
  if (t.starts_with("DateTime64(") || t.starts_with("DateTime(")) {
    *out = {Type::kFixed, t.starts_with("DateTime64(") ? 8u : 4u, {}};
    return true;
  }
  if (t == "String") {
    *out = {Type::kString, 0, {}};
    return true;
  }
  const size_t open = t.find('(');
  if (open == std::string_view::npos || !t.ends_with(")")) return false;
  const std::string_view name = t.substr(0, open);
  const std::vector<std::string_view> args = TypeArgs(t.substr(open + 1, t.size() - open - 2));
  if (name == "FixedString" && args.size() == 1) {
    size_t n = 0;
    const auto res = std::from_chars(args[0].data(), args[0].data() + args[0].size(), n);
    if (res.ec != std::errc() || n == 0 || n > 65536) return false;
    *out = {Type::kFixedString, n, {}};
    return true;
  }
  Type::Kind kind;
  if (name == "Array" && args.size() == 1) {
    kind = Type::kArray;
  } else if (name == "Nullable" && args.size() == 1) {
    kind = Type::kNullable;
  } else if (name == "Map" && args.size() == 2) {
    kind = Type::kMap;
  } else if (name == "Tuple" && !args.empty()) {
    kind = Type::kTuple;
  } else {
    return false;
  }
  *out = {kind, 0, {}};
  for (std::string_view a : args) {
    out->children.emplace_back();
    if (!ParseType(a, &out->children.back(), depth + 1)) return false;
  }
  return true;
}

// A Native column being built: its values, or its offsets (Array, Map) or
// null map (Nullable), then its children's columns.
struct ColumnData {
  const Type* type = nullptr;
  std::string data;
  uint64_t elements = 0;  // Array, Map: the children's values so far
  std::vector<ColumnData> children;

  explicit ColumnData(const Type& t) : type(&t) {
    for (const Type& c : t.children) children.emplace_back(c);
  }
  void Write(std::string* out) const {
    out->append(data);
    for (const ColumnData& c : children) c.Write(out);
  }
};

class RowReader {
 public:
  explicit RowReader(std::string_view in) : in_(in) {}
  bool eof() const { return at_ == in_.size(); }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= in_.size()) return false;
      const auto b = static_cast<uint8_t>(in_[at_++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  bool Bytes(size_t n, std::string_view* out) {
    if (in_.size() - at_ < n) return false;
    *out = in_.substr(at_, n);
    at_ += n;
    return true;
  }
  // One value of `t`, appended to `col` (skipped when null).
  bool Value(const Type& t, ColumnData* col) {
    std::string_view bytes;
    uint64_t n = 0;
    switch (t.kind) {
      case Type::kFixed:
      case Type::kFixedString:
        if (!Bytes(t.size, &bytes)) return false;
        if (col != nullptr) col->data.append(bytes);
        return true;
      case Type::kString: {
        const size_t from = at_;
        if (!Varint(&n) || !Bytes(n, &bytes)) return false;
        if (col != nullptr) col->data.append(in_.substr(from, at_ - from));
        return true;
      }
      case Type::kArray:
      case Type::kMap:
        if (!Varint(&n) || n > in_.size() - at_) return false;
        for (uint64_t i = 0; i < n; ++i) {
          for (size_t c = 0; c < t.children.size(); ++c) {
            if (!Value(t.children[c], col != nullptr ? &col->children[c] : nullptr)) return false;
          }
        }
        if (col != nullptr) {
          col->elements += n;
          col->data.append(reinterpret_cast<const char*>(&col->elements), 8);  // little-endian
        }
        return true;
      case Type::kNullable: {
        if (!Bytes(1, &bytes)) return false;
        const bool null = bytes[0] != 0;
        if (col != nullptr) col->data.push_back(null ? '\1' : '\0');
        if (!null) return Value(t.children[0], col != nullptr ? &col->children[0] : nullptr);
        if (col != nullptr) Default(t.children[0], &col->children[0]);
        return true;
      }
      case Type::kTuple:
        for (size_t c = 0; c < t.children.size(); ++c) {
          if (!Value(t.children[c], col != nullptr ? &col->children[c] : nullptr)) return false;
        }
        return true;
    }
    return false;
  }

 private:
  // The value a NULL stands on in a Nullable's nested column.
  static void Default(const Type& t, ColumnData* col) {
    switch (t.kind) {
      case Type::kFixed:
      case Type::kFixedString:
        col->data.append(t.size, '\0');
        return;
      case Type::kString:
        col->data.push_back('\0');
        return;
      case Type::kArray:
      case Type::kMap:
        col->data.append(reinterpret_cast<const char*>(&col->elements), 8);
        return;
      case Type::kNullable:
        col->data.push_back('\1');
        Default(t.children[0], &col->children[0]);
        return;
      case Type::kTuple:
        for (size_t c = 0; c < t.children.size(); ++c) Default(t.children[c], &col->children[c]);
        return;
    }
  }

  std::string_view in_;
  size_t at_ = 0;
};

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendNativeString(std::string* out, std::string_view s) {
  AppendVarint(out, s.size());
  out->append(s);
}

}  // namespace

Status CopyRowsToNative(std::string_view rows,
                        const std::vector<std::pair<std::string, std::string>>& columns,
                        const std::vector<TraceId>& ids, std::string* native) {
  native->clear();
  std::vector<Type> types(columns.size());
  size_t trace_column = columns.size();
  for (size_t c = 0; c < columns.size(); ++c) {
    if (!ParseType(columns[c].second, &types[c])) {
      return Status::Internal("trace copy: a column type it cannot read: " + columns[c].second);
    }
    if (columns[c].first == "trace_id" && types[c].kind == Type::kFixedString &&
        types[c].size == sizeof(TraceId)) {
      trace_column = c;
    }
  }
  if (trace_column == columns.size()) return Status::Internal("trace copy: no trace_id column");
  std::vector<ColumnData> cols;
  cols.reserve(columns.size());
  for (const Type& t : types) cols.emplace_back(t);
  RowReader outer(rows);
  uint64_t nrows = 0;
  while (!outer.eof()) {
    uint64_t len = 0;
    std::string_view row;
    if (!outer.Varint(&len) || !outer.Bytes(len, &row)) {
      return Status::Internal("trace copy: a row cut short");
    }
    // Each row holds one span: its trace id first checked, its values then
    // appended to the columns.
    RowReader check(row);
    TraceId id{};
    for (size_t c = 0; c <= trace_column; ++c) {
      std::string_view bytes;
      if (c == trace_column ? !check.Bytes(id.size(), &bytes) : !check.Value(types[c], nullptr)) {
        return Status::Internal("trace copy: a row that is not the spans' columns");
      }
      if (c == trace_column) std::memcpy(id.data(), bytes.data(), id.size());
    }
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) continue;
    RowReader values(row);
    for (size_t c = 0; c < columns.size(); ++c) {
      if (!values.Value(types[c], &cols[c])) {
        return Status::Internal("trace copy: a row that is not the spans' columns");
      }
    }
    if (!values.eof()) return Status::Internal("trace copy: a row longer than the spans' columns");
    ++nrows;
  }
  if (nrows == 0) return Status::Ok();
  AppendVarint(native, columns.size());
  AppendVarint(native, nrows);
  for (size_t c = 0; c < columns.size(); ++c) {
    AppendNativeString(native, columns[c].first);
    AppendNativeString(native, columns[c].second);
    cols[c].Write(native);
  }
  return Status::Ok();
}

}  // namespace spanhouse::storage
