#pragma once
// Does a model's output depend on where the sequence is cut into blocks (forward() calls)?
// A block method is exact only for a model that computes the same function wherever a
// block starts; the usual way to break that is drawing random numbers (dropout) once per
// call instead of once per step. Shapes: T steps, B sequences.
//
// NOTE [ Cut dependence, whatever the generator's layout ]
// The direct check runs, from one generator state, one forward over [0, T) and two over
// [0, c) and [c, T), c = T / 2, and compares outputs and final states. It sees per-call draws
// only where one [T, B, H] draw is laid out differently from draws of [c, B, H] and
// [T - c, B, H]. Debian's CPU LibTorch draws dropout element by element, so a per-call mask
// passes there and fails on CUDA (Philox offsets per call) or MKL (a stream per call). So a
// second check follows every random operation (an ATen op taking a Generator, seen by a
// RecordFunction observer) with one extra draw. A model that draws step by step makes the
// same draws however it is cut, so both runs shift alike and agree; one that draws per call
// makes one draw uncut and two cut, and the runs differ whatever the layout. No model gets
// a block offset or a mask: only the generator moves, between random operations.

#include "vlrnn/methods/gradient_method.h"

#include <cstdint>
#include <string>

namespace vlrnn::verify {

struct CutDependence {
  int64_t cut = 0;            // c: the second forward starts at this step (0: T < 2, unchecked)
  double here = 0.0;          // relative difference, cut vs uncut, with this build's generator
  double any_layout = 0.0;    // the same with each random operation shifting the generator
  int64_t random_ops = 0;     // random operations the perturbed forwards made (0: no draws)
};

// Both checks of the NOTE on `workload`'s model, inputs and h0, from generator seed `seed`
// (no gradients; the generators are restored afterwards). Relative differences are the
// largest over z and the final state, each relative to its largest entry.
CutDependence measure_cut_dependence(const Workload& workload, uint64_t seed);

// For a failing case: the plain-words cause when the outputs depend on the cut on this
// build (`here` beyond `tolerance`), else "".
std::string cut_dependence_diagnosis(const CutDependence& cut, int64_t time_steps,
                                     double tolerance);

// For a model that passes here but draws per call (`any_layout` beyond `tolerance` while
// `here` is not): a warning that the pass does not carry over to a GPU or an MKL build;
// else "".
std::string per_call_draws_warning(const CutDependence& cut, double tolerance);

}  // namespace vlrnn::verify
