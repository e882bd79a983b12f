# Writes one ctest entry per GoogleTest suite of an executable: `<target>.<Suite>` runs
# `<executable> --gtest_filter=<Suite>.*`. Run after the executable is built:
#   cmake -D TEST_EXECUTABLE=... -D TEST_TARGET=... -D CTEST_FILE=... -D LABELS=... \
#         -D TIMEOUT=... -P gtest_suites.cmake
# For executables whose every process pays a fixed start cost (loading libfabric runs its
# providers' constructors, about 0.35 s): their cases then share one process per suite. A failed
# case is still named, in the entry's output (`ctest --output-on-failure`). A case that skips
# makes its whole entry skipped, as gtest_discover_tests does for the case alone, so that
# scripts/test.sh still sees every skip it does not expect.
foreach(var TEST_EXECUTABLE TEST_TARGET CTEST_FILE LABELS TIMEOUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "gtest_suites.cmake: -D ${var}=... is required")
  endif()
endforeach()

execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
  file(REMOVE "${CTEST_FILE}")
  message(FATAL_ERROR "gtest_suites.cmake: '${TEST_EXECUTABLE} --gtest_list_tests' failed (${rc}):\n${listing}")
endif()

# Suite lines start in column 0 and end with '.', e.g. "Providers/FabricRing." (a value-
# parameterized suite keeps its instantiation prefix); case lines are indented.
string(REPLACE "\n" ";" lines "${listing}")
set(content "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.$")
    set(suite "${CMAKE_MATCH_1}")
    set(name "${TEST_TARGET}.${suite}")
    string(APPEND content
      "add_test([==[${name}]==] [==[${TEST_EXECUTABLE}]==] [==[--gtest_filter=${suite}.*]==])\n"
      "set_tests_properties([==[${name}]==] PROPERTIES LABELS [==[${LABELS}]==] TIMEOUT ${TIMEOUT}"
      " SKIP_REGULAR_EXPRESSION [==[\\[  SKIPPED \\]]==])\n")
  endif()
endforeach()
if(content STREQUAL "")
  message(FATAL_ERROR "gtest_suites.cmake: '${TEST_EXECUTABLE}' lists no test suite")
endif()
file(WRITE "${CTEST_FILE}" "${content}")
