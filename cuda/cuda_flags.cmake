# nvcc rejects the gcc warning flags the top level adds with add_compile_options (-Wall, -Wextra, ...):
# keep them for C and C++ and hand them to nvcc's host compiler for CUDA sources. Include from a
# directory that compiles .cu files; it rewrites that directory's inherited COMPILE_OPTIONS.
get_directory_property(_zero_opts COMPILE_OPTIONS)
set(_zero_fixed)
foreach(_o IN LISTS _zero_opts)
  if(_o MATCHES "^\\$<")
    list(APPEND _zero_fixed "${_o}")  # already language-scoped (e.g. -march=native for CXX)
  else()
    list(APPEND _zero_fixed "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_o}>" "$<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:${_o}>")
  endif()
endforeach()
set_directory_properties(PROPERTIES COMPILE_OPTIONS "${_zero_fixed}")
