# Task Bench's core library, compiled from a checkout given at configure time, and Cascade's
# implementation of Task Bench against it. Included by bench/taskbench/CMakeLists.txt and by
# tests/CMakeLists.txt (the checks run even when the benchmarks are not built); the targets
# are made once.
#   -DCASCADE_TASKBENCH_SRC=<checkout of StanfordLegion/task-bench>, or TASKBENCH_SRC in the
#   environment when CMake runs. Nothing of Task Bench is copied into this tree.
include_guard(GLOBAL)

set(CASCADE_TASKBENCH_SRC "" CACHE PATH
    "A Task Bench checkout (StanfordLegion/task-bench) for bench/taskbench; empty: $TASKBENCH_SRC")
set(CASCADE_TASKBENCH_DIR "")
if(CASCADE_TASKBENCH_SRC)
  set(CASCADE_TASKBENCH_DIR "${CASCADE_TASKBENCH_SRC}")
elseif(DEFINED ENV{TASKBENCH_SRC} AND NOT "$ENV{TASKBENCH_SRC}" STREQUAL "")
  set(CASCADE_TASKBENCH_DIR "$ENV{TASKBENCH_SRC}")
endif()
if(CASCADE_TASKBENCH_DIR AND NOT EXISTS "${CASCADE_TASKBENCH_DIR}/core/core.h")
  message(WARNING "bench/taskbench: ${CASCADE_TASKBENCH_DIR} has no core/core.h (not a Task "
                  "Bench checkout); Task Bench is not built")
  set(CASCADE_TASKBENCH_DIR "")
endif()
if(NOT CASCADE_TASKBENCH_DIR)
  message(STATUS "bench/taskbench: no Task Bench checkout (-DCASCADE_TASKBENCH_SRC=... or "
                 "TASKBENCH_SRC=...): the Task Bench implementation and its checks are skipped")
  return()
endif()
message(STATUS "bench/taskbench: Task Bench from ${CASCADE_TASKBENCH_DIR}")
set(_tb ${CASCADE_TASKBENCH_DIR}/core)
set(_tb_out ${CMAKE_BINARY_DIR}/bench/taskbench)

# The flags of Task Bench's core/Makefile: -O3, AVX2 + FMA when the CPU has them (the
# compute-bound kernel's vector path), assertions on (they are Task Bench's output check).
set(_tb_flags -O3 -UNDEBUG)
if(EXISTS /proc/cpuinfo)
  file(STRINGS /proc/cpuinfo _tb_cpu_flags REGEX "^flags" LIMIT_COUNT 1)
  if(_tb_cpu_flags MATCHES " avx2 ")
    list(APPEND _tb_flags -mavx2 -mfma)
  elseif(_tb_cpu_flags MATCHES " avx ")
    list(APPEND _tb_flags -mavx)
  endif()
endif()

# The BLAS kernels (compute_dgemm, memory_daxpy) include <mkl.h>; with OpenBLAS, a header of
# that name in the build tree that includes <cblas.h> serves them.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(TB_OPENBLAS QUIET IMPORTED_TARGET openblas)
endif()

function(_taskbench_core name)
  add_library(${name} STATIC ${_tb}/core.cc ${_tb}/core_c.cc ${_tb}/core_kernel.cc
              ${_tb}/timer.cc ${_tb}/core_random.c ${_tb}/siphash.c)
  target_include_directories(${name} SYSTEM PUBLIC ${_tb})
  target_compile_options(${name} PRIVATE ${_tb_flags} ${ARGN})
  set_target_properties(${name} PROPERTIES CXX_STANDARD 11 C_STANDARD 11
                        POSITION_INDEPENDENT_CODE ON)
  if(TB_OPENBLAS_FOUND)
    file(WRITE ${_tb_out}/blas/mkl.h "#include <cblas.h>\n")
    target_include_directories(${name} PRIVATE ${_tb_out}/blas)
    target_compile_definitions(${name} PRIVATE USE_BLAS_KERNEL)
    target_link_libraries(${name} PUBLIC PkgConfig::TB_OPENBLAS)
  endif()
  target_link_libraries(${name} PUBLIC m)
endfunction()
enable_language(C)
_taskbench_core(taskbench_core)
# With DEBUG_CORE: the error message that names a wrong input, and the check that every graph
# ran (for the tests).
_taskbench_core(taskbench_core_checked -DDEBUG_CORE)

foreach(_v "" _checked)
  add_executable(taskbench_cascade${_v} ${CMAKE_CURRENT_LIST_DIR}/main.cpp)
  target_link_libraries(taskbench_cascade${_v} PRIVATE Cascade::cascade taskbench_core${_v}
                        cascade_warnings)
  target_compile_features(taskbench_cascade${_v} PRIVATE cxx_std_20)
  set_target_properties(taskbench_cascade${_v} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_tb_out})
endforeach()
