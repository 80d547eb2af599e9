# Test helpers shared by every tests/<layer>/CMakeLists.txt.
#   zero_add_unit_test(target src...)                  plain GoogleTest binary, one process
#   zero_add_mpi_test(target RANKS 1 2 3 4 SOURCES ...) GoogleTest binary run by mpirun at each rank count
find_package(GTest REQUIRED)

function(zero_add_unit_test target)
  add_executable(${target} ${ARGN})
  target_link_libraries(${target} PRIVATE GTest::gtest GTest::gtest_main)
  add_test(NAME ${target} COMMAND ${target})
endfunction()

set(ZERO_MPIRUN ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root --bind-to none)
# The environment of every test that starts ranks (a CMake list for the ENVIRONMENT property): the KEY=VALUE
# lines of launch/mpi.env, the file launch/mpi_env.sh exports too.
file(STRINGS ${PROJECT_SOURCE_DIR}/launch/mpi.env ZERO_MPI_TEST_ENV REGEX "^[A-Za-z_][A-Za-z0-9_]*=")
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/launch/mpi.env)

function(zero_add_mpi_test target)
  cmake_parse_arguments(T "" "" "RANKS;SOURCES;LIBS;ARGS" ${ARGN})
  add_executable(${target} ${T_SOURCES})
  target_link_libraries(${target} PRIVATE zero_mpi_gtest_main GTest::gtest ${T_LIBS})
  foreach(n ${T_RANKS})
    add_test(NAME ${target}_np${n} COMMAND ${ZERO_MPIRUN} -np ${n} $<TARGET_FILE:${target}> ${T_ARGS})
    set_tests_properties(${target}_np${n} PROPERTIES PROCESSORS ${n} TIMEOUT 600
      ENVIRONMENT "${ZERO_MPI_TEST_ENV}")
  endforeach()
endfunction()

# The same MPI test binary on the scrambled test backend (tests/common/test_backend.h): storage the host
# cannot read directly, so any direct host access to backend memory fails it.
function(zero_add_scrambled_test target ranks)
  add_test(NAME ${target}_scrambled_np${ranks} COMMAND ${ZERO_MPIRUN} -np ${ranks} $<TARGET_FILE:${target}> ${ARGN})
  set_tests_properties(${target}_scrambled_np${ranks} PROPERTIES PROCESSORS ${ranks} TIMEOUT 600
    ENVIRONMENT "ZERO_TEST_BACKEND=scrambled;${ZERO_MPI_TEST_ENV}")
endfunction()
