#pragma once
// Random differential testing: configurations drawn at random (model kind, layers, dropout,
// F, H, B, T, lengths, dtype, reduction, h0 mode, head, inputs requiring grad or not), each
// verified for every exact method in the registry with randomly drawn options (block
// length, segments, slots, budget) against full BPTT.
//
// NOTE [ Random case sizes ]: nine configurations in ten are small (T <= 60, H <= 16,
// B <= 6) and fast; one in ten reaches the large end (T in [200, 600], past every internal
// chunk size, H in [32, 128], B in [4, 16]), where accumulated rounding and chunking bugs
// show. Lengths are fixed in about four in ten; otherwise variable, with T present or not
// (a padded tail), and lengths of 1 drawn often.
//
// A configuration is a pure function of its case seed (no std:: distributions, whose
// output differs between standard libraries), so `vlrnn verify --random-case SEED`
// rebuilds exactly the configuration a failing row came from.

#include "vlrnn/verify/case.h"

#include <cstdint>
#include <vector>

namespace vlrnn::verify {

// The case seed of configuration `index` of a run seeded with `seed`.
uint64_t random_case_seed(uint64_t seed, int64_t index);

// The configuration of `case_seed`, one VerifyCase per exact method of the registry (all
// share the configuration; VerifyCase::seed is `case_seed`).
std::vector<VerifyCase> random_configuration(uint64_t case_seed);

// The command line that reruns one case of a random configuration.
std::string random_case_command(const VerifyCase& c);

}  // namespace vlrnn::verify
