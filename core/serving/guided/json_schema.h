// JSON schema -> Grammar, for guided decoding (OpenAI's response_format json_schema, vLLM's
// guided_json). The supported part of JSON Schema is what structured-output clients (OpenAI SDK
// helpers, pydantic, zod) emit for plain data:
//
//   type (one or a list), properties, required, additionalProperties, minProperties (above 1
//   on declared properties only), maxProperties, propertyNames (of strings) and patternProperties
//   (one pattern) on objects without declared properties, items, prefixItems (and items as an array
//   with additionalItems, drafts 4 to 7), minItems, maxItems, uniqueItems (on items that are enum,
//   const or boolean values, at most 32 of them),
//   minLength, maxLength, pattern, format (string_formats.h), minimum, maximum,
//   exclusiveMinimum, exclusiveMaximum (integers and numbers), multipleOf (integers), enum,
//   const, anyOf, oneOf (as anyOf: exclusivity is not checked), allOf of one schema, $ref to
//   "#", "#/$defs/..." or "#/definitions/..." (recursion allowed),
//   and the annotations title, description, default, examples, $schema, $id, $comment,
//   deprecated, readOnly, writeOnly, which change nothing.
//
// Any other keyword (contains, dependentRequired, ...) is refused, naming where
// it is: output that only looked constrained would be a silent wrong answer. An object with
// declared properties gets exactly those, in their order (additionalProperties is then not used:
// the output stays valid for the schema); one without gets any keys, with additionalProperties'
// schema as their values.
//
// Threading: pure function, safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "grammar.h"

namespace headway::serving::guided {

// Throws ServiceError (kInvalidArgument) whose param is `field` followed by the path of the part
// at fault ("response_format.json_schema.schema.properties.age.minimum") when `schema_text` is not
// a JSON schema (object or boolean) this supports.
Grammar compile_json_schema(std::string_view schema_text, const std::string& field);

}  // namespace headway::serving::guided
