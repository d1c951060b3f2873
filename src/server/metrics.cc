#include "server/metrics.h"

#include <cstdlib>

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include "common/clock.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::server {

namespace {

void AppendReceiverMetrics(const std::vector<MetricsSources::Receiver>& receivers, PromText& out) {
  using Field = std::atomic<uint64_t> receivers::IntakeStats::*;
  const std::tuple<const char*, const char*, Field> counters[] = {
      {"spanhouse_receiver_requests_total", "Requests received.",
       &receivers::IntakeStats::requests},
      {"spanhouse_receiver_received_spans_total", "Spans decoded from requests, before the filter.",
       &receivers::IntakeStats::spans_received},
      {"spanhouse_receiver_accepted_spans_total", "Spans queued for the sinks (answered 200).",
       &receivers::IntakeStats::spans_accepted},
      {"spanhouse_receiver_duplicate_spans_total",
       "Spans an accepted request already had (a retry): answered as accepted, not queued again.",
       &receivers::IntakeStats::spans_duplicate}};
  for (const auto& [name, help, field] : counters) {
    out.Family(name, "counter", help);
    for (const auto& r : receivers) {
      out.Sample(name, PromText::Label("receiver", r.name), (r.stats->*field).load());
    }
  }
  out.Family("spanhouse_receiver_rejected_requests_total", "counter",
             "Requests refused whole, by reason (none of their spans queued).");
  for (const auto& r : receivers) {
    const receivers::IntakeStats& rs = *r.stats;
    // The listener's own refusals (broken HTTP, a body over the cap on the
    // wire) count with the receiver's: to a client they are the same answer.
    const uint64_t wire_malformed = r.http != nullptr ? r.http->refused_malformed.load() : 0;
    const uint64_t wire_too_large = r.http != nullptr ? r.http->refused_too_large.load() : 0;
    const std::pair<const char*, uint64_t> rejected[] = {
        {"malformed", rs.rejected_malformed.load() + wire_malformed},
        {"too_large", rs.rejected_too_large.load() + wire_too_large},
        {"too_many_spans", rs.rejected_too_many_spans.load()},
        {"media_type", rs.rejected_media_type.load()},
        {"memory_limit", rs.rejected_queue_full.load()},
        {"shutting_down", rs.rejected_shutting_down.load()},
        {"durable_queue_full", rs.rejected_durable_full.load()},
        {"durable_queue_error", rs.durable_errors.load()},
        {"unauthenticated", rs.rejected_unauthenticated.load()}};
    const std::string receiver = PromText::Label("receiver", r.name);
    for (const auto& [reason, v] : rejected) {
      out.Sample("spanhouse_receiver_rejected_requests_total",
                 receiver + "," + PromText::Label("reason", reason), v);
    }
  }
}

// One counter family with a sample per reason of `Reason`.
template <class Reason, size_t N>
void ByReason(const char* name, const char* help, const std::array<std::atomic<uint64_t>, N>& n,
              PromText& out) {
  out.Family(name, "counter", help);
  for (size_t i = 0; i < N; ++i) {
    out.Sample(name, PromText::Label("reason", pipeline::ReasonName(static_cast<Reason>(i))),
               n[i].load());
  }
}

void AppendFilterMetrics(const pipeline::FilterStats& fs, PromText& out) {
  ByReason<pipeline::RejectReason>(
      "spanhouse_filter_rejected_spans_total",
      "Spans dropped by the filter of unreasonable data, by reason (reported to the client in "
      "partial_success).",
      fs.rejected, out);
  ByReason<pipeline::TrimReason>(
      "spanhouse_filter_trimmed_total",
      "What the filter cut from kept spans, by reason: attributes, events and links dropped, "
      "keys and values cut, span names replaced.",
      fs.trimmed, out);
}

void AppendSamplingMetrics(const pipeline::HeadSampler* head, const pipeline::TailSampler* tail,
                           const pipeline::TailWindow* window, PromText& out) {
  const auto labels = [](std::string_view policy, const char* decision) {
    return PromText::Label("policy", policy) + "," + PromText::Label("decision", decision);
  };
  // A policy's kept and dropped samples of `family`.
  const auto pair = [&](const char* family, std::string_view policy, uint64_t kept,
                        uint64_t dropped) {
    out.Sample(family, labels(policy, "kept"), kept);
    out.Sample(family, labels(policy, "dropped"), dropped);
  };
  out.Family("spanhouse_sampling_spans_total", "counter",
             "Spans by sampling decision: kept (stored) or dropped (counted in the metrics only); "
             "policy head_probability or tail.");
  if (head != nullptr) {
    pair("spanhouse_sampling_spans_total", "head_probability", head->stats().kept_spans.load(),
         head->stats().dropped_spans.load());
  }
  if (tail != nullptr) {
    pair("spanhouse_sampling_spans_total", "tail", tail->stats().kept_spans.load(),
         tail->stats().dropped_spans.load());
  }
  out.Family("spanhouse_sampling_traces_total", "counter",
             "Traces by sampling decision: head sampling's counted by their root spans, tail "
             "sampling's by the policy that kept them (policy tail: dropped).");
  if (head != nullptr) {
    pair("spanhouse_sampling_traces_total", "head_probability", head->stats().kept_traces.load(),
         head->stats().dropped_traces.load());
  }
  if (tail != nullptr) {
    const pipeline::TailPolicies& p = tail->policies();
    for (size_t k = 0; k < p.policies().size(); ++k) {
      out.Sample("spanhouse_sampling_traces_total", labels(p.policies()[k].name, "kept"),
                 p.kept(k));
    }
    out.Sample("spanhouse_sampling_traces_total", labels("tail", "dropped"), p.dropped());
  }
  if (head != nullptr) {
    out.Family("spanhouse_sampling_head_probability", "gauge",
               "sampling.head.probability: the share of traces head sampling keeps (services "
               "with a probability of their own aside).");
    out.lines() +=
        fmt::format("spanhouse_sampling_head_probability {}\n", head->options().probability);
    out.One("spanhouse_sampling_bad_tracestate_total", "counter",
            "Spans whose tracestate ot entry (th or rv) could not be read; sampled as if absent.",
            "", head->stats().bad_tracestate.load());
  }
  if (tail != nullptr) {
    const pipeline::TailSamplingStats& st = tail->stats();
    out.One("spanhouse_sampling_tail_open_traces", "gauge", "Traces whose decision window is open.",
            "", tail->open_traces());
    out.One("spanhouse_sampling_tail_decided_traces", "gauge",
            "Decided traces remembered for late spans (sampling.tail.keep_ms).", "",
            tail->decided_traces());
    out.One("spanhouse_sampling_tail_memory_bytes", "gauge",
            "Memory tail sampling's traces take of the budget (held spans aside).", "",
            tail->memory_bytes());
    if (window != nullptr) {
      out.One("spanhouse_sampling_tail_held_spans", "gauge",
              "Spans waiting in the tail window for their traces' decisions.", "",
              window->held_spans());
    }
    out.One("spanhouse_sampling_tail_late_spans_total", "counter",
            "Spans of a trace already decided when they came (they follow its decision).", "",
            st.late_spans.load());
    out.One("spanhouse_sampling_tail_late_requests_total", "counter",
            "Requests of late spans only, marked and handed on without waiting.", "",
            st.late_requests.load());
    out.One("spanhouse_sampling_tail_decided_at_once_total", "counter",
            "Traces decided when a record was read back (spilled, or after a restart).", "",
            st.decided_at_once.load());
    out.One("spanhouse_sampling_tail_spilled_requests_total", "counter",
            "Requests not held in the window for want of memory (spilled to the durable queue).",
            "", st.refused_batches.load());
    out.One("spanhouse_sampling_tail_persist_errors_total", "counter",
            "Decision records the durable queue could not write.", "", st.persist_errors.load());
  }
}

}  // namespace

void AppendPipelineMetrics(const MetricsSources& s, PromText& out) {
  if (!s.receivers.empty()) AppendReceiverMetrics(s.receivers, out);
  if (s.filter != nullptr) AppendFilterMetrics(*s.filter, out);
  if (s.head_sampler != nullptr || s.tail_sampler != nullptr) {
    AppendSamplingMetrics(s.head_sampler, s.tail_sampler, s.tail_window, out);
  }
  if (s.budget != nullptr) {
    out.One("spanhouse_memory_reserved_bytes", "gauge",
            "Memory reserved for spans in flight (decoding, queued, awaiting insert).", "",
            s.budget->used());
    out.One("spanhouse_memory_limit_bytes", "gauge",
            "queue.max_bytes: past it, requests are answered 429.", "", s.budget->limit());
  }
  for (const sink::Sink* sink : s.sinks) sink->AppendMetrics(out);
  if (s.queue != nullptr) s.queue->AppendMetrics(out);
  if (s.dedup != nullptr) s.dedup->AppendMetrics(out, WallClockNs());
}

void AppendStorageMetrics(storage::SqlConnection& conn, std::string_view database, bool disks,
                          PromText& out) {
  storage::QueryResult r;
  const Status st = conn.Query(
      fmt::format("SELECT table, {}, count(), sum(rows), sum(bytes_on_disk) FROM "
                  "system.parts WHERE database = '{}' AND active GROUP BY table, disk_name "
                  "ORDER BY table, disk_name",
                  disks ? "disk_name" : "'default' AS disk_name", database),
      "TSV", &r);
  if (!st.ok()) {
    spdlog::warn("storage metrics: {}", st.message());
    return;
  }
  struct Row {
    std::string labels;
    uint64_t parts, rows, bytes;
  };
  std::vector<Row> rows;
  for (const auto& f : storage::TsvRows(r.data)) {
    if (f.size() != 5) continue;
    rows.push_back({PromText::Label("table", f[0]) + "," + PromText::Label("disk", f[1]),
                    std::strtoull(f[2].c_str(), nullptr, 10),
                    std::strtoull(f[3].c_str(), nullptr, 10),
                    std::strtoull(f[4].c_str(), nullptr, 10)});
  }
  out.Family("spanhouse_storage_parts", "gauge", "Active parts per table and disk.");
  for (const Row& row : rows) out.Sample("spanhouse_storage_parts", row.labels, row.parts);
  out.Family("spanhouse_storage_rows", "gauge", "Rows stored per table and disk.");
  for (const Row& row : rows) out.Sample("spanhouse_storage_rows", row.labels, row.rows);
  out.Family("spanhouse_storage_bytes", "gauge", "Bytes on disk per table and disk.");
  for (const Row& row : rows) out.Sample("spanhouse_storage_bytes", row.labels, row.bytes);

  // The engine's own counters of its write work since start: merges
  // rewrite inserted rows (write amplification = merged / inserted rows)
  // and are most of the store's CPU at load.
  r = {};
  if (Status ev = conn.Query(
          "SELECT event, value FROM system.events WHERE event IN ('InsertedRows', "
          "'InsertedBytes', 'MergedRows', 'MergedUncompressedBytes', 'MergeTotalMilliseconds') "
          "ORDER BY event",
          "TSV", &r);
      !ev.ok()) {
    spdlog::warn("storage metrics: {}", ev.message());
    return;
  }
  out.Family("spanhouse_engine_events_total", "counter",
             "The embedded engine's counters (system.events): rows and bytes inserted and "
             "merged, merge time; every table.");
  for (const auto& f : storage::TsvRows(r.data)) {
    if (f.size() != 2) continue;
    out.Sample("spanhouse_engine_events_total", PromText::Label("event", f[0]),
               std::strtoull(f[1].c_str(), nullptr, 10));
  }
}

}  // namespace spanhouse::server
