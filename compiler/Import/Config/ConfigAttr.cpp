//===- ConfigAttr.cpp - The resolved config as module attributes ----------===//

#include "compiler/Import/Config/ConfigAttr.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace zcc::config {

Attribute jsonToAttribute(MLIRContext *context, const Json &value) {
  Builder builder(context);
  switch (value.type()) {
  case Json::value_t::null:
    return builder.getUnitAttr();
  case Json::value_t::boolean:
    return builder.getBoolAttr(value.get<bool>());
  case Json::value_t::number_integer:
    return builder.getI64IntegerAttr(value.get<int64_t>());
  case Json::value_t::number_unsigned:
    return builder.getI64IntegerAttr(static_cast<int64_t>(value.get<uint64_t>()));
  case Json::value_t::number_float:
    return builder.getF64FloatAttr(value.get<double>());
  case Json::value_t::string:
    return builder.getStringAttr(value.get<std::string>());
  case Json::value_t::array: {
    SmallVector<Attribute> elements;
    for (const Json &element : value)
      elements.push_back(jsonToAttribute(context, element));
    return builder.getArrayAttr(elements);
  }
  case Json::value_t::object: {
    SmallVector<NamedAttribute> members;
    for (auto member = value.begin(); member != value.end(); ++member)
      members.push_back(builder.getNamedAttr(member.key(),
                                             jsonToAttribute(context, member.value())));
    return builder.getDictionaryAttr(members);
  }
  default:
    return builder.getUnitAttr();
  }
}

std::optional<Json> attributeToJson(Attribute attribute) {
  if (isa<UnitAttr>(attribute))
    return Json(nullptr);
  if (auto boolean = dyn_cast<BoolAttr>(attribute))
    return Json(boolean.getValue());
  if (auto integer = dyn_cast<IntegerAttr>(attribute))
    return Json(integer.getValue().getSExtValue());
  if (auto number = dyn_cast<FloatAttr>(attribute))
    return Json(number.getValueAsDouble());
  if (auto string = dyn_cast<StringAttr>(attribute))
    return Json(string.str());
  if (auto array = dyn_cast<ArrayAttr>(attribute)) {
    Json result = Json::array();
    for (Attribute element : array) {
      std::optional<Json> converted = attributeToJson(element);
      if (!converted)
        return std::nullopt;
      result.push_back(std::move(*converted));
    }
    return result;
  }
  if (auto dictionary = dyn_cast<DictionaryAttr>(attribute)) {
    Json result = Json::object();
    for (NamedAttribute member : dictionary) {
      std::optional<Json> converted = attributeToJson(member.getValue());
      if (!converted)
        return std::nullopt;
      result[member.getName().str()] = std::move(*converted);
    }
    return result;
  }
  return std::nullopt;
}

void attachConfig(ModuleOp module, const Json &config) {
  module->setAttr(kConfigAttrName, jsonToAttribute(module.getContext(), config));
}

DictionaryAttr getConfig(ModuleOp module) {
  return module->getAttrOfType<DictionaryAttr>(kConfigAttrName);
}

} // namespace zcc::config
