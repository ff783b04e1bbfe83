#include "collectives/rendezvous/protocol.h"

#include <nlohmann/json.hpp>

namespace hvd::rendezvous::protocol {
namespace {

using json = nlohmann::json;

const char* opName(Op op) {
  switch (op) {
    case Op::Set:
      return "set";
    case Op::Get:
      return "get";
    case Op::Wait:
      return "wait";
    case Op::Add:
      return "add";
    case Op::MultiGet:
      return "multiget";
  }
  return "?";
}

Op parseOp(const std::string& name) {
  for (Op op : {Op::Set, Op::Get, Op::Wait, Op::Add, Op::MultiGet})
    if (name == opName(op)) return op;
  throw std::invalid_argument("unknown op '" + name + "'");
}

template <typename T, typename Fn>
T decodeWith(const std::vector<uint8_t>& bytes, const std::string& peer, const char* what, Fn fn) {
  try {
    return fn(json::from_msgpack(bytes));
  } catch (const std::exception& e) {
    throw IoError("rendezvous: malformed " + std::string(what) + " from " + peer + ": " + e.what());
  }
}

}  // namespace

std::vector<uint8_t> encode(const Request& r) {
  json j = {{"op", opName(r.op)},
            {"keys", r.keys},
            {"value", json::binary(r.value)},
            {"delta", r.delta},
            {"timeout_ms", r.timeoutMs}};
  return json::to_msgpack(j);
}

std::vector<uint8_t> encode(const Response& r) {
  json values = json::array();
  for (const auto& v : r.values) values.push_back(v ? json(json::binary(*v)) : json(nullptr));
  json j = {{"ok", r.ok},       {"found", r.found},     {"value", json::binary(r.value)},
            {"values", values}, {"counter", r.counter}, {"missing", r.missing},
            {"error", r.error}};
  return json::to_msgpack(j);
}

Request decodeRequest(const std::vector<uint8_t>& bytes, const std::string& peer) {
  return decodeWith<Request>(bytes, peer, "request", [](const json& j) {
    Request r;
    r.op = parseOp(j.at("op").get<std::string>());
    r.keys = j.at("keys").get<std::vector<std::string>>();
    r.value = j.at("value").get_binary();
    r.delta = j.at("delta").get<int64_t>();
    r.timeoutMs = j.at("timeout_ms").get<int64_t>();
    bool manyKeys = r.op == Op::Wait || r.op == Op::MultiGet;
    if (r.keys.empty() || (!manyKeys && r.keys.size() != 1))
      throw std::invalid_argument("wrong number of keys for " + std::string(opName(r.op)));
    return r;
  });
}

Response decodeResponse(const std::vector<uint8_t>& bytes, const std::string& peer) {
  return decodeWith<Response>(bytes, peer, "response", [](const json& j) {
    Response r;
    r.ok = j.at("ok").get<bool>();
    r.found = j.at("found").get<bool>();
    r.value = j.at("value").get_binary();
    for (const auto& v : j.at("values")) {
      if (v.is_null())
        r.values.emplace_back();
      else
        r.values.emplace_back(Bytes(v.get_binary()));
    }
    r.counter = j.at("counter").get<int64_t>();
    r.missing = j.at("missing").get<std::vector<std::string>>();
    r.error = j.at("error").get<std::string>();
    return r;
  });
}

}  // namespace hvd::rendezvous::protocol
