#include "codec/json_writer.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace spanhouse::codec {
namespace {

TEST(JsonWriter, PutsCommasBetweenMembersAndElementsOnly) {
  std::string out;
  JsonWriter w(out);
  w.BeginObject();
  w.Key("a").Uint(1);
  w.Key("list").BeginArray();
  w.BeginObject().Key("x").Bool(true).EndObject();
  w.BeginObject().EndObject();
  w.BeginArray().EndArray();
  w.Null();
  w.EndArray();
  w.Key("empty").BeginObject().EndObject();
  w.Key("raw").Raw(R"({"k":[1,2]})");
  w.EndObject();
  EXPECT_EQ(out, R"({"a":1,"list":[{"x":true},{},[],null],"empty":{},"raw":{"k":[1,2]}})");
}

TEST(JsonWriter, QuotesKeysAndStringsItWasGiven) {
  std::string out;
  JsonWriter w(out);
  w.BeginObject().Key("say \"hi\"").String("a\\b\n").EndObject();
  EXPECT_EQ(out, R"({"say \"hi\"":"a\\b\n"})");
}

TEST(JsonWriter, WritesDoublesShortAndNonFiniteOnesAsStrings) {
  std::string out;
  JsonWriter w(out);
  w.BeginArray().Double(0.1).Double(1).Double(0.25).Double(
      std::numeric_limits<double>::quiet_NaN());
  w.EndArray();
  EXPECT_EQ(out, R"([0.1,1,0.25,"NaN"])");
}

}  // namespace
}  // namespace spanhouse::codec
