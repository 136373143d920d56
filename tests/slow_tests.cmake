# Included by ctest after the GoogleTest cases are discovered (TEST_INCLUDE_FILES in
# tests/CMakeLists.txt); the slow tests declared with add_test get their COST at the end of
# tests/CMakeLists.txt. NOTE [ Slow tests start first ]: a fresh build has no timing history
# (Testing/Temporary/CTestCostData.txt), so `ctest -j N` would start tests in the order they
# are declared, and a two-minute test that happens to come last would run alone at the end.
# A COST makes ctest start these first; the values are seconds measured on a 2-core machine,
# so their order is what matters, not their size. Once ctest has run, its own history wins.
foreach(slow IN ITEMS
    "Simulator.PredictsVariableLengthPeaksAtARealSize:120"
    "BudgetCap.PercentHoldsOnEveryModelKind:60"
    "Methods/MatrixAgainstFull.EveryCase/planner_percent_1  # GetParam() = \"planner:percent=1\":89"
    "RandomCases.AFixedSeedSetPasses:47"
    "Trainer.EveryExactMethodFollowsFullBpttsTrajectoryFor200Steps:27"
    "KeptTapes.PlannerTimeFallsWithTheBudgetDownToFullBptt:22")
  string(REGEX MATCH "^(.*):([0-9]+)$" unused "${slow}")
  set(name "${CMAKE_MATCH_1}")
  set(cost "${CMAKE_MATCH_2}")
  set_tests_properties("${name}" PROPERTIES COST "${cost}")
endforeach()
