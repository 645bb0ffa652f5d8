#!/usr/bin/env python3
"""Talks to Headway's OpenAI-compatible frontend with only Python's standard library, the way a
minimal client would, and prints one JSON line describing what it got back. The C++ test
(http_clients_test) runs it as a subprocess and checks that line.

usage: openai_stdlib_client.py BASE_URL CHECK [API_KEY]
"""
import http.client
import json
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request


def post(base, path, body, key=None):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def open_stream(base, path, body):
    url = urllib.parse.urlparse(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    connection.request("POST", path, body=json.dumps(body),
                       headers={"Content-Type": "application/json"})
    return connection, connection.getresponse()


def events(response):
    """Yields the data payloads of an SSE response, skipping comments."""
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data: "):
            yield line[len("data: "):]


def completion(base, key):
    status, body = post(base, "/v1/completions", {"prompt": "hi", "max_tokens": 6}, key)
    choice = body.get("choices", [{}])[0]
    return {"status": status, "object": body.get("object"), "text": choice.get("text"),
            "finish_reason": choice.get("finish_reason"), "usage": body.get("usage")}


def chat_stream(base, _key):
    _, response = open_stream(base, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stream": True,
        "stream_options": {"include_usage": True}})
    content, role, finish, usage, done = "", None, None, None, False
    for data in events(response):
        if data == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk["choices"]:
            role = role or choice["delta"].get("role")
            content += choice["delta"].get("content", "")
            finish = choice["finish_reason"] or finish
    return {"status": response.status, "content_type": response.getheader("Content-Type"),
            "role": role, "content": content, "finish_reason": finish, "usage": usage,
            "done": done}


def bad_request(base, _key):
    status, body = post(base, "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": 42}]})
    return {"status": status, "error": body.get("error")}


def disconnect(base, _key):
    """Reads the first content chunk of a stream, then drops the connection."""
    connection, response = open_stream(base, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}], "stream": True})
    for data in events(response):
        chunk = json.loads(data)
        if chunk["choices"][0]["delta"].get("content"):
            # Reset rather than a polite close, like a client process that died.
            connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       b"\x01\x00\x00\x00\x00\x00\x00\x00")
            connection.sock.close()
            return {"id": chunk["id"]}
    return {"id": None}


CHECKS = {"completion": completion, "chat_stream": chat_stream, "bad_request": bad_request,
          "disconnect": disconnect}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[2] not in CHECKS:
        sys.exit("usage: openai_stdlib_client.py BASE_URL {%s} [API_KEY]" % ",".join(CHECKS))
    key = sys.argv[3] if len(sys.argv) > 3 else None
    print(json.dumps(CHECKS[sys.argv[2]](sys.argv[1], key)))
