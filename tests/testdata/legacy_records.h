// Block records as older builds logged them (kSinkBlock: named; kBlock: not),
// for tests that a log written then still replays. `rec.key` is the embedded
// sink's 12-byte key, which those formats held in its place.
#pragma once

#include <string>

#include "pipeline/durable/records.h"

namespace spanhouse::testdata {

inline std::string LegacyBlockPayload(const pipeline::durable::BlockRecord& rec, bool named) {
  using pipeline::durable::PutLe;
  std::string out;
  if (named) {
    out.push_back(static_cast<char>(rec.sink.size()));
    out += rec.sink;
  }
  out += rec.key;
  PutLe(&out, rec.lsns.size(), 4);
  for (uint64_t l : rec.lsns) PutLe(&out, l, 8);
  if (rec.chunks != 1) PutLe(&out, rec.chunks, 4);
  return out;
}

}  // namespace spanhouse::testdata
