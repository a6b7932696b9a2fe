"""What checking an answer costs: reading a provider's 200 as a chat completion, before and after
answers were held to strict JSON (`swarm_tui.providers.answer`, issue 23).

Cases, each on a typical answer of about 1 KB (a chat completion of ~150 words):

  before       the body parsed as a chat completion and kept as received (what the client did)
  after        the same, through `strict_answer` first (one strict parse, shared with the shape
               check, and a few substring checks): the common case
  after+key    the same with an API key registered (each answer is also searched for its spellings),
               against before+key (the old path with the key registered: it does not search)
  rewrite      an answer with a BOM, read and written again canonically (the rare case)
  stream-body  a streamed answer's assembled body encoded under the same rules (`strict_body`)

Usage:  python benchmarks/bench_answers.py [--repeat 5] [--number 20000]
Figures are microseconds per answer, the best of --repeat runs; `after / before` is the ratio in
the same run. Absolute numbers depend on the machine and its load (check `ps aux` first).
"""

from __future__ import annotations

import argparse
import functools
import json
import timeit

from swarm_tui.core.usage import Usage
from swarm_tui.providers.answer import MAX_ANSWER_BYTES, strict_answer, strict_body
from swarm_tui.providers.client import CallResult, chat_completion_or_raise
from swarm_tui.util import secrets

KEY = "sk-bench-0123456789abcdefABCDEF0123456789"


def typical_answer() -> bytes:
    body = {
        "id": "chatcmpl-0123456789ab",
        "object": "chat.completion",
        "created": 1718000000,
        "model": "gpt-4.1-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Here is a typical answer, caf\u00e9. " * 28},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 180, "total_tokens": 300},
    }
    return json.dumps(body, ensure_ascii=False).encode()


def before(content: bytes) -> CallResult:
    data = chat_completion_or_raise(content, "application/json", 200, "req-1")
    return CallResult(body=data, usage=Usage.from_response(data.get("usage")), request_id="req-1", raw=content)


def after(content: bytes) -> CallResult:
    content, parsed = strict_answer(content, 200, "req-1", MAX_ANSWER_BYTES)
    data = chat_completion_or_raise(content, "application/json", 200, "req-1", parsed)
    return CallResult(body=data, usage=Usage.from_response(data.get("usage")), request_id="req-1", raw=content)


def measure(cases: dict, number: int, repeat: int) -> dict[str, float]:
    """Best microseconds per call of each case, the cases interleaved round by round (a load that
    comes and goes on the machine then hits them all alike)."""
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(repeat):
        for name, (fn, arg) in cases.items():
            seconds = timeit.timeit(functools.partial(fn, arg), number=number)
            best[name] = min(best[name], seconds / number * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    answer = typical_answer()
    body = json.loads(answer)
    print(f"a typical answer: {len(answer):,} bytes")
    figures = measure(
        {
            "before": (before, answer),
            "after": (after, answer),
            "rewrite": (after, b"\xef\xbb\xbf" + answer),
            "stream-body": (lambda b: strict_body(b, MAX_ANSWER_BYTES), body),
        },
        args.number,
        args.repeat,
    )
    secrets.register(KEY)  # from here on every answer is searched for the key's spellings
    figures |= measure({"before+key": (before, answer), "after+key": (after, answer)}, args.number, args.repeat)
    for name, us in figures.items():
        print(f"  {name:<12} {us:7.2f} us per answer")
    extra, keyed = figures["after"] - figures["before"], figures["after+key"] - figures["before+key"]
    ratio = figures["after"] / figures["before"]
    print(f"  after / before: {ratio:.2f}x (+{extra:.2f} us); with a key: +{keyed:.2f} us")


if __name__ == "__main__":
    main()
