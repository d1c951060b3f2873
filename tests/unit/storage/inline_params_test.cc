#include "storage/clickhouse/inline_params.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "testdata/hostile_strings.h"

namespace spanhouse::storage {
namespace {

std::string Inline(std::string_view sql, const std::vector<QueryParam>& params) {
  std::string out;
  const Status st = InlineParams(sql, params, &out);
  EXPECT_TRUE(st.ok()) << sql << ": " << st.message();
  return out;
}

// The literal one value becomes.
std::string Lit(std::string_view type, std::string_view value) {
  return Inline("{p:" + std::string(type) + "}", {{"p", std::string(value)}});
}

Status Refused(std::string_view sql, const std::vector<QueryParam>& params) {
  std::string out = "stale";
  const Status st = InlineParams(sql, params, &out);
  EXPECT_TRUE(out.empty()) << "a failure leaves no statement: " << out;
  return st;
}

bool Rejected(std::string_view type, std::string_view value) {
  const Status st = Refused("{p:" + std::string(type) + "}", {{"p", std::string(value)}});
  return st.code() == StatusCode::kInvalidArgument &&
         st.message().find("{p:" + std::string(type) + "}") != std::string::npos;
}

// A string literal read as the server's lexer reads it (18.16 and chDB
// alike): backslash escapes, \xHH.
bool Unquote(std::string_view lit, std::string* s) {
  if (lit.size() < 2 || lit.front() != '\'' || lit.back() != '\'') return false;
  s->clear();
  for (size_t i = 1; i + 1 < lit.size(); ++i) {
    const char c = lit[i];
    if (c == '\'') return false;  // an unescaped quote inside
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return false;  // raw control byte
    if (c != '\\') {
      s->push_back(c);
      continue;
    }
    const char e = lit[++i];
    if (e == 'x') {
      s->push_back(static_cast<char>(std::stoi(std::string(lit.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else if (e == '\\' || e == '\'') {
      s->push_back(e);
    } else {
      return false;
    }
  }
  return true;
}

TEST(InlineParams, StringsRoundTripEveryByte) {
  for (const std::string& s : testdata::HostileStrings()) {
    const std::string lit = Lit("String", s);
    std::string back;
    ASSERT_TRUE(Unquote(lit, &back)) << lit;
    EXPECT_EQ(back, s) << lit;
  }
  EXPECT_EQ(Lit("String", "it's"), "'it\\'s'");
  EXPECT_EQ(Lit("String", "a\\b"), "'a\\\\b'");
  EXPECT_EQ(Lit("String", std::string("\0\n\x7f", 3)), "'\\x00\\x0A\\x7F'");
  EXPECT_EQ(Lit("String", "\u00e9\xff"), "'\u00e9\xff'");  // bytes from 0x80 as they are
  EXPECT_EQ(Lit("String", "{x:String}"), "'{x:String}'");
}

TEST(InlineParams, LongRandomStringsRoundTrip) {
  std::mt19937 rng(7);
  std::string s(64 << 10, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  const std::string lit = Lit("String", s);
  std::string back;
  ASSERT_TRUE(Unquote(lit, &back));
  EXPECT_EQ(back, s);
}

TEST(InlineParams, AValueIsNeverReadAgainForPlaceholders) {
  EXPECT_EQ(Inline("SELECT {a:String}, {x:String}", {{"a", "{x:String}"}, {"x", "'"}}),
            "SELECT '{x:String}', '\\''");
}

TEST(InlineParams, Integers) {
  EXPECT_EQ(Lit("UInt8", "0"), "0");
  EXPECT_EQ(Lit("UInt8", "255"), "255");
  EXPECT_EQ(Lit("UInt16", "65535"), "65535");
  EXPECT_EQ(Lit("UInt32", "4294967295"), "4294967295");
  EXPECT_EQ(Lit("UInt64", "18446744073709551615"), "18446744073709551615");
  EXPECT_EQ(Lit("Int8", "-128"), "(-128)");
  EXPECT_EQ(Lit("Int16", "-32768"), "(-32768)");
  EXPECT_EQ(Lit("Int32", "2147483647"), "2147483647");
  EXPECT_EQ(Lit("Int64", "9223372036854775807"), "9223372036854775807");
  EXPECT_EQ(Lit("Int64", "-9223372036854775808"), "(-9223372036854775808)");
  EXPECT_EQ(Lit("Int64", "-0"), "0");
  // A negative value cannot start a -- comment.
  EXPECT_EQ(Inline("SELECT 1-{p:Int64}", {{"p", "-5"}}), "SELECT 1-(-5)");
  // As LIMIT takes it on 18.16: a bare number.
  EXPECT_EQ(Inline("LIMIT {limit:UInt32}", {{"limit", "20"}}), "LIMIT 20");
}

TEST(InlineParams, BadIntegersAreRejected) {
  for (const char* v : {"", "-", "256", "-1", "-0", "+1", "007", "00", " 1", "1 ", "1e3", "0x10",
                        "1.0", "12a", "1;DROP", "١"}) {
    EXPECT_TRUE(Rejected("UInt8", v)) << v;
  }
  EXPECT_TRUE(Rejected("UInt16", "65536"));
  EXPECT_TRUE(Rejected("UInt32", "4294967296"));
  EXPECT_TRUE(Rejected("UInt64", "18446744073709551616"));
  EXPECT_TRUE(Rejected("UInt64", "99999999999999999999999"));
  EXPECT_TRUE(Rejected("Int8", "128"));
  EXPECT_TRUE(Rejected("Int8", "-129"));
  EXPECT_TRUE(Rejected("Int32", "-2147483649"));
  EXPECT_TRUE(Rejected("Int64", "9223372036854775808"));
  EXPECT_TRUE(Rejected("Int64", "-9223372036854775809"));
  EXPECT_TRUE(Rejected("Int64", "--1"));
  EXPECT_TRUE(Rejected("Int64", "-00"));
  EXPECT_TRUE(Rejected("Int64", "1) OR (1"));
}

TEST(InlineParams, Float64) {
  EXPECT_EQ(Lit("Float64", "0.95"), "0.95");
  EXPECT_EQ(Lit("Float64", "1e-05"), "1e-05");
  EXPECT_EQ(Lit("Float64", "0.30000000000000004"), "0.30000000000000004");
  EXPECT_EQ(Lit("Float64", "100"), "100.0");  // a Float64, not a UInt8
  EXPECT_EQ(Lit("Float64", "1E5"), "1e+05");
  EXPECT_EQ(Lit("Float64", ".5"), "0.5");
  EXPECT_EQ(Lit("Float64", "0"), "0.0");
  EXPECT_EQ(Lit("Float64", "-0"), "(-0.0)");
  EXPECT_EQ(Lit("Float64", "-2.5"), "(-2.5)");
  EXPECT_EQ(Lit("Float64", "1.7976931348623157e308"), "1.7976931348623157e+308");
  EXPECT_EQ(Lit("Float64", "inf"), "inf");
  EXPECT_EQ(Lit("Float64", "Infinity"), "inf");
  EXPECT_EQ(Lit("Float64", "-inf"), "(-inf)");
  EXPECT_EQ(Lit("Float64", "nan"), "nan");
  EXPECT_EQ(Lit("Float64", "-nan"), "nan");
  // Subnormals by their bits (18.16 reads their text as 0).
  EXPECT_EQ(Lit("Float64", "5e-324"), "reinterpretAsFloat64(unhex('0100000000000000'))");
  EXPECT_EQ(Lit("Float64", "-5e-324"), "reinterpretAsFloat64(unhex('0100000000000080'))");
}

TEST(InlineParams, BadFloatsAreRejected) {
  for (const char* v : {"", "-", "+1", " 1", "1 ", "1e", "1e400", "1e-400", "0x1p3", "nan(1)",
                        "infx", "1.2.3", "1,5", "1;DROP", "e5", "--1"}) {
    EXPECT_TRUE(Rejected("Float64", v)) << v;
  }
}

TEST(InlineParams, Arrays) {
  EXPECT_EQ(Lit("Array(String)", "['a','b']"), "CAST(['a','b'] AS Array(String))");
  EXPECT_EQ(Lit("Array(String)", "[ 'a' ,\t'b' ]"), "CAST(['a','b'] AS Array(String))");
  EXPECT_EQ(Lit("Array(String)", "[]"), "CAST([] AS Array(String))");
  EXPECT_EQ(Lit("Array(String)", "[ ]"), "CAST([] AS Array(String))");
  EXPECT_EQ(Lit("Array(UInt64)", "[1,18446744073709551615]"),
            "CAST([1,18446744073709551615] AS Array(UInt64))");
  EXPECT_EQ(Lit("Array(UInt8)", "[0, 255]"), "CAST([0,255] AS Array(UInt8))");
  EXPECT_EQ(Lit("Array(UInt8)", "[]"), "CAST([] AS Array(UInt8))");
  EXPECT_EQ(Lit("Array(Int64)", "[-1,2]"), "CAST([-1,2] AS Array(Int64))");
  EXPECT_EQ(Lit("Array(Float64)", "[-0.5,1]"), "CAST([-0.5,1.0] AS Array(Float64))");
  // The elements' escapes are read and written anew.
  EXPECT_EQ(
      Lit("Array(String)", R"(['it\'s','a\\b','\x00\x7f','\n\t\0','\"','{x:String}'])"),
      R"(CAST(['it\'s','a\\b','\x00\x7F','\x0A\x09\x00','"','{x:String}'] AS Array(String)))");
  EXPECT_EQ(Lit("Array(String)", R"(['a''b','\e','\/',''''])"),
            R"(CAST(['a\'b','\x1B','/','\''] AS Array(String)))");
  // Raw bytes inside an element, any of them.
  std::string all = "['";
  for (int b = 1; b < 256; ++b) {
    if (b != '\'' && b != '\\') all.push_back(static_cast<char>(b));
  }
  all += "']";
  const std::string lit = Lit("Array(String)", all);
  const std::string inner = lit.substr(6, lit.size() - 6 - std::strlen("] AS Array(String))"));
  std::string back;
  ASSERT_TRUE(Unquote(inner, &back)) << inner;
  EXPECT_EQ("['" + back + "']", all);
}

TEST(InlineParams, BadArraysAreRejected) {
  for (const char* v :
       {"", "'a'", "[", "['a'", "['a',]", "[,'a']", "['a'] ", " ['a']", "['a']x", "['a' 'b']",
        "['a'''", "[a]", "[\"a\"]", "[NULL]", "[['a']]", "['a'];DROP", "['a\\']", "['\\x4']",
        "['\\x4g']", "['\\xzz']",
        // Escapes 18.16 and newer servers read differently.
        "['\\N']", "['\\q']", "['\\u0041']", "['\\X41']", "['\\{']", "['\\ ']", "['\\%']"}) {
    EXPECT_TRUE(Rejected("Array(String)", v)) << v;
  }
  for (const char* v : {"[256]", "[-1]", "['1']", "[1 2]", "[1,,2]", "[1,]", "[1)", "[1] ", "1",
                        "[1.0]", "[0x1]"}) {
    EXPECT_TRUE(Rejected("Array(UInt8)", v)) << v;
  }
}

TEST(InlineParams, PlaceholdersInQuotesAndCommentsAreLeftAlone) {
  const std::vector<QueryParam> p = {{"p", "v"}};
  EXPECT_EQ(Inline("SELECT '{p:String}', \"{p:String}\", `{p:String}`, {p:String}", p),
            "SELECT '{p:String}', \"{p:String}\", `{p:String}`, 'v'");
  EXPECT_EQ(Inline(R"(SELECT 'it\'s {p:String}', 'it''s {p:String}', {p:String})", p),
            R"(SELECT 'it\'s {p:String}', 'it''s {p:String}', 'v')");
  EXPECT_EQ(Inline(R"(SELECT '\\', {p:String})", p), R"(SELECT '\\', 'v')");
  EXPECT_EQ(Inline("SELECT format('{:02}', x), '{', '}', {p:String}", p),
            "SELECT format('{:02}', x), '{', '}', 'v'");
  EXPECT_EQ(Inline("SELECT 1 -- {p:String}\n, /* {p:String} */ {p:String}", p),
            "SELECT 1 -- {p:String}\n, /* {p:String} */ 'v'");
  EXPECT_EQ(Inline("SELECT '{p:String}", p), "SELECT '{p:String}");  // unterminated: as it is
  // Braces that are no placeholder.
  EXPECT_EQ(Inline("SELECT {}, {p}, {1:String}, { :String}, {p String}", p),
            "SELECT {}, {p}, {1:String}, { :String}, {p String}");
  EXPECT_EQ(Inline("no placeholders", {}), "no placeholders");
  EXPECT_EQ(Inline("", {}), "");
}

TEST(InlineParams, PlaceholderSyntax) {
  EXPECT_EQ(Inline("SELECT { p : Array( String ) }", {{"p", "['a']"}}),
            "SELECT CAST(['a'] AS Array(String))");
  // Repeated placeholders; parameters no placeholder names.
  EXPECT_EQ(Inline("{s:Int64} - {s:Int64}", {{"s", "3"}, {"unused", "x"}}), "3 - 3");
  // A literal never runs into its neighbours.
  EXPECT_EQ(Inline("SELECT 'a'{p:String}'b'", {{"p", "c"}}), "SELECT 'a' 'c' 'b'");
  EXPECT_EQ(Inline("SELECT x{p:UInt8}y, {p:UInt8}{p:UInt8}", {{"p", "5"}}), "SELECT x 5 y, 5 5");
  EXPECT_EQ(Inline("f({p:UInt8},{p:UInt8})", {{"p", "5"}}), "f(5,5)");
}

TEST(InlineParams, UnknownNamesAndTypesAreRejected) {
  Status st = Refused("SELECT {missing:String}", {{"p", "v"}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("{missing:String}"), std::string::npos) << st.message();
  for (const char* type : {"Nullable(String)", "Array(Array(String))", "Date", "Float32",
                           "FixedString(16)", "string", "Array(String", "Array()", ""}) {
    st = Refused("SELECT {p:" + std::string(type) + "}", {{"p", "1"}});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << type;
    EXPECT_NE(st.message().find("unsupported type"), std::string::npos) << st.message();
  }
  st = Refused("SELECT {p:String", {{"p", "v"}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  // One name, two values: which was meant is unknown.
  st = Refused("SELECT {p:String}", {{"p", "a"}, {"p", "b"}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Inline("SELECT {p:String}", {{"p", "a"}, {"p", "a"}}), "SELECT 'a'");
}

TEST(InlineParams, TheReadersStatements) {
  std::vector<QueryParam> params = {
      {"lo", "1700000000"}, {"hi", "1700003600"}, {"start_ns", "1"},       {"end_ns", "2"},
      {"service", "api's"}, {"limit", "20"},      {"ids", "['00ff','ab']"}};
  EXPECT_EQ(Inline("SELECT lower(hex(trace_id)) FROM db.spans WHERE timestamp >= "
                   "toDateTime({lo:UInt32}) AND service_name = {service:String} AND trace_id IN "
                   "(SELECT toFixedString(unhex(arrayJoin({ids:Array(String)})), 16)) "
                   "LIMIT {limit:UInt32}",
                   params),
            "SELECT lower(hex(trace_id)) FROM db.spans WHERE timestamp >= toDateTime(1700000000) "
            "AND service_name = 'api\\'s' AND trace_id IN (SELECT "
            "toFixedString(unhex(arrayJoin(CAST(['00ff','ab'] AS Array(String)))), 16)) LIMIT 20");
}

}  // namespace
}  // namespace spanhouse::storage
