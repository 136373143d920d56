#pragma once
// The time left of a `vlrnn verify` run, from the cases finished so far.
//
// NOTE [ Verify's ETA ]: cases differ in cost by method far more than by anything else (the
// planner measures a cost model before its first step: tens of times a block method's
// case), and the matrix runs them method by method, so an ETA from the mean case so far is
// wrong by that factor until the planner's cases run. Each remaining case is estimated from
// the finished cases of its own method, per step and sequence (T x B); a method none of
// whose cases has finished yet, from the others times a prior of its relative cost.

#include "vlrnn/verify/case.h"

#include <map>
#include <string>
#include <vector>

namespace vlrnn::experiments {

class VerifyEta {
 public:
  // A case finished after `seconds`.
  void finished(const verify::VerifyCase& c, double seconds);
  // Seconds the cases from `done` on will take; -1 before any case finished.
  double remaining(const std::vector<verify::VerifyCase>& cases, size_t done) const;
  // A method's case cost relative to a block method's (1), before any of it has run.
  static double prior(const std::string& method_name);

 private:
  struct Sum {
    double seconds = 0.0, size = 0.0;
  };
  std::map<std::string, Sum> per_method_;  // by registry name ("planner")
  Sum all_;  // size in prior-weighted units
};

}  // namespace vlrnn::experiments
