// The fixed world's pods and routes.
#include "tools/loadgen/generator_world.h"

#include <utility>

#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen::corpus {
namespace {

constexpr const char* kWindows[] = {"Windows NT 10.0; Win64; x64", "Windows NT 10.0; WOW64",
                                    "Windows NT 6.1; Win64; x64", "Windows NT 6.3; Win64; x64"};
constexpr const char* kMacOs[] = {"10_15_7", "10_15_6", "10_14_6", "11_7_10",
                                  "12_7_4",  "13_6_6",  "14_4_1",  "14_5"};
constexpr const char* kLinux[] = {"X11; Linux x86_64", "X11; Ubuntu; Linux x86_64",
                                  "X11; Fedora; Linux x86_64", "X11; Linux aarch64"};
constexpr const char* kPixels[] = {"Pixel 4a",    "Pixel 5",    "Pixel 6",  "Pixel 6a",
                                   "Pixel 6 Pro", "Pixel 7",    "Pixel 7a", "Pixel 7 Pro",
                                   "Pixel 8",     "Pixel 8 Pro"};
constexpr const char* kGalaxies[] = {
    "SM-S918B", "SM-S911B", "SM-S916B", "SM-G991B", "SM-G996B", "SM-G998B", "SM-A525F", "SM-A536B",
    "SM-A546B", "SM-A145R", "SM-A135F", "SM-M336B", "SM-F946B", "SM-F731B", "SM-N986B", "SM-T870"};
constexpr const char* kOtherPhones[] = {"moto g(60)", "Redmi Note 12", "CPH2451", "M2101K6G",
                                        "2201116SG",  "V2145",         "RMX3630", "LE2123"};
constexpr const char* kAndroidBuilds[] = {"UP1A", "UQ1A", "TQ3A", "TP1A", "SP2A", "RQ3A"};

// Parts drawn from a hash of (family, rank): the same pair, the same string.
class Parts {
 public:
  explicit Parts(uint64_t seed) : state_(seed) {}
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(SplitMix64(state_) % n); }
  template <size_t N>
  const char* Of(const char* const (&list)[N]) {
    return list[Below(N)];
  }

 private:
  uint64_t state_;
};

void AppendChrome(std::string& out, Parts& p, uint32_t major) {
  out += "Chrome/";
  codec::AppendInt(out, major);
  out += ".0.";
  codec::AppendInt(out, 4896 + 62 * (major - 100));  // each major's build
  out += '.';
  codec::AppendInt(out, p.Below(220));
}

void AppendAndroid(std::string& out, Parts& p) {
  out += "Android ";
  codec::AppendInt(out, 10 + p.Below(5));
}

}  // namespace

void AppendUserAgent(std::string& out, uint32_t family, uint32_t rank) {
  uint64_t seed = static_cast<uint64_t>(family) << 32 | rank;
  Parts p(SplitMix64(seed));
  const uint32_t chrome = 100 + p.Below(26);
  switch (family) {
    case 0:  // Chrome on Windows
    case 3:  // Edge on Windows
      out += "Mozilla/5.0 (";
      out += p.Of(kWindows);
      out += ") AppleWebKit/537.36 (KHTML, like Gecko) ";
      AppendChrome(out, p, chrome);
      out += " Safari/537.36";
      if (family == 3) {
        out += " Edg/";
        codec::AppendInt(out, chrome);
        out += ".0.";
        codec::AppendInt(out, 1200 + p.Below(1400));
        out += '.';
        codec::AppendInt(out, p.Below(120));
      }
      return;
    case 1:  // Safari on a Mac
      out += "Mozilla/5.0 (Macintosh; Intel Mac OS X ";
      out += p.Of(kMacOs);
      out += ") AppleWebKit/605.1.15 (KHTML, like Gecko) Version/";
      codec::AppendInt(out, 15 + p.Below(3));
      out += '.';
      codec::AppendInt(out, p.Below(7));
      if (p.Below(2) == 0) {
        out += '.';
        codec::AppendInt(out, 1 + p.Below(2));
      }
      out += " Safari/605.1.15";
      return;
    case 2: {  // Firefox on Linux
      const uint32_t v = 100 + p.Below(27);
      out += "Mozilla/5.0 (";
      out += p.Of(kLinux);
      out += "; rv:";
      codec::AppendInt(out, v);
      out += ".0) Gecko/20100101 Firefox/";
      codec::AppendInt(out, v);
      out += ".0";
      if (p.Below(3) == 0) {
        out += '.';
        codec::AppendInt(out, 1 + p.Below(3));
      }
      return;
    }
    case 4: {  // Safari on an iPhone
      std::string ios;
      codec::AppendInt(ios, 15 + p.Below(3));
      ios += '_';
      codec::AppendInt(ios, p.Below(8));
      if (p.Below(2) == 0) {
        ios += '_';
        codec::AppendInt(ios, 1 + p.Below(3));
      }
      out += "Mozilla/5.0 (iPhone; CPU iPhone OS ";
      out += ios;
      out += " like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/";
      for (char c : ios) out += c == '_' ? '.' : c;
      out += " Mobile/15E148 Safari/604.1";
      return;
    }
    case 5:  // Chrome on Android phones
    case 6:
      out += "Mozilla/5.0 (Linux; ";
      AppendAndroid(out, p);
      out += "; ";
      out += family == 5 ? p.Of(kPixels) : p.Of(kGalaxies);
      out += ") AppleWebKit/537.36 (KHTML, like Gecko) ";
      AppendChrome(out, p, chrome);
      out += " Mobile Safari/537.36";
      return;
    case 7:  // the shop's iOS app, its version that of the family's
    case 8:
      out += family == 7 ? "ShopApp/4.12.0 (iPhone" : "ShopApp/4.11.2 (iPhone";
      codec::AppendInt(out, 12 + p.Below(5));
      out += ',';
      codec::AppendInt(out, 1 + p.Below(8));
      out += "; iOS ";
      codec::AppendInt(out, 15 + p.Below(3));
      out += '.';
      codec::AppendInt(out, p.Below(8));
      out += '.';
      codec::AppendInt(out, p.Below(3));
      out += p.Below(3) == 0 ? "; Scale/2.00)" : "; Scale/3.00)";
      return;
    case 9:  // the shop's Android app
    case 10:
      out += family == 9 ? "ShopApp/4.12.0 (" : "ShopApp/4.10.5 (";
      AppendAndroid(out, p);
      out += "; ";
      out += p.Below(2) == 0   ? p.Of(kGalaxies)
             : p.Below(2) == 0 ? p.Of(kPixels)
                               : p.Of(kOtherPhones);
      out += "; Build/";
      out += p.Of(kAndroidBuilds);
      out += '.';
      codec::AppendInt(out, 230000 + 10000 * p.Below(2) + 100 * (1 + p.Below(12)) + 5 * p.Below(6));
      out += ".0";
      AppendPadded(out, p.Below(40), 2);
      out += ')';
      return;
    default:  // API clients
      switch (p.Below(4)) {
        case 0:
          out += "curl/";
          out += p.Below(2) == 0 ? "7." : "8.";
          codec::AppendInt(out, p.Below(20));
          out += '.';
          codec::AppendInt(out, p.Below(2));
          return;
        case 1:
          out += "python-requests/2.";
          codec::AppendInt(out, 25 + p.Below(8));
          out += '.';
          codec::AppendInt(out, p.Below(4));
          return;
        case 2:
          out += "okhttp/4.";
          codec::AppendInt(out, 9 + p.Below(4));
          out += '.';
          codec::AppendInt(out, p.Below(4));
          return;
        default:
          out += p.Below(2) == 0 ? "Go-http-client/1.1" : "Go-http-client/2.0";
          return;
      }
  }
}

World::World() {
  Rng w(0x5eedf00dcafe1234ull);  // the world is the same whatever the seed
  static constexpr char kAlnum[] = "bcdfghjklmnpqrstvwxz2456789";
  std::vector<std::string> nodes;
  for (int i = 0; i < 64; ++i) {
    std::string n = "ip-10-0-";
    codec::AppendInt(n, w.Below(64));
    n += '-';
    codec::AppendInt(n, 1 + w.Below(254));
    n += ".ec2.internal";
    nodes.push_back(std::move(n));
  }
  for (int s = 0; s < kServiceCount; ++s) {
    std::string rs;
    for (int i = 0; i < 10; ++i) rs += kAlnum[w.Below(sizeof(kAlnum) - 1)];
    for (int p = 0; p < kServices[s].pods; ++p) {
      Pod pod;
      pod.name = std::string(kServices[s].name) + "-" + rs + "-";
      for (int i = 0; i < 5; ++i) pod.name += kAlnum[w.Below(sizeof(kAlnum) - 1)];
      const uint64_t a = w.Next();
      const uint64_t b = w.Next();
      AppendUuid(pod.uid, a, b);
      pod.node = nodes[w.Below(static_cast<uint32_t>(nodes.size()))];
      AppendIpv4(pod.ip,
                 (10u << 24) | ((1 + w.Below(3)) << 16) | (w.Below(256) << 8) | (1 + w.Below(254)));
      pods[s].push_back(std::move(pod));
    }
  }
  double total = 0;
  for (const Prefix& p : kPrefixes) {
    for (const BaseRoute& b : kBaseRoutes) {
      Route r;
      r.base = &b;
      r.route = std::string(p.path) + b.path;
      r.name = std::string(b.method) + " " + r.route;
      total += b.weight * p.weight;
      r.cumulative = total;
      routes.push_back(std::move(r));
    }
  }
  for (Route& r : routes) r.cumulative /= total;
}

}  // namespace spanhouse::loadgen::corpus
