// The embedded engine's configuration file: the hot and cold disks and the
// storage policy the spans table uses (decision 0015; docs/decisions/
// chdb-facts.md: a policy of two disks and TTL ... TO VOLUME ..., ... DELETE
// works).
//
// chDB reads it when the engine boots, i.e. at the first chdb_connect of the
// process (--config-file=FILE); a connection opened while the engine runs
// shares that engine and ignores its own --config-file. Every connection is
// given the same arguments anyway (EngineArgs), so whichever opens first
// boots the engine the same way.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace spanhouse::storage {

// The storage policy of the spans table: the hot volume (named "default",
// see engine_config.cc) on the engine's default disk, the data directory;
// volume "cold" on the cold disk.
inline constexpr std::string_view kTieredPolicy = "spanhouse_tiered";

struct TieringOptions {
  // The cold volume's directory (absolute). Always defined as the disk
  // "cold", even when the cold volume is S3: a data directory switched from
  // a directory to S3 then fails to start with the engine's "part was found
  // on disk cold which is not defined in the storage policy" instead of
  // silently losing sight of the parts there.
  std::string cold_path;
  // Non-empty: the cold volume is this bucket (disk "cold_s3", its metadata
  // in <engine path>/disks/cold_s3/), e.g. "http://127.0.0.1:9000/spans/".
  std::string s3_endpoint;
  std::string s3_access_key_id;
  std::string s3_secret_access_key;
  std::string s3_region;
};

// The codec of the columns the schema declares CODEC(Default), chosen by the
// engine per part from the part's compressed size: LZ4 below
// `zstd_min_part_bytes`, ZSTD(zstd_level) from there on. Fresh inserts and
// their first merges are small and rewritten within seconds at full load, so
// they take the cheap codec; the parts that stay (and move to the cold
// volume) take the small one. 0: ZSTD for every part.
struct CompressionOptions {
  uint64_t zstd_min_part_bytes = 32ull << 20;  // serve's default (storage.zstd_min_part_bytes)
  // A merge into a part of at least this share of the table is ZSTD too,
  // however small: a small store's merged parts (decision 0064).
  double zstd_min_part_ratio = 0.25;
  int zstd_level = 1;
};

// The engine's XML configuration: the storage policy for `opts` (none when
// opts.cold_path is empty) and the compression rule `comp`.
std::string EngineConfigXml(const TieringOptions& opts, const CompressionOptions& comp = {});

// Writes EngineConfigXml(opts, comp) to `path` (replacing it atomically, mode
// 0600: it may hold S3 credentials) and creates the cold directory.
Status WriteEngineConfig(const std::string& path, const TieringOptions& opts,
                         const CompressionOptions& comp = {});

// The chdb_connect arguments beyond --path for an engine configured by the
// file at `config_path` (empty: none).
std::vector<std::string> EngineArgs(const std::string& config_path);

// Escapes text for an XML element.
std::string XmlEscape(std::string_view v);

}  // namespace spanhouse::storage
