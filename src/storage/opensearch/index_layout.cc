#include "storage/opensearch/index_layout.h"

#include <ctime>

namespace spanhouse::storage::opensearch {

namespace {

constexpr uint64_t kNsPerHour = 3600ull * 1000000000ull;
constexpr uint64_t kNsPerDay = 24 * kNsPerHour;

std::string EncodeIndexName(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
        c == '_' || c == '-') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

std::string_view KindName(IndexKind kind) {
  switch (kind) {
    case IndexKind::kSpan:
      return "jaeger-span-";
    case IndexKind::kService:
      return "jaeger-service-";
    case IndexKind::kDependencies:
      return "jaeger-dependencies-";
  }
  return "jaeger-span-";
}

// The layout without its hour ("2006.01.02.15" -> "2006.01.02").
std::string Daily(std::string_view layout) {
  std::string out(layout);
  const size_t hour = out.find("15");
  if (hour == std::string::npos) return out;
  size_t from = hour;
  if (from > 0 && (out[from - 1] == '-' || out[from - 1] == '.' || out[from - 1] == '_')) --from;
  out.erase(from, hour + 2 - from);
  return out;
}

}  // namespace

IndexLayout::IndexLayout() {
  (void)ParseLayout(opts_.date_layout, &spans_);
  dependencies_ = spans_;
}

Status IndexLayout::ParseLayout(std::string_view layout, Dates* out) {
  Dates d;
  bool year = false, month = false, day = false, hour = false;
  auto bad = [&](const std::string& why) {
    return Status::Invalid("index date layout '" + std::string(layout) + "': " + why +
                           " (Go's reference time: 2006-01-02, 2006.01.02, 2006-01-02-15)");
  };
  for (size_t i = 0; i < layout.size();) {
    const std::string_view rest = layout.substr(i);
    auto token = [&](std::string_view t, const char* format, bool* seen) {
      if (rest.substr(0, t.size()) != t) return false;
      if (*seen) return false;
      *seen = true;
      d.format += format;
      d.pattern += '*';
      i += t.size();
      return true;
    };
    if (token("2006", "%Y", &year) || token("01", "%m", &month) || token("02", "%d", &day) ||
        token("15", "%H", &hour)) {
      continue;
    }
    const char c = layout[i];
    if (c != '-' && c != '.' && c != '_') {
      return bad("only 2006, 01, 02 and 15, each once, with '-', '.' or '_' between them");
    }
    d.format += c;
    d.pattern += c;
    ++i;
  }
  if (!year || !month || !day) return bad("it needs the year, month and day (2006, 01, 02)");
  d.period_ns = hour ? kNsPerHour : kNsPerDay;
  *out = std::move(d);
  return Status::Ok();
}

Status IndexLayout::Create(const IndexLayoutOptions& options, IndexLayout* out) {
  IndexLayout l;
  l.opts_ = options;
  SH_RETURN_IF_ERROR(ParseLayout(options.date_layout, &l.spans_));
  SH_RETURN_IF_ERROR(ParseLayout(Daily(options.date_layout), &l.dependencies_));
  *out = std::move(l);
  return Status::Ok();
}

IndexLayout IndexLayout::Prefixed(std::string_view prefix) {
  IndexLayout l;
  l.opts_.prefix = std::string(prefix);
  return l;
}

uint64_t IndexLayout::period_ns() const {
  return spans_.period_ns;
}

const IndexLayout::Dates& IndexLayout::DatesOf(IndexKind kind) const {
  return kind == IndexKind::kDependencies ? dependencies_ : spans_;
}

std::string IndexLayout::Base(IndexKind kind) const {
  std::string out = opts_.prefix;
  if (!out.empty() && out.back() != '-') out += '-';
  out += KindName(kind);
  return EncodeIndexName(out);
}

std::string IndexLayout::Dated(IndexKind kind, uint64_t time_ns) const {
  const auto secs = static_cast<time_t>(time_ns / 1000000000ull);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof(buf), DatesOf(kind).format.c_str(), &tm);
  return Base(kind) + std::string(buf, n);
}

std::string IndexLayout::WriteIndex(IndexKind kind, uint64_t time_ns) const {
  if (opts_.use_aliases) return Base(kind) + "write";
  return Dated(kind, time_ns);
}

std::string IndexLayout::AllIndices(IndexKind kind) const {
  if (opts_.use_aliases) return Base(kind) + "read";
  return Base(kind) + DatesOf(kind).pattern;
}

std::string IndexLayout::ReadIndices(IndexKind kind, uint64_t from_ns, uint64_t to_ns,
                                     size_t max_chars) const {
  if (opts_.use_aliases || to_ns < from_ns) return AllIndices(kind);
  const uint64_t period = DatesOf(kind).period_ns;
  const uint64_t first = from_ns / period;
  std::string out;
  for (uint64_t p = to_ns / period + 1; p-- > first;) {
    if (!out.empty()) out += ',';
    out += Dated(kind, p * period);
    if (out.size() > max_chars) return AllIndices(kind);
  }
  return out;
}

}  // namespace spanhouse::storage::opensearch
