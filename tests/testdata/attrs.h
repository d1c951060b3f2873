// An attribute list read back from a SpanBatch as (key, type, value text), so a
// test compares a whole list at once. Shared by the codec tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "model/span_batch.h"

namespace spanhouse::testdata {

struct Attr {
  std::string key;
  ValueType type;
  std::string value;
  bool operator==(const Attr&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const Attr& a) {
  return os << "{" << a.key << ", " << static_cast<int>(a.type) << ", '" << a.value << "'}";
}

// The attributes `r` of `c`; the range must lie inside the column.
inline std::vector<Attr> Attrs(const SpanBatch& b, const AttrColumns& c, Range r) {
  std::vector<Attr> out;
  EXPECT_LE(r.begin, r.end);
  EXPECT_LE(r.end, c.size());
  for (uint32_t i = r.begin; i < r.end && i < c.size(); ++i) {
    out.push_back({std::string(b.Str(c.key[i])), c.type[i], std::string(b.Str(c.value[i]))});
  }
  return out;
}

}  // namespace spanhouse::testdata
