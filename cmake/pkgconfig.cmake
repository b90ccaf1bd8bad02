# cascade_write_pc(<name> <libraries> <output> [CORE] [REQUIRES <package>...] [LIBS <flags>...]):
# writes the pkg-config file <name>.pc for the installed libraries <libraries> (a list, each
# before the ones it needs). Without CORE the file lists MPI's compile flags and libraries (from
# FindMPI), since the static libraries on MPI need them at the consumer's link. LIBS: more
# link flags. REQUIRES names the pkg-config packages this one needs (their flags follow).
function(cascade_write_pc name libraries output)
  cmake_parse_arguments(PC "CORE" "WHAT" "REQUIRES;LIBS" ${ARGN})
  set(cflags "-I\${includedir}")
  set(libs "-L\${libdir}")
  foreach(l ${libraries})
    string(APPEND libs " -l${l}")
  endforeach()
  if(NOT PC_CORE)
    foreach(d ${MPI_CXX_COMPILE_DEFINITIONS})
      string(APPEND cflags " -D${d}")
    endforeach()
    foreach(o ${MPI_CXX_COMPILE_OPTIONS})
      string(APPEND cflags " ${o}")
    endforeach()
    set(dirs ${MPI_CXX_INCLUDE_DIRS} ${MPI_CXX_COMPILER_INCLUDE_DIRS}
             ${MPI_CXX_ADDITIONAL_INCLUDE_DIRS})
    list(REMOVE_DUPLICATES dirs)
    foreach(i ${dirs})
      string(APPEND cflags " -I${i}")
    endforeach()
    foreach(l ${MPI_CXX_LINK_FLAGS})
      string(APPEND libs " ${l}")
    endforeach()
    foreach(l ${MPI_CXX_LIBRARIES})
      string(APPEND libs " ${l}")
    endforeach()
  endif()
  string(APPEND cflags " -pthread")
  string(APPEND libs " -pthread")
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(libdir "${CMAKE_INSTALL_LIBDIR}")
  else()
    set(libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  endif()
  if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(includedir "${CMAKE_INSTALL_INCLUDEDIR}")
  else()
    set(includedir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  endif()
  if(PC_WHAT)
    set(what "${PC_WHAT}")
  elseif(PC_CORE)
    set(what "thread pool, task graphs and tracing, without MPI")
  else()
    set(what "distributed task runtime on MPI")
  endif()
  foreach(l ${PC_LIBS})
    string(APPEND libs " ${l}")
  endforeach()
  set(requires "")
  if(PC_REQUIRES)
    string(REPLACE ";" ", " requires "${PC_REQUIRES}")
    set(requires "Requires: ${requires}\n")
  endif()
  # The prefix is found from where the .pc file lies (<libdir>/pkgconfig), so the file stays
  # right under `cmake --install --prefix` and when an installed tree is moved.
  set(up "\${pcfiledir}/..")
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(up "${CMAKE_INSTALL_PREFIX}")
  else()
    string(REPLACE "/" ";" parts "${CMAKE_INSTALL_LIBDIR}")
    foreach(p ${parts})
      string(APPEND up "/..")
    endforeach()
  endif()
  file(GENERATE OUTPUT "${output}" CONTENT "prefix=${up}
libdir=${libdir}
includedir=${includedir}

Name: ${name}
Description: Cascade, ${what}
Version: ${PROJECT_VERSION}
${requires}Cflags: -std=c++20 ${cflags}
Libs: ${libs}
")
endfunction()
