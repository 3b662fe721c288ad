"""A model served from a loopback or private address may be free (ollama, llama.cpp, vLLM) or a
gateway to a paid API (a LiteLLM proxy on localhost): it is priced as any unknown model, so a limit
stops it early rather than never, and what is said tells how to count it at 0; a model Ollama serves
(`ollama/`) counts 0. One rule (pricing.py) every agent pricing tokens itself (Codex, Gemini, aider,
OpenCode) applies to the base URL it sends to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.coding_agent.aider import AiderAgent, AiderOptions
from orchestrator.coding_agent.aider_output import AiderOutput
from orchestrator.coding_agent.codex import CodexAgent, CodexOptions
from orchestrator.coding_agent.gemini import GeminiAgent, GeminiOptions
from orchestrator.coding_agent.opencode import OpenCodeAgent, OpenCodeOptions
from orchestrator.coding_agent.opencode_events import OpenCodeStream
from orchestrator.coding_agent.pricing import ANY_PRICES, CODEX_PRICES, FREE, TokenPrice, is_local, price_for

OLLAMA = "http://127.0.0.1:11434"
LOCAL = "served at a local address ({}): if it costs nothing, set price = {{input = 0, output = 0}}"
NOTE = "; " + LOCAL.format(OLLAMA)


@pytest.mark.parametrize("url", [OLLAMA, "http://localhost:8000/v1", "http://[::1]:8080/v1", "127.9.9.9:1",
                                 "http://10.1.2.3/v1", "https://172.16.0.5/v1", "http://172.31.255.1",
                                 "http://192.168.1.20:11434", "http://[::ffff:192.168.0.2]/v1",
                                 "http://gpu.localhost:8000"])
def test_loopback_and_private_addresses_are_local(url):
    assert is_local(url)


@pytest.mark.parametrize("url", [None, "", "https://api.openai.com/v1", "http://172.32.0.1/v1", "http://8.8.8.8",
                                 "http://11.0.0.1", "http://my-gpu-box:8000/v1", "not a url", "http://[::2]/v1"])
def test_public_addresses_and_unresolved_names_are_not(url):
    assert not is_local(url, resolve=lambda host: [])


RESOLVES = {"gpu-box": ["192.168.1.20"], "both": ["10.0.0.7", "fe80::1"], "mixed": ["10.0.0.7", "8.8.8.8"],
            "public": ["93.184.216.34"], "nowhere": []}


def _resolve(asked: list[str]):
    def resolve(host: str) -> list[str]:
        asked.append(host)
        return RESOLVES[host]
    return resolve


@pytest.mark.parametrize("url", ["http://gpu-box:8000/v1", "http://both:11434", "http://GPU-BOX./v1"])
def test_a_host_name_every_address_of_which_is_local_is_local(url):
    """A local server named by its host name (`http://gpu-box:8000/v1`): resolved, it is local when
    all its addresses are loopback, private or link-local."""
    asked: list[str] = []
    assert is_local(url, resolve=_resolve(asked))
    assert asked and asked[0] in RESOLVES


def test_the_hosts_file_resolver_reads_names_and_aliases(tmp_path):
    from orchestrator.coding_agent.local_host import hosts_file_resolver

    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost box\n# 10.0.0.9 gone\n192.168.1.20 gpu-box gpu-box.lan  # ours\n"
                     "fe80::1 gpu-box\n")
    assert hosts_file_resolver("gpu-box", str(hosts)) == ["192.168.1.20", "fe80::1"]
    assert hosts_file_resolver("box", str(hosts)) == ["127.0.0.1"] and hosts_file_resolver("gone", str(hosts)) == []
    assert hosts_file_resolver("x", str(tmp_path / "none")) == []


@pytest.mark.parametrize("url", ["http://mixed/v1", "http://public:8000", "http://nowhere:11434"])
def test_a_host_name_with_a_public_address_or_none_is_not(url):
    assert not is_local(url, resolve=_resolve([]))


@pytest.mark.parametrize("url", ["http://ollama.lan:11434", "http://host.docker.internal:11434/v1",
                                 "http://gpu.local:8000/v1", "http://box.home.arpa/v1", "http://[fe80::1]:8000",
                                 "http://169.254.3.4:8000"])
def test_home_network_suffixes_count_without_a_lookup_and_link_local_addresses_count(url):
    assert is_local(url, resolve=lambda host: pytest.fail(f"{host} looked up"))


def test_a_name_is_looked_up_once_per_process_and_what_it_resolved_to_is_said(monkeypatch):
    """The real resolver (the system's: /etc/hosts here, no network) is asked once per name; the
    note says what the name resolved to, so the user sees why it counts as local."""
    import socket

    from orchestrator.coding_agent import local_host

    asked: list[str] = []
    real = socket.getaddrinfo

    def counting(host, *args, **kwargs):  # the system's answer, counted
        asked.append(host)
        return real("localhost", *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    monkeypatch.setattr(local_host, "_cache", {})
    monkeypatch.setattr(local_host, "default_resolver", local_host.resolve_host)  # (the suite's: the hosts file)
    for _ in range(3):
        price, why = price_for("llama3.1", CODEX_PRICES, base_url="http://gpu-box-7:8000/v1")
    assert asked == ["gpu-box-7"]
    assert "; served at a local address (http://gpu-box-7:8000/v1; gpu-box-7 is " in why, why
    assert "127.0.0.1" in why and why.endswith("): if it costs nothing, set price = {input = 0, output = 0}"), why


def test_a_model_at_a_local_address_is_priced_as_unknown_and_told_how_to_count_it_at_0():
    """A local address may be a gateway to a paid API: counting it 0 would let max_cost_usd never
    stop it. It is priced as anywhere else, and the note says how to say it is free."""
    price, why = price_for("llama3.1", CODEX_PRICES, base_url=OLLAMA)
    assert price == price_for("llama3.1", CODEX_PRICES)[0] and price != FREE
    assert why == "the highest listed price (llama3.1 is not in the price table)" + NOTE
    assert price_for("gpt-5", CODEX_PRICES, base_url=OLLAMA) == (CODEX_PRICES["gpt-5"],
                                                                 "the list price of gpt-5" + NOTE)
    mine = TokenPrice(input=0.1, output=0.2)
    assert price_for("llama3.1", CODEX_PRICES, mine, base_url=OLLAMA) == (mine, "your price")
    free = TokenPrice(input=0, output=0)
    assert price_for("llama3.1", CODEX_PRICES, free, base_url=OLLAMA) == (free, "your price")
    assert price_for("llama3.1", CODEX_PRICES, base_url="https://api.example.com/v1")[1] == (
        "the highest listed price (llama3.1 is not in the price table)")


@pytest.mark.parametrize("model", ["ollama/qwen3", "ollama_chat/llama3.1", "OLLAMA/x"])
def test_a_model_aider_names_through_ollama_counts_nothing_unless_priced(model):
    """litellm's (aider's) `ollama/` routes to Ollama; OpenCode's is a provider id its user named."""
    assert price_for(model, ANY_PRICES, litellm_names=True) == (FREE, "0: a model Ollama serves; set price to count it")
    mine = TokenPrice(input=1, output=1)
    assert price_for(model, ANY_PRICES, mine, litellm_names=True) == (mine, "your price")
    assert price_for(model, ANY_PRICES)[0] != FREE


def test_codex_prices_by_its_provider_or_openai_base_url():
    local = CodexOptions(model="qwen3-coder", provider={"base_url": OLLAMA + "/v1", "env_key": "K"})
    assert CodexAgent.pricing(local, {}).endswith("; " + LOCAL.format(OLLAMA + "/v1"))
    assert CodexAgent.pricing(CodexOptions(model="qwen3-coder"), {"OPENAI_BASE_URL": OLLAMA}).endswith(NOTE)
    elsewhere = CodexAgent.pricing(CodexOptions(model="qwen3-coder"), {"PATH": "/bin"})
    assert "highest listed" in elsewhere and "local address" not in elsewhere
    priced = local.model_copy(update={"price": TokenPrice(input=1, output=1)})
    assert CodexAgent.pricing(priced, {}) == "turns priced at your price"


def test_gemini_prices_by_google_gemini_base_url():
    assert GeminiAgent.pricing(GeminiOptions(model="gemma-3"), {"GOOGLE_GEMINI_BASE_URL": OLLAMA}) == (
        "turns priced at the highest listed price (gemma-3 is not in the price table)" + NOTE)
    assert "highest listed" in GeminiAgent.pricing(GeminiOptions(model="gemma-3"), {"PATH": "/bin"})


def _aider_turn(model: str = "openai/my-local-model") -> AiderOutput:
    out = AiderOutput(cwd=Path("/p"))
    for line in ["Aider v0.86.2", f"Model: {model} with whole edit format", "",
                 "Done.", "Tokens: 1.0k sent, 200 received."]:
        out.feed(line + "\n")
    return out


def test_aider_turns_on_a_local_server_are_priced_unless_ollama_serves_them():
    local = AiderOptions(model="openai/my-local-model", openai_api_base=OLLAMA + "/v1")
    ceiling = price_for(None, ANY_PRICES)[0]
    assert AiderAgent(local)._cost(_aider_turn()) == pytest.approx((1000 * ceiling.input + 200 * ceiling.output) / 1e6)
    assert AiderAgent.pricing(local, {}).endswith("; " + LOCAL.format(OLLAMA + "/v1"))
    assert "at 0: a model Ollama serves" in AiderAgent.pricing(AiderOptions(model="ollama_chat/qwen3"),
                                                              {"OLLAMA_API_BASE": OLLAMA})
    assert AiderAgent(AiderOptions(model="ollama/qwen3"))._cost(_aider_turn("ollama/qwen3")) == 0.0
    free = AiderAgent(local.model_copy(update={"price": TokenPrice(input=0, output=0)}))
    assert free._cost(_aider_turn()) == 0.0  # the user says it is free
    priced = AiderAgent(local.model_copy(update={"price": TokenPrice(input=1.0, output=2.0)}))
    assert priced._cost(_aider_turn()) == pytest.approx((1000 * 1.0 + 200 * 2.0) / 1e6)
    remote = AiderAgent(AiderOptions(model="openai/my-local-model", openai_api_base="https://llm.example.com/v1"))
    ceiling = price_for(None, ANY_PRICES)[0]
    assert remote._cost(_aider_turn()) == pytest.approx((1000 * ceiling.input + 200 * ceiling.output) / 1e6)


def test_opencode_turns_of_a_provider_declared_on_a_local_server_are_priced_and_say_how_to_count_0(tmp_path):
    content = {"provider": {"local": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": OLLAMA + "/v1"}}}}
    env = {"OPENCODE_CONFIG_CONTENT": json.dumps(content)}
    options = OpenCodeOptions(model="local/qwen3-coder")
    stream = OpenCodeStream()
    stream.feed(json.dumps({"type": "step_finish", "sessionID": "ses_1", "part": {
        "reason": "stop", "cost": 0, "tokens": {"input": 1000, "output": 200}}}))
    nowhere = {"OPENCODE_CONFIG_CONTENT": "", "XDG_CONFIG_HOME": "/nonexistent"}
    assert OpenCodeAgent(options, env=env)._cost(stream) == OpenCodeAgent(options, env=nowhere)._cost(stream) > 0
    assert OpenCodeAgent.pricing(options, env).endswith("; " + LOCAL.format(OLLAMA + "/v1"))
    assert "local address" not in OpenCodeAgent.pricing(OpenCodeOptions(model="other/qwen3-coder"), env)
    # The same provider declared in the global config file (as for the offline fake) is found too.
    (tmp_path / "opencode").mkdir()
    (tmp_path / "opencode" / "opencode.json").write_text(json.dumps(content))
    assert OpenCodeAgent.pricing(options, {**nowhere, "XDG_CONFIG_HOME": str(tmp_path)}).endswith(
        "; " + LOCAL.format(OLLAMA + "/v1"))
    free = OpenCodeOptions(model="local/qwen3-coder", price=TokenPrice(input=0, output=0))
    assert OpenCodeAgent(free, env=env)._cost(stream) == 0.0
