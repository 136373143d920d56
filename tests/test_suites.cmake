# Included by ctest (TEST_INCLUDE_FILES in tests/CMakeLists.txt, through a generated file that
# sets VLRNN_TEST_BINARY and VLRNN_TEST_ENVIRONMENT first): lists the GoogleTest cases of
# vlrnn_tests and adds one ctest test per suite, plus one per slow case.
#
# NOTE [ One process per suite ]: every test process loads LibTorch, about 0.6 s of CPU
# before the first line of a test runs; with a process per case, the 560 cases spent more
# of ctest's time starting than testing. A process per suite (Trainer.*, Methods/
# MatrixAgainstFull.*, ...) pays that ~100 times instead, and a failing case is still named
# in the output (--output-on-failure). Cases share their suite's process, so a test must
# leave no state behind that another case of its suite would see (a registry entry, an
# environment variable, the thread count).
#
# NOTE [ Slow tests start first ]: a fresh build has no timing history
# (Testing/Temporary/CTestCostData.txt), so `ctest -j N` would start tests in the order they
# are declared, and a two-minute test that comes last would run alone at the end. Below,
# "name:seconds" (seconds on a 2-core machine; their order is what matters) gives a suite its
# COST, and a case ("Suite.Case") its own process with that COST, taken out of its suite's
# filter. Once ctest has run, its own history wins.
set(slow_tests
    "Simulator.PredictsVariableLengthPeaksAtARealSize:120"
    "Methods/MatrixAgainstFull.EveryCase/planner_percent_1:100"
    "Methods/MatrixAgainstFull.EveryCase/planner_percent_90:56"
    "Methods/MatrixAgainstFull:64"
    "RandomCases:61"
    "BudgetCap.PercentHoldsOnEveryModelKind:54"
    "Trainer:33"
    "KeptTapes:32"
    "EveryMethod/Validation:29"
    "ModelsAndMethods/VariableLengths:23"
    "Methods/ExactOnBidirectional:23"
    "BudgetCap:16"
    "Models/BuiltInModel:14")

execute_process(COMMAND "${VLRNN_TEST_BINARY}" --gtest_list_tests
                OUTPUT_VARIABLE listing ERROR_VARIABLE listing_error RESULT_VARIABLE listed
                TIMEOUT 120)
if(NOT listed EQUAL 0)
  # A test that fails and says why, rather than a suite that silently runs nothing.
  add_test(vlrnn_tests.list_cases "${VLRNN_TEST_BINARY}" --gtest_list_tests)
  return()
endif()

# gtest's listing: "Suite." lines, then "  Case" lines; either may end in "  # ..." (the
# parameter of a parameterized case), which is no part of the name a filter matches.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "  #.*$" "" bare "${line}")
  if(bare MATCHES "^([^ ].*)\\.$")
    set(suite "${CMAKE_MATCH_1}")
    list(APPEND suites "${suite}")
    set("cases_of_${suite}" "")
  elseif(bare MATCHES "^  (.+)$")
    list(APPEND "cases_of_${suite}" "${CMAKE_MATCH_1}")
  endif()
endforeach()

set(slow_cases "")  # filter names ("Suite.Case") of the cases that run alone
foreach(entry IN LISTS slow_tests)
  string(REGEX MATCH "^(.*):([0-9]+)$" unused "${entry}")
  set(name "${CMAKE_MATCH_1}")
  set(cost "${CMAKE_MATCH_2}")
  if(name MATCHES "\\.")
    add_test("${name}" "${VLRNN_TEST_BINARY}" "--gtest_filter=${name}")
    # Passes only when its one case ran and passed: a renamed case fails here instead of
    # silently running nothing.
    set_tests_properties("${name}" PROPERTIES COST "${cost}" TIMEOUT 600
                         ENVIRONMENT "${VLRNN_TEST_ENVIRONMENT}"
                         PASS_REGULAR_EXPRESSION "\\[  PASSED  \\] 1 test\\.")
    list(APPEND slow_cases "${name}")
  else()
    set("cost_of_${name}" "${cost}")
  endif()
endforeach()

foreach(suite IN LISTS suites)
  set(filter "${suite}.*")
  set(excluded "")
  foreach(slow IN LISTS slow_cases)
    string(FIND "${slow}" "${suite}." at)
    if(at EQUAL 0)
      list(APPEND excluded "${slow}")
    endif()
  endforeach()
  if(excluded)
    string(REPLACE ";" ":" excluded "${excluded}")
    set(filter "${filter}-${excluded}")
  endif()
  add_test("${suite}.*" "${VLRNN_TEST_BINARY}" "--gtest_filter=${filter}")
  set_tests_properties("${suite}.*" PROPERTIES TIMEOUT 600 ENVIRONMENT "${VLRNN_TEST_ENVIRONMENT}")
  if(DEFINED "cost_of_${suite}")
    set_tests_properties("${suite}.*" PROPERTIES COST "${cost_of_${suite}}")
  endif()
endforeach()

# The planner's two matrix variants plan the same workloads, so they share cost models
# (NOTE [ Cost models on disk ]): run one after the other, the second reads from the build's
# cost-model folder what the first measured (184 models) instead of measuring again.
set(planner_first "Methods/MatrixAgainstFull.EveryCase/planner_percent_1")
set(planner_second "Methods/MatrixAgainstFull.EveryCase/planner_percent_90")
list(FIND slow_cases "${planner_first}" first_at)
list(FIND slow_cases "${planner_second}" second_at)
if(first_at GREATER -1 AND second_at GREATER -1)
  set_tests_properties("${planner_second}" PROPERTIES DEPENDS "${planner_first}")
endif()
