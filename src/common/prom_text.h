// The Prometheus text exposition format (0.0.4), built by every component
// that has counters: each family once, with its HELP and TYPE lines, then all
// of its samples (a scraper rejects a family whose samples are split), in
// whatever order the components append them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace spanhouse {

class PromText {
 public:
  // Makes `name` the current family (its header written once, at the first
  // call). `type`: counter, gauge or histogram; a counter's name ends in _total.
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    auto [it, fresh] = index_.try_emplace(std::string(name), families_.size());
    if (fresh) {
      families_.push_back({});
      std::string& h = families_.back().head;
      h.append("# HELP ").append(name).append(" ").append(help).append("\n");
      h.append("# TYPE ").append(name).append(" ").append(type).append("\n");
    }
    current_ = it->second;
  }
  // A sample of the current family; `labels` as `k="v",k2="v2"` (values
  // escaped with Label), or empty.
  void Sample(std::string_view name, std::string_view labels, uint64_t value) {
    std::string& b = lines();
    b.append(name);
    if (!labels.empty()) b.append("{").append(labels).append("}");
    b.append(" ").append(std::to_string(value)).append("\n");
  }
  // A family of one sample.
  void One(std::string_view name, std::string_view type, std::string_view help,
           std::string_view labels, uint64_t value) {
    Family(name, type, help);
    Sample(name, labels, value);
  }
  // The current family's sample lines, to append to (a histogram's).
  std::string& lines() {
    if (families_.empty()) families_.push_back({});
    return families_[current_].body;
  }
  // Whole families rendered elsewhere, put after the others.
  std::string& trailer() { return trailer_; }

  std::string Render() const {
    std::string out;
    for (const auto& f : families_) out.append(f.head).append(f.body);
    return out + trailer_;
  }

  // `k="v"` with v escaped as the format asks (\\, \", \n).
  static std::string Label(std::string_view key, std::string_view value) {
    std::string out(key);
    out += "=\"";
    for (char c : value) {
      if (c == '\\' || c == '"') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += '"';
    return out;
  }

 private:
  struct Rendered {
    std::string head;
    std::string body;
  };
  std::vector<Rendered> families_;
  std::map<std::string, size_t, std::less<>> index_;
  size_t current_ = 0;
  std::string trailer_;
};

}  // namespace spanhouse
