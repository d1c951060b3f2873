#include "storage/clickhouse/dead_letter.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace spanhouse::storage {

namespace {

Status WriteAllSynced(const std::string& path, int flags, std::span<const std::string> pieces) {
  const int fd = ::open(path.c_str(), flags | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot open " + path + ": " + std::strerror(errno));
  bool ok = true;
  for (const std::string& piece : pieces) {
    for (size_t done = 0; ok && done < piece.size();) {
      const ssize_t w = ::write(fd, piece.data() + done, piece.size() - done);
      if (w < 0 && errno == EINTR) continue;
      ok = w > 0;
      if (ok) done += static_cast<size_t>(w);
    }
  }
  ok = ok && ::fdatasync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) return Status::Internal("cannot write " + path + ": " + std::strerror(saved));
  return Status::Ok();
}

}  // namespace

Status WriteDeadLetter(const std::string& dir, const DeadLetterEntry& entry,
                       std::span<const std::string> block_pieces) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Internal("cannot create " + dir + ": " + ec.message());
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const std::string file = fmt::format("{}-w{}-d{}{}.native", now, entry.writer, entry.day,
                                       entry.table == "spans" ? std::string() : "-" + entry.table);
  if (Status st = WriteAllSynced(dir + "/" + file, O_CREAT | O_TRUNC, block_pieces); !st.ok()) {
    return st;
  }
  std::string error = entry.error;
  for (char& c : error) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  const std::string line = fmt::format("{}\t{}\t{}\t{}\t{}\t{}\n", now, file, entry.writer,
                                       entry.day, entry.rows, error);
  return WriteAllSynced(dir + "/index.tsv", O_CREAT | O_APPEND, {&line, 1});
}

}  // namespace spanhouse::storage
