// Tests for request-body decompression (codec/compression.h): every encoding
// round trips, the output cap is exact and is enforced while decoding (a
// small "bomb" never expands into memory), corrupt and truncated input is a
// client error, and zstd frames that ask for a huge window are refused.
#include <gtest/gtest.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_getFrameHeader
#include <zstd.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "codec/compression.h"
#include "common/status.h"
#include "testdata/gzip.h"

namespace spanhouse::codec {
namespace {

// Bytes that do not compress to nothing: a repeating but non-trivial pattern.
std::string Payload(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>('a' + (x >> 16) % 7);
  }
  return s;
}

using testdata::Gzip;

// zlib's compress2: a zlib stream, what HTTP calls "deflate".
std::string Zlib(std::string_view in) {
  uLongf n = compressBound(static_cast<uLong>(in.size()));
  std::string out(n, '\0');
  EXPECT_EQ(
      compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(in.data()),
                static_cast<uLong>(in.size()), Z_BEST_COMPRESSION),
      Z_OK);
  out.resize(n);
  return out;
}

// Raw deflate (windowBits -15): no zlib or gzip header.
std::string RawDeflate(std::string_view in) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(in.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string Zstd(std::string_view in, int level = 3) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), level);
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(n);
  return out;
}

// A zstd frame whose header declares a window of 2^window_log bytes. The
// content size is left unknown (streamed with ZSTD_e_continue first), so the
// encoder cannot shrink the window to the input and must write a window
// descriptor instead of a single-segment header.
std::string ZstdWithWindow(std::string_view in, int window_log) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  EXPECT_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, window_log)));
  EXPECT_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_enableLongDistanceMatching, 1)));
  std::string out(ZSTD_compressBound(in.size()) + 1024, '\0');
  ZSTD_outBuffer ob{out.data(), out.size(), 0};
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  size_t r = ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_continue);
  EXPECT_FALSE(ZSTD_isError(r)) << ZSTD_getErrorName(r);
  ZSTD_inBuffer empty{nullptr, 0, 0};
  do {
    r = ZSTD_compressStream2(cctx, &ob, &empty, ZSTD_e_end);
    EXPECT_FALSE(ZSTD_isError(r)) << ZSTD_getErrorName(r);
  } while (r != 0 && !ZSTD_isError(r));
  ZSTD_freeCCtx(cctx);
  out.resize(ob.pos);
  return out;
}

TEST(Compression, IdentityAndEmptyEncodingCopyTheBody) {
  const std::string in = Payload(1000);
  for (std::string_view enc : {"", "identity"}) {
    std::string out = "stale";
    Status st = Decompress(enc, in, 1000, &out);
    ASSERT_TRUE(st.ok()) << enc << ": " << st.message();
    EXPECT_EQ(out, in) << enc;
  }
}

TEST(Compression, IdentityCapIsExact) {
  const std::string in = Payload(1000);
  std::string out;
  EXPECT_TRUE(Decompress("identity", in, 1000, &out).ok());
  Status st = Decompress("identity", in, 999, &out);
  EXPECT_EQ(st.code(), StatusCode::kTooLarge) << st.message();
  EXPECT_EQ(Decompress("", in, 999, &out).code(), StatusCode::kTooLarge);
}

TEST(Compression, GzipRoundTrip) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{64 * 1024}, size_t{300 * 1000}}) {
    const std::string in = Payload(n);
    std::string out = "stale";
    Status st = Decompress("gzip", Gzip(in), 1 << 20, &out);
    ASSERT_TRUE(st.ok()) << n << ": " << st.message();
    EXPECT_EQ(out, in) << n;
  }
}

TEST(Compression, XGzipIsGzip) {
  const std::string in = Payload(5000);
  std::string out;
  ASSERT_TRUE(Decompress("x-gzip", Gzip(in), 1 << 20, &out).ok());
  EXPECT_EQ(out, in);
}

TEST(Compression, DeflateZlibRoundTrip) {
  for (size_t n : {size_t{1}, size_t{100}, size_t{200 * 1000}}) {
    const std::string in = Payload(n);
    std::string out;
    Status st = Decompress("deflate", Zlib(in), 1 << 20, &out);
    ASSERT_TRUE(st.ok()) << n << ": " << st.message();
    EXPECT_EQ(out, in) << n;
  }
}

TEST(Compression, DeflateAlsoAcceptsAGzipBodyAndGzipAZlibBody) {
  // Both names share one header-detecting inflater.
  const std::string in = Payload(4000);
  std::string out;
  ASSERT_TRUE(Decompress("deflate", Gzip(in), 1 << 20, &out).ok());
  EXPECT_EQ(out, in);
  ASSERT_TRUE(Decompress("gzip", Zlib(in), 1 << 20, &out).ok());
  EXPECT_EQ(out, in);
}

TEST(Compression, RawDeflateWithoutZlibHeaderIsRejected) {
  // HTTP "deflate" is the zlib format (RFC 9110 8.4.1.2); headerless deflate is not accepted.
  std::string out;
  Status st = Decompress("deflate", RawDeflate(Payload(1000)), 1 << 20, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
}

TEST(Compression, ZstdRoundTrip) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{64 * 1024}, size_t{300 * 1000}}) {
    const std::string in = Payload(n);
    std::string out = "stale";
    Status st = Decompress("zstd", Zstd(in), 1 << 20, &out);
    ASSERT_TRUE(st.ok()) << n << ": " << st.message();
    EXPECT_EQ(out, in) << n;
  }
}

TEST(Compression, ZstdConcatenatedFramesAreAllDecoded) {
  const std::string a = Payload(1000);
  const std::string b = "second frame";
  std::string out;
  Status st = Decompress("zstd", Zstd(a) + Zstd(b), 1 << 20, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out, a + b);
}

TEST(Compression, GzipOutputExactlyAtCapIsOkOneByteOverIsTooLarge) {
  // Sizes around the 64 KiB inflate buffer as well as odd ones.
  for (size_t n :
       {size_t{1}, size_t{777}, size_t{64 * 1024}, size_t{64 * 1024 + 1}, size_t{200 * 1000}}) {
    const std::string in = Payload(n);
    const std::string gz = Gzip(in);
    std::string out;
    Status st = Decompress("gzip", gz, n, &out);
    ASSERT_TRUE(st.ok()) << n << ": " << st.message();
    EXPECT_EQ(out, in);
    st = Decompress("gzip", gz, n - 1, &out);
    EXPECT_EQ(st.code(), StatusCode::kTooLarge) << n << ": " << st.message();
  }
}

TEST(Compression, DeflateOutputExactlyAtCapIsOkOneByteOverIsTooLarge) {
  const std::string in = Payload(100 * 1000);
  const std::string z = Zlib(in);
  std::string out;
  EXPECT_TRUE(Decompress("deflate", z, in.size(), &out).ok());
  EXPECT_EQ(Decompress("deflate", z, in.size() - 1, &out).code(), StatusCode::kTooLarge);
}

TEST(Compression, ZstdOutputExactlyAtCapIsOkOneByteOverIsTooLarge) {
  for (size_t n :
       {size_t{1}, size_t{777}, size_t{128 * 1024}, size_t{128 * 1024 + 1}, size_t{200 * 1000}}) {
    const std::string in = Payload(n);
    const std::string zs = Zstd(in);
    std::string out;
    Status st = Decompress("zstd", zs, n, &out);
    ASSERT_TRUE(st.ok()) << n << ": " << st.message();
    EXPECT_EQ(out, in);
    st = Decompress("zstd", zs, n - 1, &out);
    EXPECT_EQ(st.code(), StatusCode::kTooLarge) << n << ": " << st.message();
  }
}

TEST(Compression, TooLargeMessageNamesTheCap) {
  std::string out;
  Status st = Decompress("gzip", Gzip(Payload(5000)), 4096, &out);
  ASSERT_EQ(st.code(), StatusCode::kTooLarge);
  EXPECT_NE(st.message().find("4096"), std::string::npos) << st.message();
}

TEST(Compression, GzipBombStopsAtTheCap) {
  const std::string zeros(64u << 20, '\0');
  const std::string bomb = Gzip(zeros, Z_BEST_COMPRESSION);
  ASSERT_LT(bomb.size(), 128u * 1024);  // ~1000:1
  constexpr size_t kCap = 1u << 20;
  std::string out;
  Status st = Decompress("gzip", bomb, kCap, &out);
  EXPECT_EQ(st.code(), StatusCode::kTooLarge) << st.message();
  // Decoding stopped near the cap instead of expanding all 64 MiB.
  EXPECT_LE(out.size(), kCap);
  EXPECT_LE(out.capacity(), 4 * kCap);
}

TEST(Compression, ZstdBombStopsAtTheCap) {
  const std::string zeros(64u << 20, '\0');
  const std::string bomb = Zstd(zeros, 19);
  ASSERT_LT(bomb.size(), 128u * 1024);
  constexpr size_t kCap = 1u << 20;
  std::string out;
  Status st = Decompress("zstd", bomb, kCap, &out);
  EXPECT_EQ(st.code(), StatusCode::kTooLarge) << st.message();
  EXPECT_LE(out.size(), kCap);
  EXPECT_LE(out.capacity(), 4 * kCap);
}

TEST(Compression, TruncatedGzipIsInvalid) {
  const std::string gz = Gzip(Payload(100 * 1000));
  for (size_t keep :
       {size_t{0}, size_t{1}, size_t{5}, size_t{10}, gz.size() / 2, gz.size() - 8, gz.size() - 1}) {
    std::string out;
    Status st = Decompress("gzip", std::string_view(gz).substr(0, keep), 1 << 20, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument)
        << "kept " << keep << " of " << gz.size() << ": " << st.message();
  }
}

TEST(Compression, TruncatedZlibIsInvalid) {
  const std::string z = Zlib(Payload(100 * 1000));
  for (size_t keep : {size_t{0}, size_t{1}, z.size() / 2, z.size() - 1}) {
    std::string out;
    Status st = Decompress("deflate", std::string_view(z).substr(0, keep), 1 << 20, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument)
        << "kept " << keep << " of " << z.size() << ": " << st.message();
  }
}

TEST(Compression, TruncatedZstdIsInvalid) {
  const std::string zs = Zstd(Payload(300 * 1000));
  for (size_t keep : {size_t{0}, size_t{1}, size_t{4}, size_t{6}, zs.size() / 2, zs.size() - 1}) {
    std::string out;
    Status st = Decompress("zstd", std::string_view(zs).substr(0, keep), 1 << 20, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument)
        << "kept " << keep << " of " << zs.size() << ": " << st.message();
  }
}

TEST(Compression, CorruptedGzipChecksumIsInvalid) {
  std::string gz = Gzip(Payload(10000));
  gz[gz.size() - 6] ^= 0x55;  // inside the CRC32 trailer
  std::string out;
  Status st = Decompress("gzip", gz, 1 << 20, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
}

TEST(Compression, GarbageIsInvalid) {
  const std::string garbage = "this is not compressed at all, just text";
  for (std::string_view enc : {"gzip", "x-gzip", "deflate", "zstd"}) {
    std::string out;
    Status st = Decompress(enc, garbage, 1 << 20, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << enc << ": " << st.message();
  }
  // A valid gzip body under the zstd name and the other way round.
  const std::string in = Payload(1000);
  std::string out;
  EXPECT_EQ(Decompress("zstd", Gzip(in), 1 << 20, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Decompress("gzip", Zstd(in), 1 << 20, &out).code(), StatusCode::kInvalidArgument);
}

TEST(Compression, UnknownEncodingIsUnsupportedMedia) {
  for (std::string_view enc : {"br", "compress", "gzip, br", "*"}) {
    std::string out;
    Status st = Decompress(enc, "whatever", 1 << 20, &out);
    EXPECT_EQ(st.code(), StatusCode::kUnsupportedMedia) << enc;
    EXPECT_NE(st.message().find(std::string(enc)), std::string::npos) << st.message();
  }
}

TEST(Compression, ZstdWindowWithinLimitIsAccepted) {
  const std::string in = Payload(5000);
  const std::string zs = ZstdWithWindow(in, kZstdMaxWindowLog);
  ZSTD_frameHeader fh{};
  ASSERT_EQ(ZSTD_getFrameHeader(&fh, zs.data(), zs.size()), 0u);
  EXPECT_EQ(fh.windowSize, 1ull << kZstdMaxWindowLog);
  std::string out;
  Status st = Decompress("zstd", zs, 1 << 20, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out, in);
}

TEST(Compression, ZstdWindowOverLimitIsRejected) {
  // windowLog 27 with long-distance matching, on a small input: the frame
  // header must carry the 128 MiB window (checked), and the decoder must
  // refuse to allocate it.
  const std::string in = Payload(5000);
  const std::string zs = ZstdWithWindow(in, 27);
  ZSTD_frameHeader fh{};
  ASSERT_EQ(ZSTD_getFrameHeader(&fh, zs.data(), zs.size()), 0u);
  ASSERT_EQ(fh.windowSize, 1ull << 27) << "zstd did not write the window into the header";
  // The frame itself is valid: an unlimited decoder decodes it.
  std::string plain(in.size(), '\0');
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, 27);
  ZSTD_outBuffer ob{plain.data(), plain.size(), 0};
  ZSTD_inBuffer ib{zs.data(), zs.size(), 0};
  EXPECT_EQ(ZSTD_decompressStream(dctx, &ob, &ib), 0u);
  ZSTD_freeDCtx(dctx);
  EXPECT_EQ(plain, in);

  std::string out;
  Status st = Decompress("zstd", zs, 1 << 20, &out);
  // Not corrupt, too large for this server: 413, with the limit named.
  EXPECT_EQ(st.code(), StatusCode::kTooLarge) << st.message();
  EXPECT_NE(st.message().find("window over 8 MiB"), std::string::npos) << st.message();
  EXPECT_TRUE(out.empty());
}

TEST(Compression, ZstdSingleSegmentFrameIsBoundByItsContentSize) {
  // With the content size known, zstd shrinks the window to the input even
  // when asked for 2^27: such frames are accepted (their window is small).
  const std::string in = Payload(5000);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, 27);
  std::string zs(ZSTD_compressBound(in.size()), '\0');
  size_t n = ZSTD_compress2(cctx, zs.data(), zs.size(), in.data(), in.size());
  ZSTD_freeCCtx(cctx);
  ASSERT_FALSE(ZSTD_isError(n));
  zs.resize(n);
  ZSTD_frameHeader fh{};
  ASSERT_EQ(ZSTD_getFrameHeader(&fh, zs.data(), zs.size()), 0u);
  EXPECT_LE(fh.windowSize, 1ull << kZstdMaxWindowLog);
  std::string out;
  ASSERT_TRUE(Decompress("zstd", zs, 1 << 20, &out).ok());
  EXPECT_EQ(out, in);
}

TEST(Compression, OutputIsReplacedNotAppended) {
  const std::string in = Payload(100);
  for (std::string_view enc : {"gzip", "deflate", "zstd", "identity"}) {
    std::string body = enc == "gzip"      ? Gzip(in)
                       : enc == "deflate" ? Zlib(in)
                       : enc == "zstd"    ? Zstd(in)
                                          : in;
    std::string out = "previous contents";
    ASSERT_TRUE(Decompress(enc, body, 1 << 20, &out).ok()) << enc;
    EXPECT_EQ(out, in) << enc;
  }
}

// RFC 1952 2.2: a gzip file is a series of members, and a decoder must
// decompress them all (gzip(1), Go's gzip.Reader, Python's gzip do). Clients
// that compress in chunks produce such bodies.
TEST(Compression, GzipMultiMemberBodyIsFullyDecoded) {
  const std::string a = "first member, ";
  const std::string b = "second member";
  std::string out;
  Status st = Decompress("gzip", Gzip(a) + Gzip(b), 1 << 20, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out, a + b) << "only the first gzip member was decoded";
}

// Bytes after the end of the gzip/zlib stream are neither data nor a valid
// member: they must not be dropped silently (the zstd path rejects them).
TEST(Compression, GzipTrailingGarbageIsInvalid) {
  const std::string in = Payload(1000);
  std::string out;
  Status st = Decompress("gzip", Gzip(in) + "trailing junk", 1 << 20, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "accepted; out.size()=" << out.size();
  st = Decompress("deflate", Zlib(in) + "trailing junk", 1 << 20, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "accepted; out.size()=" << out.size();
}

TEST(Compression, ZstdTrailingGarbageIsInvalid) {
  const std::string in = Payload(1000);
  std::string out;
  Status st = Decompress("zstd", Zstd(in) + "trailing junk", 1 << 20, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
}

TEST(Compression, GzipManyMembers) {
  std::string body;
  std::string want;
  for (int i = 0; i < 100; ++i) {
    const std::string part = "member " + std::to_string(i) + " " + Payload(static_cast<size_t>(i));
    body += Gzip(part);
    want += part;
  }
  std::string out;
  Status st = Decompress("gzip", body, 1 << 20, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out, want);
}

TEST(Compression, GzipMembersShareTheCap) {
  const std::string a = Payload(40000);
  const std::string b = Payload(30000);
  const std::string body = Gzip(a) + Gzip(b);
  std::string out;
  EXPECT_TRUE(Decompress("gzip", body, a.size() + b.size(), &out).ok());
  Status st = Decompress("gzip", body, a.size() + b.size() - 1, &out);
  EXPECT_EQ(st.code(), StatusCode::kTooLarge) << st.message();
}

TEST(Compression, GzipTruncatedSecondMemberIsInvalid) {
  const std::string second = Gzip(Payload(5000));
  for (size_t keep : {size_t{1}, size_t{2}, size_t{10}, second.size() / 2, second.size() - 1}) {
    std::string out;
    Status st = Decompress("gzip", Gzip("first") + second.substr(0, keep), 1 << 20, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument)
        << "kept " << keep << " of " << second.size() << ": " << st.message();
  }
}

}  // namespace
}  // namespace spanhouse::codec
