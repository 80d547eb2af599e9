# Sharded checkpoints (zero_checkpoint): manifest, shard file I/O, atomic publish and retention,
# resharding plan, async writer, fault injection; the Checkpointer the trainers call. Included from
# checkpoint/CMakeLists.txt.
add_library(zero_checkpoint
  ${CMAKE_CURRENT_LIST_DIR}/agree.cpp
  ${CMAKE_CURRENT_LIST_DIR}/async_writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpointer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fault.cpp
  ${CMAKE_CURRENT_LIST_DIR}/file_io.cpp
  ${CMAKE_CURRENT_LIST_DIR}/full_state.cpp
  ${CMAKE_CURRENT_LIST_DIR}/full_tensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/load.cpp
  ${CMAKE_CURRENT_LIST_DIR}/manifest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/publish.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reshard_plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shard_layout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shared_dir.cpp
  ${CMAKE_CURRENT_LIST_DIR}/verify.cpp)
target_link_libraries(zero_checkpoint
  PUBLIC zero_engine nlohmann_json::nlohmann_json Threads::Threads
  PRIVATE PkgConfig::XXHASH)
