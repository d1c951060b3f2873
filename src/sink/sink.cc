#include <utility>

#include "sink/sink.h"

namespace spanhouse::sink {

void AppendSinkMetrics(const std::string& name, const SinkStats& s, PromText& out) {
  const std::string label = PromText::Label("sink", name);
  const std::tuple<const char*, const char*, const char*, uint64_t> families[] = {
      {"spanhouse_sink_rows_written_total", "counter", "Spans stored by the sink.",
       s.rows_written.load()},
      {"spanhouse_sink_batches_written_total", "counter",
       "Writes (inserts, bulk requests) that succeeded.", s.writes.load()},
      {"spanhouse_sink_insert_errors_total", "counter", "Writes that failed (each retried).",
       s.write_errors.load()},
      {"spanhouse_sink_rows_lost_total", "counter",
       "Spans given up: neither stored, dead-lettered nor left in the durable queue.",
       s.rows_lost.load()},
      {"spanhouse_sink_rows_left_queued_total", "counter",
       "Spans left in the durable queue at shutdown (stored after the next start).",
       s.rows_left_queued.load()},
      {"spanhouse_sink_pending_rows", "gauge", "Spans taken by the sink and not yet stored.",
       s.pending_rows.load()},
      {"spanhouse_sink_dead_letter_rows_total", "counter",
       "Spans the store refused for good, written to the dead-letter directory.",
       s.rows_dead_lettered.load()},
      {"spanhouse_sink_dead_letter_blocks_total", "counter",
       "Blocks written to the dead-letter directory.", s.blocks_dead_lettered.load()},
      {"spanhouse_sink_bytes_sent_total", "counter",
       "Bytes of rows sent over the network to the store (request bodies, every attempt).",
       s.bytes_sent.load()}};
  for (const auto& [family, type, help, value] : families)
    out.One(family, type, help, label, value);
  out.Family("spanhouse_sink_insert_errors_by_class_total", "counter",
             "Failed writes by class: retryable (retried with backoff) or permanent "
             "(dead-lettered).");
  out.Sample("spanhouse_sink_insert_errors_by_class_total",
             label + "," + PromText::Label("class", "retryable"), s.retryable_errors.load());
  out.Sample("spanhouse_sink_insert_errors_by_class_total",
             label + "," + PromText::Label("class", "permanent"), s.permanent_errors.load());
  out.Family("spanhouse_sink_insert_seconds", "histogram", "Time per write, per sink.");
  s.write_seconds.AppendPrometheus(out.lines(), "spanhouse_sink_insert_seconds", label);
}

}  // namespace spanhouse::sink

namespace spanhouse::sink {

bool Sink::BlockMembers(std::string_view, const SpanBatch& batch,
                        std::vector<uint32_t>* idx) const {
  idx->resize(batch.span_count());
  for (uint32_t i = 0; i < idx->size(); ++i) (*idx)[i] = i;
  return true;
}

}  // namespace spanhouse::sink
