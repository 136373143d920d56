#include "lib/verify_eta.h"

#include "lib/method_specs.h"

namespace vlrnn::experiments {
namespace {

double size_of(const verify::VerifyCase& c) { return double(c.time_steps * c.batch); }

}  // namespace

double VerifyEta::prior(const std::string& method_name) {
  // Measured on the reduced grid (`verify --model lstm --methods M`, T = 28, 2 cores): a
  // planner case takes about 18 times a vlrnn case (it measures its cost model first);
  // checkpoint and revolve are within a factor of two of vlrnn.
  return method_name == "planner" ? 20.0 : 1.0;
}

void VerifyEta::finished(const verify::VerifyCase& c, double seconds) {
  const std::string name = method_name_of(c.method);
  auto& m = per_method_[name];
  m.seconds += seconds;
  m.size += size_of(c);
  all_.seconds += seconds;
  all_.size += size_of(c) * prior(name);
}

double VerifyEta::remaining(const std::vector<verify::VerifyCase>& cases, size_t done) const {
  if (all_.size <= 0) return -1.0;
  double total = 0.0;
  for (size_t i = done; i < cases.size(); ++i) {
    const std::string name = method_name_of(cases[i].method);
    const auto it = per_method_.find(name);
    total += it != per_method_.end() && it->second.size > 0
                 ? it->second.seconds / it->second.size * size_of(cases[i])
                 : all_.seconds / all_.size * size_of(cases[i]) * prior(name);
  }
  return total;
}

}  // namespace vlrnn::experiments
