#include "lib/method_checks.h"

#include "lib/method_specs.h"

#include "vlrnn/registry/methods.h"

namespace vlrnn::experiments {

void check_method_specs(const std::vector<std::string>& specs) {
  for (const auto& spec : specs) make_method_from_spec(substitute_block(spec, 8, 64));
}

}  // namespace vlrnn::experiments
