"""The LLM proposer against a local server speaking each API's wire format (tests/agent/
llm_server.py), through the official SDKs: a search from the softmax seed on mtia-sim where a
reply that does not parse is a stopped child whose diagnostics go back to the model, its repair
is measured, tokens and money are counted per node and held to the budgets, every exchange is
in the store and a resumed search sends no request again; rate limits retried, a malformed
reply, a timeout and a dead endpoint each ending cleanly."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app
from agent.execute import make_executor
from agent.propose.endpoints import AnthropicEndpoint, Endpoint, EndpointError, OpenAIEndpoint, Prices
from agent.propose.llm import LLMProposer, extract
from agent.search import registry
from agent.search.loop import Budget, Settings, run_search
from agent.store import open_store
from agent.tasks import load_task
from tests.agent.llm_server import Replay, openai_body, recording

TASK = load_task(Path(__file__).resolve().parents[2] / "benchmarks" / "tasks" / "softmax")
SEED = (TASK.folder / "seed.kir").read_text()
runner = CliRunner()


def search(endpoint: Endpoint, db: Path, budget: Budget, **kw):
    settings = Settings(task=TASK, backend="mtia-sim", target="mtia-sim", preset="test", measure_top=2)
    program_text = SEED  # the seed's defaults: BLOCK = 1024 covers the test preset's rows
    with open_store(str(db)) as store:
        sid = store.search("s", TASK.name, {})
        proposer = LLMProposer(endpoint, store=store, search=sid, tokens=budget.tokens, money=budget.money, **kw)
        strategy = registry.get("greedy")(random.Random(0), width=1)
        with make_executor("inline") as ex:
            result = run_search(settings, program_text, strategy, proposer, ex, store, sid, budget)
        return result, store.exchanges(sid), proposer


def test_a_search_feeds_parse_errors_back_counts_tokens_and_money_and_resumes_without_asking_again(tmp_path):
    prices = Prices(input=3.0, output=15.0)
    db = tmp_path / "s.sqlite"
    with Replay(recording("softmax_openai")) as server:
        endpoint = OpenAIEndpoint("kir-test", base_url=server.url, retries=0, prices=prices)
        result, exchanges, proposer = search(endpoint, db, Budget(evaluations=3))
        sent = list(server.requests)
    nodes = sorted(result.tree, key=lambda n: n.id)
    broken = next(n for n in nodes if n.move.name == "rewrite" and n.record is not None and not n.record.ok)
    assert broken.record.stage == "parse" and broken.record.errors[0].rule.startswith("syntax.")
    repaired = next(n for n in nodes if n.move.name == "repair")
    assert repaired.record.ok and repaired.score is not None and "warps(8)" in repaired.text
    # the second request carries the first reply and the parse diagnostics, as turns
    second = sent[1][1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert "stopped at parse" in second[-1]["content"] and "syntax." in second[-1]["content"]
    assert "softmax" in second[1]["content"] and "```kir" in second[1]["content"]  # task and parent
    # tokens and money per request, per node, and for the search
    assert [(e["input_tokens"], e["output_tokens"]) for e in exchanges][:2] == [(1840, 260), (2310, 255)]
    spent = result.progress.to_json()["proposer"]
    assert spent["tokens"] == sum(e["input_tokens"] + e["output_tokens"] for e in exchanges)
    assert spent["money"] == pytest.approx(sum(prices.cost(e["input_tokens"], e["output_tokens"]) for e in exchanges))
    assert dict(repaired.move.params)["tokens"] == 2310 + 255
    # resumed: the replies come from the store; the server is not asked again
    with Replay([]) as server:
        endpoint = OpenAIEndpoint("kir-test", base_url=server.url, retries=0, prices=prices)
        again, _, proposer2 = search(endpoint, db, Budget(evaluations=3))
        assert server.requests == []
    assert sorted((n.id, n.key) for n in again.tree) == sorted((n.id, n.key) for n in result.tree)
    assert proposer2.usage()["replayed"] == len(sent) and proposer2.usage()["requests"] == 0


def test_the_token_and_money_budgets_are_kept_before_a_request_is_sent(tmp_path):
    with Replay(recording("softmax_openai")) as server:
        endpoint = OpenAIEndpoint("kir-test", base_url=server.url, retries=0)
        result, exchanges, _ = search(endpoint, tmp_path / "t.sqlite", Budget(evaluations=10, tokens=5000))
        assert len(server.requests) == 2  # the third would not fit: 4,665 spent, a prompt of ~2,000 more
    assert result.progress.reason.startswith("token budget (5000) spent")
    assert sum(e["input_tokens"] + e["output_tokens"] for e in exchanges) <= 5000
    # a request always asks for no more output than is left
    assert server.requests[1][1]["max_tokens"] <= 5000 - (1840 + 260)
    prices = Prices(input=10.0, output=30.0)  # money per million tokens
    with Replay(recording("softmax_openai")) as server:
        endpoint = OpenAIEndpoint("kir-test", base_url=server.url, retries=0, prices=prices)
        result, exchanges, _ = search(
            endpoint, tmp_path / "m.sqlite", Budget(evaluations=10, money=0.1), max_tokens=1000
        )
    assert result.progress.reason.startswith("money budget (0.1) spent")
    assert sum(e["cost"] for e in exchanges) <= 0.1


def test_anthropic_wire_format(tmp_path):
    with Replay(recording("softmax_anthropic"), prefix="") as server:
        endpoint = AnthropicEndpoint("kir-test", base_url=server.url, retries=0)
        result, exchanges, _ = search(endpoint, tmp_path / "a.sqlite", Budget(evaluations=2))
        path, body = server.requests[0]
    assert path == "/v1/messages" and body["system"].startswith("You write GPU kernels in KIR")
    assert body["messages"][0]["role"] == "user"
    assert any(n.move.proposer == "llm" and n.score is not None for n in result.tree)
    assert (exchanges[0]["input_tokens"], exchanges[0]["output_tokens"]) == (1850, 240)


def test_a_rate_limit_is_retried_with_backoff():
    with Replay(recording("rate_limited_openai")) as server:
        reply = OpenAIEndpoint("kir-test", base_url=server.url, retries=2).complete(
            "s", [{"role": "user", "content": "u"}], 64
        )
        assert len(server.requests) == 2
    assert "warps(8)" in extract(reply.text)[0]


@pytest.mark.parametrize(
    ("responses", "fatal"),
    [
        ([{"status": 200, "raw": "{not json"}], False),
        ([{"status": 200, "body": {"id": "x", "object": "chat.completion", "choices": []}}], False),
        ([{"status": 500, "body": {"error": {"message": "down"}}}], True),
        ([{"status": 401, "body": {"error": {"message": "bad key"}}}], True),
        ([{"status": 200, "sleep": 3, "body": openai_body("late", 1, 1)}], True),
    ],
)
def test_endpoint_errors(responses, fatal):
    with Replay(responses) as server:
        endpoint = OpenAIEndpoint("kir-test", base_url=server.url, retries=0, timeout=1.0)
        with pytest.raises(EndpointError) as err:
            endpoint.complete("s", [{"role": "user", "content": "u"}], 64)
    assert err.value.fatal == fatal


def test_a_dead_endpoint_ends_the_search_cleanly(tmp_path):
    endpoint = OpenAIEndpoint("kir-test", base_url="http://127.0.0.1:9/v1", retries=0, timeout=2.0)
    result, exchanges, proposer = search(endpoint, tmp_path / "d.sqlite", Budget(evaluations=5))
    assert result.progress.reason.startswith("the LLM endpoint stopped answering")
    assert len(result.tree) == 1 and result.tree.root.score is not None  # the seed measured and kept
    assert exchanges[0]["error"] and exchanges[0]["reply"] is None


def test_settings_come_from_the_environment_not_the_code():
    env = {"KIR_LLM_PROVIDER": "anthropic", "KIR_LLM_MODEL": "m", "KIR_LLM_BASE_URL": "http://h", "KIR_LLM_API_KEY": "k",
           "KIR_LLM_PRICE_IN": "3", "KIR_LLM_PRICE_OUT": "15"}  # fmt: skip
    e = Endpoint.from_settings({}, env)
    assert isinstance(e, AnthropicEndpoint) and (e.model, e.base_url, e.api_key) == ("m", "http://h", "k")
    assert e.prices == Prices(3.0, 15.0)
    assert Endpoint.from_settings({"provider": "openai", "model": "x"}, env).provider == "openai"
    for bad in ({"KIR_LLM_PROVIDER": "nope", "KIR_LLM_MODEL": "m"}, {"KIR_LLM_MODEL": ""},
                {"KIR_LLM_MODEL": "m", "KIR_LLM_PRICE_IN": "free"}):  # fmt: skip
        with pytest.raises(EndpointError):
            Endpoint.from_settings({}, bad)


def test_extract_takes_the_last_fenced_block_or_makes_the_edits():
    assert extract("a\n```kir\nkernel a\n```\nthen\n```\nkernel b\n```") == ("kernel b\n", None)
    assert extract("kernel c") == ("kernel c\n", None)
    edit = "<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE"
    assert extract(edit, "a\nx = 1\nb\n") == ("a\nx = 2\nb\n", None)
    assert "not in the program" in extract(edit, "a\n")[1]
    assert "2 times" in extract(edit, "x = 1\nx = 1\n")[1]


def test_an_edit_that_does_not_apply_is_fed_back_and_its_repair_measured(tmp_path):
    with Replay(recording("softmax_edits_openai")) as server:
        endpoint = OpenAIEndpoint("kir-test", base_url=server.url, retries=0)
        result, _, _ = search(endpoint, tmp_path / "e.sqlite", Budget(evaluations=2))
        second = server.requests[1][1]["messages"][-1]["content"]
    assert "llm.edit" in second and "not in the program" in second
    stopped = next(n for n in result.tree if n.move.name == "rewrite")
    assert stopped.record.errors[0].rule == "llm.edit"
    repaired = next(n for n in result.tree if n.move.name == "repair")
    assert repaired.score is not None and "warps(8)" in repaired.text and "warps(4)" not in repaired.text


def test_kir_search_with_the_llm_proposer(tmp_path, monkeypatch):
    monkeypatch.setenv("KIR_LLM_PRICE_IN", "1")
    monkeypatch.setenv("KIR_LLM_PRICE_OUT", "2")
    with Replay(recording("softmax_openai")) as server:
        result = runner.invoke(
            app,
            ["search", "softmax", "--proposer", "llm", "--llm-model", "kir-test", "--llm-base-url", server.url,
             "--backend", "mtia-sim", "--budget", "2", "--tokens", "100000", "--executor", "inline",
             "--db", str(tmp_path / "c.sqlite"), "--json"],
        )  # fmt: skip
        prompt = server.requests[0][1]["messages"][1]["content"]
    data = json.loads(result.stdout)
    assert data["ok"], data
    # the knowledge base's notes for the target (mtia-sim's manual) and the applicable tactics
    assert "# Notes from the manuals" in prompt and "hardware/mtia-sim" in prompt and "- retile:" in prompt
    spent = data["progress"]["proposer"]
    assert spent["requests"] >= 2 and spent["tokens"] > 0 and spent["money"] > 0
    bad = runner.invoke(app, ["search", "softmax", "--llm-model", "x", "--json"])
    assert bad.exit_code != 0 and "--proposer llm" in bad.stdout
