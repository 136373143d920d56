#pragma once
// The source tree a binary was built from: its commit and whether it had uncommitted changes,
// compiled in at build time (cmake/VlrnnSourceStamp.cmake), and the rule that results are
// written from a clean tree only.
//
// NOTE [ Provenance from the build ]: a result is worth keeping when the code that measured it
// is a commit someone can check out. What ran is the binary, so the commit and the dirty state
// recorded (meta.json's git_sha, git_dirty) are those of the tree the binary was built from,
// stamped by the build, not of whatever directory the command runs in: run from /tmp, from a
// copy, or from another checkout, the record still names the code that ran. A build without
// git, or from a tree that is no checkout, cannot say: its stamp is "unknown" for both, recorded
// as git_dirty "unknown" (never false), and refused like a dirty tree unless --allow-dirty says
// the run is on purpose.

#include <nlohmann/json.hpp>

#include <string>

namespace vlrnn::experiments {

enum class SourceTree { clean, dirty, unknown };

struct SourceStamp {
  std::string git_sha = "unknown";  // 40 hex digits, or "unknown"
  SourceTree tree = SourceTree::unknown;
};

// What this binary was built from.
SourceStamp built_from();

// meta.json's git_dirty: false (clean), true (dirty) or "unknown".
nlohmann::json git_dirty_json(SourceTree tree);
// The reverse, for a meta.json read back (merge): anything but true / false is unknown.
SourceTree source_tree_of(const nlohmann::json& git_dirty);

// Throws, as `what` ("vlrnn sweep"), unless `stamp` is clean or `allow_dirty` is set: results
// from uncommitted or unknown code are written on purpose only.
void check_results_provenance(const SourceStamp& stamp, bool allow_dirty, const std::string& what);

}  // namespace vlrnn::experiments
