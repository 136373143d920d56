#include "lib/source_stamp.h"

#include <c10/util/Exception.h>

namespace vlrnn::experiments {

// Defined in the .cpp the build generates (cmake/VlrnnSourceStamp.cmake).
namespace generated {
const char* source_git_sha();
const char* source_tree();
}  // namespace generated

SourceStamp built_from() {
  const std::string tree = generated::source_tree();
  return {generated::source_git_sha(), tree == "clean"   ? SourceTree::clean
                                       : tree == "dirty" ? SourceTree::dirty
                                                         : SourceTree::unknown};
}

nlohmann::json git_dirty_json(SourceTree tree) {
  switch (tree) {
    case SourceTree::clean: return false;
    case SourceTree::dirty: return true;
    case SourceTree::unknown: break;
  }
  return "unknown";
}

SourceTree source_tree_of(const nlohmann::json& git_dirty) {
  if (git_dirty.is_boolean()) return git_dirty.get<bool>() ? SourceTree::dirty : SourceTree::clean;
  return SourceTree::unknown;
}

void check_results_provenance(const SourceStamp& stamp, bool allow_dirty, const std::string& what) {
  if (allow_dirty || stamp.tree == SourceTree::clean) return;
  const std::string reason =
      stamp.tree == SourceTree::dirty
          ? "this binary was built from a tree with uncommitted changes (git status listed "
            "modified tracked files at build time)"
          : "this binary cannot tell which code it was built from (built without git, or "
            "from a tree that is no git checkout)";
  TORCH_CHECK(false, what, ": refusing to write results: ", reason,
              " (NOTE [ Provenance from the build ]): commit and rebuild first, or pass "
              "--allow-dirty to record the run on purpose (meta.json then says git_dirty: ",
              git_dirty_json(stamp.tree).dump(), ")");
}

}  // namespace vlrnn::experiments
