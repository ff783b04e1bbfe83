// Rows of the parameter table that fill a component's options struct (HVD_OPTION rows) name the
// struct by a tag; this is where each tag's struct sits in the runtime's Config. A row declares
// the member itself (its type and name), so a new knob is its row and its use: the options
// struct's members are expanded from the rows (param_option_members.h), Config::fromParams
// fills them (runtime/config_fields.cc) and the docs are generated.
#pragma once

#define HVD_OPTION_PATH_Engine engine
#define HVD_OPTION_PATH_Coordinator engine.coordinator
#define HVD_OPTION_PATH_Executor engine.executor
#define HVD_OPTION_PATH_Autotune engine.autotune

#define HVD_OPTION_STRINGIFY_(...) #__VA_ARGS__
#define HVD_OPTION_STRINGIFY(...) HVD_OPTION_STRINGIFY_(__VA_ARGS__)
// "engine.coordinator.fusionThresholdBytes", for --print-config and the docs.
#define HVD_OPTION_MEMBER_NAME(Struct, member) HVD_OPTION_STRINGIFY(HVD_OPTION_PATH_##Struct.member)
