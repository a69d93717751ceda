"""The secrets iba is configured with, and the one function that scrubs them from what it stores.

A configured secret is an API key a backend sends (the environment variables backends read, and
any key a backend was built with: `register`) or the user:password part of a server URL
(--base-url, OPENAI_BASE_URL, an endpoints file: `register_url`). A model or a server may echo
either back in a *successful* reply (a proxy that quotes its request, a prompt-injected agent), so
every text iba stores passes through `redact_stored` at the storage boundary: the run store, the
response cache, batch folders and the report's files. Error messages are scrubbed before they are
raised (llm.retry.redact), with the same list.

The registered values are process-wide, like the caches (docs/ARCHITECTURE.md, Conventions): a
store written by the same process as its backends scrubs what they were given.
"""

from __future__ import annotations

import json
import os
import re
import threading
from urllib.parse import unquote, urlsplit

SECRET_ENV = ("OPENAI_API_KEY",)  # the keys backends read from the environment (llm.openai_compat, batch.provider)
URL_ENV = ("OPENAI_BASE_URL",)  # server URLs from the environment, which may carry user:password@
MIN_LEN = 8  # shorter values would match ordinary words in stored text ("test", "EMPTY")
MASK = "***"
# after a scheme's "://", whatever stands before the @ of the authority is credentials
_USERINFO = re.compile(r"[^/\s@\"'<>\\]+@")

_registered: set[str] = set()
_lock = threading.Lock()


def register(*values: str | None) -> None:
    """Secrets this process was configured with beyond the environment (a backend's key)."""
    with _lock:
        _registered.update(v for v in values if v and len(v) >= MIN_LEN)


def url_credentials(url: str) -> list[str]:
    """The user and password of a URL's userinfo (both as written and percent-decoded)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    out = [x for x in (parts.username, parts.password) if x]
    return out + [unquote(x) for x in out if unquote(x) != x]


def register_url(url: str) -> None:
    register(*url_credentials(url))


def configured() -> list[str]:
    """Every configured secret, longest first (so a key is masked whole before any part of it)."""
    env = [os.environ.get(name) for name in SECRET_ENV]
    env += [c for name in URL_ENV for c in url_credentials(os.environ.get(name) or "")]
    with _lock:
        values = {v for v in [*env, *_registered] if v and len(v) >= MIN_LEN}
    return sorted(values, key=lambda v: (-len(v), v))


def redact_stored(text: str, extra: tuple[str | None, ...] = ()) -> str:
    """`text` with every configured secret (and `extra`), as written or JSON-escaped, and every
    URL's userinfo masked. The one redaction applied to whatever iba stores."""
    for secret in [*configured(), *(e for e in extra if e and len(e) >= 4)]:
        for form in {secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]}:
            if form in text:
                text = text.replace(form, MASK)
    return _mask_userinfo(text)


def _mask_userinfo(text: str) -> str:
    """Every `scheme://user:password@` as `scheme://***@`. Looked for from each "://" (a regex
    tried at every position costs ~50 ms on a 200 kB record; this, nothing where there is no URL)."""
    if "@" not in text:
        return text
    out, start, at = [], 0, text.find("://")
    while at != -1:
        m = _USERINFO.match(text, at + 3)
        if m is not None:
            out += [text[start:at + 3], MASK + "@"]
            start = m.end()
        at = text.find("://", at + 3)
    return "".join(out) + text[start:] if out else text
