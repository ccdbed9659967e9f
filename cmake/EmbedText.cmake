# fp8attn_embed_text(<file> <out-var> <delimiter>): the text of <file> in <out-var>, for configure_file into a C++
# raw string R"<delimiter>(...)<delimiter>". The build reconfigures when the file changes (configure_file then
# rewrites the header only if its text changed), and a file containing ")<delimiter>", which would end the raw
# string early, is refused.
function(fp8attn_embed_text file var delimiter)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  file(READ ${file} _text)
  string(FIND "${_text}" ")${delimiter}" _at)
  if(NOT _at EQUAL -1)
    message(FATAL_ERROR "fp8attn: ${file} contains ')${delimiter}', which ends the raw string")
  endif()
  set(${var} "${_text}" PARENT_SCOPE)
endfunction()
