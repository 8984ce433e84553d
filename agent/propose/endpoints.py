"""The LLM endpoints the LLM proposer talks to, through each vendor's official SDK: any
OpenAI-compatible server (`openai`: a hosted API, vLLM, llama.cpp's server; the base URL says
which) and Anthropic's Messages API (`anthropic`).

The model, the key and the base URL come from settings (`Endpoint.from_settings`) or the
environment, never from code: `KIR_LLM_PROVIDER` (openai or anthropic), `KIR_LLM_MODEL`,
`KIR_LLM_BASE_URL`, `KIR_LLM_API_KEY` (else the SDK's own variable, `OPENAI_API_KEY` or
`ANTHROPIC_API_KEY`), and the prices in money per million tokens, `KIR_LLM_PRICE_IN` and
`KIR_LLM_PRICE_OUT` (0 when unset: a local model costs nothing).

Rate limits (429) and server errors (5xx) are retried by the SDKs with exponential backoff
(`retries`, honouring `Retry-After`); what is left after the retries, a connection that never
opens, a refused key or a reply without text, is an `EndpointError`, whose `fatal` says whether
another request could go better (a malformed reply) or not (the endpoint is gone, the key is
refused): the proposer stops asking after a fatal one, and the search goes on without it.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PROVIDERS = ("openai", "anthropic")


class EndpointError(Exception):
    """A request that got no usable reply. `fatal`: no later request will get one either."""

    def __init__(self, message: str, fatal: bool) -> None:
        super().__init__(message)
        self.fatal = fatal


@dataclass(frozen=True)
class Reply:
    """The text of a reply and what it cost, in tokens as the endpoint counted them."""

    text: str
    input_tokens: int
    output_tokens: int
    model: str


@dataclass(frozen=True)
class Prices:
    """Money per million tokens, read and written."""

    input: float = 0.0
    output: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1e6


class Endpoint(ABC):
    """One model behind one API. `complete` sends a system text and the turns so far
    (`{"role": "user" | "assistant", "content": str}`) and returns the reply."""

    provider: str

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 4,
        prices: Prices = Prices(),
    ) -> None:
        if not model:
            raise EndpointError(f"no model for the {self.provider} endpoint: set KIR_LLM_MODEL or --llm-model", True)
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.prices = prices

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Endpoint:
        """The endpoint the settings name (keys `provider`, `model`, `base_url`, `timeout`,
        `retries`), with the environment (`KIR_LLM_*`) filling what they leave out; the key only
        from the environment."""
        s = dict(settings or {})
        e = os.environ if env is None else env
        provider = s.get("provider") or e.get("KIR_LLM_PROVIDER") or "openai"
        if provider not in PROVIDERS:
            raise EndpointError(f"no LLM provider {provider!r}: one of {', '.join(PROVIDERS)}", True)
        kind: type[Endpoint] = OpenAIEndpoint if provider == "openai" else AnthropicEndpoint
        try:
            prices = Prices(float(e.get("KIR_LLM_PRICE_IN") or 0), float(e.get("KIR_LLM_PRICE_OUT") or 0))
        except ValueError:
            raise EndpointError("KIR_LLM_PRICE_IN and KIR_LLM_PRICE_OUT are money per million tokens", True) from None
        return kind(
            s.get("model") or e.get("KIR_LLM_MODEL") or "",
            base_url=s.get("base_url") or e.get("KIR_LLM_BASE_URL") or None,
            api_key=e.get("KIR_LLM_API_KEY") or None,
            timeout=float(s.get("timeout") or 120.0),
            retries=int(s["retries"]) if s.get("retries") is not None else 4,
            prices=prices,
        )

    def describe(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model, "base_url": self.base_url}

    @abstractmethod
    def complete(self, system: str, turns: list[dict[str, str]], max_tokens: int) -> Reply: ...

    @staticmethod
    def _send(sdk, create, **request: Any):
        """`create(**request)` with the SDK's errors as EndpointErrors (`_sdk_error`), and a body
        that is not the API's JSON as a malformed reply."""
        try:
            return create(**request)
        except sdk.APIError as err:
            raise _sdk_error(err, sdk) from None
        except ValueError as err:
            raise EndpointError(f"a malformed reply: {err}", False) from None


def _sdk_error(err: Exception, sdk) -> EndpointError:
    """An SDK's exception as an EndpointError: fatal unless the reply was malformed."""
    status = getattr(err, "status_code", None)
    if isinstance(err, sdk.APITimeoutError):
        return EndpointError(f"no reply within the timeout (after the retries): {err}", True)
    if isinstance(err, sdk.APIConnectionError):
        return EndpointError(f"the endpoint cannot be reached: {err}", True)
    if isinstance(err, sdk.APIStatusError):
        fatal = status in (401, 403, 404) or status == 429 or (status or 0) >= 500
        return EndpointError(f"the endpoint answered {status}: {err}", fatal)
    return EndpointError(f"{type(err).__name__}: {err}", False)


class OpenAIEndpoint(Endpoint):
    """An OpenAI-compatible chat-completions endpoint (`openai.OpenAI`)."""

    provider = "openai"

    def _client(self):
        import openai  # the SDK only where this endpoint is used

        return openai, openai.OpenAI(
            api_key=self.api_key or os.environ.get("OPENAI_API_KEY") or "none",
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.retries,
        )

    def complete(self, system: str, turns: list[dict[str, str]], max_tokens: int) -> Reply:
        sdk, client = self._client()
        resp = self._send(
            sdk, client.chat.completions.create, model=self.model,
            messages=[{"role": "system", "content": system}, *turns], max_tokens=max_tokens, temperature=0.2,
        )  # fmt: skip
        choices = getattr(resp, "choices", None) or []
        text = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
        usage = getattr(resp, "usage", None)
        if not isinstance(text, str) or usage is None:
            raise EndpointError("a reply without a message or without its token counts", False)
        return Reply(text, int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0), str(resp.model))


class AnthropicEndpoint(Endpoint):
    """Anthropic's Messages API (`anthropic.Anthropic`)."""

    provider = "anthropic"

    def _client(self):
        import anthropic  # the SDK only where this endpoint is used

        return anthropic, anthropic.Anthropic(
            api_key=self.api_key or os.environ.get("ANTHROPIC_API_KEY") or "none",
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.retries,
        )

    def complete(self, system: str, turns: list[dict[str, str]], max_tokens: int) -> Reply:
        sdk, client = self._client()
        resp = self._send(
            sdk, client.messages.create, model=self.model, system=system, messages=turns, max_tokens=max_tokens,
            temperature=0.2,
        )  # fmt: skip
        blocks = getattr(resp, "content", None) or []
        text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", None) == "text")
        usage = getattr(resp, "usage", None)
        if not text or usage is None:
            raise EndpointError("a reply without text or without its token counts", False)
        return Reply(text, int(usage.input_tokens or 0), int(usage.output_tokens or 0), str(resp.model))
