// The rare fields' value (span_extras.h) against the engine: the bytes the
// encoder makes for a span equal the engine's RowBinary of the 21 columns
// schema 7's writer stored for it (so the upgrade's DEFAULT,
// ExtrasFromRareColumns, makes them too), and decoding gives back what was
// encoded.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_extras.h"

namespace spanhouse::storage {
namespace {

std::string Hex(std::string_view s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02X}", c);
  return out;
}

// The spans table's 21 rare columns, in table order, and the engine's value
// for them: formatRowNoNewline('RowBinary', ...), '' when all are empty.
std::string EngineExtras() {
  const std::string cols = Q(fmt::format(
      "SELECT name, type FROM system.columns WHERE database = '{}' AND table = 'spans' AND "
      "match(name, '^(scope_attr_|scope_dropped|scope_schema|event_|dropped_events|link_|"
      "dropped_links)') ORDER BY position",
      kDatabase));
  std::vector<std::string> names;
  std::string empty;
  for (const auto& row : TsvRows(cols)) {
    EXPECT_EQ(row.size(), 2u);
    const std::string& name = row.at(0);
    const std::string& type = row.at(1);
    names.push_back(name);
    empty += fmt::format("{}{}", empty.empty() ? "" : " AND ",
                         type.starts_with("Array")                  ? "empty(" + name + ")"
                         : type.find("String") != std::string::npos ? name + " = ''"
                                                                    : name + " = 0");
  }
  EXPECT_EQ(names.size(), 21u);
  return fmt::format("if({}, '', formatRowNoNewline('RowBinary', {}))", empty,
                     fmt::join(names, ", "));
}

TEST(SpanExtras, EqualTheEnginesRowBinaryOfTheStoredColumns) {
  Reset();
  Capabilities caps;
  SchemaOptions v7;
  v7.layout = Schema7Layout();
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps, v7).ok());
  const SpanBatch in = testdata::SampleBatch(3);
  WriteAll(in, caps, UserFieldValues::kMarked, false, false, false);

  std::map<std::string, std::string> ours;  // span id (hex) -> value (hex)
  size_t with_events = 0;
  size_t with_links = 0;
  for (uint32_t i = 0; i < in.span_count(); ++i) {
    std::string value;
    EncodeSpanExtras(in, i, &value);
    ours[Hex(std::string_view(reinterpret_cast<const char*>(in.spans.span_id[i].data()), 8))] =
        Hex(value);
    with_events += in.spans.events[i].size() > 0;
    with_links += in.spans.links[i].size() > 0;

    // Decoded into a span of its own, it encodes to the same bytes.
    SpanBatch back;
    const uint32_t span = back.AddSpan(back.AddResource(), back.AddScope());
    const Status st = DecodeSpanExtras(value, &back, span);
    ASSERT_TRUE(st.ok()) << st.message();
    std::string again;
    EncodeSpanExtras(back, span, &again);
    EXPECT_EQ(Hex(again), Hex(value)) << "span " << i;
    EXPECT_EQ(back.events.time_ns.size(), in.spans.events[i].size());
    EXPECT_EQ(back.links.trace_id.size(), in.spans.links[i].size());
  }
  ASSERT_GT(with_events, 0u);
  ASSERT_GT(with_links, 0u);

  // The expression made here from the table's columns, and the schema's.
  for (const std::string& expr : {EngineExtras(), ExtrasFromRareColumns()}) {
    const std::string rows =
        Q(fmt::format("SELECT hex(span_id), hex({}) FROM {}.spans", expr, kDatabase));
    size_t compared = 0;
    for (const auto& row : TsvRows(rows)) {
      ASSERT_GE(row.size(), 1u);
      const auto it = ours.find(row[0]);
      ASSERT_NE(it, ours.end()) << row[0];
      // An empty value is an empty last field.
      EXPECT_EQ(row.size() > 1 ? row[1] : std::string(), it->second) << "span " << it->first;
      ++compared;
    }
    EXPECT_EQ(compared, in.span_count()) << expr;
  }
}

TEST(SpanExtras, DamagedValuesAreErrorsNotCrashes) {
  SpanBatch in = testdata::SampleBatch(1);
  std::string value;
  for (uint32_t i = 0; i < in.span_count() && value.empty(); ++i) EncodeSpanExtras(in, i, &value);
  ASSERT_FALSE(value.empty());
  // Every strict prefix is cut short somewhere in its 21 fields.
  for (size_t len = 1; len < value.size(); ++len) {
    SpanBatch back;
    const uint32_t span = back.AddSpan(back.AddResource(), back.AddScope());
    EXPECT_FALSE(DecodeSpanExtras(std::string_view(value).substr(0, len), &back, span).ok()) << len;
  }
  // A size larger than the value.
  SpanBatch back;
  const uint32_t span = back.AddSpan(back.AddResource(), back.AddScope());
  EXPECT_FALSE(DecodeSpanExtras(std::string("\xff\xff\xff\x0f", 4), &back, span).ok());
  // Bytes after a whole value.
  EXPECT_FALSE(DecodeSpanExtras(value + "x", &back, span).ok());
}

}  // namespace
}  // namespace spanhouse::storage
