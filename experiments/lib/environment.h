#pragma once
// What every result set records about the machine and the code that measured it (meta.json,
// a compare or verify --json file): host, commit and tree state (lib/source_stamp.h), LibTorch,
// BLAS and thread counts, CPU, load. Each command adds its own fields to it.

#include "vlrnn/measure/peak_gemm.h"

#include <nlohmann/json.hpp>

#include <string>

namespace vlrnn::experiments {

// The fields every meta.json shares (docs/architecture.md, "The results schema").
nlohmann::json environment_json();
// Warns on stderr, as `who`, when `env` (environment_json()) says LibTorch runs on the
// reference BLAS: times measured there mean little.
void warn_if_reference_blas(const nlohmann::json& env, const std::string& who);
// meta.json's peak_gemm entry of one device and dtype (key "cpu/float32").
nlohmann::json peak_gemm_json(const measure::PeakGemm& peak);
// "2026-11-23T01:02:03Z"
std::string utc_now();

}  // namespace vlrnn::experiments
