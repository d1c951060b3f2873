#include "storage/clickhouse/span_block.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "../../testdata/sample_batch.h"

namespace spanhouse::storage {
namespace {

Capabilities Modern() {
  return Capabilities::FromVersion("26.5.1.1");
}

TEST(SpanBlock, RoundTripsEveryStoredField) {
  SpanBatch in = testdata::SampleBatch(3);
  std::string block;
  EncodeSpanBlock(in, Modern(), &block);
  SpanBatch out;
  ASSERT_TRUE(DecodeSpanBlocks(block, &out).ok());
  std::string why;
  EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(out, &why)) << why;
  // Both ids in span_ids (schema 11) or in two columns (schema 10).
  EXPECT_NE(block.find("span_ids"), std::string::npos);
  std::string two;
  EncodeSpanBlock(in, Modern(), &two, nullptr, UserFields::Default(), true, false);
  EXPECT_EQ(two.find("span_ids"), std::string::npos);
  SpanBatch out10;
  ASSERT_TRUE(DecodeSpanBlocks(two, &out10).ok());
  EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(out10, &why)) << why;
  // Nothing of the resource but the service name went into the block.
  SpanBatch full = testdata::SampleBatch(3);
  ASSERT_FALSE(full.LogicallyEquals(out, &why));
}

TEST(SpanBlock, ResourceIdsIdentifyContentNotLayout) {
  SpanBatch a = testdata::SampleBatch(2);
  SpanBatch b;
  b.AddString("unrelated bytes first, so every offset differs");
  b.Append(a);
  const auto ia = ResourceIds(a);
  const auto ib = ResourceIds(b);
  ASSERT_EQ(ia.size(), ib.size());
  for (size_t r = 0; r < ia.size(); ++r) EXPECT_EQ(ia[r], ib[r]) << r;
  // One changed value, type or the schema URL makes another resource.
  ASSERT_GT(a.resources.attrs[0].size(), 0u);
  SpanBatch c = a;
  c.resource_attrs.value[c.resources.attrs[0].begin] = c.AddString("another value");
  EXPECT_NE(ResourceIds(c)[0], ia[0]);
  SpanBatch d = a;
  d.resource_attrs.type[d.resources.attrs[0].begin] = ValueType::kBytes;
  EXPECT_NE(ResourceIds(d)[0], ia[0]);
  SpanBatch e = a;
  e.resources.schema_url[0] = e.AddString("https://opentelemetry.io/schemas/9.9.9");
  EXPECT_NE(ResourceIds(e)[0], ia[0]);
}

TEST(SpanBlock, SeveralBlocksConcatenate) {
  SpanBatch a = testdata::SampleBatch(1);
  SpanBatch b = testdata::SampleBatch(2, 1800000000000000000ull);
  std::string data;
  EncodeSpanBlock(a, Modern(), &data);
  EncodeSpanBlock(b, Modern(), &data);
  SpanBatch out;
  ASSERT_TRUE(DecodeSpanBlocks(data, &out).ok());
  SpanBatch both = a;
  both.Append(b);
  std::string why;
  EXPECT_TRUE(testdata::StoredPart(both).LogicallyEquals(out, &why)) << why;
}

// Key columns go as LowCardinality, with dictionaries whose indexes are one,
// two or four bytes wide by the number of distinct values; servers without
// LowCardinality get plain strings. Each way decodes to the same spans.
TEST(SpanBlock, KeyColumnsRoundTripAsLowCardinalityOfEveryIndexWidth) {
  for (int distinct : {3, 300, 70000}) {
    SpanBatch in;
    SpanBatch one = testdata::SampleBatch(1);
    while (in.span_count() < static_cast<size_t>(distinct)) in.Append(one);
    for (uint32_t i = 0; i < in.span_count(); ++i) {
      in.spans.name[i] = in.AddString("op-" + std::to_string(i % distinct));
    }
    for (const Capabilities& caps : {Modern(), Capabilities::FromVersion("18.16.1")}) {
      std::string block;
      EncodeSpanBlock(in, caps, &block);
      EXPECT_EQ(block.find("LowCardinality(String)") != std::string::npos, caps.low_cardinality);
      SpanBatch out;
      Status st = DecodeSpanBlocks(block, &out);
      ASSERT_TRUE(st.ok()) << distinct << ": " << st.message();
      ASSERT_EQ(out.span_count(), in.span_count());
      std::string why;
      EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(out, &why)) << distinct << ": " << why;
    }
  }
}

TEST(UserFields, KeysOutsideTheWellKnownNamespacesAreUserFields) {
  const UserFields& d = UserFields::Default();
  EXPECT_FALSE(d.IsUserField("http.request.method"));
  EXPECT_FALSE(d.IsUserField("http"));
  EXPECT_FALSE(d.IsUserField("k8s.pod.name"));
  EXPECT_TRUE(d.IsUserField("httpx.method"));
  EXPECT_TRUE(d.IsUserField("app.channel"));
  EXPECT_TRUE(d.IsUserField("order_id"));
  UserFields custom({"app.internal", "db"});
  EXPECT_FALSE(custom.IsUserField("app.internal.flag"));
  EXPECT_TRUE(custom.IsUserField("app.channel"));
  EXPECT_TRUE(custom.IsUserField("http.request.method"));
  EXPECT_FALSE(custom.IsUserField("db.system"));
}

// Each span's user fields as one JSON object: its own first, then its
// resource's; each value typed as JSON can say it (arrays and maps as their
// JSON text, bytes as base64, non-finite doubles as strings).
TEST(UserFields, JsonOfASpanAndItsResource) {
  SpanBatch b = testdata::SampleBatch(2);
  UserFieldsJson uf(UserFields::Default());
  const std::string span_part =
      R"("ratio":0.25,"cached":false,"blob":"AP8B","list":"[1,2,3]","map":"{\"k\":\"v\"}",)"
      R"("nothing":null)";
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    const std::string_view res_service = b.Str(b.resources.service_name[b.spans.resource[i]]);
    const std::string want = res_service == "db" ? "{" + span_part + R"(,"tags":"[\"a\",1,true]"})"
                                                 : "{" + span_part + "}";
    EXPECT_EQ(uf.Of(b, i), want) << i;
  }
  // Nothing user-defined: an empty object. (The filter must outlive the writer.)
  std::vector<std::string> known = UserFields::DefaultWellKnown();
  known.insert(known.end(), {"ratio", "cached", "blob", "list", "map", "nothing", "tags"});
  const UserFields all_known(known);
  UserFieldsJson none(all_known);
  EXPECT_EQ(none.Of(b, 0), std::string_view("{}"));
  SpanBatch inf = testdata::SampleBatch(1);
  inf.span_attrs.value[inf.spans.attrs[0].begin + 2] = inf.AddString("-Infinity");
  UserFieldsJson uf2(UserFields::Default());
  EXPECT_NE(std::string(uf2.Of(inf, 0)).find(R"("ratio":"-Infinity")"), std::string::npos);
}

// user_fields goes as a Map (schema 13) or the JSON type's own (flattened)
// columns where the engine has the JSON type, as JSON text elsewhere; each
// decodes back, the values the arrays leave to it included.
TEST(SpanBlock, UserFieldsAsMapJsonColumnsOrText) {
  SpanBatch in = testdata::SampleBatch(2);
  const std::string map = std::string("\x0buser_fields") +
                          static_cast<char>(kUserFieldsMapWireType.size()) +
                          std::string(kUserFieldsMapWireType);
  for (const auto& [caps, as_map] : {std::pair{Modern(), true}, std::pair{Modern(), false},
                                     std::pair{Capabilities::FromVersion("24.8.1"), true}}) {
    std::string block;
    EncodeSpanBlock(in, caps, &block, nullptr, UserFields::Default(), true, true, true, as_map);
    const bool json = block.find(std::string("\x0buser_fields\x04JSON", 17)) != std::string::npos;
    EXPECT_EQ(json, caps.json_type && !as_map);
    EXPECT_EQ(block.find(map) != std::string::npos, caps.json_type && as_map);
    if (!caps.json_type) {
      EXPECT_NE(block.find(R"("ratio":0.25)"), std::string::npos);
    } else if (as_map) {
      // The value's text, once: the arrays keep its key and marked type.
      EXPECT_NE(block.find(std::string("\x04") + "0.25"), std::string::npos);
    }
    SpanBatch out;
    Status st = DecodeSpanBlocks(block, &out);
    ASSERT_TRUE(st.ok()) << st.message();
    std::string why;
    EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(out, &why)) << why;
  }
}

// Span attributes of the types the JSON type gives back exactly (string,
// int, double, bool) keep their value in user_fields only: the arrays keep
// the key and the type, marked, with an empty value. Decoding puts the value
// back, with its type, in its place.
TEST(SpanBlock, UserFieldValuesAreStoredOnceAndComeBackTyped) {
  SpanBatch in;
  const uint32_t r = in.AddResource();
  SpanBatch::AddAttr(in.resource_attrs, in.AddString("service.name"), ValueType::kString,
                     in.AddString("shop"));
  SpanBatch::AddAttr(in.resource_attrs, in.AddString("app.tier"), ValueType::kString,
                     in.AddString("gold"));
  in.resources.attrs[r] = {0, 2};
  in.ResolveServiceName(r);
  const uint32_t sc = in.AddScope();
  const uint32_t sp = in.AddSpan(r, sc);
  in.spans.trace_id[sp] = testdata::MakeTraceId(1);
  in.spans.span_id[sp] = testdata::MakeSpanId(1);
  in.spans.start_ns[sp] = 1700000000000000000ull;
  in.spans.end_ns[sp] = in.spans.start_ns[sp] + 5;
  struct A {
    const char* key;
    ValueType type;
    std::string value;
    bool once;  // value in user_fields only
  };
  const std::vector<A> attrs = {
      {"http.request.method", ValueType::kString, "GET", false},  // well-known
      {"app.user_id", ValueType::kString, "user-8c1f0e2a77", true},
      {"app.order_id", ValueType::kInt, "-9223372036854775808", true},
      {"app.price", ValueType::kDouble, "19.99", true},
      {"app.tiny", ValueType::kDouble, "5e-324", true},
      {"app.neg_zero", ValueType::kDouble, "-0", true},
      {"app.flag", ValueType::kBool, "true", true},
      {"app.tier", ValueType::kString, "platinum", true},  // the resource has it too
      {"app.empty", ValueType::kString, "", true},
      {"app.bin", ValueType::kString, std::string("\x00\xff\xfe", 3), true},
      // Not given back exactly by the JSON type: stay in the arrays.
      {"app.bytes", ValueType::kBytes, std::string("\x01\x02", 2), false},
      {"app.list", ValueType::kArray, "[1,2]", false},
      {"app.map", ValueType::kKvList, "{\"a\":1}", false},
      {"app.nan", ValueType::kDouble, "NaN", false},
      {"app.long_form", ValueType::kDouble, "1.50", false},  // not the shortest text
      {"app.plus", ValueType::kInt, "+5", false},
      {"app.nothing", ValueType::kEmpty, "", false},
      // A key twice: the first's value goes to user_fields, the second stays.
      {"app.twice", ValueType::kInt, "1", true},
      {"app.twice", ValueType::kString, "second-value-of-twice", false},
  };
  for (const A& a : attrs) {
    SpanBatch::AddAttr(in.span_attrs, in.AddString(a.key), a.type, in.AddString(a.value));
  }
  in.spans.attrs[sp] = {0, static_cast<uint32_t>(in.span_attrs.size())};

  std::string block;
  EncodeSpanBlock(in, Modern(), &block);
  // A value stored once is in the block once (user_fields), a value kept
  // in the arrays twice (arrays and user_fields) or once (not a user field).
  auto occurrences = [&](std::string_view v) {
    size_t n = 0;
    for (size_t at = block.find(v); at != std::string::npos; at = block.find(v, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(occurrences("user-8c1f0e2a77"), 1u);
  EXPECT_EQ(occurrences("platinum"), 1u);
  EXPECT_EQ(occurrences("second-value-of-twice"), 1u);  // the second of a key: arrays only
  EXPECT_EQ(occurrences("GET"), 1u);

  SpanBatch out;
  Status st = DecodeSpanBlocks(block, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  std::string why;
  EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(out, &why)) << why;
  ASSERT_EQ(out.span_count(), 1u);
  const Range got = out.spans.attrs[0];
  ASSERT_EQ(got.size(), attrs.size());
  for (size_t k = 0; k < attrs.size(); ++k) {
    EXPECT_EQ(out.Str(out.span_attrs.key[got.begin + k]), attrs[k].key);
    EXPECT_EQ(out.span_attrs.type[got.begin + k], attrs[k].type) << attrs[k].key;
    EXPECT_EQ(out.Str(out.span_attrs.value[got.begin + k]), attrs[k].value) << attrs[k].key;
  }

  // Schema 4's encoding (every value in the arrays too) decodes the same.
  std::vector<SpanRow> rows = {{&in, 0, ResourceIds(in)[0]}};
  std::string both;
  EncodeSpanRows(rows, Modern(), &both, UserFields::Default(), UserFieldValues::kInArrays);
  size_t twice = 0;
  for (size_t at = both.find("user-8c1f0e2a77"); at != std::string::npos;
       at = both.find("user-8c1f0e2a77", at + 1)) {
    ++twice;
  }
  EXPECT_EQ(twice, 2u);
  SpanBatch old;
  st = DecodeSpanBlocks(both, &old);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(old, &why)) << why;
}

// One span attribute as a test writes it.
struct A {
  const char* key;
  ValueType type;
  const char* value;
};

// One trace of shop's, a span per row with that row's attributes.
SpanBatch TraceOfRows(const std::vector<std::vector<A>>& rows) {
  SpanBatch in;
  const uint32_t r = in.AddResource();
  SpanBatch::AddAttr(in.resource_attrs, in.AddString("service.name"), ValueType::kString,
                     in.AddString("shop"));
  in.resources.attrs[r] = {0, 1};
  in.ResolveServiceName(r);
  const uint32_t sc = in.AddScope();
  for (size_t k = 0; k < rows.size(); ++k) {
    const uint32_t sp = in.AddSpan(r, sc);
    in.spans.trace_id[sp] = testdata::MakeTraceId(1);
    in.spans.span_id[sp] = testdata::MakeSpanId(static_cast<uint8_t>(k + 1));
    in.spans.start_ns[sp] = 1700000000000000000ull + k;
    in.spans.end_ns[sp] = in.spans.start_ns[sp] + 5;
    const auto first = static_cast<uint32_t>(in.span_attrs.size());
    for (const A& a : rows[k]) {
      SpanBatch::AddAttr(in.span_attrs, in.AddString(a.key), a.type, in.AddString(a.value));
    }
    in.spans.attrs[sp] = {first, static_cast<uint32_t>(in.span_attrs.size())};
  }
  return in;
}

// Rows of a block repeat their neighbours' keys and values (a trace's
// spans), and the encoder reuses what it found for the row before (a key's
// dictionary index by its place, a number's parse by its path). Every row
// still comes back as it went in: keys repeated, moved, fewer and more, the
// same text as another type, numbers the JSON type does not give back
// exactly, a key twice, no attributes; in both encodings.
TEST(SpanBlock, RowsRepeatingTheirNeighboursKeysAndValuesRoundTrip) {
  const ValueType kI = ValueType::kInt;
  const ValueType kD = ValueType::kDouble;
  const ValueType kS = ValueType::kString;
  const std::vector<std::vector<A>> rows = {
      {{"app.n", kI, "42"}, {"app.d", kD, "19.99"}, {"http.route", kS, "/a"}},
      {{"app.n", kI, "42"}, {"app.d", kD, "19.99"}, {"http.route", kS, "/a"}},
      {{"app.d", kD, "19.99"}, {"app.n", kI, "42"}},
      {{"app.n", kS, "42"}, {"app.d", kD, "1.50"}, {"http.route", kS, "/b"}, {"app.x", kI, "+5"}},
      {{"app.n", kI, "42"}, {"app.d", kD, "1.50"}, {"http.route", kS, "/b"}, {"app.x", kI, "+5"}},
      {{"app.n", kD, "NaN"}, {"app.d", kD, "NaN"}},
      {{"app.n", kD, "NaN"}, {"app.d", kI, "7"}},
      {{"app.n", kI, "42"}, {"app.d", kI, "7"}, {"app.n", kI, "43"}},
      {},
      {{"app.n", kI, "-9223372036854775808"}, {"app.d", kD, "7"}},
      {{"app.n", kI, "-9223372036854775808"}, {"app.d", kD, "7"}},
  };
  const SpanBatch in = TraceOfRows(rows);
  std::vector<SpanRow> order;
  for (uint32_t i = 0; i < in.span_count(); ++i) order.push_back({&in, i, ResourceIds(in)[0]});
  for (const UserFieldValues values : {UserFieldValues::kMarked, UserFieldValues::kInArrays}) {
    std::string block;
    EncodeSpanRows(order, Modern(), &block, UserFields::Default(), values);
    SpanBatch out;
    const Status st = DecodeSpanBlocks(block, &out);
    ASSERT_TRUE(st.ok()) << st.message();
    std::string why;
    EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(out, &why)) << why;
    ASSERT_EQ(out.span_count(), rows.size());
    for (size_t k = 0; k < rows.size(); ++k) {
      const Range got = out.spans.attrs[k];
      ASSERT_EQ(got.size(), rows[k].size()) << k;
      for (size_t j = 0; j < rows[k].size(); ++j) {
        const A& a = rows[k][j];
        EXPECT_EQ(out.Str(out.span_attrs.key[got.begin + j]), a.key) << k << " " << j;
        EXPECT_EQ(out.span_attrs.type[got.begin + j], a.type) << k << " " << a.key;
        EXPECT_EQ(out.Str(out.span_attrs.value[got.begin + j]), a.value) << k << " " << a.key;
      }
    }
  }
}

// A marked attribute whose value user_fields lacks is an error, not an
// attribute that silently comes back empty.
TEST(SpanBlock, MarkedValueMissingFromUserFieldsIsAnError) {
  SpanBatch in = testdata::SampleBatch(1);
  std::string block;
  EncodeSpanBlock(in, Modern(), &block);
  // The path "ratio" renamed in the block's user_fields ("ratio" is a
  // marked double): the decoder finds no value for it.
  const std::string path("\x05ratio", 6);
  const size_t at = block.rfind(path);
  ASSERT_NE(at, std::string::npos);
  block[at + 1] = 'R';
  SpanBatch out;
  Status st = DecodeSpanBlocks(block, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ratio"), std::string::npos) << st.message();
}

TEST(SpanBlock, EmptyBatchIsAnEmptyBlock) {
  SpanBatch in;
  std::string block;
  EncodeSpanBlock(in, Modern(), &block);
  SpanBatch out;
  ASSERT_TRUE(DecodeSpanBlocks(block, &out).ok());
  EXPECT_EQ(out.span_count(), 0u);
}

TEST(SpanBlock, TruncatedBlockIsAnErrorNotACrash) {
  SpanBatch in = testdata::SampleBatch(1);
  std::string block;
  EncodeSpanBlock(in, Modern(), &block);
  for (size_t n = 1; n < block.size(); n += 7) {
    SpanBatch out;
    EXPECT_FALSE(DecodeSpanBlocks(std::string_view(block).substr(0, n), &out).ok()) << n;
  }
}

TEST(SpanBlock, RowsFromSeveralBatchesInTableKeyOrder) {
  // Two batches; the second's spans start an hour earlier.
  const uint64_t t0 = 1700000000000000000ull;
  SpanBatch late = testdata::SampleBatch(2, t0 + 3600000000000ull);
  SpanBatch early = testdata::SampleBatch(2, t0);
  const auto late_ids = ResourceIds(late);
  const auto early_ids = ResourceIds(early);
  std::vector<SpanRow> rows;
  for (uint32_t i = 0; i < late.span_count(); ++i)
    rows.push_back({&late, i, late_ids[late.spans.resource[i]]});
  for (uint32_t i = 0; i < early.span_count(); ++i)
    rows.push_back({&early, i, early_ids[early.spans.resource[i]]});
  std::reverse(rows.begin(), rows.end());
  SortByTableKey(&rows);
  for (size_t k = 1; k < rows.size(); ++k) {
    const auto& a = rows[k - 1];
    const auto& b = rows[k];
    const uint64_t ha = a.batch->spans.start_ns[a.index] / 1000000000ull;
    const uint64_t hb = b.batch->spans.start_ns[b.index] / 1000000000ull;
    ASSERT_LE(ha, hb) << k;
    if (ha == hb) {
      EXPECT_LE(std::memcmp(a.batch->spans.trace_id[a.index].data(),
                            b.batch->spans.trace_id[b.index].data(), 16),
                0)
          << k;
    }
  }
  EXPECT_EQ(rows.front().batch, &early);
  EXPECT_EQ(rows.back().batch, &late);
  // Encoded in that order, they decode in that order.
  std::string block;
  EncodeSpanRows(rows, Modern(), &block);
  SpanBatch out;
  ASSERT_TRUE(DecodeSpanBlocks(block, &out).ok());
  ASSERT_EQ(out.span_count(), rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(out.spans.span_id[k], rows[k].batch->spans.span_id[rows[k].index]) << k;
    EXPECT_EQ(out.spans.start_ns[k], rows[k].batch->spans.start_ns[rows[k].index]) << k;
  }
}

// The start second comes before the trace id (schema 9's key), and the
// hour key of schema 8 the other way round within an hour.
TEST(SpanBlock, SortByTableKeyPutsTheSecondBeforeTheTraceId) {
  SpanBatch b = testdata::SampleBatch(1);
  ASSERT_GE(b.span_count(), 2u);
  const uint64_t t = 1700000000000000000ull;  // a whole hour: both spans in it
  b.spans.start_ns[0] = t + 1000000000ull;    // a second later, the smaller id
  b.spans.start_ns[1] = t + 999999999ull;     // the second before, the greater id
  b.spans.trace_id[0] = testdata::MakeTraceId(1);
  b.spans.trace_id[1] = testdata::MakeTraceId(2);
  std::vector<SpanRow> rows = {{&b, 0, 0}, {&b, 1, 0}};
  SortByTableKey(&rows);
  EXPECT_EQ(rows[0].index, 1u);
  EXPECT_EQ(rows[1].index, 0u);
  SortByTimeTraceStart(&rows, 3600000000000ull);
  EXPECT_EQ(rows[0].index, 0u);
  EXPECT_EQ(rows[1].index, 1u);
}

// Rows with equal keys (second, trace id, start) keep their order; trace ids
// order as their bytes do (the first byte most significant).
TEST(SpanBlock, SortByTableKeyIsStableAndOrdersIdsByteWise) {
  SpanBatch b = testdata::SampleBatch(1);
  ASSERT_GE(b.span_count(), 3u);
  const uint64_t t = b.spans.start_ns[0];
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    b.spans.start_ns[i] = t;
    b.spans.trace_id[i] = testdata::MakeTraceId(1);
  }
  b.spans.trace_id[0][0] = 0x80;  // greater in its first byte, smaller in its last
  b.spans.trace_id[0][15] = 0x00;
  b.spans.trace_id[1][15] = 0xff;
  // Every span twice, the copies told apart by resource_id (0, then 1).
  std::vector<SpanRow> rows;
  for (uint64_t copy = 0; copy < 2; ++copy) {
    for (uint32_t i = 0; i < b.span_count(); ++i) rows.push_back({&b, i, copy});
  }
  SortByTableKey(&rows);
  std::vector<std::pair<uint32_t, uint64_t>> got;
  for (const SpanRow& r : rows) got.emplace_back(r.index, r.resource_id);
  std::vector<std::pair<uint32_t, uint64_t>> want;
  for (uint64_t copy = 0; copy < 2; ++copy) {
    for (uint32_t i = 2; i < b.span_count(); ++i) want.emplace_back(i, copy);
  }
  want.insert(want.end(), {{1, 0}, {1, 1}, {0, 0}, {0, 1}});
  EXPECT_EQ(got, want);
}

TEST(Schema, WireTypesFollowCapabilities) {
  auto old = Capabilities::FromVersion("18.16.1");
  EXPECT_FALSE(old.datetime64);
  EXPECT_FALSE(old.low_cardinality);
  EXPECT_EQ(TableType(Logical::kTimeNs, old), "UInt64");
  EXPECT_EQ(TableType(Logical::kKeyArray2, old), "Array(Array(String))");
  auto cur = Modern();
  EXPECT_EQ(TableType(Logical::kTimeNs, cur), "DateTime64(9)");
  EXPECT_EQ(TableType(Logical::kKeyArray, cur), "Array(LowCardinality(String))");
  EXPECT_EQ(WireType(Logical::kKeyArray, cur), "Array(String)");
  for (const auto& sql : SchemaDdl(old)) {
    EXPECT_EQ(sql.find("LowCardinality"), std::string::npos) << sql;
    EXPECT_EQ(sql.find("DateTime64"), std::string::npos) << sql;
    EXPECT_EQ(sql.find("SimpleAggregateFunction"), std::string::npos) << sql;
  }
}

TEST(Schema, CodecsOnlyWhereTheServerHasThem) {
  for (const auto& sql : SchemaDdl(Capabilities::FromVersion("19.16.3"))) {
    EXPECT_EQ(sql.find("CODEC"), std::string::npos) << sql;
  }
  const std::vector<std::string> ddl = SchemaDdl(Modern());
  std::string all;
  for (const auto& sql : ddl) all += sql + "\n";
  EXPECT_NE(all.find("duration_ns UInt64 CODEC(T64, Default)"), std::string::npos) << all;
  EXPECT_NE(all.find("attr_values Array(LowCardinality(String)) CODEC(ZSTD(3))"), std::string::npos)
      << all;
  EXPECT_NE(all.find("end_s SimpleAggregateFunction(max, UInt32) CODEC(T64, Default)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("trace_id8 FixedString(8) CODEC(Default)"), std::string::npos) << all;
  EXPECT_NE(all.find("user_fields Map(LowCardinality(String), LowCardinality(String)) "
                     "CODEC(ZSTD(6))"),
            std::string::npos)
      << all;
  // Schema 12's layout: the JSON type, ZSTD(3).
  SchemaOptions json;
  json.layout = Schema12Layout();
  std::string json_ddl;
  for (const auto& sql : SchemaDdl(Modern(), json)) json_ddl += sql + "\n";
  EXPECT_NE(json_ddl.find("user_fields JSON CODEC(ZSTD(3))"), std::string::npos) << json_ddl;
  EXPECT_NE(all.find("index_granularity = 4096, index_granularity_bytes = 5242880, "
                     "allow_suspicious_low_cardinality_types = 1"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("resource_id LowCardinality(UInt64) CODEC(ZSTD(3))"), std::string::npos)
      << all;
  EXPECT_NE(all.find("attr_keys Array(LowCardinality(String)) CODEC(ZSTD(6))"), std::string::npos)
      << all;
  // Schema 5's layout, as its upgrade test and the benchmark build it.
  SchemaOptions v5;
  v5.layout = Schema5Layout();
  std::string five;
  for (const auto& sql : SchemaDdl(Modern(), v5)) five += sql + "\n";
  EXPECT_NE(five.find("index_granularity = 32768, index_granularity_bytes = 41943040, "
                      "merge_max_block_size = 32768"),
            std::string::npos)
      << five;
  EXPECT_NE(five.find("resource_id UInt64 CODEC(Default)"), std::string::npos) << five;
  EXPECT_NE(five.find("parent_span_id FixedString(8) CODEC(Default)"), std::string::npos) << five;
  EXPECT_NE(five.find("attr_keys Array(LowCardinality(String)) CODEC(ZSTD(3))"), std::string::npos)
      << five;
  EXPECT_EQ(five.find("allow_suspicious"), std::string::npos) << five;
  // Schema 4's layout, as its upgrade test and the benchmark build it.
  SchemaOptions v4;
  v4.layout = Schema4Layout();
  std::string old;
  std::string old_spans;
  for (const auto& sql : SchemaDdl(Modern(), v4)) {
    old += sql + "\n";
    if (sql.find(".spans (") != std::string::npos) old_spans = sql;
  }
  EXPECT_NE(old.find("ORDER BY (toStartOfHour(timestamp), trace_id) SETTINGS"), std::string::npos)
      << old;
  EXPECT_NE(old.find("end_ns SimpleAggregateFunction(max, UInt64) CODEC(T64, Default)"),
            std::string::npos)
      << old;
  EXPECT_NE(old.find("user_fields JSON CODEC(Default)"), std::string::npos) << old;
  // The spans table's granules the engine's default (red_service_1m, new
  // in schema 7, has its own).
  EXPECT_EQ(old_spans.find("index_granularity"), std::string::npos) << old_spans;
  EXPECT_NE(old.find("ORDER BY (service_name, kind, minute) TTL minute + INTERVAL 7 DAY SETTINGS "
                     "index_granularity = 256"),
            std::string::npos)
      << old;
  EXPECT_NE(old.find("attr_keys Array(LowCardinality(String)) CODEC(ZSTD(3))"), std::string::npos)
      << old;
  // Servers with codecs but before the Default codec: ZSTD(1) where it would be.
  all.clear();
  for (const auto& sql : SchemaDdl(Capabilities::FromVersion("20.8.2"))) all += sql + "\n";
  EXPECT_NE(all.find("duration_ns UInt64 CODEC(T64, ZSTD(1))"), std::string::npos) << all;
  EXPECT_NE(all.find("trace_id FixedString(16) CODEC(ZSTD(1))"), std::string::npos) << all;
  EXPECT_EQ(all.find("Default"), std::string::npos) << all;
  // ... and before LowCardinality(UInt64) is taken: resource_id stays UInt64.
  EXPECT_NE(all.find("resource_id UInt64 CODEC(ZSTD(3))"), std::string::npos) << all;
  EXPECT_EQ(all.find("allow_suspicious"), std::string::npos) << all;
  EXPECT_NE(all.find("ORDER BY (timestamp, trace_id, start_time)"), std::string::npos);
  // The master list gives every stored column a codec.
  for (const auto& c : SpanColumns()) EXPECT_STRNE(c.codec, "") << c.name;
}

TEST(Schema, LayoutChangesCodecsTypesKeyAndSettings) {
  SchemaOptions o;
  o.layout.codec = [](const CodecQuery& q) {
    if (q.table == "spans" && q.column == "span_ids") return std::string("NONE");
    return q.table == "trace_index" ? std::string("ZSTD(3)") : std::string();
  };
  o.layout.low_cardinality_values = false;
  o.layout.low_cardinality_keys = false;
  o.layout.spans_order_by = "(service_name, toStartOfHour(timestamp), trace_id)";
  o.layout.low_cardinality_resource_id = false;
  o.layout.index_granularity = 16384;
  o.layout.column_statistics = false;
  o.layout.table_settings = "merge_with_ttl_timeout = 3600";
  o.layout.min_bytes_for_wide_part = 1 << 20;
  std::string all;
  for (const auto& sql : SchemaDdl(Modern(), o)) all += sql + "\n";
  EXPECT_NE(all.find("span_ids FixedString(16) CODEC(NONE)"), std::string::npos) << all;
  // The ids' aliases take no codec, whatever the layout says of them.
  EXPECT_NE(all.find("span_id FixedString(8) ALIAS toFixedString(substring(span_ids, 1, 8), 8),"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("duration_ns UInt64,"), std::string::npos) << all;
  EXPECT_NE(all.find("start_s SimpleAggregateFunction(min, UInt32) CODEC(ZSTD(3))"),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("LowCardinality"), std::string::npos) << all;
  EXPECT_NE(all.find("ORDER BY (service_name, toStartOfHour(timestamp), trace_id)"),
            std::string::npos);
  EXPECT_NE(all.find("SETTINGS index_granularity = 16384, "
                     "index_granularity_bytes = 20971520, merge_max_block_size = 16384, "
                     "min_bytes_for_wide_part = 1048576, merge_selector_base = 10, "
                     "prewarm_mark_cache = 1, "
                     "string_serialization_version = 'single_stream', "
                     "auto_statistics_types = '', merge_with_ttl_timeout = 3600"),
            std::string::npos)
      << all;
  EXPECT_NE(
      all.find("ORDER BY resource_id SETTINGS prewarm_mark_cache = 1, auto_statistics_types = '', "
               "merge_with_ttl_timeout = 3600"),
      std::string::npos)
      << all;
  // The marks a lookup reads (spans, trace_index, resources) are loaded ahead
  // of it, on servers that have the setting.
  size_t prewarmed = 0;
  for (size_t at = all.find("prewarm_mark_cache = 1"); at != std::string::npos;
       at = all.find("prewarm_mark_cache = 1", at + 1)) {
    ++prewarmed;
  }
  EXPECT_EQ(prewarmed, 3u) << all;
  for (const auto& sql : SchemaDdl(Capabilities::FromVersion("24.8.1"))) {
    EXPECT_EQ(sql.find("prewarm_mark_cache"), std::string::npos) << sql;
  }
  // The spans table's Strings in one stream each: where the server names
  // the setting's value so, and the layout asks for it.
  EXPECT_EQ(all.find("string_serialization_version"), all.rfind("string_serialization_version"))
      << all;
  for (const auto& sql : SchemaDdl(Capabilities::FromVersion("25.10.1"))) {
    EXPECT_EQ(sql.find("string_serialization_version"), std::string::npos) << sql;
  }
  SchemaOptions size_streams = o;
  size_streams.layout.single_stream_strings = false;
  for (const auto& sql : SchemaDdl(Modern(), size_streams)) {
    EXPECT_EQ(sql.find("string_serialization_version"), std::string::npos) << sql;
  }
  // Columns of small granules take 16 KiB blocks where columns have
  // settings of their own; the layout says which.
  EXPECT_NE(all.find("user_fields Map(String, String) SETTINGS (min_compress_block_size = 16384),"),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("span_ids FixedString(16) CODEC(NONE) SETTINGS"), std::string::npos) << all;
  for (const auto& sql : SchemaDdl(Capabilities::FromVersion("23.8.1"))) {
    EXPECT_EQ(sql.find("min_compress_block_size"), std::string::npos) << sql;
  }
  o.layout.small_block_columns = {};
  for (const auto& sql : SchemaDdl(Modern(), o)) {
    EXPECT_EQ(sql.find("min_compress_block_size"), std::string::npos) << sql;
  }
  // Statistics are turned off only where the server makes them by default,
  // and only unless the layout keeps them.
  for (const auto& sql : SchemaDdl(Capabilities::FromVersion("25.8.1"))) {
    EXPECT_EQ(sql.find("auto_statistics_types"), std::string::npos) << sql;
  }
  o.layout.column_statistics = true;
  for (const auto& sql : SchemaDdl(Modern(), o)) {
    EXPECT_EQ(sql.find("auto_statistics_types"), std::string::npos) << sql;
  }
}

TEST(Schema, ColumnListIsInEnumOrder) {
  // Schema 7's read columns are every column but extras, span_ids and the
  // attribute columns, in enum order.
  const auto& read = ReadColumns(false);
  ASSERT_EQ(read.size(), static_cast<size_t>(Col::kCount) - 2 - kAttrColumnCount);
  for (size_t i = 0; i < read.size(); ++i) EXPECT_EQ(static_cast<size_t>(read[i].id), i);
  // Schema 8's: the same less the 21 rare ones, plus extras.
  const auto& read8 = ReadColumns();
  ASSERT_EQ(read8.size(), read.size() - 21 + 1);
  EXPECT_EQ(read8.back().id, Col::kExtras);
  const auto& rare = RareColumns();
  ASSERT_EQ(rare.size(), 21u);
  EXPECT_EQ(rare.front().id, Col::kScopeAttrKeys);
  EXPECT_EQ(rare.back().id, Col::kDroppedLinks);
  for (bool extras : {false, true}) {
    // The stored columns are the read ones less the resource's own; with
    // span_ids (schema 11), less the two ids it holds, plus it, last.
    const auto& stored10 = SpanColumns(extras, false);
    EXPECT_EQ(stored10.size(), ReadColumns(extras).size() - 5);
    const auto& stored = SpanColumns(extras);
    EXPECT_EQ(stored.size(), stored10.size() - 1);
    EXPECT_EQ(stored.back().id, Col::kSpanIds);
    for (const auto* cols : {&stored10, &stored}) {
      for (size_t i = 1; i < cols->size(); ++i) EXPECT_LT((*cols)[i - 1].id, (*cols)[i].id);
      for (const auto& c : *cols) {
        EXPECT_EQ(std::string(c.name).rfind("resource_attr", 0), std::string::npos) << c.name;
      }
    }
    for (const auto& c : stored) {
      EXPECT_NE(c.id, Col::kSpanId);
      EXPECT_NE(c.id, Col::kParentSpanId);
    }
    // Schema 12's: the attribute columns last, each named as AttrColumnKeys
    // says; read back too.
    const auto& stored12 = SpanColumns(extras, true, true);
    ASSERT_EQ(stored12.size(), stored.size() + kAttrColumnCount);
    ASSERT_EQ(ReadColumns(extras, true).size(), ReadColumns(extras).size() + kAttrColumnCount);
    for (size_t k = 0; k < kAttrColumnCount; ++k) {
      const ColumnSpec& c = stored12[stored.size() + k];
      EXPECT_EQ(c.id, AttrColumnKeys()[k].id);
      EXPECT_EQ(c.name, AttrColumnKeys()[k].column);
      EXPECT_EQ(AttrColumnOf(AttrColumnKeys()[k].key), static_cast<int>(k));
    }
  }
  EXPECT_EQ(AttrColumnOf("network.peer"), -1);
  EXPECT_EQ(AttrColumnOf("db.statement.x"), -1);
}

// The attribute columns (schema 12): a span's value of each of their keys
// goes there, its attr_types entry marked and its attr_values entry empty;
// a key twice keeps its second value in the arrays; any value type; every
// span comes back as it went in. Without the columns (older engines, older
// layouts) nothing is marked.
TEST(SpanBlock, AttributeColumnValuesRoundTripMarked) {
  const std::vector<std::vector<A>> rows = {
      {{"http.route", ValueType::kString, "/a"},
       {"network.peer.address", ValueType::kString, "10.1.2.3"},
       {"network.peer.port", ValueType::kInt, "51234"},
       {"user_agent.original", ValueType::kString, "Mozilla/5.0 (X11; Linux x86_64)"}},
      {{"db.statement", ValueType::kString, "SELECT * FROM carts WHERE id = 17"},
       {"db.statement", ValueType::kString, "the second, kept in the arrays"},
       {"app.user_id", ValueType::kString, "u-1"}},
      {{"network.peer.port", ValueType::kString, "not a number"},
       {"user_agent.original", ValueType::kEmpty, ""}},
      {},
  };
  const SpanBatch in = TraceOfRows(rows);
  std::vector<SpanRow> order;
  for (uint32_t i = 0; i < in.span_count(); ++i) order.push_back({&in, i, ResourceIds(in)[0]});
  for (const bool columns : {true, false}) {
    SCOPED_TRACE(columns);
    std::string block;
    EncodeSpanRows(order, Modern(), &block, UserFields::Default(), UserFieldValues::kMarked, true,
                   true, columns);
    EXPECT_EQ(block.find("attr_user_agent_original") != std::string::npos, columns);
    // The values are in the block once: in their columns or in attr_values.
    const std::string sql = "SELECT * FROM carts WHERE id = 17";
    const size_t at = block.find(sql);
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(block.find(sql, at + 1), std::string::npos);
    SpanBatch out;
    const Status st = DecodeSpanBlocks(block, &out);
    ASSERT_TRUE(st.ok()) << st.message();
    std::string why;
    EXPECT_TRUE(testdata::StoredPart(in).LogicallyEquals(out, &why)) << why;
    for (size_t k = 0; k < rows.size(); ++k) {
      const Range got = out.spans.attrs[k];
      ASSERT_EQ(got.size(), rows[k].size()) << k;
      for (size_t j = 0; j < rows[k].size(); ++j) {
        EXPECT_EQ(out.span_attrs.type[got.begin + j], rows[k][j].type) << k << " " << j;
        EXPECT_EQ(out.Str(out.span_attrs.value[got.begin + j]), rows[k][j].value) << k;
      }
    }
  }
  // An engine without LowCardinality or codecs (18.16) gets no such column.
  std::string old;
  EncodeSpanRows(order, Capabilities::FromVersion("18.16"), &old);
  EXPECT_EQ(old.find("attr_network_peer_address"), std::string::npos);
  // A block whose attribute column is not one the decoder knows is an error,
  // not spans whose marked values come back empty.
  std::string lacking;
  EncodeSpanRows(order, Modern(), &lacking);
  const std::string name = "attr_db_statement";
  const size_t at = lacking.find(name);
  ASSERT_NE(at, std::string::npos);
  lacking[at + 5] = 'x';  // renamed: an unknown column
  SpanBatch out;
  EXPECT_FALSE(DecodeSpanBlocks(lacking, &out).ok());
}

}  // namespace
}  // namespace spanhouse::storage
