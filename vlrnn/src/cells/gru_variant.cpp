#include "vlrnn/cells/gru_variant.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace vlrnn {

std::string to_string(GruVariant variant) {
  switch (variant) {
    case GruVariant::kV1: return "v1";
    case GruVariant::kV2: return "v2";
    case GruVariant::kV3: return "v3";
    case GruVariant::kV4: return "v4";
  }
  return "?";
}

std::vector<GruVariant> all_gru_variants() {
  return {GruVariant::kV1, GruVariant::kV2, GruVariant::kV3, GruVariant::kV4};
}

GruVariant gru_variant_from_string(const std::string& name, const std::string& argument) {
  std::vector<std::string> known;
  for (auto v : all_gru_variants()) {
    if (to_string(v) == name) return v;
    known.push_back(to_string(v));
  }
  TORCH_CHECK(false, argument, ": unknown GRU variant \"", name, "\"; known variants: ",
              fmt::format("{}", fmt::join(known, ", ")));
}

bool resets_before_matmul(GruVariant variant) {
  return variant == GruVariant::kV1 || variant == GruVariant::kV2;
}

void GruWeights::check(const std::string& argument) const {
  TORCH_CHECK(w_ih.defined() && w_hh.defined() && b_ih.defined() && b_hh.defined(), argument,
              ": expected the four tensors w_ih, w_hh, b_ih, b_hh, got an undefined one");
  TORCH_CHECK(w_hh.dim() == 2 && w_hh.size(0) == 3 * w_hh.size(1), argument,
              ".w_hh: expected shape [3H, H], got ", w_hh.sizes());
  const int64_t hidden = w_hh.size(1);
  TORCH_CHECK(w_ih.dim() == 2 && w_ih.size(0) == 3 * hidden, argument,
              ".w_ih: expected shape [3H, F] = [", 3 * hidden, ", F], got ", w_ih.sizes());
  TORCH_CHECK(b_ih.sizes() == torch::IntArrayRef{3 * hidden}, argument,
              ".b_ih: expected shape [3H] = [", 3 * hidden, "], got ", b_ih.sizes());
  TORCH_CHECK(b_hh.sizes() == torch::IntArrayRef{3 * hidden}, argument,
              ".b_hh: expected shape [3H] = [", 3 * hidden, "], got ", b_hh.sizes());
  for (const auto* t : {&w_hh, &b_ih, &b_hh}) {
    TORCH_CHECK(t->scalar_type() == w_ih.scalar_type() && t->device() == w_ih.device(),
                argument, ": expected all four tensors with w_ih's dtype ", w_ih.scalar_type(),
                " on ", w_ih.device(), ", got one with ", t->scalar_type(), " on ", t->device());
  }
}

}  // namespace vlrnn
