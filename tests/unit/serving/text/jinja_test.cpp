// The Jinja-subset interpreter behind chat templates: lexer (whitespace control), parser (what is
// refused, with lines), evaluator (Python/Jinja semantics templates rely on).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "jinja_evaluator.h"
#include "jinja_lexer.h"
#include "jinja_parser.h"

namespace headway::serving::jinja {
namespace {

using ::testing::HasSubstr;

std::string render_text(const std::string& source, Dict globals = {}) {
  return render(parse(tokenize(source)), globals);
}

// The SyntaxError a template is refused with, as "line N: message".
std::string syntax_error(const std::string& source) {
  try {
    parse(tokenize(source));
  } catch (const SyntaxError& e) {
    return "line " + std::to_string(e.line) + ": " + e.what();
  }
  return "(parsed)";
}

std::string render_error(const std::string& source, Dict globals = {}) {
  try {
    render_text(source, std::move(globals));
  } catch (const RenderError& e) {
    return "line " + std::to_string(e.line) + ": " + e.what();
  }
  return "(rendered)";
}

TEST(JinjaLexer, WhitespaceControlMarkers) {
  EXPECT_EQ(render_text("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render_text("a \n {%- if true %}b{% endif -%} \n c"), "abc");
  EXPECT_EQ(render_text("a {{ 'b' }} c"), "a b c");
  EXPECT_EQ(render_text("x {#- a comment -#} y {# another #}z"), "xy z");
}

TEST(JinjaLexer, TrimBlocksAndLstripBlocksAsHuggingFaceRendersThem) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render_text("{% if true %}\n    x\n    {% endif %}\nafter\n"), "    x\nafter");
  EXPECT_EQ(render_text("{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n"), "  1\n  2\n");
  // Not for expressions, and not when text precedes the tag on its line.
  EXPECT_EQ(render_text("  {{ 'x' }}\n"), "  x");
  EXPECT_EQ(render_text("a {% if true %}b{% endif %}"), "a b");
  // {%+ keeps the indentation.
  EXPECT_EQ(render_text("  {%+ if true %}b{% endif %}"), "  b");
  EXPECT_EQ(render_text("{# comment #}\nx"), "x");
}

TEST(JinjaLexer, StringLiterals) {
  EXPECT_EQ(render_text(R"({{ 'it\'s' ~ "\n" ~ "say \"hi\"" ~ '\\' }})"), "it's\nsay \"hi\"\\");
  EXPECT_EQ(render_text("{{ 'a' 'b' }}"), "ab");  // adjacent literals concatenate
}

TEST(JinjaEvaluator, OperatorsAndPrecedence) {
  EXPECT_EQ(
      render_text("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }}"),
      "7 9 3 -4 2");
  EXPECT_EQ(render_text("{{ 7 / 2 }} {{ 'ab' * 2 }} {{ 'a' ~ 1 ~ none }}"), "3.5 abab a1None");
  EXPECT_EQ(render_text("{{ 'x' + 'y' | upper }}"), "xY");  // filters bind tighter than +
  EXPECT_EQ(render_text("{{ not true or true }} {{ not (true or true) }}"), "True False");
  EXPECT_EQ(render_text("{{ 1 if false else 2 }}{{ 'z' if false }}"), "2");
  EXPECT_EQ(render_text("{{ 0 or 'fallback' }} {{ 'a' and 'b' }}"), "fallback b");
  EXPECT_EQ(render_text("{{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 2 < 10 }} {{ 'b' >= 'a' }}"),
            "True True True True");
  EXPECT_EQ(render_text("{{ 'ell' in 'hello' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }}"),
            "True True True");
}

TEST(JinjaEvaluator, SubscriptsSlicesAndAttributes) {
  Dict globals = {{"m", Value::dict({{"role", Value::string("user")}})},
                  {"xs", Value::list({Value::integer(1), Value::integer(2), Value::integer(3)})}};
  EXPECT_EQ(render_text("{{ m['role'] }} {{ m.role }} {{ m.missing }}|{{ xs[-1] }} {{ xs[9] }}|",
                        globals),
            "user user |3 |");
  EXPECT_EQ(render_text("{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ 'héllo'[1:3] }}", globals),
            "[2, 3] [1, 2] [3, 2, 1] él");
  // Lists are read in place (subscripts, slices, first/last, in); strings by character.
  EXPECT_EQ(render_text("{{ xs[0] }}{{ xs[-3] }} {{ 'héllo'[1] }}{{ 'héllo'[-1] }} {{ xs | first }}"
                        "{{ xs | last }} {{ 'héllo' | first }}{{ 'héllo' | last }} "
                        "{{ [] | first }}|{{ 2 in xs }} {{ 4 in xs }} {{ xs[3:] }}",
                        globals),
            "11 éo 13 ho |True False []");
  EXPECT_EQ(render_text("{{ {'a': [1, 'b'], 'c': none} }} {{ (1, 2) }}"),
            "{'a': [1, 'b'], 'c': None} [1, 2]");
}

TEST(JinjaEvaluator, LoopVariablesAndScoping) {
  EXPECT_EQ(render_text("{% for x in ['a', 'b', 'c'] %}{{ loop.index0 }}{{ loop.index }}"
                        "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }} "
                        "{% endfor %}"),
            "01TrueFalse33 12FalseFalse32 23FalseTrue31 ");
  // A set inside a loop stays there (and does not carry over between iterations)...
  EXPECT_EQ(render_text("{% set n = 0 %}{% for x in [1, 2] %}{% set n = n + x %}{{ n }}{% endfor %}"
                        "{{ n }}"),
            "120");
  // ...while namespace() carries state out, as templates do.
  EXPECT_EQ(render_text("{% set ns = namespace(total=0) %}{% for x in [1, 2, 3] %}"
                        "{% set ns.total = ns.total + x %}{% endfor %}{{ ns.total }}"),
            "6");
  EXPECT_EQ(render_text("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
  EXPECT_EQ(
      render_text("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.last }}{% endfor %}"),
      "2False4True");
  EXPECT_EQ(render_text("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render_text("{% if false %}a{% elif 1 %}b{% else %}c{% endif %}"), "b");
}

TEST(JinjaEvaluator, FiltersTestsAndMethods) {
  EXPECT_EQ(render_text("{{ '  x  ' | trim }}|{{ 'héllo' | length }}|{{ [1, 2] | length }}|"
                        "{{ 'Ab' | upper }}{{ 'Ab' | lower }}"),
            "x|5|2|ABab");
  EXPECT_EQ(render_text("{{ missing | default('d') }} {{ '' | default('e', true) }} "
                        "{{ ['a', 'b'] | join(', ') }}"),
            "d e a, b");
  EXPECT_EQ(render_text("{{ {'name': 'f', 'args': [1, 'x'], 'ok': true, 'no': none} | tojson }}"),
            R"({"name": "f", "args": [1, "x"], "ok": true, "no": null})");
  EXPECT_EQ(render_text("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render_text("{{ 'q\"\n' | tojson }}"), R"("q\"\n")");
  EXPECT_EQ(render_text("{{ ['a', 'code', 'b'] | reject('equalto', 'code') | join(',') }}"), "a,b");
  EXPECT_EQ(render_text("{{ [{'r': 'u'}, {'r': 's'}] | selectattr('r', 'equalto', 's') | list }}"),
            "[{'r': 's'}]");
  EXPECT_EQ(render_text("{{ [{'r': 'u'}, {'r': 's'}] | map(attribute='r') | join }}"), "us");
  EXPECT_EQ(render_text("{{ x is defined }} {{ x is not defined }} {{ none is none }} "
                        "{{ 'a' is string }} {{ {} is mapping }} {{ 3 is divisibleby 3 }}"),
            "False True True True True True");
  EXPECT_EQ(render_text("{{ '  a b  '.strip() }}|{{ 'xay'.lstrip('x') }}|{{ 'a,b'.split(',') }}|"
                        "{{ 'abc'.startswith('ab') }}|{{ {'k': 1}.get('z', 2) }}"),
            "a b|ay|['a', 'b']|True|2");
  EXPECT_EQ(render_text("{{ range(3) | list }} {{ range(1, 7, 2) | join('') }}"), "[0, 1, 2] 135");
}

TEST(JinjaEvaluator, UndefinedPrintsNothingButCannotBeUsed) {
  EXPECT_EQ(render_text("[{{ nothing }}]{% if nothing %}x{% endif %}{% for x in nothing %}y"
                        "{% endfor %}"),
            "[]");
  EXPECT_EQ(render_error("\n{{ nothing.attr }}"), "line 2: 'nothing' is undefined (reading .attr)");
  EXPECT_EQ(render_error("{{ m['content'] + nothing }}",
                         {{"m", Value::dict({{"content", Value::string("x")}})}}),
            "line 1: 'nothing' is undefined (in +)");
  EXPECT_THAT(render_error("{{ 'a' + 1 }}"),
              HasSubstr("unsupported operand types for +: string and integer"));
  EXPECT_THAT(render_error("{{ 1 // 0 }}"), HasSubstr("division by zero"));
  EXPECT_THAT(render_error("{{ 9223372036854775807 + 1 }}"), HasSubstr("integer overflow in +"));
  EXPECT_THAT(render_error("{{ range(10000000) }}"), HasSubstr("more than 1000000 items"));
  EXPECT_THAT(render_error("{% set x = 1 %}{% set x.y = 2 %}"),
              HasSubstr("'x', which is not a namespace()"));
  EXPECT_THAT(render_error("{{ 'abc'.get('x') }}"), HasSubstr("a string has no method 'get'"));
}

TEST(JinjaEvaluator, RaiseExceptionCarriesTheTemplatesMessage) {
  try {
    render_text("{% if true %}{{ raise_exception('Roles must alternate') }}{% endif %}");
    FAIL() << "no exception";
  } catch (const TemplateException& e) {
    EXPECT_STREQ(e.what(), "Roles must alternate");
  }
}

TEST(JinjaParser, RefusesUnsupportedConstructsNamingTheLine) {
  EXPECT_EQ(syntax_error("a\n{% macro m() %}x{% endmacro %}"),
            "line 2: '{% macro %}' is not supported by Headway's chat template interpreter");
  EXPECT_EQ(syntax_error("{{ x | frobnicate }}"), "line 1: unknown filter 'frobnicate'");
  EXPECT_EQ(syntax_error("\n\n{{ x is frobnicated }}"), "line 3: unknown test 'frobnicated'");
  EXPECT_EQ(syntax_error("{{ lookup('x') }}"), "line 1: unknown function 'lookup'");
  EXPECT_EQ(syntax_error("{{ x.pop() }}"), "line 1: unknown method 'pop'");
  EXPECT_EQ(syntax_error("{% set x %}block{% endset %}"),
            "line 1: block assignments ({% set x %}...{% endset %}) are not supported");
  EXPECT_EQ(syntax_error("{{ 1 < x < 3 }}"),
            "line 1: chained comparisons (a < b < c) are not supported");
  EXPECT_EQ(syntax_error("{% include 'other.jinja' %}"),
            "line 1: '{% include %}' is not supported by Headway's chat template interpreter");
  EXPECT_EQ(syntax_error("{{ 2 ** 3 }}"), "line 1: the ** operator is not supported");
}

TEST(JinjaParser, RefusesMalformedTemplatesNamingTheLine) {
  EXPECT_EQ(syntax_error("x\n{% for m in messages %}{{ m }}"),
            "line 2: '{% for %}' is never closed with '{% endfor %}'");
  EXPECT_EQ(syntax_error("{% if a %}x{% endfor %}"), "line 1: unexpected '{% endfor %}'");
  EXPECT_EQ(syntax_error("{% endif %}"), "line 1: unexpected '{% endif %}'");
  EXPECT_EQ(syntax_error("{{ 'abc }}"), "line 1: string literal is never closed");
  EXPECT_EQ(syntax_error("\n{{ x "), "line 2: {{ is never closed with }}");
  EXPECT_EQ(syntax_error("{# open"), "line 1: comment {# is never closed with #}");
  EXPECT_EQ(syntax_error("{{ x + }}"), "line 1: expected an expression, found '}}'");
  EXPECT_EQ(syntax_error("{{ x ! y }}"), "line 1: unexpected character '!' inside a tag");
  EXPECT_EQ(syntax_error("{% if x %}{% else %}{% else %}{% endif %}"),
            "line 1: unexpected '{% else %}'");
  EXPECT_EQ(syntax_error("{{ x }} {% %}"), "line 1: expected a statement keyword, found '%}'");
}

}  // namespace
}  // namespace headway::serving::jinja
