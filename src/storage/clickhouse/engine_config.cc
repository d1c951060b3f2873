#include "storage/clickhouse/engine_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace spanhouse::storage {

std::string XmlEscape(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// A local disk's path ends with '/' (the engine joins names onto it).
std::string DirWithSlash(std::string p) {
  if (p.empty() || p.back() != '/') p += '/';
  return p;
}

std::string CompressionXml(const CompressionOptions& comp) {
  // min_part_size is compared with the part's compressed size (for a merge:
  // the sum of its sources'), so a part crosses it once and stays above.
  // min_part_size_ratio with the merged part's share of the table's active
  // bytes; an insert is chosen for as size 0, share 0, so it stays LZ4. A
  // case that holds sets ZSTD; none: the engine's LZ4.
  auto zstd_case = [&](uint64_t min_bytes, double min_ratio) {
    return fmt::format(
        "    <case>\n"
        "      <min_part_size>{}</min_part_size>\n"
        "      <min_part_size_ratio>{}</min_part_size_ratio>\n"
        "      <method>zstd</method>\n"
        "      <level>{}</level>\n"
        "    </case>\n",
        min_bytes, min_ratio, comp.zstd_level);
  };
  std::string cases = zstd_case(comp.zstd_min_part_bytes, 0);
  if (comp.zstd_min_part_bytes > 0 && comp.zstd_min_part_ratio > 0) {
    cases += zstd_case(0, comp.zstd_min_part_ratio);
  }
  return "  <compression>\n" + cases + "  </compression>\n";
}

std::string StorageXml(const TieringOptions& opts) {
  if (opts.cold_path.empty()) return "";
  const bool s3 = !opts.s3_endpoint.empty();
  std::string s3_disk;
  if (s3) {
    std::string creds;
    if (!opts.s3_access_key_id.empty()) {
      creds = fmt::format(
          "        <access_key_id>{}</access_key_id>\n"
          "        <secret_access_key>{}</secret_access_key>\n",
          XmlEscape(opts.s3_access_key_id), XmlEscape(opts.s3_secret_access_key));
    }
    if (!opts.s3_region.empty()) {
      creds += fmt::format("        <region>{}</region>\n", XmlEscape(opts.s3_region));
    }
    s3_disk = fmt::format(
        "      <cold_s3>\n"
        "        <type>s3</type>\n"
        "        <endpoint>{}</endpoint>\n"
        "{}"
        "      </cold_s3>\n",
        XmlEscape(DirWithSlash(opts.s3_endpoint)), creds);
  }
  // The hot volume is named "default" and holds the default disk: the
  // engine lets a table switch policies in place only when the new policy
  // has the old one's volumes (an existing spans table was on "default").
  // No merges on the cold volume (prefer_not_to_merge): a part arrives
  // there after hours of merging on hot, and a merge of a cold part with a
  // newer hot one of the same day would bring the old spans back to hot
  // until the result is old enough to move again (and on S3 would read and
  // write the bucket). Parts expired on cold are still dropped.
  // move_factor 0: parts move by the TTL alone, never because the hot disk
  // is filling (with the default cold directory on the same file system a
  // move frees nothing, and a nearly full disk would send every new part to
  // cold at once).
  return fmt::format(
      "  <storage_configuration>\n"
      "    <disks>\n"
      "      <cold>\n"
      "        <type>local</type>\n"
      "        <path>{0}</path>\n"
      "      </cold>\n"
      "{1}"
      "    </disks>\n"
      "    <policies>\n"
      "      <{2}>\n"
      "        <volumes>\n"
      "          <default>\n"
      "            <disk>default</disk>\n"
      "          </default>\n"
      "          <cold>\n"
      "            <disk>{3}</disk>\n"
      "            <prefer_not_to_merge>true</prefer_not_to_merge>\n"
      "          </cold>\n"
      "        </volumes>\n"
      "        <move_factor>0</move_factor>\n"
      "      </{2}>\n"
      "    </policies>\n"
      "  </storage_configuration>\n",
      XmlEscape(DirWithSlash(opts.cold_path)), s3_disk, kTieredPolicy, s3 ? "cold_s3" : "cold");
}

}  // namespace

std::string EngineConfigXml(const TieringOptions& opts, const CompressionOptions& comp) {
  return "<!-- Written by spanhouse at every start; edits are overwritten. -->\n<clickhouse>\n" +
         StorageXml(opts) + CompressionXml(comp) + "</clickhouse>\n";
}

Status WriteEngineConfig(const std::string& path, const TieringOptions& opts,
                         const CompressionOptions& comp) {
  std::error_code ec;
  if (!opts.cold_path.empty()) std::filesystem::create_directories(opts.cold_path, ec);
  if (ec) {
    return Status::Internal(
        fmt::format("cannot create the cold directory {}: {}", opts.cold_path, ec.message()));
  }
  const std::string tmp = path + ".tmp";
  const std::string xml = EngineConfigXml(opts, comp);
  // Created 0600 from the start: the file may hold S3 credentials.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Internal(fmt::format("cannot write {}: {}", tmp, strerror(errno)));
  ::fchmod(fd, 0600);  // an older file of that name may have had other bits
  size_t done = 0;
  while (done < xml.size()) {
    const ssize_t n = ::write(fd, xml.data() + done, xml.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = strerror(errno);
      ::close(fd);
      return Status::Internal(fmt::format("cannot write {}: {}", tmp, why));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    return Status::Internal(fmt::format("cannot write {}: {}", tmp, strerror(errno)));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Internal(fmt::format("cannot replace {}: {}", path, ec.message()));
  return Status::Ok();
}

std::vector<std::string> EngineArgs(const std::string& config_path) {
  if (config_path.empty()) return {};
  return {"--config-file=" + config_path};
}

}  // namespace spanhouse::storage
