# How the project's MPI programs run as CTest tests (tests/, apps/, bench/): the flags and
# environment of mpiexec, and cascade_mpi_test(). The top CMakeLists.txt includes this file
# after find_package(MPI), so every directory below it sees the same values.

execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _cascade_mpiexec_version
                ERROR_QUIET)
# CASCADE_MPIEXEC_FLAGS: what follows `mpiexec -n <ranks>`; CASCADE_MPI_ENV: the environment of
# each test. Plain variables, set anew at each configure (not cached).
unset(CASCADE_MPIEXEC_FLAGS CACHE)
unset(CASCADE_MPI_ENV CACHE)
set(CASCADE_MPIEXEC_FLAGS "")
list(APPEND CASCADE_MPIEXEC_FLAGS ${MPIEXEC_PREFLAGS})
# CASCADE_WATCHDOG: a hang prints what each rank waits for, well before the test timeout.
set(CASCADE_MPI_ENV "CASCADE_CHECK=1" "CASCADE_WATCHDOG=60")
if(_cascade_mpiexec_version MATCHES "Open MPI|OpenRTE")
  # More ranks than cores, and running as root in containers.
  list(APPEND CASCADE_MPIEXEC_FLAGS --oversubscribe)
  list(APPEND CASCADE_MPI_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
       OMPI_MCA_rmaps_base_oversubscribe=1)
endif()

set(CASCADE_SANITIZE_MAX_RANKS 5 CACHE STRING
    "Sanitizer builds run the MPI tests at this many ranks at most")
option(CASCADE_SANITIZE_ALL_RANKS
       "Sanitizer builds run each MPI test at all its rank counts up to the maximum (OFF: the lowest and highest)"
       OFF)

# cascade_mpi_test(NAME RANKS <n...> [TIMEOUT s] [LABELS <label...>] [WRAP <command...>]
#                  COMMAND <args...>): one CTest test per rank count, NAME_np<n>, running
# `WRAP mpiexec -n <n> CASCADE_MPIEXEC_FLAGS COMMAND` in CASCADE_MPI_ENV. TIMEOUT defaults to
# 120 s, LABELS to mpi. A sanitizer build may leave some rank counts out (below): set the
# properties of one of them inside if(TEST NAME_np<n>).
function(cascade_mpi_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "RANKS;COMMAND;WRAP;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS mpi)
  endif()
  set(ranks ${T_RANKS})
  if(CASCADE_SANITIZE)
    # Sanitizer builds stop at CASCADE_SANITIZE_MAX_RANKS ranks, and run each test at the
    # lowest and the highest of its rank counts up to there (every one of them with
    # CASCADE_SANITIZE_ALL_RANKS): the plain builds run the others, and an instrumented
    # test costs up to twelve times the plain one (the objects tests at 1 to 4 ranks: 98 s
    # under ASan+UBSan, 8 s in the Open MPI build, each summed over one CI run).
    set(ranks "")
    foreach(n ${T_RANKS})
      if(NOT n GREATER CASCADE_SANITIZE_MAX_RANKS)
        list(APPEND ranks ${n})
      endif()
    endforeach()
    list(LENGTH ranks count)
    if(NOT CASCADE_SANITIZE_ALL_RANKS AND count GREATER 2)
      list(SORT ranks COMPARE NATURAL)
      list(GET ranks 0 lowest)
      list(GET ranks -1 highest)
      set(ranks ${lowest} ${highest})
    endif()
  endif()
  foreach(n ${ranks})
    add_test(NAME ${name}_np${n}
             COMMAND ${T_WRAP} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n}
                     ${CASCADE_MPIEXEC_FLAGS} ${T_COMMAND})
    set_tests_properties(${name}_np${n} PROPERTIES TIMEOUT ${T_TIMEOUT}
                         ENVIRONMENT "${CASCADE_MPI_ENV}" LABELS "${T_LABELS}")
  endforeach()
endfunction()

