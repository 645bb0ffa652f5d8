#!/usr/bin/env python3
"""Renders real chat templates with Headway and with Jinja2 and says where they differ.

    python3 scripts/chat_template_sweep.py [--headway build/bin/headway] [--templates DIR] [NAME...]

Without --templates, the chat templates that llama.cpp collects from model checkpoints (about 70,
in models/templates/ of the llama-cpp-python source package) are fetched from PyPI once into
~/.cache/headway-chat-templates. Each template renders six conversations (one turn; a system turn
and history; tools with a call and its result; reasoning and non-ASCII text; two calls with nested
arguments; history with chat_template_kwargs) through `headway chat-template` and through Jinja2 set up as Hugging Face's
apply_chat_template sets it up (the renderer vLLM uses): trim_blocks, lstrip_blocks, loop controls,
{% generation %}, its tojson, raise_exception and strftime_now, tools=None when there are none.

A template agrees when every conversation renders to the same text, or both refuse it. The last
line counts the templates that agree. Needs Python's jinja2 (pip install jinja2) and, the first
time, pip to reach PyPI. A development tool, not part of the test suite: it needs the network once.
"""

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.exit("chat_template_sweep: needs jinja2 (pip install jinja2)")

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = pathlib.Path.home() / ".cache" / "headway-chat-templates"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather.\nTwo lines.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "days": {"type": "integer", "enum": [1, 2, 3]},
                "nested": {
                    "type": "object",
                    "properties": {"x": {"type": "array", "items": {"type": ["number", "string"]}}},
                    "additionalProperties": {"type": "string"},
                },
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search.",
        "parameters": {
            "type": "object",
            "properties": {
                "q": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "limit": {"type": "number", "minimum": 1.5},
            },
            "required": [],
        },
    },
}


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# (messages, tools, chat_template_kwargs): tool call arguments are objects, as serving hands them
# to templates.
_TURNS = [
    ([{"role": "user", "content": "Hello there"}], None),
    (
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "What is 2+2?"},
        ],
        None,
    ),
    (
        [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "",
             "tool_calls": [call("call_1", "get_weather", {"city": "Paris", "days": 3})]},
            {"role": "tool", "content": '{"temp": 21}', "tool_call_id": "call_1"},
            {"role": "user", "content": "Thanks"},
        ],
        [WEATHER],
    ),
    (
        [
            {"role": "user", "content": "Think: 17*3?"},
            {"role": "assistant", "content": "<think>\n17*3 = 51\n</think>\n\n51",
             "reasoning_content": "17*3 = 51"},
            {"role": "user", "content": "  And \u00fc\u00d72?  \n"},
        ],
        None,
    ),
    (
        [
            {"role": "system", "content": "Use tools when needed."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": "Checking both.",
             "tool_calls": [
                 call("call_a", "get_weather", {"city": "Paris"}),
                 call("call_b", "get_weather",
                      {"city": "Rome", "days": 2,
                       "nested": {"x": [1, 2.5, "y"], "flag": True, "none": None}}),
             ]},
            {"role": "tool", "content": "sunny", "tool_call_id": "call_a"},
            {"role": "tool", "content": "rainy", "tool_call_id": "call_b"},
            {"role": "assistant", "content": "Paris sunny, Rome rainy."},
            {"role": "user", "content": "Thanks!"},
        ],
        [WEATHER, SEARCH],
    ),
]

CONVERSATIONS = [(messages, tools, None) for messages, tools in _TURNS] + [
    # Qwen3's switch, and a reasoning effort for gpt-oss's.
    (_TURNS[1][0], None, {"enable_thinking": False, "reasoning_effort": "low"}),
]


class Generation(Extension):
    """Hugging Face's {% generation %}: renders its body (it marks it for training masks)."""

    tags = {"generation"}

    def parse(self, parser):
        line = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(line)

    def _render(self, caller):
        return caller()


def hugging_face_environment():
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env


def fetch_templates():
    target = CACHE / "templates"
    if target.is_dir() and any(target.glob("*.jinja")):
        return target
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as download:
        subprocess.run([sys.executable, "-m", "pip", "download", "llama-cpp-python", "--no-binary",
                        ":all:", "--no-deps", "--quiet", "-d", download], check=True)
        archive = next(pathlib.Path(download).glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if "/models/templates/" in member.name and member.name.endswith(".jinja"):
                    data = tar.extractfile(member).read()
                    (target / pathlib.PurePosixPath(member.name).name).write_bytes(data)
    return target


def jinja_render(env, source, messages, tools, kwargs):
    try:
        return True, env.from_string(source).render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=True,
            bos_token="", eos_token="", **(kwargs or {}))
    except Exception as error:  # a template refusing a conversation, or failing on it
        return False, f"{type(error).__name__}: {error}"


def headway_render(headway, template, request_file):
    run = subprocess.run([headway, "chat-template", "--template", str(template), "--request",
                          str(request_file)], capture_output=True, text=True)
    if run.returncode == 0:
        return True, run.stdout
    return False, run.stderr.strip()


def first_difference(a, b):
    at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    return f"at {at}: Jinja2 {a[max(0, at - 30):at + 50]!r}, Headway {b[max(0, at - 30):at + 50]!r}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--headway", default=str(ROOT / "build" / "bin" / "headway"))
    parser.add_argument("--templates", help="a folder of .jinja files (default: llama.cpp's)")
    parser.add_argument("names", nargs="*", help="only templates whose file name contains one")
    args = parser.parse_args()
    if not os.access(args.headway, os.X_OK):
        sys.exit(f"chat_template_sweep: {args.headway} is not an executable; build it first "
                 "(bash scripts/run.sh) or pass --headway")
    folder = pathlib.Path(args.templates) if args.templates else fetch_templates()
    templates = sorted(p for p in folder.glob("*.jinja")
                       if not args.names or any(n in p.name for n in args.names))
    env = hugging_face_environment()
    agree = 0
    with tempfile.TemporaryDirectory() as scratch:
        requests = []
        for i, (messages, tools, kwargs) in enumerate(CONVERSATIONS):
            request = pathlib.Path(scratch) / f"request{i}.json"
            body = {"messages": messages}
            if tools:
                body["tools"] = tools
            if kwargs:
                body["chat_template_kwargs"] = kwargs
            request.write_text(json.dumps(body))
            requests.append(request)
        for template in templates:
            source = template.read_text()
            verdicts = []
            for (messages, tools, kwargs), request in zip(CONVERSATIONS, requests):
                jinja_ok, jinja_text = jinja_render(env, source, messages, tools, kwargs)
                headway_ok, headway_text = headway_render(args.headway, template, request)
                if jinja_ok and headway_ok:
                    verdicts.append("same" if jinja_text == headway_text else
                                    "differs " + first_difference(jinja_text, headway_text))
                elif not jinja_ok and not headway_ok:
                    verdicts.append("both refuse")
                elif jinja_ok:
                    verdicts.append("Headway refuses: " + headway_text)
                else:
                    verdicts.append("Jinja2 refuses: " + jinja_text)
            same = all(v in ("same", "both refuse") for v in verdicts)
            agree += same
            print(f"{template.name}: " + ("agrees" if same else " | ".join(verdicts)))
    print(f"{agree} of {len(templates)} templates render as Jinja2 does "
          f"({len(CONVERSATIONS)} conversations each)")


if __name__ == "__main__":
    main()
