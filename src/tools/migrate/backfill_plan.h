// What `spanhouse backfill` plans and keeps: the time range cut into
// chunks of about equal span counts (from a histogram of start times), each
// read with its own search_after cursor by whichever worker takes it next,
// and the checkpoint file that holds every chunk's position, so that a
// killed backfill resumes each where it stopped (with any --parallel).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace spanhouse::migrate {

struct BackfillChunk {
  uint64_t start_us = 0;  // [start_us, end_us) of span start times
  uint64_t end_us = 0;
  uint64_t spans = 0;  // what the plan counted in it
  uint64_t read = 0;   // documents read so far (a page read again counts again)
  // The sort values (JSON array) of the last document of the last page
  // imported; "" before the first.
  std::string after;
  bool done = false;
};

struct BackfillCheckpoint {
  std::string index;  // the index pattern read
  uint64_t start_us = 0;
  uint64_t end_us = 0;
  uint64_t total = 0;  // spans the plan counted in the range
  uint64_t pages = 0, read = 0, imported = 0, already_stored = 0, invalid = 0;
  std::vector<BackfillChunk> chunks;  // in time order, covering [start_us, end_us)
  bool done = false;
  // Read from a checkpoint of the single-cursor format (before chunks): its
  // position over the whole range, for ResumeSingleCursor; "" otherwise.
  std::string single_cursor_after;
};

// The checkpoint as the file holds it (one JSON object and a newline).
std::string CheckpointJson(const BackfillCheckpoint& c);

// Reads `text` (the checkpoint file `path`) into `c`, whose index and range
// are already this backfill's: a checkpoint of another index or range, or
// one that is not a backfill checkpoint, is refused (kInvalidArgument)
// naming what to do. A checkpoint of the single-cursor format is read with
// no chunks and its position in single_cursor_after.
Status ParseCheckpoint(std::string_view text, const std::string& path, BackfillCheckpoint* c);

// A stretch of start times and the spans in it (a histogram's bucket).
struct SpanCount {
  uint64_t start_us = 0;
  uint64_t end_us = 0;
  uint64_t spans = 0;
};

// Chunks covering [start_us, end_us) with about `total / n` spans each, from
// a histogram: `buckets` in time order, not overlapping. A bucket is not
// split; empty stretches join a neighbour. At most `n` chunks, at least one.
std::vector<BackfillChunk> PlanChunks(uint64_t start_us, uint64_t end_us,
                                      const std::vector<SpanCount>& buckets, size_t n);

// The first sort value of `after` (a span's startTime): false if `after` is
// not a JSON array starting with an unsigned integer.
bool CursorStartTime(std::string_view after, uint64_t* start_us);

// Resumes a single-cursor checkpoint's position in freshly planned chunks:
// the chunks before it are done, the one holding its start time continues
// after it. False if `after` is not a cursor of this range.
bool ResumeSingleCursor(const std::string& after, std::vector<BackfillChunk>* chunks);

}  // namespace spanhouse::migrate
