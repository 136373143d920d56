#include "test_util.h"

#include "lib/environment.h"
#include "lib/source_stamp.h"

#include <regex>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;
using testing::expect_error_mentions;

const std::string kSha(40, 'a');

TEST(SourceStamp, TheBuildStampedThisBinaryWithACommitOrUnknownButNeverACleanUnknown) {
  const auto stamp = built_from();
  const bool known = std::regex_match(stamp.git_sha, std::regex("[0-9a-f]{40}"));
  EXPECT_TRUE(known || stamp.git_sha == "unknown") << stamp.git_sha;
  // No commit, no claim about its tree.
  if (!known) EXPECT_EQ(stamp.tree, SourceTree::unknown);
  const auto env = environment_json();
  EXPECT_EQ(env["git_sha"], stamp.git_sha);
  EXPECT_EQ(env["git_dirty"], git_dirty_json(stamp.tree));
}

TEST(SourceStamp, GitDirtyIsFalseTrueOrUnknownAndReadsBack) {
  EXPECT_EQ(git_dirty_json(SourceTree::clean), json(false));
  EXPECT_EQ(git_dirty_json(SourceTree::dirty), json(true));
  EXPECT_EQ(git_dirty_json(SourceTree::unknown), json("unknown"));
  for (auto tree : {SourceTree::clean, SourceTree::dirty, SourceTree::unknown}) {
    EXPECT_EQ(source_tree_of(git_dirty_json(tree)), tree);
  }
  // A meta.json without the field (or with anything else) says nothing: unknown, not clean.
  EXPECT_EQ(source_tree_of(json()), SourceTree::unknown);
}

TEST(SourceStamp, OnlyACleanKnownTreeWritesResultsWithoutAllowDirty) {
  EXPECT_NO_THROW(check_results_provenance({kSha, SourceTree::clean}, false, "vlrnn sweep"));
  expect_error_mentions(
      [] { check_results_provenance({kSha, SourceTree::dirty}, false, "vlrnn sweep"); },
      {"vlrnn sweep", "uncommitted changes", "--allow-dirty", "git_dirty: true"});
  expect_error_mentions(
      [] { check_results_provenance({"unknown", SourceTree::unknown}, false, "vlrnn compare --json"); },
      {"vlrnn compare --json", "cannot tell", "--allow-dirty", "git_dirty: \"unknown\""});
  EXPECT_NO_THROW(check_results_provenance({kSha, SourceTree::dirty}, true, "vlrnn sweep"));
  EXPECT_NO_THROW(check_results_provenance({"unknown", SourceTree::unknown}, true, "vlrnn sweep"));
}

}  // namespace
}  // namespace vlrnn::experiments
