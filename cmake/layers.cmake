# Per-layer header visibility, from cmake/layers.txt (which says what belongs to each layer).
#
# The sources include headers by their path from the source root ("collectives/transport/comm.h"),
# but the source root is not on any library's include path. Instead, hvd_layer(<target>) gives
# the target one include folder, build/layers/<layer>/, holding links to its layer's headers at
# their usual paths, PUBLIC (INTERFACE for an interface library). A target then sees its own
# headers and those of the layers it links, and PRIVATE links stay private: a header of a layer
# the target does not link is "No such file or directory". Tests and the Python module keep the
# source root (they may include anything). scripts/check_layers.py checks the same file with
# better messages, and the links too (hvd_layers_write_links).

set(HVD_LAYERS_FILE ${PROJECT_SOURCE_DIR}/cmake/layers.txt)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${HVD_LAYERS_FILE})

# Reads the layers: HVD_LAYER_OF_<target> (the layer), HVD_LAYER_PATHS_<layer>, HVD_LAYERS and
# HVD_LAYER_TARGETS.
function(hvd_layers_read)
  file(STRINGS ${HVD_LAYERS_FILE} lines)
  set(layer "")
  set(layers "")
  set(targets "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "#.*" "" line "${line}")
    if(line MATCHES "^layer +([A-Za-z0-9_-]+)")
      set(layer ${CMAKE_MATCH_1})
      list(APPEND layers ${layer})
    elseif(line MATCHES "^ +target +([^ ]+)")
      if(NOT CMAKE_MATCH_1 STREQUAL "-")
        set(HVD_LAYER_OF_${CMAKE_MATCH_1} ${layer} PARENT_SCOPE)
        list(APPEND targets ${CMAKE_MATCH_1})
      endif()
    elseif(line MATCHES "^ +paths +(.*)")
      string(REGEX REPLACE " +" ";" paths "${CMAKE_MATCH_1}")
      list(APPEND HVD_LAYER_PATHS_${layer} ${paths})
      set(HVD_LAYER_PATHS_${layer} ${HVD_LAYER_PATHS_${layer}} PARENT_SCOPE)
    endif()
  endforeach()
  set(HVD_LAYERS ${layers} PARENT_SCOPE)
  set(HVD_LAYER_TARGETS ${targets} PARENT_SCOPE)
endfunction()
hvd_layers_read()

# The headers of `layer`: those directly in its "dir/" folders (not their subfolders, which are
# other layers) and its single files; not a file that another layer names on its own.
function(hvd_layer_headers layer out)
  set(claimed "")
  foreach(other IN LISTS HVD_LAYERS)
    if(NOT other STREQUAL layer)
      foreach(p IN LISTS HVD_LAYER_PATHS_${other})
        if(NOT p MATCHES "/$|/\\*\\*$")
          list(APPEND claimed ${p})
        endif()
      endforeach()
    endif()
  endforeach()
  set(headers "")
  foreach(p IN LISTS HVD_LAYER_PATHS_${layer})
    if(p MATCHES "/\\*\\*$")
      message(FATAL_ERROR "layers.txt: a library layer (${layer}) lists ${p}: name its folders")
    elseif(p MATCHES "/$")
      file(GLOB found CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
           ${PROJECT_SOURCE_DIR}/${p}*.h ${PROJECT_SOURCE_DIR}/${p}*.hpp)
      list(APPEND headers ${found})
    elseif(p MATCHES "\\.(h|hpp)$")
      list(APPEND headers ${p})
    endif()
  endforeach()
  if(claimed)
    list(REMOVE_ITEM headers ${claimed})
  endif()
  set(${out} ${headers} PARENT_SCOPE)
endfunction()

# Gives `target` its layer's include folder (see the top of this file).
function(hvd_layer target)
  set(layer ${HVD_LAYER_OF_${target}})
  if(NOT layer)
    message(FATAL_ERROR "hvd_layer(${target}): no layer in cmake/layers.txt has this target")
  endif()
  set(root ${CMAKE_BINARY_DIR}/layers/${layer})
  file(REMOVE_RECURSE ${root})  # drops links to headers that are gone
  hvd_layer_headers(${layer} headers)
  foreach(h IN LISTS headers)
    get_filename_component(dir ${root}/${h} DIRECTORY)
    file(MAKE_DIRECTORY ${dir})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${h} ${root}/${h} SYMBOLIC)
  endforeach()
  file(MAKE_DIRECTORY ${root})
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE ${root})
  elseif(type STREQUAL "EXECUTABLE")
    target_include_directories(${target} PRIVATE ${root})
  else()
    target_include_directories(${target} PUBLIC ${root})
  endif()
endfunction()

# Writes each layer target's direct links and link interface (as CMake keeps them: a PRIVATE
# link of a static library appears in the interface as $<LINK_ONLY:...>) for the include-graph
# test. Call after every target is defined.
function(hvd_layers_write_links file)
  set(text "")
  foreach(t IN LISTS HVD_LAYER_TARGETS)
    if(NOT TARGET ${t})
      continue()
    endif()
    get_target_property(links ${t} LINK_LIBRARIES)
    get_target_property(interface ${t} INTERFACE_LINK_LIBRARIES)
    if(NOT links)
      set(links "")
    endif()
    if(NOT interface)
      set(interface "")
    endif()
    string(APPEND text "${t}\t${links}\t${interface}\n")
  endforeach()
  file(WRITE ${file}.tmp "${text}")
  file(COPY_FILE ${file}.tmp ${file} ONLY_IF_DIFFERENT)
endfunction()
