# `cmake --install`: the engine as a library other trainers embed. Installs the libraries, a deliberate
# set of public headers under include/zero/ (the same paths as in this tree: #include "zero/engine.h"),
# a CMake package (find_package(zero): zero::core, zero::launch_env (zero::comm's environment table, no MPI),
# zero::comm, zero::optim, zero::engine,
# zero::checkpoint, with their MPI/Eigen/fmt/json/xxhash (and OpenMP) dependencies found again by zeroConfig.cmake;
# zero::cuda, when built, only for the component cuda, find_package(zero COMPONENTS cuda), which alone
# finds CUDA and NCCL: a CPU consumer of a CUDA-built install needs neither) and a pkg-config file
# (zero.pc, the CPU libraries). docs/EMBEDDING.md says what the public API promises. Also bin/pmtrain
# and (CUDA builds) lib/libpmtrain_cuda_backend.so.
# Every header a public header includes is public too: install_consumer compiles each installed header
# alone against the prefix.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ZERO_PUBLIC_HEADERS
  core/check.h core/chunks.h core/dtype.h core/memory.h core/process_memory.h core/step_clock.h
  core/math/hd.h core/math/rounding.h core/math/adamw_math.h core/math/fixed_point.h
  comm/communicator.h comm/mpi_communicator.h comm/bootstrap.h comm/peer_watch.h
  optim/adamw.h optim/lr_schedule.h
  zero/engine.h zero/engine_config.h zero/partition.h zero/device_ops.h zero/buffer_plan.h
  checkpoint/checkpointer.h checkpoint/agree.h checkpoint/async_writer.h checkpoint/fault.h checkpoint/file_io.h
  checkpoint/load.h checkpoint/manifest.h checkpoint/publish.h checkpoint/shard_layout.h checkpoint/shared_dir.h
  checkpoint/verify.h)
set(ZERO_INSTALL_TARGETS zero_core zero_launch_env zero_comm zero_optim zero_engine zero_checkpoint)
if(ZERO_CUDA_ENABLED)
  list(APPEND ZERO_PUBLIC_HEADERS cuda/cuda_ops.h cuda/nccl_communicator.h cuda/device_select.h cuda/device_allocator.h
    cuda/host_wait.h)
endif()

# pmtrain, and its CUDA backend module in the lib dir, where pmtrain looks for it (bin/../lib,
# pmtrain/cuda_backend_loader.h). Component pmtrain: `cmake --install BUILD --component pmtrain` installs
# just these two.
if(TARGET pmtrain)
  install(TARGETS pmtrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT pmtrain)
endif()
if(TARGET pmtrain_cuda_backend)
  install(TARGETS pmtrain_cuda_backend LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT pmtrain)
endif()

foreach(h ${ZERO_PUBLIC_HEADERS})
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zero/${dir})
endforeach()
foreach(t ${ZERO_INSTALL_TARGETS})
  string(REGEX REPLACE "^zero_" "" short ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${short})
endforeach()
install(TARGETS ${ZERO_INSTALL_TARGETS} EXPORT zeroTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zero)
set(ZERO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/zero)
install(EXPORT zeroTargets NAMESPACE zero:: DESTINATION ${ZERO_CMAKE_DIR})
# zero::cuda in an export set of its own: zeroConfig.cmake includes zeroCudaTargets.cmake only for the
# component cuda, after finding CUDAToolkit and NCCL (zero::nccl) for it. Nothing in zeroTargets links it.
if(ZERO_CUDA_ENABLED)
  set_target_properties(zero_cuda PROPERTIES EXPORT_NAME cuda)
  install(TARGETS zero_cuda EXPORT zeroCudaTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zero)
  install(EXPORT zeroCudaTargets NAMESPACE zero:: DESTINATION ${ZERO_CMAKE_DIR})
endif()
# The engine's CPU ops run on OpenMP's threads where the build found OpenMP (zero/CMakeLists.txt): its consumers
# then link OpenMP too, found again by zeroConfig.cmake and named in zero.pc.
get_target_property(_zero_engine_links zero_engine LINK_LIBRARIES)
set(ZERO_ENGINE_OPENMP OFF)
set(ZERO_PC_OPENMP "")
if("OpenMP::OpenMP_CXX" IN_LIST _zero_engine_links)
  set(ZERO_ENGINE_OPENMP ON)
  set(ZERO_PC_OPENMP " -fopenmp")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zeroConfig.cmake.in
  ${PROJECT_BINARY_DIR}/zeroConfig.cmake INSTALL_DESTINATION ${ZERO_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zeroConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zeroConfig.cmake ${PROJECT_BINARY_DIR}/zeroConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/zeroFindNccl.cmake DESTINATION ${ZERO_CMAKE_DIR})
# zero.pc names the prefix relative to itself (pkg-config's ${pcfiledir}), as libdir is relative to the prefix.
file(RELATIVE_PATH ZERO_PC_PREFIX_FROM_PCDIR ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" ZERO_PC_PREFIX_FROM_PCDIR "${ZERO_PC_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/zero.pc.in ${PROJECT_BINARY_DIR}/zero.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/zero.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
