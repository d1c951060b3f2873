// Writes the seed corpus of fuzz_durable_log: segment files as SegmentLog itself writes them,
// behind the target's 8 control bytes (fuzz_durable_log.cc). Run once by hand
// (tests/fuzz/README.md); the output is checked in.
//   make_durable_seeds tests/fuzz/corpus
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "pipeline/durable/segment_log.h"

namespace {

namespace fs = std::filesystem;
using spanhouse::pipeline::durable::LogOptions;
using spanhouse::pipeline::durable::RecordKind;
using spanhouse::pipeline::durable::SegmentLog;
using spanhouse::sink::Ticket;

constexpr size_t kHeaderBytes = 32;  // format 2

void Write(const fs::path& dir, std::string_view name, std::string_view control,
           std::string_view file) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary);
  out.write(control.data(), std::streamsize(control.size()));
  out.write(file.data(), std::streamsize(file.size()));
  std::printf("%s/%.*s: %zu bytes\n", dir.c_str(), static_cast<int>(name.size()), name.data(),
              control.size() + file.size());
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The segment files in `dir` (not the .free ones), oldest first.
std::vector<std::string> Segments(const fs::path& dir) {
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".seg") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> files;
  for (const auto& p : paths) files.push_back(ReadFile(p));
  return files;
}

std::unique_ptr<SegmentLog> Open(const fs::path& dir, uint64_t segment_bytes) {
  LogOptions o;
  o.dir = dir.string();
  o.segment_bytes = segment_bytes;
  o.fsync_always = false;
  std::unique_ptr<SegmentLog> log;
  if (!SegmentLog::Open(o, &log).ok()) {
    std::fprintf(stderr, "cannot open a log in %s\n", dir.c_str());
    std::exit(1);
  }
  return log;
}

Ticket Append(SegmentLog& log, RecordKind kind, std::string_view payload) {
  Ticket ref;
  if (!log.Append(kind, payload, &ref).ok()) {
    std::fprintf(stderr, "append failed\n");
    std::exit(1);
  }
  return ref;
}

// Control bytes: mode, segment number, cut, first LSN - 1 (4 bytes), epoch.
std::string Control(uint8_t mode, uint8_t cut = 0) {
  return std::string({static_cast<char>(mode), 0, static_cast<char>(cut), 0, 0, 0, 0, 7});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_durable_seeds CORPUS_DIR\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  const fs::path out = fs::path(argv[1]) / "durable_log";
  char tmpl[] = "/tmp/make_durable_seeds.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const fs::path work = tmpl;

  // One segment of three records of different kinds, as a clean Close leaves it.
  std::string clean;
  {
    const fs::path dir = work / "clean";
    auto log = Open(dir, 64 << 20);
    Append(*log, RecordKind::kEncodedRequest,
           std::string("\x00\x01\x02\x03\x04\x05\x06\x07\x01", 9) + "{\"resourceSpans\":[]}");
    Append(*log, RecordKind::kSpans, std::string("\x0a\x00", 2));
    Append(*log, RecordKind::kBlock, std::string(24, '\x11'));
    log->Close();
    clean = Segments(dir).back();
  }
  const std::string_view records = std::string_view(clean).substr(kHeaderBytes);
  Write(out, "one-segment", Control(0), clean);
  // Torn in the middle of its last record, as a crash mid-write leaves it.
  Write(out, "torn-tail", Control(0), std::string_view(clean).substr(0, clean.size() - 5));
  // With a stale .free file beside it; its records stored (released) before the log closes.
  Write(out, "stale-free", Control(16), clean);
  Write(out, "released", Control(64), clean);
  // The records behind headers the target builds: format 2, format 1, a recycled file whose
  // last record fails its check, and two segments.
  Write(out, "built-v2", Control(1 | 4), records);
  Write(out, "built-v1", Control(3 | 4), records);
  Write(out, "built-recycled-tail", Control(2 | 4 | 8), records);
  Write(out, "built-two-segments", Control(1 | 4 | 32, 128), records);

  // A recycled file at a crash: the new segment's records, then the old segment's bytes.
  {
    const fs::path dir = work / "recycled";
    auto log = Open(dir, 4096);
    std::vector<Ticket> refs;
    for (int i = 0; i < 6; ++i) {
      refs.push_back(Append(*log, RecordKind::kEncodedRequest, std::string(900, 'a' + i)));
    }
    for (auto& r : refs) r.Ack();  // the full segment is released: kept to be written over
    Append(*log, RecordKind::kEncodedRequest, std::string(100, 'z'));
    const std::vector<std::string> files = Segments(dir);  // before Close cuts it
    Write(out, "recycled-at-crash", Control(0), files.back());
    log->Close();
  }
  fs::remove_all(work);
  return 0;
}
