// Tests for the engine configuration serve writes (engine_config.h): the
// disks and the tiered policy, S3 credentials only when given, XML escaping,
// and the file's permissions. The engine reading it is tested in
// tests/integration/tiering_test.cc and tests/e2e/test_tiering.py.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "storage/clickhouse/engine_config.h"

namespace spanhouse::storage {
namespace {

bool Has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(EngineConfig, DirectoryColdVolume) {
  TieringOptions o;
  o.cold_path = "/srv/cold";
  const std::string xml = EngineConfigXml(o);
  EXPECT_TRUE(Has(xml, "<cold>\n        <type>local</type>\n        <path>/srv/cold/</path>"))
      << xml;
  EXPECT_TRUE(Has(xml, "<spanhouse_tiered>")) << xml;
  // Hot volume named "default" on the default disk; cold volume on "cold".
  EXPECT_TRUE(Has(xml, "<default>\n            <disk>default</disk>\n          </default>")) << xml;
  EXPECT_TRUE(Has(xml, "<disk>cold</disk>")) << xml;
  EXPECT_TRUE(Has(xml, "<prefer_not_to_merge>true</prefer_not_to_merge>")) << xml;
  EXPECT_TRUE(Has(xml, "<move_factor>0</move_factor>")) << xml;
  EXPECT_FALSE(Has(xml, "s3")) << xml;
  // A path given with its slash keeps one.
  o.cold_path = "/srv/cold/";
  EXPECT_TRUE(Has(EngineConfigXml(o), "<path>/srv/cold/</path>"));
}

// The compression rule: ZSTD at the configured level from the threshold on
// (the engine compares it with a part's compressed size); no storage policy
// without a cold path (the storage benchmark's engine).
TEST(EngineConfig, CompressionRuleAndNoPolicyWithoutColdPath) {
  CompressionOptions c;
  c.zstd_min_part_bytes = 12345;
  c.zstd_level = 2;
  const std::string xml = EngineConfigXml(TieringOptions{}, c);
  // ... and for a merge into a part of a quarter of the table or more.
  EXPECT_TRUE(Has(xml,
                  "<compression>\n    <case>\n      <min_part_size>12345</min_part_size>\n"
                  "      <min_part_size_ratio>0</min_part_size_ratio>\n"
                  "      <method>zstd</method>\n      <level>2</level>\n    </case>\n"
                  "    <case>\n      <min_part_size>0</min_part_size>\n"
                  "      <min_part_size_ratio>0.25</min_part_size_ratio>\n"
                  "      <method>zstd</method>\n      <level>2</level>\n    </case>\n"
                  "  </compression>"))
      << xml;
  // ZSTD everywhere: one case.
  c.zstd_min_part_bytes = 0;
  EXPECT_EQ(EngineConfigXml(TieringOptions{}, c).find("0.25"), std::string::npos);
  EXPECT_FALSE(Has(xml, "storage_configuration")) << xml;
  // Serve's default: 32 MiB, level 1.
  EXPECT_TRUE(Has(EngineConfigXml(TieringOptions{}), "<min_part_size>33554432</min_part_size>"));
  EXPECT_TRUE(Has(EngineConfigXml(TieringOptions{}), "<level>1</level>"));
}

TEST(EngineConfig, S3ColdVolume) {
  TieringOptions o;
  o.cold_path = "/srv/cold";
  o.s3_endpoint = "http://127.0.0.1:9000/spans/cold";
  o.s3_access_key_id = "AKIA";
  o.s3_secret_access_key = "a<b>&\"c'";
  o.s3_region = "eu-west-1";
  const std::string xml = EngineConfigXml(o);
  EXPECT_TRUE(Has(xml, "<type>s3</type>")) << xml;
  EXPECT_TRUE(Has(xml, "<endpoint>http://127.0.0.1:9000/spans/cold/</endpoint>")) << xml;
  EXPECT_TRUE(Has(xml, "<access_key_id>AKIA</access_key_id>")) << xml;
  EXPECT_TRUE(Has(xml, "<secret_access_key>a&lt;b&gt;&amp;&quot;c&apos;</secret_access_key>"))
      << xml;
  EXPECT_TRUE(Has(xml, "<region>eu-west-1</region>")) << xml;
  // The cold volume is the bucket; the directory disk stays defined.
  EXPECT_TRUE(Has(xml, "<disk>cold_s3</disk>")) << xml;
  EXPECT_FALSE(Has(xml, "<disk>cold</disk>")) << xml;
  EXPECT_TRUE(Has(xml, "<path>/srv/cold/</path>")) << xml;

  o.s3_access_key_id.clear();
  o.s3_secret_access_key.clear();
  o.s3_region.clear();
  const std::string anon = EngineConfigXml(o);
  EXPECT_FALSE(Has(anon, "access_key_id")) << anon;
  EXPECT_FALSE(Has(anon, "secret_access_key")) << anon;
  EXPECT_FALSE(Has(anon, "<region>")) << anon;
}

TEST(EngineConfig, XmlEscape) {
  EXPECT_EQ(XmlEscape("plain/path_1"), "plain/path_1");
  EXPECT_EQ(XmlEscape("<a & 'b' \"c\">"), "&lt;a &amp; &apos;b&apos; &quot;c&quot;&gt;");
  TieringOptions o;
  o.cold_path = "/srv/a&b <c>";
  EXPECT_TRUE(Has(EngineConfigXml(o), "<path>/srv/a&amp;b &lt;c&gt;/</path>"));
}

TEST(EngineConfig, WrittenPrivatelyWithTheColdDirectory) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spanhouse-engcfg-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "clickhouse-config.xml").string();
  {
    std::ofstream old(file);  // an older file, readable by all
    old << "old";
  }
  ::chmod(file.c_str(), 0644);
  TieringOptions o;
  o.cold_path = (dir / "cold" / "nested").string();
  o.s3_endpoint = "http://127.0.0.1:9000/spans/";
  o.s3_access_key_id = "k";
  o.s3_secret_access_key = "s";
  Status st = WriteEngineConfig(file, o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(std::filesystem::is_directory(o.cold_path));
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), EngineConfigXml(o));
  struct stat sb {};
  ASSERT_EQ(::stat(file.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));
  EXPECT_EQ(EngineArgs(file), std::vector<std::string>{"--config-file=" + file});
  EXPECT_TRUE(EngineArgs("").empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spanhouse::storage
