# Every test carries a label: its folder's (DFCCL_TEST_LABEL, set by tests/CMakeLists.txt: unit, mp, gpu for
# device/, sim, harness) unless it is given one (gpu for a GPU test outside device/). `ctest -L gpu` is what a GPU
# runner runs (.ci/run-gpu).
include(GoogleTest)

# dfccl_add_gtest(<name> SOURCES <files...> LIBS <targets...> [OWN_MAIN] [LABELS <label>] [TIMEOUT <s>])
# Builds one GoogleTest binary bin/<name>; each of its test cases becomes a ctest test named <name>.<Suite>.<Case>
# (listed when ctest runs, so that listing needs no GPU). Exit code 77 means "skipped" (device tests on a machine
# without enough GPUs, gpu_check.h). TIMEOUT applies to each case. OWN_MAIN: the sources define main() (else
# gtest_main does).
function(dfccl_add_gtest name)
  cmake_parse_arguments(ARG "OWN_MAIN" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  if(ARG_OWN_MAIN)
    target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest Threads::Threads)
  else()
    target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main Threads::Threads)
  endif()
  set(label ${DFCCL_TEST_LABEL})
  if(ARG_LABELS)
    set(label ${ARG_LABELS})
  endif()
  set(timeout 900)
  if(ARG_TIMEOUT)
    set(timeout ${ARG_TIMEOUT})
  endif()
  gtest_discover_tests(${name} TEST_PREFIX "${name}." DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       PROPERTIES SKIP_RETURN_CODE 77 LABELS ${label} TIMEOUT ${timeout})
endfunction()

# dfccl_add_mpi_test(<name> NP <n> COMMAND <exe> [ARGS...] [TIMEOUT <s>])
# Registers `mpirun -np <n> <exe> args...` as a ctest test. mpirun runs as root in CI and oversubscribes 2 cores.
function(dfccl_add_mpi_test name)
  cmake_parse_arguments(ARG "" "NP;TIMEOUT" "COMMAND" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ARG_NP} --oversubscribe --bind-to none
                   ${ARG_COMMAND})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS ${DFCCL_TEST_LABEL}
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  if(ARG_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  endif()
endfunction()

# Gives every test of the calling folder that has no label yet the folder's (plain add_test calls). Call it at the
# end of the folder's CMakeLists.txt.
function(dfccl_label_unlabelled)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_test_property(${t} LABELS l)
    if(NOT l)
      set_tests_properties(${t} PROPERTIES LABELS ${DFCCL_TEST_LABEL})
    endif()
  endforeach()
endfunction()
