// Where Jaeger's documents lie in a cluster, as Jaeger's own options name
// it: an index prefix ("<prefix>-jaeger-span-..."), and either dated indices
// (the date in a Go-style layout, "2006-01-02" by default: one a day, or one
// an hour when the layout has "15") or rollover indices behind a read and a
// write alias ("<prefix>-jaeger-span-read" / "-write", Jaeger's use_aliases).
// The sink writes, and the reader and the backfill read, through one layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace spanhouse::storage::opensearch {

enum class IndexKind { kSpan, kService, kDependencies };

struct IndexLayoutOptions {
  std::string prefix;  // "" or the prefix, with or without its trailing '-'
  // Go's reference-time tokens 2006, 01, 02 (all three) and 15 (hourly),
  // with '-', '.' or '_' between them.
  std::string date_layout = "2006-01-02";
  bool use_aliases = false;
};

class IndexLayout {
 public:
  // The default: no prefix, daily indices "YYYY-MM-DD", no aliases.
  IndexLayout();
  // kInvalidArgument naming what is wrong with the date layout.
  static Status Create(const IndexLayoutOptions& options, IndexLayout* out);
  // The default layout under `prefix`.
  static IndexLayout Prefixed(std::string_view prefix);

  // "jaeger-span-" or "<prefix>-jaeger-span-" (Jaeger's rule for a prefix),
  // its bytes other than [A-Za-z0-9._-] percent-encoded (they make no valid
  // index name; the cluster then answers none).
  std::string Base(IndexKind kind) const;
  // Where a document of a span starting at `time_ns` is written: the write
  // alias, or the dated index of that time.
  std::string WriteIndex(IndexKind kind, uint64_t time_ns) const;
  // What a read of [from_ns, to_ns] searches: the read alias; or the dated
  // indices of the range, newest first, comma-separated, or AllIndices when
  // that list would be longer than max_chars (a request line has a limit:
  // 4 KiB by default) or the range is reversed.
  std::string ReadIndices(IndexKind kind, uint64_t from_ns, uint64_t to_ns,
                          size_t max_chars = 3000) const;
  // Every index of the kind: the read alias, or the base followed by the
  // layout's pattern ("jaeger-span-*-*-*"; not the archive or the aliases).
  std::string AllIndices(IndexKind kind) const;

  bool use_aliases() const { return opts_.use_aliases; }
  const IndexLayoutOptions& options() const { return opts_; }
  // The time one dated span index covers: a day or an hour.
  uint64_t period_ns() const;

 private:
  // The strftime format and wildcard pattern of a layout.
  struct Dates {
    std::string format;   // "%Y-%m-%d"
    std::string pattern;  // "*-*-*"
    uint64_t period_ns = 0;
  };
  static Status ParseLayout(std::string_view layout, Dates* out);
  const Dates& DatesOf(IndexKind kind) const;
  std::string Dated(IndexKind kind, uint64_t time_ns) const;

  IndexLayoutOptions opts_;
  Dates spans_;         // spans and services
  Dates dependencies_;  // always daily, as Jaeger's dependency indices are
};

}  // namespace spanhouse::storage::opensearch
