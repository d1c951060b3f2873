// The fuzz targets' seed corpus (tests/fuzz/corpus), replayed in the ordinary build: every
// seed is a valid request that decodes, and re-encodes to the same spans. An input a fuzzer
// found (crash-*) is checked in there too; it may be refused, but whatever it decodes to must
// re-encode, so the plain unit tests keep reproducing what the fuzzer found.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "codec/otlp.h"
#include "codec/otlp_encode.h"
#include "codec/zipkin.h"
#include "model/span_batch.h"

namespace spanhouse::codec {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> Seeds(const char* target) {
  std::vector<fs::path> files;
  for (const auto& e :
       fs::directory_iterator(fs::path(SPANHOUSE_TESTDATA) / "../fuzz/corpus" / target)) {
    files.push_back(e.path());
  }
  return files;
}

std::string Read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool IsFinding(const fs::path& p) {
  return p.filename().string().starts_with("crash-");
}

// Decodes every seed of `target` with `decode(bytes, batch)` and checks what it accepts.
template <typename Decode>
void Replay(const char* target, Decode decode) {
  const auto seeds = Seeds(target);
  ASSERT_GE(seeds.size(), 4u);
  for (const auto& seed : seeds) {
    SpanBatch b;
    const Status st = decode(Read(seed), b);
    if (IsFinding(seed) && !st.ok()) continue;
    ASSERT_TRUE(st.ok()) << seed << ": " << st.message();
    SpanBatch again;
    ASSERT_TRUE(DecodeOtlpProto(EncodeOtlpProto(b), again).ok()) << seed;
    std::string why;
    EXPECT_TRUE(b.LogicallyEquals(again, &why)) << seed << ": " << why;
  }
}

TEST(FuzzCorpus, ProtoSeedsDecodeAndReencode) {
  Replay("otlp_proto",
         [](std::string body, SpanBatch& b) { return DecodeOtlpProtoOwned(std::move(body), b); });
}

TEST(FuzzCorpus, JsonSeedsDecodeAndReencode) {
  Replay("otlp_json",
         [](const std::string& body, SpanBatch& b) { return DecodeOtlpJson(body, b); });
}

TEST(FuzzCorpus, ZipkinJsonSeedsDecodeAndReencode) {
  Replay("zipkin_json",
         [](const std::string& body, SpanBatch& b) { return DecodeZipkinJson(body, b); });
}

TEST(FuzzCorpus, ZipkinProtoSeedsDecodeAndReencode) {
  Replay("zipkin_proto",
         [](const std::string& body, SpanBatch& b) { return DecodeZipkinProto(body, b); });
}

// make_seeds writes each Zipkin span list both ways, as zipkin_json/NAME.json and
// zipkin_proto/NAME: the two must decode to the same spans.
TEST(FuzzCorpus, ZipkinSeedPairsDecodeAlike) {
  int pairs = 0;
  for (const auto& proto : Seeds("zipkin_proto")) {
    const fs::path json =
        proto.parent_path().parent_path() / "zipkin_json" / (proto.filename().string() + ".json");
    if (!fs::exists(json)) continue;
    SpanBatch a, b;
    ASSERT_TRUE(DecodeZipkinJson(Read(json), a).ok()) << json;
    ASSERT_TRUE(DecodeZipkinProto(Read(proto), b).ok()) << proto;
    std::string why;
    EXPECT_TRUE(a.LogicallyEquals(b, &why)) << proto << ": " << why;
    ++pairs;
  }
  EXPECT_GE(pairs, 4);
}

}  // namespace
}  // namespace spanhouse::codec
