#pragma once
// Printing and saving verification outcomes.

#include "vlrnn/verify/matrix.h"

#include <ostream>
#include <string>
#include <vector>

namespace vlrnn::verify {

// A table: case, method, max abs diff, max rel diff, worst tensor, pass. With
// `failures_only`, passing rows are left out (the summary line still counts them).
void print_table(std::ostream& out, const std::vector<VerifyOutcome>& outcomes,
                 bool failures_only = false);
// "N passed, M failed" (plus the approximate methods reported).
std::string summary_line(const std::vector<VerifyOutcome>& outcomes);
// One outcome as a line of JSON (a verify record's fields; `vlrnn verify` writes them through
// the results writer, experiments/lib/results_store.h).
std::string outcome_json(const VerifyOutcome& outcome);

}  // namespace vlrnn::verify
