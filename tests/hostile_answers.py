"""A hostile server whose 200s are chat completions written at the byte level, and whose errors
echo the caller's key in every place a client might keep.

It extends `tests/hostile.HostileServer` (same markers, `[[hostile:NAME]]` or `[[hostile:NAMExN]]`
in the last message; every other fate of that server still works). Its own fates:

Answers Python's `json` reads but a strict reader (jq, serde_json, Go, a JSON Lines tool) may not:

    bom          a UTF-8 byte-order mark before the JSON
    nan          `NaN` and `-Infinity` as values (logprobs of a broken server)
    dupkeys      `content` twice in the message (which one is the answer?)
    surrogate    a lone surrogate escape (`\\ud800`) in the content
    control      raw control characters (a tab, a newline, \\x01) inside a string
    lineseps     raw U+2028, U+2029 and U+0085 in the content (line breaks to `str.splitlines`)
    hugenum      a number past a double (`1e999`) and an integer of 5,000 digits
    bigusage     usage counts past 2**63 (SQLite's integer)
    utf16        the whole body in UTF-16 (with its BOM)
    deep         an answer nested 100,000 arrays deep
    notutf8      a Latin-1 byte in the content: not UTF-8 at all
    huge         an answer of 1 MiB (over a cap a test sets lower)
    big          an ordinary answer of 32 KiB (to fill a file quickly)

Errors that echo the key (a 401 each; `authorization` is read from the request):

    keycode      the key as `error.code`
    keyheader    the key in `x-request-id`
    keyspell     the key URL-encoded, lower-cased, upper-cased and as `Bearer <key>` in the message
    keytype      the key as `error.type` and `error.param`
    keyok        a normal 200 whose `x-request-id`, `id` and content echo the key (URL-encoded,
                 lower-cased, `Bearer <key>`)
    keyquote     a 401 whose message spells the key as other encoders write it: URL-encoded as
                 urllib's `quote` does (a `/` kept), that upper-cased, URL-encoded twice, as HTML
                 entities (`&#x2F;`)
    keyescaped   a normal 200 whose JSON text holds the key escaped as PHP (`\\/`) and .NET
                 (`\\u002B`) write it: the key itself to any JSON reader
    echoall      a normal 200 whose content and `x-request-id` echo every secret the request
                 carried besides the bearer key: the `api-key` header and the raw query string

An error whose text a strict reader chokes on once it is written back:

    errweird     a 400 whose message holds U+2028, U+0085, a lone surrogate and a NUL, with an
                 `x-request-id` holding a raw 0x85 byte (U+0085 to a latin-1 reader)

`default_fate`: the fate of a request that names none (`providers test` sends its own prompt).
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from aiohttp import web

from tests.hostile import HostileServer, completion

ANSWER_FATES = frozenset(
    {
        "bom",
        "nan",
        "dupkeys",
        "surrogate",
        "control",
        "lineseps",
        "hugenum",
        "bigusage",
        "utf16",
        "deep",
        "notutf8",
        "huge",
        "big",
    }
)
KEY_FATES = frozenset({"keycode", "keyheader", "keyspell", "keytype", "keyok", "keyquote", "keyescaped", "echoall"})
ERROR_FATES = frozenset({"errweird"})
MARKER = re.compile(r"\[\[hostile:([a-z0-9]+?)(?:x(\d+))?\]\]")
"""`tests/hostile`'s marker."""


def answer_bytes(fate: str, prompt: str, model: str) -> bytes:
    """The body of a 200 for `fate`, byte for byte."""
    body = completion(prompt, model)
    text = json.dumps(body)
    content = json.dumps(body["choices"][0]["message"]["content"])
    match fate:
        case "bom":
            return b"\xef\xbb\xbf" + text.encode()
        case "nan":
            return text.replace('"finish_reason"', '"logprobs": {"x": NaN, "y": -Infinity}, "finish_reason"').encode()
        case "dupkeys":
            return text.replace(f'"content": {content}', f'"content": "a decoy", "content": {content}').encode()
        case "surrogate":
            return text.replace(f'"content": {content}', f'"content": {content[:-1]} \\ud800 end"').encode()
        case "control":
            return text.replace(f'"content": {content}', f'"content": {content[:-1]}\tand\nmore\x01"').encode()
        case "lineseps":
            return text.replace(f'"content": {content}', f'"content": {content[:-1]} a\u2028b\u2029c\u0085d"').encode()
        case "hugenum":
            return text.replace('"created": 1', f'"created": 1e999, "big": {"9" * 5000}').encode()
        case "bigusage":
            return text.replace('"prompt_tokens": 10', f'"prompt_tokens": {2**70}').encode()
        case "utf16":
            return text.encode("utf-16")
        case "deep":
            return text.replace('"created": 1', '"created": 1, "deep": ' + "[" * 100_000 + "]" * 100_000).encode()
        case "notutf8":
            return text.replace(f'"content": {content}', f'"content": {content[:-1]} caf\xe9"').encode("latin-1")
        case "big":
            return text.replace(f'"content": {content}', f'"content": {content[:-1]} {"y" * 32 * 1024}"').encode()
        case "huge":
            return text.replace(f'"content": {content}', f'"content": {content[:-1]} {"x" * 1024 * 1024}"').encode()
    raise AssertionError(fate)


class ByteHostileServer(HostileServer):
    """`HostileServer` with the answers above and the key-echoing errors."""

    def __init__(self, *, default_fate: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.default_fate = default_fate

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return await super()._handle(request)
        body = await request.json()
        prompt = str(body["messages"][-1]["content"])
        marker = self._peek(prompt)
        if marker is None and self.default_fate is not None:
            fate = self.default_fate
        elif marker in ANSWER_FATES | KEY_FATES | ERROR_FATES:
            fate = self._fate(prompt)
        else:
            return await super()._handle(request)  # aiohttp keeps the body read: it reads it again
        self.requests[f"{request.method} {request.path}"] += 1
        if fate is None:  # `NAMExN` after its N: a normal answer
            self.answered[prompt] += 1
            return web.json_response(completion(prompt, body.get("model", "hostile-1")))
        if fate in ANSWER_FATES:
            self.answered[prompt] += 1
            data = answer_bytes(fate, prompt, body.get("model", "hostile-1"))
            return web.Response(status=200, body=data, headers={"content-type": "application/json"})
        if fate == "errweird":
            error = {"message": "bad\u2028request\u0085 \ud800 \x00 end", "type": "invalid_request_error"}
            return web.Response(
                status=400,
                text=json.dumps({"error": error}),
                content_type="application/json",
                headers={"x-request-id": "req-\x85x"},
            )
        key = (request.headers.get("authorization") or "").removeprefix("Bearer ")
        if fate == "echoall":
            self.answered[prompt] += 1
            answer = completion(prompt, body.get("model", "hostile-1"))
            carried = f"api-key {request.headers.get('api-key')} query {request.query_string}"
            answer["choices"][0]["message"]["content"] += f" (you sent {carried})"
            return web.json_response(answer, headers={"x-request-id": f"req-{request.headers.get('api-key')}"})
        if fate == "keyquote":
            spelled = f"{quote(key)} / {quote(key).upper()} / {quote(quote(key, safe=''), safe='')} / "
            spelled += key.replace("/", "&#x2F;").replace("+", "&#43;")
            error = {"message": f"bad key {spelled}", "type": "invalid_request_error", "code": "invalid_api_key"}
            return web.json_response({"error": error}, status=401)
        if fate == "keyescaped":
            self.answered[prompt] += 1
            text = json.dumps(completion(prompt, body.get("model", "hostile-1")))
            escaped = key.replace("/", "\\/").replace("+", "\\u002B")  # as JSON text: PHP's and .NET's escapes
            data = text.replace('"}, "finish_reason"', f' (you sent {escaped})"}}, "finish_reason"', 1)
            return web.Response(
                status=200, text=data.replace('"chatcmpl-', f'"chatcmpl-{escaped}-', 1), content_type="application/json"
            )
        if fate == "keyok":
            self.answered[prompt] += 1
            answer = completion(prompt, body.get("model", "hostile-1"))
            answer["id"] = f"chatcmpl-{key}"
            echoed = f" (you sent {quote(key, safe='')}, {key.lower()}, Bearer {key})"
            answer["choices"][0]["message"]["content"] += echoed
            return web.json_response(answer, headers={"x-request-id": f"req-{key}"})
        return self._echo_key(fate, key)

    @staticmethod
    def _peek(prompt: str) -> str | None:
        """The fate a prompt names, without counting it as seen."""
        match = MARKER.search(prompt)
        return match.group(1) if match else None

    def _echo_key(self, fate: str, key: str) -> web.Response:
        error: dict = {
            "message": "Incorrect API key provided",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
            "param": None,
        }
        headers = {}
        match fate:
            case "keycode":
                error["code"] = key
            case "keyheader":
                headers["x-request-id"] = f"req-{key}"
            case "keyspell":
                error["message"] = (
                    f"bad key {quote(key, safe='')} / {key.lower()} / {key.upper()} / Authorization: Bearer {key}"
                )
            case "keytype":
                error["type"] = key
                error["param"] = key
        return web.json_response({"error": error}, status=401, headers=headers)
