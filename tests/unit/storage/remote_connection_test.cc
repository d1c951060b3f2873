// What RemoteConnection reads and writes without a server: the exception a
// server appends to an answer it had begun, in both servers' wordings, and
// the query string's encoding.
#include "storage/clickhouse/remote_connection.h"

#include <gtest/gtest.h>

#include <string>

namespace spanhouse::storage {
namespace {

TEST(TrailingException, FindsTheServersTextAfterTheRows) {
  EXPECT_EQ(TrailingException("1\t0\n2\t0\nCode: 395, e.displayText() = DB::Exception: Value "
                              "passed to 'throwIf' function is non zero, e.what() = "
                              "DB::Exception\n"),
            "Code: 395, e.displayText() = DB::Exception: Value passed to 'throwIf' function is "
            "non zero, e.what() = DB::Exception");
  EXPECT_EQ(TrailingException("1\nCode: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_"
                              "EXCEEDED) (version 24.3.1.1)\n"),
            "Code: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_EXCEEDED) (version "
            "24.3.1.1)");
  EXPECT_EQ(TrailingException("Code: 62. DB::Exception: Syntax error"),
            "Code: 62. DB::Exception: Syntax error");
}

TEST(TrailingException, RowsThatOnlyLookLikeOneAreRows) {
  EXPECT_EQ(TrailingException(""), "");
  EXPECT_EQ(TrailingException("1\n2\n3\n"), "");
  // Not at a line's start, no code, or no exception after it.
  EXPECT_EQ(TrailingException("note\tCode: 12. DB::Exception\n"), "");
  EXPECT_EQ(TrailingException("Code: x. DB::Exception: no\n"), "");
  EXPECT_EQ(TrailingException("Code: 12 was fine\n"), "");
}

TEST(UrlEncode, KeepsUnreservedAndEscapesTheRest) {
  EXPECT_EQ(UrlEncode("abc-XYZ_09.~"), "abc-XYZ_09.~");
  EXPECT_EQ(UrlEncode("a b&c=d/é\n"), "a%20b%26c%3Dd%2F%C3%A9%0A");
  EXPECT_EQ(UrlEncode(std::string("\0'", 2)), "%00%27");
}

}  // namespace
}  // namespace spanhouse::storage
