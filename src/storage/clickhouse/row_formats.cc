#include "storage/clickhouse/row_formats.h"

#include <array>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "storage/clickhouse/native.h"
#include "storage/clickhouse/span_block.h"
#include "storage/clickhouse/span_extras.h"

namespace spanhouse::storage {

namespace {

// The one place that knows which batch field fills which column of a row:
// it visits a cell as typed values (numbers, times, ids, strings, arrays)
// and a sink turns them into the bytes of one format. Templated on the sink,
// so the per-value calls inline (no virtual dispatch per value).
template <typename Sink>
class CellWalker {
 public:
  CellWalker(const SpanBatch& b, Sink& out)
      : b_(b), out_(out), resource_ids_(ResourceIds(b)), user_fields_(UserFields::Default()) {}

  void Rows() {
    const auto& cols = SpanColumns();
    for (size_t i = 0; i < b_.span_count(); ++i) {
      out_.RowBegin(i);
      for (size_t c = 0; c < cols.size(); ++c) {
        if (c > 0) out_.FieldSep();
        Cell(cols[c].id, i);
      }
      out_.RowEnd();
    }
  }

 private:
  enum class Part { kKey, kType, kValue };

  template <typename Fn>
  void Array(Range r, Fn&& each) {
    out_.ArrayBegin(r.size());
    for (uint32_t k = r.begin; k < r.end; ++k) {
      if (k != r.begin) out_.ElemSep();
      each(k);
    }
    out_.ArrayEnd();
  }
  void Attrs(const AttrColumns& cols, Range r, Part p) {
    Array(r, [&](uint32_t a) {
      switch (p) {
        case Part::kKey:
          out_.Str(b_.Str(cols.key[a]));
          break;
        case Part::kType:
          out_.UInt(static_cast<uint8_t>(cols.type[a]));
          break;
        case Part::kValue:
          out_.Str(b_.Str(cols.value[a]));
          break;
      }
    });
  }
  void Cell(Col id, size_t i) {
    const auto& s = b_.spans;
    const uint32_t res = s.resource[i];
    const uint32_t sc = s.scope[i];
    switch (id) {
      case Col::kTimestamp:
        out_.DateTime(static_cast<uint32_t>(s.start_ns[i] / 1000000000));
        break;
      case Col::kTraceId:
        out_.Id(s.trace_id[i].data(), 16);
        break;
      case Col::kSpanId:
        out_.Id(s.span_id[i].data(), 8);
        break;
      case Col::kParentSpanId:
        out_.Id(s.parent_span_id[i].data(), 8);
        break;
      case Col::kSpanIds: {
        uint8_t ids[16];
        std::memcpy(ids, s.span_id[i].data(), 8);
        std::memcpy(ids + 8, s.parent_span_id[i].data(), 8);
        out_.Id(ids, 16);
        break;
      }
      case Col::kTraceState:
        out_.Str(b_.Str(s.trace_state[i]));
        break;
      case Col::kFlags:
        out_.UInt(s.flags[i]);
        break;
      case Col::kName:
        out_.Str(b_.Str(s.name[i]));
        break;
      case Col::kKind:
        out_.UInt(s.kind[i]);
        break;
      case Col::kStartTime:
        out_.Time(s.start_ns[i]);
        break;
      case Col::kDurationNs:
        out_.UInt(s.end_ns[i] >= s.start_ns[i] ? s.end_ns[i] - s.start_ns[i] : uint64_t{0});
        break;
      case Col::kStatusCode:
        out_.UInt(s.status_code[i]);
        break;
      case Col::kStatusMessage:
        out_.Str(b_.Str(s.status_message[i]));
        break;
      case Col::kServiceName:
        out_.Str(b_.Str(b_.resources.service_name[res]));
        break;
      case Col::kResourceAttrKeys:  // not in the spans table (see schema.h)
      case Col::kResourceAttrTypes:
      case Col::kResourceAttrValues:
      case Col::kResourceDroppedAttrs:
      case Col::kResourceSchemaUrl:
        break;
      case Col::kResourceId:
        out_.UInt(resource_ids_[res]);
        break;
      case Col::kScopeName:
        out_.Str(b_.Str(b_.scopes.name[sc]));
        break;
      case Col::kScopeVersion:
        out_.Str(b_.Str(b_.scopes.version[sc]));
        break;
      case Col::kAttrKeys:
        Attrs(b_.span_attrs, s.attrs[i], Part::kKey);
        break;
      case Col::kAttrTypes:
        Attrs(b_.span_attrs, s.attrs[i], Part::kType);
        break;
      case Col::kAttrValues:
        Attrs(b_.span_attrs, s.attrs[i], Part::kValue);
        break;
      case Col::kDroppedAttrs:
        out_.UInt(s.dropped_attributes_count[i]);
        break;
      case Col::kUserFields:
        out_.Str(user_fields_.Of(b_, static_cast<uint32_t>(i)));
        break;
      case Col::kExtras:
        extras_.clear();
        EncodeSpanExtras(b_, static_cast<uint32_t>(i), &extras_);
        out_.Str(extras_);
        break;
      case Col::kScopeAttrKeys:  // in extras
      case Col::kScopeAttrTypes:
      case Col::kScopeAttrValues:
      case Col::kScopeDroppedAttrs:
      case Col::kScopeSchemaUrl:
      case Col::kEventTimes:
      case Col::kEventNames:
      case Col::kEventAttrKeys:
      case Col::kEventAttrTypes:
      case Col::kEventAttrValues:
      case Col::kEventDroppedAttrs:
      case Col::kDroppedEvents:
      case Col::kLinkTraceIds:
      case Col::kLinkSpanIds:
      case Col::kLinkTraceStates:
      case Col::kLinkFlags:
      case Col::kLinkAttrKeys:
      case Col::kLinkAttrTypes:
      case Col::kLinkAttrValues:
      case Col::kLinkDroppedAttrs:
      case Col::kDroppedLinks:
      // Rows keep every value in the attribute arrays (RowColumns has no
      // attribute columns).
      case Col::kAttrNetworkPeerAddress:
      case Col::kAttrNetworkPeerPort:
      case Col::kAttrUserAgentOriginal:
      case Col::kAttrDbStatement:
      case Col::kCount:
        break;
    }
  }

  const SpanBatch& b_;
  Sink& out_;
  std::vector<uint64_t> resource_ids_;
  UserFieldsJson user_fields_;
  std::string extras_;  // the current row's
};

// How a byte is written inside a text value: as itself, as a named escape
// (\t, \n, ...) or as \xNN.
struct EscapeTable {
  std::array<char, 256> text{};    // strings: 0 = as is
  std::array<char, 256> binary{};  // ids: also every byte outside printable ASCII

  EscapeTable() {
    for (int c = 0; c < 256; ++c) {
      const bool control = c < 0x20 || c == 0x7f;
      text[c] = control ? 'x' : 0;
      binary[c] = control || c >= 0x80 ? 'x' : 0;
    }
    const std::pair<char, char> named[] = {{'\\', '\\'}, {'\'', '\''}, {'\t', 't'}, {'\n', 'n'},
                                           {'\r', 'r'},  {'\0', '0'},  {'\b', 'b'}, {'\f', 'f'}};
    for (auto [raw, esc] : named) {
      text[static_cast<uint8_t>(raw)] = esc;
      binary[static_cast<uint8_t>(raw)] = esc;
    }
  }
};

const EscapeTable& Escapes() {
  static const EscapeTable t;
  return t;
}

// Values and TabSeparated. The two differ only at the top level of a row:
// Values quotes strings and times and wraps rows in (...), TSV leaves them
// bare between tabs. Inside an array both write the quoted form
// ['a','b'], which never holds a raw tab or newline, so TSV needs no second
// escaping.
class TextSink {
 public:
  TextSink(std::string* out, const Capabilities& caps, bool values)
      : out_(*out), datetime64_(caps.datetime64), values_(values) {}

  void RowBegin(size_t i) {
    if (!values_) return;
    if (i > 0) out_.push_back(',');
    out_.push_back('(');
  }
  void RowEnd() { out_.push_back(values_ ? ')' : '\n'); }
  void FieldSep() { out_.push_back(values_ ? ',' : '\t'); }
  void ArrayBegin(size_t /*n*/) {
    ++depth_;
    out_.push_back('[');
  }
  void ElemSep() { out_.push_back(','); }
  void ArrayEnd() {
    --depth_;
    out_.push_back(']');
  }

  template <typename T>
  void UInt(T v) {
    Number(static_cast<uint64_t>(v));
  }
  void DateTime(uint32_t seconds) {
    Quote();
    Number(seconds);
    Quote();
  }
  void Time(uint64_t ns) {
    if (!datetime64_) {
      Number(ns);
      return;
    }
    Quote();
    Number(ns / 1000000000);
    char frac[10] = {'.', '0', '0', '0', '0', '0', '0', '0', '0', '0'};
    uint64_t f = ns % 1000000000;
    for (int k = 9; k > 0 && f > 0; --k, f /= 10) frac[k] = static_cast<char>('0' + f % 10);
    out_.append(frac, sizeof(frac));
    Quote();
  }
  void Str(std::string_view s) {
    Quote();
    Escaped(s, Escapes().text);
    Quote();
  }
  void Id(const uint8_t* p, size_t n) {
    Quote();
    Escaped({reinterpret_cast<const char*>(p), n}, Escapes().binary);
    Quote();
  }

 private:
  void Quote() {
    if (values_ || depth_ > 0) out_.push_back('\'');
  }
  void Number(uint64_t v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out_.append(buf, r.ptr);
  }
  // Copies runs of plain bytes at once; escapes the rest.
  void Escaped(std::string_view s, const std::array<char, 256>& table) {
    static constexpr char kHex[] = "0123456789abcdef";
    size_t run = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      const auto c = static_cast<uint8_t>(s[k]);
      const char esc = table[c];
      if (esc == 0) continue;
      out_.append(s.data() + run, k - run);
      run = k + 1;
      if (esc == 'x') {
        const char hex[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
        out_.append(hex, 4);
      } else {
        const char named[2] = {'\\', esc};
        out_.append(named, 2);
      }
    }
    out_.append(s.data() + run, s.size() - run);
  }

  std::string& out_;
  const bool datetime64_;
  const bool values_;
  int depth_ = 0;
};

// RowBinary: Native's value encodings, row by row; arrays carry their length.
class RowBinarySink {
 public:
  explicit RowBinarySink(std::string* out) : w_(out) {}

  void RowBegin(size_t /*i*/) {}
  void RowEnd() {}
  void FieldSep() {}
  void ArrayBegin(size_t n) { w_.Varint(n); }
  void ElemSep() {}
  void ArrayEnd() {}

  template <typename T>
  void UInt(T v) {
    w_.Fixed<T>(v);
  }
  void DateTime(uint32_t seconds) { w_.Fixed<uint32_t>(seconds); }
  // DateTime64(9) is an Int64 of nanoseconds: the same bytes as UInt64 ns.
  void Time(uint64_t ns) { w_.Fixed<uint64_t>(ns); }
  void Str(std::string_view s) { w_.String(s); }
  void Id(const uint8_t* p, size_t n) { w_.Bytes(p, n); }

 private:
  native::Writer w_;
};

}  // namespace

const char* FormatName(RowFormat f) {
  switch (f) {
    case RowFormat::kValues:
      return "Values";
    case RowFormat::kTabSeparated:
      return "TabSeparated";
    case RowFormat::kRowBinary:
      return "RowBinary";
    case RowFormat::kNative:
      return "Native";
  }
  return "?";
}

void EncodeRows(const SpanBatch& batch, const Capabilities& caps, RowFormat f, std::string* out) {
  switch (f) {
    case RowFormat::kValues:
    case RowFormat::kTabSeparated: {
      TextSink sink(out, caps, f == RowFormat::kValues);
      CellWalker<TextSink>(batch, sink).Rows();
      break;
    }
    case RowFormat::kRowBinary: {
      RowBinarySink sink(out);
      CellWalker<RowBinarySink>(batch, sink).Rows();
      break;
    }
    case RowFormat::kNative:
      // The columns the row formats carry (SpanColumns()).
      EncodeSpanBlock(batch, caps, out, nullptr, UserFields::Default(), true, true, false,
                      /*user_fields_map=*/false);
      break;
  }
}

std::string RowStructure(const Capabilities& caps) {
  std::string s;
  for (const auto& c : SpanColumns()) {
    if (!s.empty()) s += ", ";
    // user_fields as the table's type: text formats carry JSON text the
    // engine parses, Native the JSON type's own columns.
    s += fmt::format("{} {}", c.name,
                     c.logical == Logical::kJson ? TableType(c.logical, caps, Schema12Layout())
                                                 : WireType(c.logical, caps));
  }
  return s;
}

std::string InsertFromFileSql(std::string_view table, RowFormat f, const Capabilities& caps,
                              FileStructure s, std::string_view columns) {
  std::string structure;
  if (s == FileStructure::kWire) structure = fmt::format(", '{}'", RowStructure(caps));
  // user_fields goes as JSON text; RowBinary read with the table's types
  // would expect the JSON type's binary form.
  const char* settings = f == RowFormat::kRowBinary && caps.json_type
                             ? " SETTINGS input_format_binary_read_json_as_string = 1"
                             : "";
  return fmt::format("INSERT INTO {}{} SELECT * FROM file({{path:String}}, '{}'{}){}", table,
                     columns.empty() ? "" : fmt::format(" ({})", columns), FormatName(f), structure,
                     settings);
}

std::string RowColumns() {
  std::string s;
  for (const auto& c : SpanColumns()) s += fmt::format("{}{}", s.empty() ? "" : ", ", c.name);
  return s;
}

}  // namespace spanhouse::storage
