#pragma once
// Method specs as users write them: "vlrnn", "vlrnn:block_length=64", "tbptt:k1=8,k2=16", lists of
// them separated by commas, and templates for sweeps ("checkpoint:segments={N}"): their
// text only, without LibTorch (lib/method_checks.h builds them).

#include <cstdint>
#include <string>
#include <vector>

namespace vlrnn::experiments {

// Splits "full,vlrnn:block_length=64,tbptt:k1=8,k2=16" into specs. A comma starts a new spec
// unless what follows is another key=value option of the current one ("k2=16" has a '='
// and no ':'), so multi-option specs need no quoting.
std::vector<std::string> split_method_list(const std::string& list);

// The registry name of a spec: the part before ':'.
std::string method_name_of(const std::string& spec);
bool has_options(const std::string& spec);

// NOTE [ Spec templates ]: {K} is replaced by the block length and {N} by the number of
// blocks ceil(T / K), so one template covers methods configured either way
// ("vlrnn:block_length={K}", "checkpoint:segments={N}", "tbptt:k={K}").
bool uses_block(const std::string& spec);  // true when it holds {K} or {N}
std::string substitute_block(const std::string& spec, int64_t block, int64_t time_steps);

}  // namespace vlrnn::experiments
