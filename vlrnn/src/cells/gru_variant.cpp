#include "vlrnn/cells/gru_variant.h"

#include "vlrnn/cells/block_rnn.h"

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
  check_layer_weights(w_ih, w_hh, b_ih, b_hh, /*gates=*/3, argument);
}

}  // namespace vlrnn
