// Strings that break naive quoting: quotes, backslashes and escape-like
// text, NUL and other control bytes, braces and placeholder-like text, SQL
// comment starts, multi-byte and invalid UTF-8, and every byte value. Shared
// by the inline_params tests (unit and against real servers).
#pragma once

#include <string>
#include <vector>

namespace spanhouse::testdata {

inline std::vector<std::string> HostileStrings() {
  std::vector<std::string> v = {"",
                                "plain",
                                "it's",
                                "''",
                                "'",
                                "\\",
                                "\\'",
                                "a\\",
                                "\\x41",
                                "\\0",
                                "\\N",
                                std::string("nul\0byte", 8),
                                std::string(1, '\0'),
                                "tab\tnew\nline\rcr",
                                "\x01\x1f\x7f",
                                "{",
                                "}",
                                "{x:String}",
                                "'{x:String}'",
                                "-- comment",
                                "/*",
                                "'); DROP TABLE spans; --",
                                "\"`",
                                "\u00e9\u65e5\u672c\U0001F600",
                                "\x80\xff\xc3\x28\xed\xa0\x80\xf0\x28\x8c\x28"};
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  v.push_back(all);
  return v;
}

}  // namespace spanhouse::testdata
