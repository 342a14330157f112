# dfccl_add_gtest(<name> SOURCES <files...> LIBS <targets...> [OWN_MAIN] [LABELS <labels...>] [TIMEOUT <s>])
# Builds one GoogleTest binary bin/<name> and registers it as one ctest test. Exit code 77 means "skipped"
# (device tests on a machine without a GPU). OWN_MAIN: the sources define main() (else gtest_main does).
function(dfccl_add_gtest name)
  cmake_parse_arguments(ARG "OWN_MAIN" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  if(ARG_OWN_MAIN)
    target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest Threads::Threads)
  else()
    target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main Threads::Threads)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
  if(ARG_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  endif()
endfunction()

# dfccl_add_mpi_test(<name> NP <n> COMMAND <exe> [ARGS...] [TIMEOUT <s>])
# Registers `mpirun -np <n> <exe> args...` as a ctest test. mpirun runs as root in CI and oversubscribes 2 cores.
function(dfccl_add_mpi_test name)
  cmake_parse_arguments(ARG "" "NP;TIMEOUT" "COMMAND" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ARG_NP} --oversubscribe --bind-to none
                   ${ARG_COMMAND})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  if(ARG_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  endif()
endfunction()
