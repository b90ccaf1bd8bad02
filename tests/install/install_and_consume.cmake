# Run by CTest (see CMakeLists.txt here) as: cmake -D... -P install_and_consume.cmake
# Installs the build, then builds and runs examples/consumer through find_package(Cascade) and
# through pkg-config (cascade.pc), and examples/consumer_core, which uses Cascade::core alone,
# through find_package(Cascade COMPONENTS core) with MPI out of reach and through
# cascade-core.pc; the core consumer must not depend on libmpi.

foreach(var CASCADE_BUILD_DIR CONSUMER_SOURCE_DIR CORE_CONSUMER_SOURCE_DIR WORK_DIR GENERATOR
            CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_and_consume: ${var} not set")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(step name)
  message(STATUS "[install_and_consume] ${name}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_and_consume: step '${name}' failed (${rc})")
  endif()
endfunction()

# check_no_mpi(<binary>): fails if <binary> or a library it loads is an MPI library.
function(check_no_mpi binary)
  find_program(LDD_EXECUTABLE ldd)
  find_program(READELF_EXECUTABLE readelf)
  if(LDD_EXECUTABLE)
    set(cmd "${LDD_EXECUTABLE}" "${binary}")  # the libraries it loads, transitively
  elseif(READELF_EXECUTABLE)
    set(cmd "${READELF_EXECUTABLE}" -d "${binary}")  # the libraries it names
  else()
    message(STATUS "[install_and_consume] neither ldd nor readelf: ${binary} not checked for MPI")
    return()
  endif()
  execute_process(COMMAND ${cmd} OUTPUT_VARIABLE deps ERROR_VARIABLE deps RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_and_consume: '${cmd}' failed (${rc}): ${deps}")
  endif()
  if(deps MATCHES "lib(mpi|pmpi|mpich|open-pal|open-rte)[^ \t\n]*")
    message(FATAL_ERROR "install_and_consume: ${binary} depends on MPI (${CMAKE_MATCH_0}):\n${deps}")
  endif()
  message(STATUS "[install_and_consume] ${binary}: no MPI library")
endfunction()

step("install into ${prefix}"
  "${CMAKE_COMMAND}" --install "${CASCADE_BUILD_DIR}" --prefix "${prefix}" --config "${CONFIG}")

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  # Only the scratch prefix may satisfy find_package(Cascade), never a registry entry.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
if(MPI_CXX_COMPILER)
  list(APPEND configure_args "-DMPI_CXX_COMPILER=${MPI_CXX_COMPILER}")
endif()
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
step("configure examples/consumer" "${CMAKE_COMMAND}" ${configure_args})

# The package must have come from the prefix just installed.
file(STRINGS "${build}/CMakeCache.txt" cascade_dir REGEX "^Cascade_DIR:")
string(REGEX REPLACE "^Cascade_DIR:[A-Z]+=" "" cascade_dir "${cascade_dir}")
file(REAL_PATH "${cascade_dir}" cascade_dir)
file(REAL_PATH "${prefix}" real_prefix)
string(FIND "${cascade_dir}/" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install_and_consume: Cascade was found in '${cascade_dir}', "
                      "not in the installed prefix '${real_prefix}'")
endif()

step("build examples/consumer" "${CMAKE_COMMAND}" --build "${build}" --config "${CONFIG}")

set(app "${build}/app")
if(NOT EXISTS "${app}" AND EXISTS "${build}/${CONFIG}/app")
  set(app "${build}/${CONFIG}/app")
endif()
step("run the consumer" "${app}")

# The same program built without CMake, through the installed cascade.pc.
find_program(PKG_CONFIG_EXECUTABLE pkg-config)
if(NOT PKG_CONFIG_EXECUTABLE)
  message(FATAL_ERROR "install_and_consume: pkg-config not found (Debian: apt-get install pkg-config)")
endif()
file(GLOB_RECURSE pc_files "${prefix}/*/cascade.pc")
list(LENGTH pc_files n_pc)
if(NOT n_pc EQUAL 1)
  message(FATAL_ERROR "install_and_consume: expected one cascade.pc under ${prefix}, found '${pc_files}'")
endif()
get_filename_component(pc_dir "${pc_files}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
execute_process(COMMAND "${PKG_CONFIG_EXECUTABLE}" --cflags --libs cascade
  OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install_and_consume: pkg-config --cflags --libs cascade failed (${rc})")
endif()
message(STATUS "[install_and_consume] pkg-config: ${pc_flags}")
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
separate_arguments(extra_cxx UNIX_COMMAND "${CXX_FLAGS} ${LINK_FLAGS}")
step("build examples/consumer with pkg-config"
  "${CXX_COMPILER}" ${extra_cxx} -O1 "${CONSUMER_SOURCE_DIR}/main.cpp" -o "${WORK_DIR}/app_pc" ${pc_flags})
step("run the pkg-config consumer" "${WORK_DIR}/app_pc")

# ---- the core alone: no MPI anywhere ------------------------------------------------------
# examples/consumer_core is configured with no MPI hint and with find_package(MPI) disabled, so
# the package must give Cascade::core without looking for MPI; it is built with the plain
# compiler (no MPI include path: its main.cpp fails to compile if <mpi.h> comes in) and must
# not load an MPI library.
set(core_build "${WORK_DIR}/build_core")
set(core_args
  -S "${CORE_CONSUMER_SOURCE_DIR}" -B "${core_build}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
if(MAKE_PROGRAM)
  list(APPEND core_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
step("configure examples/consumer_core (MPI disabled)" "${CMAKE_COMMAND}" ${core_args})
step("build examples/consumer_core" "${CMAKE_COMMAND}" --build "${core_build}" --config "${CONFIG}")
set(app_core "${core_build}/app_core")
if(NOT EXISTS "${app_core}" AND EXISTS "${core_build}/${CONFIG}/app_core")
  set(app_core "${core_build}/${CONFIG}/app_core")
endif()
# With a path, the consumer traces its run; the trace must name its tasks.
set(core_trace "${WORK_DIR}/core_trace.json")
step("run the core consumer" "${app_core}" "${core_trace}")
if(NOT EXISTS "${core_trace}")
  message(FATAL_ERROR "install_and_consume: the core consumer wrote no trace at ${core_trace}")
endif()
file(READ "${core_trace}" trace_text)
if(NOT trace_text MATCHES "\"pascal 20,10\"")
  message(FATAL_ERROR "install_and_consume: ${core_trace} does not name the task 'pascal 20,10'")
endif()
check_no_mpi("${app_core}")

# The same through cascade-core.pc: no MPI flag may appear.
execute_process(COMMAND "${PKG_CONFIG_EXECUTABLE}" --cflags --libs cascade-core
  OUTPUT_VARIABLE pc_core_flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install_and_consume: pkg-config --cflags --libs cascade-core failed (${rc})")
endif()
message(STATUS "[install_and_consume] pkg-config (core): ${pc_core_flags}")
# The prefix's own path is not a flag of MPI's, whatever it is called.
set(pc_core_check "${pc_core_flags}")
foreach(p "${real_prefix}" "${prefix}")
  string(REPLACE "${p}" "<prefix>" pc_core_check "${pc_core_check}")
endforeach()
string(TOLOWER "${pc_core_check}" pc_core_check)
if(pc_core_check MATCHES "mpi")
  message(FATAL_ERROR "install_and_consume: cascade-core.pc brings MPI: ${pc_core_flags}")
endif()
separate_arguments(pc_core_flags UNIX_COMMAND "${pc_core_flags}")
step("build examples/consumer_core with pkg-config"
  "${CXX_COMPILER}" ${extra_cxx} -O1 "${CORE_CONSUMER_SOURCE_DIR}/main.cpp"
  -o "${WORK_DIR}/app_core_pc" ${pc_core_flags})
step("run the pkg-config core consumer" "${WORK_DIR}/app_core_pc")
check_no_mpi("${WORK_DIR}/app_core_pc")
message(STATUS "[install_and_consume] OK")
