// InlineParams against real servers: each value written into the SQL as a
// literal and run on Debian's clickhouse-server 18.16 (which has no query
// parameters) and on the embedded chDB; both must read exactly the value's
// bytes, the value chDB binds as a real query parameter.
#include "storage/clickhouse/inline_params.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "integration/clickhouse_server.h"
#include "integration/engine.h"
#include "testdata/hostile_strings.h"

namespace spanhouse::storage {
namespace {

std::string Hex(std::string_view s) {
  std::string out;
  for (const char c : s) out += fmt::format("{:02X}", static_cast<unsigned char>(c));
  return out;
}

// `s` as an element of an array parameter's text: quoted, with the
// engine's backslash escapes (\n, \t, \0 and \xHH alike).
std::string Quoted(std::string_view s) {
  std::string out = "'";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\0') {
      out += "\\0";
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "'";
}

class InlineParamsServers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ =
        std::make_unique<ClickHouseServer>((std::filesystem::temp_directory_path() /
                                            ("spanhouse-ch-inline-" + std::to_string(::getpid())))
                                               .string());
    if (server_->running()) old_ = server_->Connect();
  }
  static void TearDownTestSuite() {
    old_.reset();
    const std::string dir = server_->dir();
    server_.reset();
    std::filesystem::remove_all(dir);
  }
  void SetUp() override {
    ASSERT_TRUE(server_->running());
    ASSERT_NE(old_, nullptr);
  }

  // `sql` with `params` inlined, run on 18.16 and on chDB: each must answer
  // `want` (TSV).
  static void ExpectInlined(const std::string& sql, const std::vector<QueryParam>& params,
                            const std::string& want) {
    std::string inlined;
    const Status st = InlineParams(sql, params, &inlined);
    ASSERT_TRUE(st.ok()) << st.message();
    const std::string shown = inlined.substr(0, 300);
    QueryResult r;
    Status run = old_->Run(inlined, "TSV", &r, {});
    EXPECT_TRUE(run.ok()) << shown << ": " << run.message();
    EXPECT_EQ(r.data, want) << old_->version() << ": " << shown;
    r = {};
    run = Engine::conn->Run(inlined, "TSV", &r, {});
    EXPECT_TRUE(run.ok()) << shown << ": " << run.message();
    EXPECT_EQ(r.data, want) << "chDB: " << shown;
  }

  // `sql` run on chDB with `params` bound as query parameters.
  static std::string Bound(const std::string& sql, const std::vector<QueryParam>& params) {
    QueryResult r;
    const Status st = Engine::conn->Run(sql, "TSV", &r, params);
    EXPECT_TRUE(st.ok()) << sql << ": " << st.message();
    return r.data;
  }

  static inline std::unique_ptr<ClickHouseServer> server_;
  static inline std::unique_ptr<RemoteConnection> old_;
};

std::vector<std::string> Strings() {
  std::vector<std::string> v = testdata::HostileStrings();
  std::mt19937 rng(11);
  std::string random(64 << 10, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  v.push_back(random);
  return v;
}

TEST_F(InlineParamsServers, TheServerOlderThanQueryParametersIs18) {
  EXPECT_TRUE(old_->version().starts_with("18.")) << old_->version();
}

TEST_F(InlineParamsServers, StringsArriveByteForByte) {
  const std::string sql = "SELECT hex({s:String}), length({s:String})";
  for (const std::string& s : Strings()) {
    const std::string want = fmt::format("{}\t{}\n", Hex(s), s.size());
    ASSERT_EQ(Bound(sql, {{"s", s}}), want) << "chDB's own binding of " << Hex(s.substr(0, 40));
    ExpectInlined(sql, {{"s", s}}, want);
  }
}

TEST_F(InlineParamsServers, ArraysOfStringsArriveByteForByte) {
  const std::string sql =
      "SELECT arrayMap(x -> hex(x), {a:Array(String)}), length({a:Array(String)})";
  const std::vector<std::string> strings = testdata::HostileStrings();
  std::string text = "[";
  std::string want = "[";
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string sep = i == 0 ? "" : (i % 2 ? ", " : ",");
    text += sep + Quoted(strings[i]);
    want += (i == 0 ? "'" : ",'") + Hex(strings[i]) + "'";
    ExpectInlined(sql, {{"a", "[" + Quoted(strings[i]) + "]"}},
                  fmt::format("['{}']\t1\n", Hex(strings[i])));
  }
  text += "]";
  want += fmt::format("]\t{}\n", strings.size());
  ExpectInlined(sql, {{"a", text}}, want);
  // Empty: still an Array(String), as the reader's indexOf and arrayJoin need.
  ExpectInlined(
      "SELECT length({a:Array(String)}), toTypeName({a:Array(String)}), "
      "indexOf({a:Array(String)}, 'x'), (SELECT count() FROM (SELECT "
      "arrayJoin({a:Array(String)})))",
      {{"a", "[]"}}, "0\tArray(String)\t0\t0\n");
}

TEST_F(InlineParamsServers, IntegersArriveAsTheirValues) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"UInt8", "0"},
      {"UInt8", "255"},
      {"UInt16", "65535"},
      {"UInt32", "4294967295"},
      {"UInt64", "18446744073709551615"},
      {"Int8", "-128"},
      {"Int16", "-32768"},
      {"Int32", "-2147483648"},
      {"Int64", "9223372036854775807"},
      {"Int64", "-9223372036854775808"},
      {"Int64", "-1"},
      {"Int64", "-0"}};
  for (const auto& [type, value] : cases) {
    const std::string sql =
        fmt::format("SELECT {{n:{0}}}, 1-{{n:{0}}} = 1-to{0}('{1}')", type, value);
    const std::string want = Bound(sql, {{"n", value}});
    ASSERT_TRUE(want.ends_with("\t1\n")) << type << " " << value << ": " << want;
    ExpectInlined(sql, {{"n", value}}, want);
  }
  // Where 18.16 takes nothing but a number literal.
  ExpectInlined("SELECT number FROM system.numbers LIMIT {n:UInt32}", {{"n", "3"}}, "0\n1\n2\n");
  ExpectInlined("SELECT {a:Array(UInt64)}, {b:Array(UInt8)}, toTypeName({b:Array(UInt8)})",
                {{"a", "[1, 18446744073709551615]"}, {"b", "[]"}},
                "[1,18446744073709551615]\t[]\tArray(UInt8)\n");
}

// The little-endian bytes of `v` read as a double, as hex(reinterpretAsString(x))
// shows them (trailing zero bytes dropped).
std::string Float64Hex(const char* v) {
  double d = 0;
  EXPECT_EQ(std::from_chars(v, v + std::strlen(v), d).ec, std::errc()) << v;
  uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof(bits));
  std::string le;
  for (int i = 0; i < 8; ++i, bits >>= 8) le.push_back(static_cast<char>(bits & 0xFF));
  while (!le.empty() && le.back() == '\0') le.pop_back();
  return Hex(le);
}

TEST_F(InlineParamsServers, FloatsArriveBitForBit) {
  const std::string sql = "SELECT hex(reinterpretAsString({f:Float64})), toTypeName({f:Float64})";
  for (const char* v :
       {"0", "-0", "0.95", "1e-05", "100", "0.30000000000000004", "-2.5", "1.7976931348623157e308",
        "2.2250738585072014e-308", "inf", "-inf", "123456789012345678901234567890"}) {
    const std::string want = Float64Hex(v) + "\tFloat64\n";
    ASSERT_EQ(Bound(sql, {{"f", v}}), want) << v;
    ExpectInlined(sql, {{"f", v}}, want);
  }
  // Subnormals: 18.16 reads their text as 0 (and the engine its own bound
  // 5e-324 as 0 too); the inlined value is the text's double.
  for (const char* v : {"5e-324", "-5e-324", "1e-320", "2.2250738585072009e-308"}) {
    ExpectInlined(sql, {{"f", v}}, Float64Hex(v) + "\tFloat64\n");
  }
  ExpectInlined("SELECT isNaN({f:Float64})", {{"f", "nan"}}, "1\n");
  // An aggregate function's parameter, which 18.16 takes only as a literal.
  ExpectInlined("SELECT quantileExact({q:Float64})(number) FROM numbers(11)", {{"q", "0.5"}},
                "5\n");
  ExpectInlined("SELECT {a:Array(Float64)}", {{"a", "[0.5, -1, 1e-05]"}}, "[0.5,-1,0.00001]\n");
}

TEST_F(InlineParamsServers, PlaceholdersInsideQuotesStayText) {
  ExpectInlined("SELECT hex('{p:String}'), hex({p:String}) -- {p:String}\n", {{"p", "{p:String}'"}},
                Hex("{p:String}") + "\t" + Hex("{p:String}'") + "\n");
}

// The elements of an array parameter's text read as the servers read an
// array's text themselves (CAST of the text as a String to Array(String)).
TEST_F(InlineParamsServers, ArrayTextIsReadAsTheServersReadIt) {
  for (const std::string text :
       {R"(['\"', '\/', '\\', '\'', 'a''b', ''''])", R"(['\a\b\e\f\n\r\t\v\0'])",
        R"(['\x41\x7f\xFF\x00'])", "['\x01\n\t\x7f\xff', '{x:String}']", "[ 'a' ,'b' ]", "[]"}) {
    std::string want;
    std::string sql;
    ASSERT_TRUE(InlineParams("SELECT arrayMap(x -> hex(x), CAST({t:String} AS Array(String)))",
                             {{"t", text}}, &sql)
                    .ok());
    for (SqlConnection* c : std::initializer_list<SqlConnection*>{old_.get(), Engine::conn.get()}) {
      QueryResult r;
      const Status st = c->Run(sql, "TSV", &r, {});
      ASSERT_TRUE(st.ok()) << sql << ": " << st.message();
      if (want.empty()) want = r.data;
      EXPECT_EQ(r.data, want) << "18.16 and chDB differ on " << text;
    }
    ExpectInlined("SELECT arrayMap(x -> hex(x), {a:Array(String)})", {{"a", text}}, want);
  }
}

}  // namespace
}  // namespace spanhouse::storage
