// The fixed world's pods and routes.
#include "tools/loadgen/generator_world.h"

#include <utility>

#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen::corpus {

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
