#include "tools/migrate/backfill_plan.h"

#include <simdjson.h>

#include <algorithm>

#include "codec/json_writer.h"
#include "tools/migrate/admin_client.h"

namespace spanhouse::migrate {

namespace {

void WriteCursor(codec::JsonWriter& w, const std::string& after) {
  if (after.empty()) {
    w.Null();
  } else {
    w.Raw(after);  // the sort values as OpenSearch gave them
  }
}

// The cursor at `key`: "" for null, the array minified, false for anything else.
bool ReadCursor(simdjson::dom::element parent, const char* key, std::string* after) {
  simdjson::dom::element v;
  if (parent[key].get(v) != simdjson::SUCCESS || v.is_null()) {
    after->clear();
    return true;
  }
  if (!v.is_array()) return false;
  *after = simdjson::minify(v);
  uint64_t start = 0;
  return CursorStartTime(*after, &start);
}

uint64_t U64Or0(simdjson::dom::element parent, const char* key) {
  uint64_t v = 0;
  if (parent[key].get_uint64().get(v) != simdjson::SUCCESS) v = 0;
  return v;
}

}  // namespace

std::string CheckpointJson(const BackfillCheckpoint& c) {
  std::string out;
  codec::JsonWriter w(out);
  w.BeginObject().Key("from").String("opensearch").Key("format").Uint(2);
  w.Key("index").String(c.index).Key("start_us").Uint(c.start_us).Key("end_us").Uint(c.end_us);
  w.Key("total").Uint(c.total).Key("pages").Uint(c.pages).Key("read").Uint(c.read);
  w.Key("imported").Uint(c.imported).Key("already_stored").Uint(c.already_stored);
  w.Key("invalid").Uint(c.invalid).Key("done").Bool(c.done).Key("chunks").BeginArray();
  for (const BackfillChunk& k : c.chunks) {
    w.BeginObject().Key("start_us").Uint(k.start_us).Key("end_us").Uint(k.end_us);
    w.Key("spans").Uint(k.spans).Key("read").Uint(k.read).Key("after");
    WriteCursor(w, k.after);
    w.Key("done").Bool(k.done).EndObject();
  }
  w.EndArray().EndObject();
  out += '\n';
  return out;
}

Status ParseCheckpoint(std::string_view text, const std::string& path, BackfillCheckpoint* c) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text.data(), text.size()).get(doc) != simdjson::SUCCESS) {
    return Status::Invalid("checkpoint " + path + " is not JSON: remove it to start over");
  }
  std::string_view index;
  uint64_t start = 0, end = 0;
  if (doc["index"].get_string().get(index) != simdjson::SUCCESS ||
      doc["start_us"].get_uint64().get(start) != simdjson::SUCCESS ||
      doc["end_us"].get_uint64().get(end) != simdjson::SUCCESS) {
    return Status::Invalid("checkpoint " + path + " is not a backfill checkpoint");
  }
  if (index != c->index || start != c->start_us || end != c->end_us) {
    return Status::Invalid("checkpoint " + path + " is of another backfill (" + std::string(index) +
                           ", " + FormatTime(start) + " to " + FormatTime(end) +
                           "): give another --checkpoint or remove it");
  }
  const std::string damaged =
      "checkpoint " + path + " is damaged: remove it to start over (nothing is imported twice)";
  c->total = U64Or0(doc, "total");
  c->pages = U64Or0(doc, "pages");
  c->read = U64Or0(doc, "read");
  c->imported = U64Or0(doc, "imported");
  c->already_stored = U64Or0(doc, "already_stored");
  c->invalid = U64Or0(doc, "invalid");
  bool done = false;
  if (doc["done"].get_bool().get(done) != simdjson::SUCCESS) done = false;
  c->done = done;
  c->chunks.clear();
  c->single_cursor_after.clear();
  simdjson::dom::array chunks;
  if (doc["chunks"].get_array().get(chunks) != simdjson::SUCCESS) {
    // The single-cursor format: one position over the whole range.
    if (!ReadCursor(doc, "after", &c->single_cursor_after)) return Status::Invalid(damaged);
    return Status::Ok();
  }
  // The chunks cover the range in order, each a cursor inside it.
  uint64_t next = start;
  for (simdjson::dom::element e : chunks) {
    BackfillChunk k;
    bool chunk_done = false;
    if (e["start_us"].get_uint64().get(k.start_us) != simdjson::SUCCESS ||
        e["end_us"].get_uint64().get(k.end_us) != simdjson::SUCCESS ||
        e["done"].get_bool().get(chunk_done) != simdjson::SUCCESS || k.start_us != next ||
        k.end_us <= k.start_us || k.end_us > end || !ReadCursor(e, "after", &k.after)) {
      return Status::Invalid(damaged);
    }
    uint64_t at = 0;
    if (!k.after.empty() && (!CursorStartTime(k.after, &at) || at < k.start_us || at >= k.end_us)) {
      return Status::Invalid(damaged);
    }
    k.done = chunk_done;
    k.spans = U64Or0(e, "spans");
    k.read = U64Or0(e, "read");
    next = k.end_us;
    c->chunks.push_back(std::move(k));
  }
  if (next != end) return Status::Invalid(damaged);
  return Status::Ok();
}

std::vector<BackfillChunk> PlanChunks(uint64_t start_us, uint64_t end_us,
                                      const std::vector<SpanCount>& buckets, size_t n) {
  // The buckets that start in the range after the one before (one past the
  // end is cut short there).
  std::vector<SpanCount> in;
  uint64_t total = 0;
  for (const SpanCount& b : buckets) {
    const uint64_t from = in.empty() ? start_us : in.back().end_us;
    if (b.start_us < from || b.start_us >= end_us || b.end_us <= b.start_us) continue;
    in.push_back({b.start_us, std::min(end_us, b.end_us), b.spans});
    total += b.spans;
  }
  n = std::max<size_t>(n, 1);
  // Chunk k ends after the bucket where the count reaches k/n of the total.
  std::vector<BackfillChunk> out;
  BackfillChunk cur;
  cur.start_us = start_us;
  uint64_t seen = 0;
  for (const SpanCount& b : in) {
    cur.spans += b.spans;
    seen += b.spans;
    const auto k = static_cast<uint64_t>(out.size() + 1);
    if (out.size() + 1 < n && b.end_us < end_us && cur.spans > 0 && seen * n >= k * total) {
      cur.end_us = b.end_us;
      out.push_back(cur);
      cur = BackfillChunk();
      cur.start_us = b.end_us;
    }
  }
  cur.end_us = end_us;
  out.push_back(cur);
  return out;
}

bool CursorStartTime(std::string_view after, uint64_t* start_us) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array a;
  return parser.parse(after.data(), after.size()).get(doc) == simdjson::SUCCESS &&
         doc.get_array().get(a) == simdjson::SUCCESS && a.size() > 0 &&
         a.at(0).get_uint64().get(*start_us) == simdjson::SUCCESS;
}

bool ResumeSingleCursor(const std::string& after, std::vector<BackfillChunk>* chunks) {
  uint64_t at = 0;
  if (!CursorStartTime(after, &at) || chunks->empty() || at < chunks->front().start_us ||
      at >= chunks->back().end_us) {
    return false;
  }
  // Every document up to the cursor (start time, then trace and span ids) was
  // imported: the chunks that end before its start time, and the part of
  // the one holding it up to it.
  for (BackfillChunk& k : *chunks) {
    if (k.end_us <= at) {
      k.done = true;
      k.read = k.spans;
    } else if (k.start_us <= at) {
      k.after = after;
    }
  }
  return true;
}

}  // namespace spanhouse::migrate
