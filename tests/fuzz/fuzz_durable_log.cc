// libFuzzer target: the durable queue's log read back from disk (pipeline/durable/segment_log.h)
// after a crash or a corruption: its segment files are whatever the input makes of them.
//
// Input layout: 8 control bytes, then the file bytes.
//   byte 0: bits 0-1 the header: 0 none (the file bytes are the whole file, as found on disk),
//           1 format 2, 2 format 2 of a recycled file, 3 format 1, built from bytes 3-7 and put
//           before the file bytes; bit 2: the records' CRCs are made right (the fuzzer cannot
//           forge a CRC32C, and a record that fails its check ends the segment); bit 3: except
//           the last record's; bit 4: a stale `.free` file lies beside the segments; bit 5: the
//           file bytes are two segment files, cut at byte 2's share of them; bit 6: every
//           record is released (stored) before the log closes.
//   byte 1: the first segment's number; bytes 3-6: its first LSN - 1; byte 7: the epoch.
// The log is opened on a directory holding those files (SegmentLog::Open), replayed twice, a
// record is appended and read back, then the log is closed, opened again and replayed.
//
// Invariants besides "no crash, no leak, no UB": the records replayed are exactly those an
// independent reading of the format finds (each inside its file, its CRC matching, at the LSNs
// its header gives, in order), LSNs are consecutive in a segment and increase from one segment
// to the next (CheckLsnOrder),
// the corrupt-tail counters account for every byte after the last valid record (except after a
// recycled file's records in the newest segment), a second replay gives the same records and
// counts nothing again, stale `.free` files are gone after Open, the appended record gets the
// next LSN and reads back as written, and after reopening the replay is the same records
// followed by the appended one, with the same epoch; or nothing at all once every record was
// released.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "invariants.h"
#include "pipeline/durable/segment_log.h"

namespace spanhouse::fuzz {
namespace {

namespace fs = std::filesystem;
using pipeline::durable::Crc32cPortable;
using pipeline::durable::LogOptions;
using pipeline::durable::RecordKind;
using pipeline::durable::SegmentLog;
using sink::Ticket;

// The on-disk format as segment_log.h describes it, written out again here so that the check
// does not share the code it checks.
constexpr size_t kHeaderV1 = 24;   // magic, version, epoch, first LSN
constexpr size_t kHeaderV2 = 32;   // then flags and 4 reserved bytes
constexpr size_t kRecordHead = 8;  // length, CRC
constexpr uint32_t kMaxRecord = 1u << 30;
constexpr uint32_t kRecycled = 1;

uint32_t U32(std::string_view s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}
uint64_t U64(std::string_view s, size_t at) {
  return U32(s, at) | (uint64_t{U32(s, at + 4)} << 32);
}
void PutU32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}
void PutU64(std::string& s, size_t at, uint64_t v) {
  PutU32(s, at, static_cast<uint32_t>(v));
  PutU32(s, at + 4, static_cast<uint32_t>(v >> 32));
}

struct Header {
  size_t size = 0;  // where the records start
  uint64_t epoch = 0;
  uint64_t first_lsn = 0;
  uint32_t key = 0;
  uint32_t flags = 0;
};

std::optional<Header> ParseHeader(std::string_view file) {
  if (file.size() < kHeaderV1 || file.substr(0, 4) != "SHDQ") return std::nullopt;
  Header h;
  const uint32_t version = U32(file, 4);
  if (version == 1) {
    h.size = kHeaderV1;
  } else if (version == 2 && file.size() >= kHeaderV2) {
    h.size = kHeaderV2;
    h.key = Crc32cPortable(file.substr(0, kHeaderV2));
    h.flags = U32(file, kHeaderV1);
  } else {
    return std::nullopt;
  }
  h.epoch = U64(file, 8);
  h.first_lsn = U64(file, 16);
  return h;
}

struct Rec {
  uint64_t segment = 0;
  uint64_t lsn = 0;
  uint8_t kind = 0;
  std::string payload;
  uint64_t offset = 0;
  bool operator==(const Rec&) const = default;
};

// What a replay must find in one segment file: its valid records, and where they end.
struct Expected {
  std::optional<Header> header;
  std::vector<Rec> records;
  size_t end = 0;
};

Expected Read(uint64_t segment, std::string_view file) {
  Expected e;
  e.header = ParseHeader(file);
  if (!e.header) return e;
  size_t off = e.header->size;
  uint64_t lsn = e.header->first_lsn;
  while (off + kRecordHead <= file.size()) {
    const uint32_t len = U32(file, off);
    if (len == 0 || len > kMaxRecord || file.size() - off - kRecordHead < len) break;
    const std::string_view body = file.substr(off + kRecordHead, len);
    if ((Crc32cPortable(body) ^ e.header->key) != U32(file, off + 4)) break;
    e.records.push_back(
        Rec{segment, lsn++, static_cast<uint8_t>(body[0]), std::string(body.substr(1)), off});
    off += kRecordHead + len;
  }
  e.end = off;
  return e;
}

// Makes the CRC of each record that fits right for `key`, from `start` (a record with a
// length that does not fit ends the walk); with `spare_last`, the last one's stays as it is.
void FixCrcs(std::string& file, size_t start, uint32_t key, bool spare_last) {
  size_t last = std::string::npos;
  uint32_t last_crc = 0;
  for (size_t off = start; off + kRecordHead <= file.size();) {
    const uint32_t len = U32(file, off);
    if (len == 0 || len > kMaxRecord || file.size() - off - kRecordHead < len) break;
    last = off;
    last_crc = U32(file, off + 4);
    PutU32(file, off + 4,
           Crc32cPortable(std::string_view(file).substr(off + kRecordHead, len)) ^ key);
    off += kRecordHead + len;
  }
  if (spare_last && last != std::string::npos) PutU32(file, last + 4, last_crc);
}

std::string SegmentName(uint64_t number, std::string_view ext) {
  char name[40];
  std::snprintf(name, sizeof(name), "%020llu.%.*s", static_cast<unsigned long long>(number),
                static_cast<int>(ext.size()), ext.data());
  return name;
}

const fs::path& WorkDir() {
  static const fs::path dir = [] {
    // tmpfs when there is one: every input creates, syncs and deletes files.
    std::error_code ec;
    const fs::path base =
        fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string tmpl = (base / "fuzz_durable_log.XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) Fail("cannot make a temporary directory", tmpl);
    return fs::path(tmpl);
  }();
  // Registered once `dir` is made, so that it runs before `dir` is destroyed.
  static const int cleanup = std::atexit([] {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  });
  (void)cleanup;
  return dir;
}

struct Replayed {
  std::vector<Rec> records;
  uint64_t corrupt_tails = 0;
  uint64_t corrupt_bytes = 0;
  uint64_t records_replayed = 0;
};

Replayed Replay(SegmentLog& log) {
  Replayed r;
  log.ReadReplay([&](const SegmentLog::Record& rec, uint64_t segment) {
    r.records.push_back(Rec{segment, rec.lsn, static_cast<uint8_t>(rec.kind),
                            std::string(rec.payload), rec.offset});
  });
  r.corrupt_tails = log.stats().corrupt_tails.load();
  r.corrupt_bytes = log.stats().corrupt_bytes.load();
  r.records_replayed = log.stats().records_replayed.load();
  return r;
}

// What a replay of these segment files (by number, oldest first) must give.
Replayed Expect(const std::vector<std::pair<uint64_t, std::string>>& files) {
  Replayed r;
  for (size_t i = 0; i < files.size(); ++i) {
    const Expected e = Read(files[i].first, files[i].second);
    r.records.insert(r.records.end(), e.records.begin(), e.records.end());
    const bool newest = i + 1 == files.size();
    const bool recycled_tail = newest && e.header && (e.header->flags & kRecycled) != 0;
    if (e.end < files[i].second.size() && !recycled_tail) {
      r.corrupt_tails++;
      r.corrupt_bytes += files[i].second.size() - e.end;
    }
  }
  r.records_replayed = r.records.size();
  return r;
}

void CheckReplay(const Replayed& got, const Replayed& want, std::string_view when) {
  if (got.records.size() != want.records.size()) {
    Fail(when, "replayed " + std::to_string(got.records.size()) + " records, the format holds " +
                   std::to_string(want.records.size()));
  }
  for (size_t i = 0; i < got.records.size(); ++i) {
    if (!(got.records[i] == want.records[i])) {
      Fail(when, "record " + std::to_string(i) + " (LSN " + std::to_string(got.records[i].lsn) +
                     ") differs from the file's");
    }
  }
  if (got.corrupt_tails != want.corrupt_tails || got.corrupt_bytes != want.corrupt_bytes) {
    Fail(when, "corrupt tails counted " + std::to_string(got.corrupt_tails) + "/" +
                   std::to_string(got.corrupt_bytes) + " bytes, skipped " +
                   std::to_string(want.corrupt_tails) + "/" + std::to_string(want.corrupt_bytes));
  }
  if (got.records_replayed != want.records_replayed) Fail(when, "records_replayed");
}

// Within a segment LSNs are consecutive, and so strictly increase unless a header puts them
// where 64 bits wrap (no log written by SegmentLog comes near). From one segment to the next
// they strictly increase when the headers were written as the log writes them (`across`): a
// header found on disk says where its segment's LSNs begin, rightly or not.
void CheckLsnOrder(const std::vector<Rec>& records, bool across) {
  for (size_t i = 1; i < records.size(); ++i) {
    const Rec& a = records[i - 1];
    const Rec& b = records[i];
    const bool ok = a.segment == b.segment ? b.lsn == a.lsn + 1 : !across || b.lsn > a.lsn;
    if (!ok) Fail("LSNs out of order", std::to_string(a.lsn) + " then " + std::to_string(b.lsn));
  }
}

std::unique_ptr<SegmentLog> OpenLog(const fs::path& dir) {
  LogOptions options;
  options.dir = dir.string();
  // Sealed as soon as every record is released, however young: the
  // invariants below expect a released active segment gone at the restart.
  options.early_seal_age = std::chrono::milliseconds(0);
  std::unique_ptr<SegmentLog> log;
  const Status st = SegmentLog::Open(options, &log);
  if (!st.ok()) Fail("Open", st.message());
  return log;
}

void WriteFile(const fs::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

int TestOne(std::string_view input) {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);  // a warning per corrupt tail, every input
    return true;
  }();
  (void)quiet;
  if (input.size() < 8) return 0;
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(input[i]); };
  const int header_mode = byte(0) & 3;
  const bool fix_crcs = (byte(0) & 4) != 0;
  const bool spare_last = (byte(0) & 8) != 0;
  const bool stale_free = (byte(0) & 16) != 0;
  const bool two = (byte(0) & 32) != 0;
  const bool release = (byte(0) & 64) != 0;
  const uint64_t first_number = 1 + byte(1);
  const uint64_t first_lsn = 1 + uint64_t{U32(input, 3)};
  const uint64_t epoch = byte(7);
  const std::string_view bytes = input.substr(8);

  // The segment files, oldest first.
  std::vector<std::string_view> parts = {bytes};
  if (two) {
    const size_t cut = bytes.size() * byte(2) / 256;
    parts = {bytes.substr(0, cut), bytes.substr(cut)};
  }
  std::vector<std::pair<uint64_t, std::string>> files;
  uint64_t next_lsn = first_lsn;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string file;
    if (header_mode != 0) {
      // As OpenNewSegment writes it: each segment begins at the LSN after the last one's.
      file.assign(header_mode == 3 ? kHeaderV1 : kHeaderV2, '\0');
      std::memcpy(file.data(), "SHDQ", 4);
      PutU32(file, 4, header_mode == 3 ? 1 : 2);
      PutU64(file, 8, epoch);
      PutU64(file, 16, next_lsn);
      if (header_mode == 2) PutU32(file, kHeaderV1, kRecycled);
    }
    file.append(parts[i]);
    if (const std::optional<Header> h = ParseHeader(file); h && fix_crcs) {
      FixCrcs(file, h->size, h->key, spare_last);
    }
    const Expected e = Read(0, file);
    if (e.header) next_lsn = e.header->first_lsn + e.records.size();
    files.emplace_back(first_number + i * (1 + byte(2) % 3), std::move(file));
  }

  const fs::path dir = WorkDir() / "log";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  for (const auto& [number, file] : files) WriteFile(dir / SegmentName(number, "seg"), file);
  const fs::path free_file = dir / SegmentName(first_number + 7, "free");
  if (stale_free) WriteFile(free_file, "a released segment's old bytes");

  // The epoch and the next LSN the log takes from the newest segment with a header.
  std::optional<Header> newest;
  uint64_t expected_next = 1;
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    const Expected e = Read(it->first, it->second);
    if (!e.header) continue;
    newest = e.header;
    expected_next = e.records.empty() ? e.header->first_lsn : e.records.back().lsn + 1;
    break;
  }
  const Replayed want = Expect(files);
  const bool built = header_mode != 0;

  uint64_t epoch_seen = 0;
  Rec appended;
  {
    std::unique_ptr<SegmentLog> log = OpenLog(dir);
    if (fs::exists(free_file)) Fail("stale .free file", "still there after Open");
    if (newest && newest->epoch != 0 && log->epoch() != newest->epoch) {
      Fail("epoch", "not the newest segment's");
    }
    epoch_seen = log->epoch();
    const Replayed first = Replay(*log);
    CheckReplay(first, want, "replay");
    CheckLsnOrder(first.records, built);
    CheckReplay(Replay(*log), want, "second replay");  // counted once, read the same

    // A record appended after the replay: the next LSN, read back as written.
    appended.kind = byte(7);
    appended.payload = std::string(bytes.substr(bytes.size() - std::min<size_t>(bytes.size(), 40)));
    Ticket ref;
    const Status result =
        log->Append(static_cast<RecordKind>(appended.kind), appended.payload, &ref);
    if (!result.ok()) Fail("Append", result.message());
    if (ref.lsn() != expected_next) Fail("appended LSN", std::to_string(ref.lsn()));
    RecordKind kind{};
    std::string payload;
    const Status st = log->Read(ref, &kind, &payload);
    if (!st.ok()) Fail("Read of the appended record", st.message());
    if (static_cast<uint8_t>(kind) != appended.kind || payload != appended.payload) {
      Fail("appended record", "reads back differently");
    }
    appended.lsn = ref.lsn();
    if (release) {
      ref.Ack();
      log->EndReplay();
    }
    // Otherwise neither the hold nor the replay's pins are released: every segment stays for
    // the next Open, as after a crash.
    log->Close();
  }

  // Reopened: the same records, then the appended one in the segment after them.
  {
    std::unique_ptr<SegmentLog> log = OpenLog(dir);
    if (log->epoch() != epoch_seen) Fail("epoch", "changed across a restart");
    std::vector<std::pair<uint64_t, std::string>> now;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".seg") continue;
      std::ifstream in(e.path(), std::ios::binary);
      now.emplace_back(std::stoull(e.path().stem().string()),
                       std::string(std::istreambuf_iterator<char>(in), {}));
    }
    std::sort(now.begin(), now.end());
    now.pop_back();  // the new active segment, made by this Open
    const Replayed again = Expect(now);
    if (release) {
      // Stored records are not replayed: their segments are gone, the active one sealed.
      if (now.size() != 1 || now[0].first <= files.back().first + 1 || !again.records.empty()) {
        Fail("after a restart", "released records or their segments are still there");
      }
    } else {
      if (now.size() != files.size() + 1) Fail("segments after a restart", "not one more");
      if (again.records.size() != want.records.size() + 1) {
        Fail("after a restart", "the appended record is not there");
      }
      appended.segment = again.records.back().segment;
      appended.offset = again.records.back().offset;
      if (!(again.records.back() == appended)) Fail("after a restart", "appended record differs");
    }
    const Replayed replayed = Replay(*log);
    CheckReplay(replayed, again, "replay after a restart");
    CheckLsnOrder(replayed.records, built);
    log->Close();
  }
  fs::remove_all(dir, ec);
  return 0;
}

}  // namespace spanhouse::fuzz
