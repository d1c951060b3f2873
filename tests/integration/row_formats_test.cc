// Encoders: rows written in each format read back identical through ClickHouse.
#include "storage/clickhouse/row_formats.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "storage/clickhouse/span_block.h"

namespace spanhouse::storage {
namespace {

// The sample batch, then one trace whose strings and ids hold every byte a
// text format must escape: quotes, backslashes, tabs, newlines, \0, \xff,
// control bytes, UTF-8.
SpanBatch Corpus() {
  SpanBatch b = testdata::SampleBatch(3);
  SpanBatch odd = testdata::SampleBatch(1, 1700000100000000000ull);
  auto s = [&](std::string_view x) { return odd.AddString(x); };
  using namespace std::string_literals;
  const std::string nasty =
      "it's a \\ back\\slash,\ttab\nnewline\r\0nul\xff\x01\x7f [x] 'q' h\xc3\xa9"s;
  TraceId tid{0x00, '\'', '\\', '\t', '\n', '\r', 0xff, 0x80,
              ',',  '(',  ')',  '[',  ']',  0x7f, 0x01, 'a'};
  SpanId sid{'\'', 0x00, '\\', 0xff, '\n', '\t', 0x20, 0x9c};
  for (uint32_t i = 0; i < odd.span_count(); ++i) {
    odd.spans.trace_id[i] = tid;
    odd.spans.span_id[i][0] = static_cast<uint8_t>(i);
    odd.spans.trace_state[i] = s(nasty);
    odd.spans.name[i] = s(i == 0 ? std::string_view(nasty) : std::string_view("\\N"));
    odd.spans.status_message[i] = s(nasty.substr(0, 5 + i));
    odd.spans.start_ns[i] += 7;  // nanoseconds not on a microsecond
  }
  odd.spans.parent_span_id[1] = sid;
  odd.links.span_id[0] = sid;
  odd.links.trace_id[0] = tid;
  odd.links.trace_state[0] = s(nasty);
  odd.events.name[0] = s(nasty);
  odd.span_attrs.key[0] = s(nasty);
  odd.span_attrs.value[0] = s(nasty);
  odd.event_attrs.value[0] = s("\t");
  odd.link_attrs.value[0] = s("'");
  odd.scopes.name[0] = s("sc'ope\\");
  odd.resources.schema_url[0] = s("a\tb");
  odd.resources.service_name[0] = s("svc\n'");
  b.Append(odd);
  return b;
}

constexpr RowFormat kFormats[] = {RowFormat::kValues, RowFormat::kTabSeparated,
                                  RowFormat::kRowBinary, RowFormat::kNative};

struct Case {
  RowFormat format;
  bool inline_values;  // INSERT ... VALUES <data in the query text>
  FileStructure structure;
  bool old_types = false;  // a server before DateTime64: times as UInt64 nanoseconds
};

class RowFormatsTest : public ::testing::TestWithParam<Case> {};

TEST_P(RowFormatsTest, RowsReadBackIdentical) {
  const Case c = GetParam();
  Reset();
  Capabilities caps;
  Status st;
  if (c.old_types) {
    caps = Capabilities::FromVersion("19.8");
    ASSERT_FALSE(caps.datetime64);
    for (const auto& sql : SchemaDdl(caps)) {
      st = Engine::conn->Query(sql, "");
      ASSERT_TRUE(st.ok()) << st.message();
    }
  } else {
    // The formats carry user_fields as the JSON type (row_formats.h).
    SchemaOptions schema;
    schema.layout = Schema12Layout();
    st = EnsureSchema(*Engine::conn, &caps, schema);
    ASSERT_TRUE(st.ok()) << st.message();
  }

  const SpanBatch in = Corpus();
  std::string data;
  EncodeRows(in, caps, c.format, &data);
  ASSERT_FALSE(data.empty());
  const std::string table = fmt::format("{}.spans", kDatabase);
  if (c.inline_values) {
    st = Engine::conn->Query(
        fmt::format("INSERT INTO {} ({}) VALUES {}", table, RowColumns(), data), "");
  } else {
    const std::string path = Engine::dir + "/rows." + FormatName(c.format);
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
    ASSERT_EQ(std::fclose(f), 0);
    st = Engine::conn->Query(InsertFromFileSql(table, c.format, caps, c.structure, RowColumns()),
                             "", nullptr, {{"path", path}});
    std::remove(path.c_str());
  }
  ASSERT_TRUE(st.ok()) << st.message();

  QueryResult r;
  st = Engine::conn->Query(
      fmt::format("SELECT {} FROM {} ORDER BY start_time, span_id SETTINGS {} = 1",
                  SpanSelectList(caps), table, kFlattenedJsonSetting),
      "Native", &r);
  ASSERT_TRUE(st.ok()) << st.message();
  SpanBatch out;
  st = DecodeSpanBlocks(r.data, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  std::string why;
  EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(out, &why))
      << FormatName(c.format) << ": " << why;
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {{RowFormat::kValues, true, FileStructure::kWire}};
  for (FileStructure s : {FileStructure::kWire, FileStructure::kTable}) {
    for (RowFormat f : kFormats) cases.push_back({f, false, s});
  }
  for (RowFormat f : kFormats) cases.push_back({f, false, FileStructure::kWire, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Formats, RowFormatsTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           const Case& c = p.param;
                           const char* how = c.inline_values                       ? "Inline"
                                             : c.structure == FileStructure::kWire ? "FileWire"
                                                                                   : "FileTable";
                           return std::string(FormatName(c.format)) + how +
                                  (c.old_types ? "UInt64Times" : "");
                         });

}  // namespace
}  // namespace spanhouse::storage
