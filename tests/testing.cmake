# Every test carries a label: its folder's (DFCCL_TEST_LABEL, set by tests/CMakeLists.txt: unit, mp, gpu for
# device/, sim, harness) unless it is given one (gpu for a GPU test outside device/). `ctest -L gpu` is what a GPU
# runner runs (.ci/run-gpu).
# Label `extra`: reruns under another transport or shape, which `make test` leaves to `make test-extra`
# (dfccl_extra_tests, or LABELS ... extra on a gtest variant).
# Under ctest -j (`make test`), a test that must not share the machine (network namespaces, a bound on a time) is
# RUN_SERIAL and labelled `serial` (dfccl_serial_tests, SERIAL); an mpirun test takes one process slot per rank
# (PROCESSORS), so that ctest -j N runs no more than N ranks at once. Label `asan`: what `make test-asan` runs.
include(GoogleTest)

# dfccl_gtest_properties(<name> [LABELS <label>...] [RUN_SERIAL] [SERIAL_CASES <regex>] [ENVIRONMENT <VAR=value>...])
# Sets properties on every discovered case of gtest binary <name> (or of its variant <name><suffix>,
# dfccl_add_gtest_variant) when ctest lists them (after discovery): LABELS add to the labels given before (a list,
# e.g. unit asan, which gtest_discover_tests' PROPERTIES cannot carry), ENVIRONMENT replaces the environment.
# RUN_SERIAL: every case runs alone; with SERIAL_CASES, only the cases whose ctest name matches <regex> do.
function(dfccl_gtest_properties name)
  cmake_parse_arguments(ARG "RUN_SERIAL" "SERIAL_CASES" "LABELS;ENVIRONMENT" ${ARGN})
  set(file ${CMAKE_CURRENT_BINARY_DIR}/${name}_properties.cmake)
  get_property(known DIRECTORY PROPERTY DFCCL_GTEST_LABELS_${name} SET)
  if(NOT known)
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${file})
  endif()
  get_property(labels DIRECTORY PROPERTY DFCCL_GTEST_LABELS_${name})
  get_property(serial DIRECTORY PROPERTY DFCCL_GTEST_SERIAL_${name})
  get_property(cases DIRECTORY PROPERTY DFCCL_GTEST_SERIAL_CASES_${name})
  list(APPEND labels ${ARG_LABELS})
  list(REMOVE_DUPLICATES labels)
  if(ARG_RUN_SERIAL AND ARG_SERIAL_CASES)
    set(cases "${ARG_SERIAL_CASES}")
    list(REMOVE_ITEM labels serial)
  elseif(ARG_RUN_SERIAL)
    set(serial " RUN_SERIAL TRUE")
  endif()
  if(ARG_ENVIRONMENT)
    string(APPEND serial " ENVIRONMENT [==[${ARG_ENVIRONMENT}]==]")
  endif()
  set_property(DIRECTORY PROPERTY DFCCL_GTEST_LABELS_${name} ${labels})
  set_property(DIRECTORY PROPERTY DFCCL_GTEST_SERIAL_${name} "${serial}")
  set_property(DIRECTORY PROPERTY DFCCL_GTEST_SERIAL_CASES_${name} "${cases}")
  # ctest's scripts know set_tests_properties only (no set_property on tests): the whole set, rewritten each time.
  set(text "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS [==[${labels}]==]${serial})\n")
  if(cases)
    string(APPEND text "  set(_serial \${${name}_TESTS})\n  list(FILTER _serial INCLUDE REGEX [==[${cases}]==])\n"
           "  if(_serial)\n    set_tests_properties(\${_serial} PROPERTIES RUN_SERIAL TRUE LABELS [==[${labels};serial]==])\n"
           "  endif()\n")
  endif()
  file(WRITE ${file} "${text}endif()\n")
endfunction()

# dfccl_add_gtest(<name> SOURCES <files...> LIBS <targets...> [OWN_MAIN] [LABELS <labels>] [TIMEOUT <s>] [SERIAL])
# Builds one GoogleTest binary bin/<name>; each of its test cases becomes a ctest test named <name>.<Suite>.<Case>
# (listed when ctest runs, so that listing needs no GPU). Exit code 77 means "skipped" (device tests on a machine
# without enough GPUs, gpu_check.h). TIMEOUT applies to each case. OWN_MAIN: the sources define main() (else
# gtest_main does). SERIAL: each case runs alone (RUN_SERIAL, label serial); with SERIAL_CASES <regex>, only the
# cases whose ctest name matches (those that bound a time).
function(dfccl_add_gtest name)
  cmake_parse_arguments(ARG "OWN_MAIN;SERIAL" "TIMEOUT;SERIAL_CASES" "SOURCES;LIBS;LABELS" ${ARGN})
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
                       PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${timeout})
  if(ARG_SERIAL AND ARG_SERIAL_CASES)
    dfccl_gtest_properties(${name} RUN_SERIAL SERIAL_CASES "${ARG_SERIAL_CASES}")
  elseif(ARG_SERIAL)
    list(APPEND label serial)
    dfccl_gtest_properties(${name} RUN_SERIAL)
  endif()
  dfccl_gtest_properties(${name} LABELS ${label})
endfunction()

# dfccl_add_gtest_variant(<name> <suffix> ENVIRONMENT <VAR=value>... [FILTER <gtest filter>] [LABELS <labels>]
#                         [TIMEOUT <s>] [SERIAL [SERIAL_CASES <regex>]])
# The cases of gtest binary <name> (those FILTER selects) once more, with an environment, as ctest tests
# <name>.<Suite>.<Case><suffix>: one test per case, so that ctest -j spreads them (a whole binary as one test would
# hold a slot for all its cases). Labels: the folder's unless LABELS.
function(dfccl_add_gtest_variant name suffix)
  cmake_parse_arguments(ARG "SERIAL" "TIMEOUT;SERIAL_CASES" "ENVIRONMENT;FILTER;LABELS" ${ARGN})
  set(filter)
  if(ARG_FILTER)
    set(filter TEST_FILTER ${ARG_FILTER})
  endif()
  set(timeout 900)
  if(ARG_TIMEOUT)
    set(timeout ${ARG_TIMEOUT})
  endif()
  set(label ${DFCCL_TEST_LABEL})
  if(ARG_LABELS)
    set(label ${ARG_LABELS})
  endif()
  gtest_discover_tests(${name} TEST_PREFIX "${name}." TEST_SUFFIX "${suffix}" TEST_LIST ${name}${suffix}_TESTS
                       ${filter} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${timeout})
  set(serial)
  if(ARG_SERIAL AND ARG_SERIAL_CASES)
    set(serial RUN_SERIAL SERIAL_CASES "${ARG_SERIAL_CASES}")
  elseif(ARG_SERIAL)
    list(APPEND label serial)
    set(serial RUN_SERIAL)
  endif()
  dfccl_gtest_properties(${name}${suffix} LABELS ${label} ENVIRONMENT ${ARG_ENVIRONMENT} ${serial})
endfunction()

# dfccl_add_mpi_test(<name> NP <n> COMMAND <exe> [ARGS...] [TIMEOUT <s>])
# Registers `mpirun -np <n> <exe> args...` as a ctest test. mpirun runs as root in CI and oversubscribes 2 cores.
function(dfccl_add_mpi_test name)
  cmake_parse_arguments(ARG "" "NP;TIMEOUT" "COMMAND" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ARG_NP} --oversubscribe --bind-to none
                   ${ARG_COMMAND})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS ${DFCCL_TEST_LABEL} PROCESSORS ${ARG_NP}
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  if(ARG_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  endif()
endfunction()

# Gives every test of the calling folder that has no label yet but serial or asan the folder's (plain add_test calls).
# Call it at the end of the folder's CMakeLists.txt.
function(dfccl_label_unlabelled)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_test_property(${t} LABELS l)
    if(NOT l)
      set(l "")
    endif()
    set(own ${l})
    list(REMOVE_ITEM own serial asan extra)
    if(NOT own)
      set_property(TEST ${t} PROPERTY LABELS ${DFCCL_TEST_LABEL} ${l})
    endif()
  endforeach()
endfunction()

# dfccl_serial_tests(<test>...): tests (ctest names, not gtest binaries) that run alone: RUN_SERIAL, label serial.
function(dfccl_serial_tests)
  set_tests_properties(${ARGN} PROPERTIES RUN_SERIAL TRUE)
  set_property(TEST ${ARGN} APPEND PROPERTY LABELS serial)
endfunction()

# dfccl_extra_tests(<test>...): reruns of tests that `make test` has, under another transport, block count or host
# layout (label extra): `make test` leaves them out, `make test-extra` runs them (.ci/run runs both).
function(dfccl_extra_tests)
  set_property(TEST ${ARGN} APPEND PROPERTY LABELS extra)
endfunction()

# dfccl_asan_tests(<test>...): tests that `make test-asan` runs (label asan).
function(dfccl_asan_tests)
  set_property(TEST ${ARGN} APPEND PROPERTY LABELS asan)
endfunction()
