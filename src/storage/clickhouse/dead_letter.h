// Blocks the engine refused for good (a permanent error: a type mismatch,
// a value it cannot parse) are not dropped: each is written to
// <data_dir>/dead-letter/ as the Native block that was inserted
// (<unix ns>-w<writer>-d<day>.native: readable with the file() table
// function or clickhouse-local; a block of another table than spans, such
// as sampled_spans, has "-<table>" before ".native"), and one line is
// appended to index.tsv:
//   unix_ns  file  writer  day  rows  error (tabs and newlines as spaces)
// Both are fsynced before the spans' records leave the durable queue.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace spanhouse::storage {

struct DeadLetterEntry {
  std::string table = "spans";  // the table the block was for
  std::string writer;
  uint32_t day = 0;
  uint64_t rows = 0;
  std::string error;
};

Status WriteDeadLetter(const std::string& dir, const DeadLetterEntry& entry,
                       std::span<const std::string> block_pieces);

}  // namespace spanhouse::storage
