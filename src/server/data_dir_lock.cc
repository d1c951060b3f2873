#include "server/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace spanhouse::server {

Status DataDirLock::Acquire(const std::string& dir, DataDirLock* out) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot create data directory " + dir + ": " + ec.message());
  const std::string path = dir + "/spanhouse.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Unavailable("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    ::close(fd);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return Status::Unavailable("data directory " + dir + " is in use by another spanhouse (pid " +
                               pid + "); stop it or choose another --data-dir");
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The pid is only informational; the lock is what matters.
  }
  *out = DataDirLock();
  out->fd_ = fd;
  return Status::Ok();
}

DataDirLock& DataDirLock::operator=(DataDirLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace spanhouse::server
