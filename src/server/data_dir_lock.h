// One spanhouse per data directory: an exclusive flock on <dir>/spanhouse.lock,
// taken before anything in the directory is touched and held until exit.
#pragma once

#include <string>

#include "common/status.h"

namespace spanhouse::server {

class DataDirLock {
 public:
  // Creates the directory if missing, then locks it. If another process
  // holds the lock, returns an error naming its pid and changes nothing.
  static Status Acquire(const std::string& dir, DataDirLock* out);
  DataDirLock() = default;
  DataDirLock(DataDirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  DataDirLock& operator=(DataDirLock&& o) noexcept;
  ~DataDirLock();

 private:
  int fd_ = -1;
};

}  // namespace spanhouse::server
