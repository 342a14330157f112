# Writes a build-info header: the version and `git describe --always --dirty` of the source tree at build time, as
# DFCCL_<PREFIX>_VERSION and DFCCL_<PREFIX>_GIT_REVISION (the harness and the simulator both use it). The file is
# rewritten only when its text changes, so an unchanged tree rebuilds nothing.
#   cmake -DSRC=<source dir> -DOUT=<header> -DVERSION=<x.y.z> -DPREFIX=<HARNESS|SIM> -P build_info.cmake
execute_process(COMMAND git describe --always --dirty WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR rev STREQUAL "")
  set(rev "unknown")
endif()
set(text "// Generated at build time by common/build_info.cmake.\n#pragma once\n#define DFCCL_${PREFIX}_VERSION \"${VERSION}\"\n#define DFCCL_${PREFIX}_GIT_REVISION \"${rev}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
