# Task Bench's own checks on Cascade's implementation (included by tests/CMakeLists.txt;
# cascade_mpi_test: cmake/mpi_test.cmake). Every pattern at 1-4 ranks, all patterns at once as
# -and graphs, every kernel, and a run with a corrupted input that the check must stop. Without
# a Task Bench checkout one test says so and is skipped.
include(${CMAKE_CURRENT_LIST_DIR}/targets.cmake)
if(NOT TARGET taskbench_cascade_checked)
  add_test(NAME taskbench_checks
           COMMAND sh -c "echo 'Task Bench checks skipped: configure with -DCASCADE_TASKBENCH_SRC=<checkout of StanfordLegion/task-bench> (or TASKBENCH_SRC in the environment)'; exit 77")
  set_tests_properties(taskbench_checks PROPERTIES SKIP_RETURN_CODE 77 LABELS taskbench)
  return()
endif()

set(_tb_exe $<TARGET_FILE:taskbench_cascade_checked>)
# Widths that do not divide evenly between ranks; patterns that need them get a radix/period
# that fits.
set(_tb_patterns trivial no_comm stencil_1d stencil_1d_periodic dom tree fft all_to_all
    nearest spread random_nearest)
set(_tb_all "")

set(_tb_kernel_list compute_bound compute_bound2 busy_wait empty memory_bound load_imbalance)
if(TB_OPENBLAS_FOUND)
  list(APPEND _tb_kernel_list compute_dgemm memory_daxpy)
endif()
set(_tb_args_compute_bound -iter 16)
set(_tb_args_compute_bound2 -iter 16)
set(_tb_args_busy_wait -iter 100)
set(_tb_args_empty "")
set(_tb_args_memory_bound -scratch 8192 -iter 4)
set(_tb_args_load_imbalance -iter 32 -imbalance 0.5)
set(_tb_args_compute_dgemm -scratch 1536 -iter 1)
set(_tb_args_memory_daxpy -scratch 8192 -iter 2)

list(LENGTH _tb_kernel_list _tb_nk)
set(_i 0)
foreach(p ${_tb_patterns})
  set(_args -steps 13 -width 7 -type ${p})
  if(p STREQUAL "nearest")
    list(APPEND _args -radix 5)
  endif()
  cascade_mpi_test(taskbench_${p} RANKS 1 2 3 4 TIMEOUT 120
                   COMMAND ${_tb_exe} ${_args} -kernel compute_bound -iter 8 -output 32 -worker 2)
  # The same graph in the run of all patterns at once, each with another kernel.
  math(EXPR _k "${_i} % ${_tb_nk}")
  list(GET _tb_kernel_list ${_k} _kernel)
  if(_tb_all)
    list(APPEND _tb_all -and)
  endif()
  list(APPEND _tb_all ${_args} -kernel ${_kernel} ${_tb_args_${_kernel}})
  math(EXPR _i "${_i} + 1")
endforeach()
cascade_mpi_test(taskbench_all_patterns_at_once RANKS 1 2 3 4 TIMEOUT 120
                 COMMAND ${_tb_exe} ${_tb_all} -worker 2)
# One thread per rank (the one that drives MPI runs every task), and two workers of which
# the thread that drives MPI is one (ThreadpoolOptions::joiner_works).
cascade_mpi_test(taskbench_all_patterns_one_thread RANKS 1 2 3 4 TIMEOUT 120
                 COMMAND ${_tb_exe} ${_tb_all} -worker 1)
cascade_mpi_test(taskbench_all_patterns_joiner_works RANKS 2 3 TIMEOUT 120
                 COMMAND ${_tb_exe} ${_tb_all} -worker 2 -cascade-joiner-works)
foreach(k ${_tb_kernel_list})
  cascade_mpi_test(taskbench_kernel_${k} RANKS 2 TIMEOUT 120
                   COMMAND ${_tb_exe} -steps 9 -width 6 -type stencil_1d -kernel ${k}
                           ${_tb_args_${k}} -worker 2)
endforeach()
# The check is live: a wrong input stops the run, and DEBUG_CORE's message names it.
cascade_mpi_test(taskbench_check_catches_a_wrong_input RANKS 2 TIMEOUT 120
                 COMMAND ${_tb_exe} -steps 5 -width 4 -type stencil_1d -cascade-corrupt)
set_tests_properties(taskbench_check_catches_a_wrong_input_np2 PROPERTIES
                     PASS_REGULAR_EXPRESSION "Task Bench detected corrupted value")
get_property(_tb_tests DIRECTORY PROPERTY TESTS)
foreach(t ${_tb_tests})
  if(t MATCHES "^taskbench_")
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT OPENBLAS_NUM_THREADS=1)
    set_property(TEST ${t} APPEND PROPERTY LABELS taskbench)
  endif()
endforeach()
